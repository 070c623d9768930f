"""mbridge STAND-IN (dapo-ops sandbox, Ascend-like profile): verl's vanilla model bridge, which verl's Ascend
image installs instead of Megatron-Bridge (``pip install mbridge``; verl/models/mcore/mbridge.py:21 imports
``AutoBridge`` from it)."""

__version__ = "0.15.1"


class AutoBridge:
    pass
