"""torch STAND-IN (dapo-ops sandbox, Ascend-like profile): only torch's device-backend auto-loading, which is what
makes ``import torch`` fail on an Ascend image without CANN's environment. torch 2.5+ ``torch/__init__.py``
``_import_device_backends``: every entry point of group ``torch.backends`` is loaded and called at import, unless
``TORCH_DEVICE_BACKEND_AUTOLOAD=0``; a failure is re-raised as the RuntimeError below (torch's own wording)."""

import os

__version__ = "2.7.1+cpu"


def _import_device_backends():
    from importlib.metadata import entry_points

    group_name = "torch.backends"
    eps = entry_points()
    backend_extensions = eps.select(group=group_name) if hasattr(eps, "select") else eps.get(group_name, ())
    for backend_extension in backend_extensions:
        try:
            entrypoint = backend_extension.load()
            entrypoint()
        except Exception as err:
            raise RuntimeError(
                f"Failed to load the backend extension: {backend_extension.name}. "
                f"You can disable extension auto-loading with TORCH_DEVICE_BACKEND_AUTOLOAD=0."
            ) from err


def _is_device_backend_autoload_enabled() -> bool:
    return os.getenv("TORCH_DEVICE_BACKEND_AUTOLOAD", "1") == "1"


if _is_device_backend_autoload_enabled():
    _import_device_backends()
