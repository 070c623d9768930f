"""verl STAND-IN (dapo-ops sandbox / test equipment only). Not the real verl."""

__version__ = "0.9.1"

# real verl imports torch at package import (verl/__init__.py:32 ``from .protocol import DataProto`` -> torch), and
# torch >= 2.5 auto-loads its device backends (torch_npu on Ascend images). The default sandbox image has no torch;
# the Ascend-like image (sandbox/ascend_image/) has a torch stand-in whose torch_npu needs CANN's set_env.sh.
try:
    import torch  # noqa: F401
except ModuleNotFoundError as _e:
    if _e.name != "torch":
        raise
