"""Ascend CANN / torch_npu / CUDA driver error-code families -> what the supervisor should do.

STDLIB ONLY: part of :mod:`dapo_ops.core.classify`, which runs inside the training container. A bad row of
:data:`FAMILIES` raises :class:`~dapo_ops.core.classify.verdict.ClassifierTableError` at import.

An NPU failure often reaches the log only as a code. The classifier reads the code's FAMILY (its
structure), not a list of codes it has seen, and maps it to one of four supervisor categories:

``memory``              device memory could not be allocated (an OOM: the memory ladder may help)
``communication``       HCCL / HCCP collective set-up or execution failed (clean up, retry once)
``device-unavailable``  the device is absent, busy, not mounted into the container or not visible
                        (``ASCEND_RT_VISIBLE_DEVICES``, ``/dev/davinci*``): no retry helps until fixed
``kernel-fault``        an operator / AI Core / runtime execution fault (a kernel bug or a version
                        mismatch): stop and report; no memory escalation

The families (each row of :data:`FAMILIES` names its public source):

- CANN error codes ``E<module><4 digits>`` (six characters; the second names the module; 0000-8999 are
  user errors, 9000-9999 internal): ``EE`` Runtime, ``EH`` ACL, ``EI`` HCCL, ``EJ`` HCCP, ``EL`` Driver,
  ``EZ`` operator / aclnn execution, ``E1``-``EB`` graph / operator compilation.
  https://www.hiascend.com/document/detail/en/CANNCommunityEdition/900/maintenref/troubleshooting/troubleshooting_0225.html
- ACL return codes (``aclError``, six digits): 1xxxxx environment / code logic (107xxx parameter, handle,
  context, device id), 2xxxxx resource shortage (207001/207002/207018: memory), 3xxxxx queue,
  5xxxxx internal hardware/software faults (507xxx driver / execution, 561xxx aclnn inner).
  https://www.hiascend.com/document/detail/en/CANNCommunityEdition/910/API/runtimeapi/aclcppdevg_03_6666.html ,
  ``include/acl/error_codes/rt_error_codes.h`` (https://docs.rs/cann-sys/0.1.3/cann_sys/acl_error_code/)
- torch_npu ``ERR<submodule 2 digits><code 3 digits>`` (``torch_npu/utils/_error_code.py``): submodule 00 PTA,
  01 OPS, 02 DIST, 03 GRAPH, 04 PROF; code 006 memory, 009 resource unavailable, 011 timeout, 100 ACL call
  failed, 200 HCCL call failed (https://github.com/Ascend/pytorch, ``torch_npu/utils/_error_code.py``).
- CUDA driver results (``CUresult``): 2 = ``CUDA_ERROR_OUT_OF_MEMORY``, 100 = ``CUDA_ERROR_NO_DEVICE``,
  101 = ``CUDA_ERROR_INVALID_DEVICE`` (CUDA driver API ``cuda.h``), as printed by torch_memory_saver
  (SGLang) ``CUresult error: 2``.
"""

from __future__ import annotations

import re
from typing import Iterable

from dapo_ops.core.classify.verdict import ClassifierTableError

__all__ = ["CATEGORIES", "FAMILIES", "category_of", "find_codes"]

CATEGORIES = ("memory", "communication", "device-unavailable", "kernel-fault")

_CANN_DOC = (
    "https://www.hiascend.com/document/detail/en/CANNCommunityEdition/900/maintenref/troubleshooting/"
    "troubleshooting_0225.html"
)
_HCCL_DOC = "https://www.hiascend.com/document/detail/en/CANNCommunityEdition/900/API/hcclug/hcclug_000025.html"
_DRV_DOC = (
    "https://www.hiascend.com/document/detail/zh/canncommercial/80RC22/developmentguide/maintenref/"
    "troubleshooting/atlaserrorcode_15_0263.html"
)
_ACL_DOC = "https://www.hiascend.com/document/detail/en/CANNCommunityEdition/910/API/runtimeapi/aclcppdevg_03_6666.html"
_PTA_SRC = "https://github.com/Ascend/pytorch (torch_npu/utils/_error_code.py)"

# ACL numbers count only where a line names them as a result ("error code is 207001", "ret = 507899")
_ACL = r"(?:error code(?: is|=|:)? ?|ret(?:urn)?(?: code)? ?[=:] ?|aclerror ?)"

# (family, code regex on a lower-cased line, category, meaning, source). First matching row wins, so the
# specific rows come before their family's catch-all.
FAMILIES: tuple[tuple[str, str, str, str, str], ...] = (
    # ---- CANN driver (EL): EL0001 device absent, EL0002 invalid id, EL0015 invalid device access; EL0004 memory
    ("cann-driver", r"\bel0004\b", "memory", "EL0004 driver memory allocation failure", _DRV_DOC),
    (
        "cann-driver",
        r"\bel00(?:01|02|05|07|15)\b",
        "device-unavailable",
        "EL0001/0002/0005/0007/0015: device absent or abnormal, invalid device id, busy, no permission, invalid access",
        _DRV_DOC,
    ),
    ("cann-driver", r"\bel\d{4}\b", "kernel-fault", "EL other: driver resource / operation failure", _DRV_DOC),
    # ---- HCCL (EI) / HCCP (EJ): communication; EI0011 is HCCL's own device-memory shortage
    ("cann-hccl", r"\bei0011\b", "memory", "EI0011 HCCL insufficient device memory (HCCL_BUFFSIZE)", _HCCL_DOC),
    ("cann-hccl", r"\bei\d{4}\b", "communication", "EIxxxx HCCL: config, socket, transport, timeout", _HCCL_DOC),
    ("cann-hccp", r"\bej\d{4}\b", "communication", "EJxxxx HCCP (RoCE / process) failure", _HCCL_DOC),
    # ---- Runtime (EE), ACL API (EH), operators (EZ), compile modules (E1-EB): execution / kernel faults
    # EE1002 "Stream synchronize timeout": the stream's tasks (in training: a collective) never finished in time
    (
        "cann-runtime",
        r"\bee1002\b",
        "communication",
        "EE1002 stream synchronize timeout (a collective or a peer never finished within HCCL_EXEC_TIMEOUT)",
        _CANN_DOC,
    ),
    (
        "cann-runtime",
        r"\bee(?!1002\b)\d{4}\b",
        "kernel-fault",
        "EExxxx runtime: stream / task / kernel execution",
        _CANN_DOC,
    ),
    ("cann-acl", r"\beh\d{4}\b", "kernel-fault", "EHxxxx ACL API layer (environment / init)", _CANN_DOC),
    ("cann-op", r"\bez\d{4}\b", "kernel-fault", "EZxxxx operator / aclnn execution (EZ9999: inner error)", _CANN_DOC),
    ("cann-compile", r"\be[1-9ab]\d{4}\b", "kernel-fault", "E1xxxx-EBxxxx graph / operator compilation", _CANN_DOC),
    # ---- torch_npu PTA codes: ERR<submodule><code>
    ("pta", r"\berr0[0-4]006\b", "memory", "ERRss006: torch_npu memory error", _PTA_SRC),
    ("pta", r"\berr02\d{3}\b|\berr0[0-4]200\b", "communication", "ERR02xxx DIST / ERRss200 HCCL call failed", _PTA_SRC),
    ("pta", r"\berr0[0-4]009\b", "device-unavailable", "ERRss009: resource (device) unavailable", _PTA_SRC),
    # ERRss100 (ACL call failed) says nothing by itself: the ACL / CANN code next to it decides
    (
        "pta",
        r"\berr0[0-4](?:005|011|300)\b",
        "kernel-fault",
        "ERRss005 internal / 011 timeout / 300 GE call failed",
        _PTA_SRC,
    ),
    # ---- ACL aclError numbers, only where a line names them as an error code
    (
        "acl",
        _ACL + r"(?:20700[12]|207018)\b",
        "memory",
        "207001/207002/207018: ACL_ERROR_RT_MEMORY_ALLOCATION and related",
        _ACL_DOC,
    ),
    (
        "acl",
        _ACL + r"10700[12]\b",
        "device-unavailable",
        "107001 invalid device id / 107002 context null (device not set or not visible)",
        _ACL_DOC,
    ),
    ("acl", _ACL + r"507057\b", "communication", "507057 SUSPECT REMOTE ERROR (a peer's fault)", _ACL_DOC),
    # 507046 ACL_ERROR_RT_STREAM_SYNC_TIMEOUT ("all tasks in the specified stream are not completed"), 107020
    # ACL_ERROR_RT_TASK_TIMEOUT ("reason=[task timeout]"): a wait that timed out, not a faulty kernel
    (
        "acl",
        _ACL + r"(?:507046|107020)\b",
        "communication",
        "507046 stream sync timeout / 107020 task timeout (the device waited out a collective)",
        _ACL_DOC,
    ),
    (
        "acl",
        _ACL + r"(?!507046\b)5\d{5}\b",
        "kernel-fault",
        "5xxxxx internal hardware / software fault (507xxx execution, 561xxx aclnn inner)",
        _ACL_DOC,
    ),
    # ---- CUDA driver results
    (
        "cuda-driver",
        r"curesult error: ?2\b|cuda_error_out_of_memory|cudaerrormemoryallocation",
        "memory",
        "CUresult 2 = CUDA_ERROR_OUT_OF_MEMORY",
        "CUDA driver API cuda.h (CUresult)",
    ),
    (
        "cuda-driver",
        r"cuda_error_no_device|curesult error: ?10[01]\b|no cuda-capable device is detected",
        "device-unavailable",
        "CUresult 100/101: no (visible) CUDA device",
        "CUDA driver API cuda.h (CUresult)",
    ),
)


def _compile(families: Iterable[tuple[str, ...]]) -> tuple[tuple[str, re.Pattern[str], str, str], ...]:
    """``(family, compiled regex, category, meaning)`` per row.

    Raises:
        ClassifierTableError: a row of the wrong shape, an unknown category or a bad regex.
    """
    out: list[tuple[str, re.Pattern[str], str, str]] = []
    for row in families:
        if len(row) != 5:
            raise ClassifierTableError(f"device code row must be (family, regex, category, meaning, source): {row!r}")
        fam, rx, cat, meaning, _src = row
        if cat not in CATEGORIES:
            raise ClassifierTableError(
                f"device code family {fam!r}: unknown category {cat!r} (one of {', '.join(CATEGORIES)})"
            )
        try:
            out.append((fam, re.compile(rx), cat, meaning))
        except re.error as exc:
            raise ClassifierTableError(f"device code family {fam!r}: bad regex {rx!r}: {exc}") from exc
    return tuple(out)


_COMPILED = _compile(FAMILIES)


def find_codes(low_line: str) -> list[tuple[str, str, str]]:
    """All ``(family, category, matched text)`` in one lower-cased line, in :data:`FAMILIES` order, one
    per family row."""
    out = []
    for fam, rx, cat, _meaning in _COMPILED:
        m = rx.search(low_line)
        if m:
            out.append((fam, cat, m.group(0)))
    return out


_PRIORITY = ("memory", "device-unavailable", "communication", "kernel-fault")


def category_of(low_line: str) -> str | None:
    """The supervisor category of the codes in one lower-cased line (``None``: no code). When one line
    holds several, memory beats device-unavailable beats communication beats kernel-fault (the more
    actionable reading: ``ERR00100 ... error code is 207001`` is memory)."""
    cats = {c for _f, c, _t in find_codes(low_line)}
    for c in _PRIORITY:
        if c in cats:
            return c
    return None
