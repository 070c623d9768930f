"""``dapo-ops classify LOGFILE [--exit-code N]``: read a training log and say what happened and what to do.

Thin wrapper around :func:`dapo_ops.core.classify.classify_file` (which reads only the last 4 MiB, so a
multi-GB ``train.log`` costs the same as a small one); a gzip log (``attempt-<k>.log.gz``) is streamed and its
last 4 MiB of text classified the same way. The classifier replays the live supervisor's detectors on the log's
own clock (``dapo_ops/core/classify/replay.py``): a storm reads ``error-storm`` here as it did on the run. Output contract (scripts may rely on it): the
first two lines are exactly ``class: <name>`` and ``action: <text>``; then ``kind:``, ``detail:``,
the evidence lines and the hint. Exit 0 whenever the file could be read (whatever the verdict); a
one-line error and exit 2 otherwise.
"""

from __future__ import annotations

import gzip
import json
import textwrap
import zlib

from invoke.exceptions import Exit

from dapo_ops.cli._common import dapo_task
import dapo_ops.core.classify

EXIT_USAGE = 2

_HELP = {
    "logfile": "the training log to read (e.g. <run_dir>/train.log or <workdir>/train.log)",
    "exit_code": "the process exit status if known (e.g. 137, 1, 0); empty = unknown / still running",
    "oom_killed": "docker inspect .State.OOMKilled of the container (true/false); empty = unknown",
    "total": "planned training steps (trainer.total_training_steps); 0 = take it from the log",
    "tail_mib": "MiB read from the end of the file",
    "json": "after the class: / action: lines, print the whole verdict as JSON (instead of evidence and hint)",
}


def _parse_bool(name: str, value: str) -> bool | None:
    v = value.strip().lower()
    if not v:
        return None
    if v in ("1", "true", "yes", "y"):
        return True
    if v in ("0", "false", "no", "n"):
        return False
    raise Exit(f"classify: --{name.replace('_', '-')} must be true or false, got {value!r}", code=EXIT_USAGE)


def render(v: "dapo_ops.core.classify.Verdict", width: int = 100) -> str:
    """Human text for a verdict: ``class:`` and ``action:`` lines first (stable), then the rest."""
    lines = [f"class: {v.cls}", f"action: {v.action}", f"kind: {v.action_kind.value}"]
    if v.detail.get("phase"):  # the OOM phase (dapo_ops.core.classify.PHASES): which memory ladder applies
        lines.append(f"phase: {v.detail['phase']}")
    if v.detail:
        lines.append("detail: " + " ".join(f"{k}={v.detail[k]}" for k in sorted(v.detail)))
    if v.evidence:
        lines.append("evidence:")
        lines += [f"  {e}" for e in v.evidence]
    lines.append("hint:")
    lines += textwrap.wrap(v.hint, width=width, initial_indent="  ", subsequent_indent="  ")
    return "\n".join(lines)


@dapo_task(help=_HELP)
def classify(c, logfile, exit_code="", oom_killed="", total=0, tail_mib=4, json=False):
    """Classify a training log (LOGFILE): print `class:` and `action:`, then evidence and a hint.

    Example: `dapo-ops classify /verl/train.log --exit-code 137 --oom-killed false`. Exit 0 when the
    file was read (whatever the verdict), 2 with a one-line error otherwise.
    """
    if logfile in ("-h", "--help"):  # `inv classify --help`: the positional swallowed the flag
        print("Usage: inv classify [--options] LOGFILE\n\n" + textwrap.dedent(classify.__doc__ or "").strip())
        for name, text in _HELP.items():
            print(f"  --{name.replace('_', '-'):<12} {text}")
        return
    if not logfile:
        raise Exit(
            "classify: give the log file, e.g. `dapo-ops classify /verl/train.log --exit-code 137`", code=EXIT_USAGE
        )
    code = None
    if str(exit_code).strip():
        try:
            code = int(str(exit_code).strip())
        except ValueError:
            raise Exit(f"classify: --exit-code must be an integer such as 137, got {exit_code!r}", code=EXIT_USAGE)
    oom = _parse_bool("oom_killed", str(oom_killed))
    state = {"OOMKilled": oom} if oom is not None else None
    if int(tail_mib) <= 0:
        raise Exit("classify: --tail-mib must be a positive number of MiB, e.g. 4", code=EXIT_USAGE)
    kw = {"exit_code": code, "container_state": state, "planned_total": int(total) or None}
    try:
        if _is_gzip(logfile):  # a kept log (attempt-<k>.log.gz): the same tail of its text
            v = dapo_ops.core.classify.classify(_gzip_tail(logfile, int(tail_mib) << 20), **kw)
        else:
            v = dapo_ops.core.classify.classify_file(logfile, tail_bytes=int(tail_mib) << 20, **kw)
    except (OSError, EOFError, zlib.error) as exc:
        raise Exit(f"classify: cannot read {logfile}: {getattr(exc, 'strerror', None) or exc}", code=EXIT_USAGE)
    if json:
        print(f"class: {v.cls}")
        print(f"action: {v.action}")
        if v.detail.get("phase"):
            print(f"phase: {v.detail['phase']}")
        print(_json_dumps(v.to_json()))
    else:
        print(render(v))


def _is_gzip(path: str) -> bool:
    """True when the file starts with the gzip magic bytes (1f 8b). Raises OSError when it cannot be read."""
    with open(path, "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


def _gzip_tail(path: str, tail_bytes: int) -> str:
    """The last ``tail_bytes`` bytes of a gzip file's text (streamed; the first partial line dropped), decoded as
    UTF-8 with replacement. Raises OSError / EOFError / zlib.error on a broken file."""
    tail = b""
    with gzip.open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            tail = (tail + chunk)[-tail_bytes - 1 :]
    if len(tail) > tail_bytes:
        tail = tail[tail.find(b"\n") + 1 :] if b"\n" in tail else tail[1:]
    return tail.decode("utf-8", errors="replace")


def _json_dumps(obj) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False)
