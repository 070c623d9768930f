"""Runs on the host inside the training container, stdlib only, shipped with core/: the supervisor and the probes, each started as ``python -m dapo_ops.agent.<op>``."""
