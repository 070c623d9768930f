"""STAND-IN for the Megatron namespace (sandbox only); see ``megatron/bridge``."""
