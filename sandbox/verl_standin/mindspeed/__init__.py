"""STAND-IN for ``mindspeed`` (MindSpeed, sandbox only): verl 0.9.1's Megatron engine on Ascend applies its patches
(``verl/workers/engine/mindspeed/transformer_impl.py:18-21``), so a real verl Ascend Megatron image has it and
preflight looks for it."""
