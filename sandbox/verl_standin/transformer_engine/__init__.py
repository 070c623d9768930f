"""STAND-IN for Transformer Engine (sandbox only): verl 0.9.1's Megatron engine on GPU imports Megatron-Bridge, which
imports ``transformer_engine.pytorch`` (``megatron/bridge/peft/lora_layers.py:20``), so a real verl Megatron image has
it and preflight looks for it."""
