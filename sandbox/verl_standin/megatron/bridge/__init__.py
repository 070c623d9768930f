"""STAND-IN for ``megatron.bridge`` (Megatron-Bridge, sandbox only): verl 0.9.1's Megatron engine imports it
(``verl/models/mcore/bridge.py:17``), so a real verl Megatron image has it and preflight looks for it."""
