"""STAND-IN for ``cupy`` (sandbox only): verl 0.9.1's nccl checkpoint engine (one-step-off weight sync on GPU)
imports it (``verl/checkpoint_engine/nccl_checkpoint_engine.py:22-23``), so a real verl one-step-off GPU image has
it and preflight looks for it."""
