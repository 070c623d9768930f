"""torch_npu STAND-IN (dapo-ops sandbox, Ascend-like profile): imports only where CANN's environment is set, and
otherwise fails with torch_npu's own text (Ascend/pytorch ``torch_npu/__init__.py``: ``import torch_npu.npu`` loads
``torch_npu._C``, linked against CANN's libhccl.so; its ImportError gets ``. Please check that the cann package is
installed. Please run 'source set_env.sh' in the CANN installation path.`` + ``pta_error(ErrCode.NOT_FOUND)``,
``[ERROR] <time> (PID:<pid>, Device:-1, RankID:-1) ERR00008 PTA resource not found``; seen e.g. in
vllm-project/vllm-ascend#262). The loader finds libhccl.so the way ld.so does for it here: on LD_LIBRARY_PATH."""

import os
import time

__version__ = "2.7.1"


def _found(lib: str) -> bool:
    return any(os.path.isfile(os.path.join(d, lib)) for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d)


if not _found("libhccl.so"):
    _pta = "\n[ERROR] %s (PID:%d, Device:-1, RankID:-1) ERR00008 PTA resource not found" % (
        time.strftime("%Y-%m-%d-%H:%M:%S"),
        os.getpid(),
    )
    if "ASCEND_OPP_PATH" in os.environ:
        _msg = ". Please check that the compiler package is installed. "
    else:
        _msg = ". Please check that the cann package is installed. "
    raise ImportError(
        "libhccl.so: cannot open shared object file: No such file or directory"
        + _msg
        + "Please run 'source set_env.sh' in the CANN installation path."
        + _pta
    )


def _autoload():
    """torch_npu's ``torch.backends`` entry point (torch calls it at ``import torch``)."""
