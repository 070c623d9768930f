"""STAND-IN for ``flash_attn`` (sandbox only): verl 0.9.1's FSDP engine on CUDA loads the model with
``attn_implementation=flash_attention_2`` (``verl/workers/config/model.py:185``), so a real verl GPU image has it
and preflight looks for it."""
