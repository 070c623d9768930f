"""dapo-ops: launch, supervise and recover verl DAPO training on Ascend NPU / NVIDIA GPU hosts.

This module must stay stdlib-only and cheap to import: the remote supervisor ships a
subset of this package into arbitrary training images (see ``dapo_ops/control/remote/bundle.py``).
"""

__version__ = "0.1.0"
