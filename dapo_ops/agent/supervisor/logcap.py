"""The bound on train.log's growth (STDLIB ONLY, shipped): a log that grows faster than a bound is capped.

Measured (tests/fixtures/real-verl/tool-runs, 13 real H200 runs through the tool): a healthy attempt writes
~130 KB in all, < 600 B/s on average; the printed config is most of it. A reward-function storm (H200) wrote
133 KB/s (64 MB in 8 minutes, ~11 GB a day). :class:`LogCap` is a token bucket: :data:`BURST_BYTES` may come at
once (over a hundred healthy attempts), then :data:`RATE_BYTES_S` per second (27 x the healthy average). Past it,
train.log keeps its head (what was written), every line of the log grammar (``step:``, totals, saves, links,
attempt delimiters: :func:`dapo_ops.core.logformat.has_marker`, what ``inv status`` reads), one summary line per
:data:`REPORT_S` seconds with the count of lines left out and the most repeated ones, and at the end the last
:data:`TAIL_LINES` lines. The supervisor warns once (supervisor.log, run.json ``log_capped``). Nothing the verdict
needs is lost: the classifier reads verl's own ``attempt-<k>.log`` and the storm detector sees every line before the
cap.
"""

from __future__ import annotations

import collections
from typing import Any, Callable, Deque, Dict, List, Optional

from dapo_ops.core.logformat import has_marker, normalise_line

BURST_BYTES = 16 << 20
RATE_BYTES_S = 16 << 10
#: capped: leave the cap when the bucket holds this much again (the rate stayed under the bound for a while)
RESUME_BYTES = 1 << 20
REPORT_S = 60.0
TAIL_LINES = 200
MAX_KINDS = 1000


class LogCap:
    """Decides per chunk what of verl's output reaches train.log. ``write(data)`` is where train.log is written;
    ``clock()`` seconds; ``on_cap(info)`` is called once, when the cap first applies."""

    def __init__(
        self,
        write: Callable[[bytes], None],
        clock: Callable[[], float],
        rate_bytes_s: float = RATE_BYTES_S,
        burst_bytes: float = BURST_BYTES,
        on_cap: Optional[Callable[[Dict[str, Any]], None]] = None,
    ):
        self.write, self.clock, self.on_cap = write, clock, on_cap
        self.rate, self.burst = float(rate_bytes_s), float(burst_bytes)
        self.tokens = self.burst
        self.t = clock()
        self.capped = False
        self.warned = False
        self.partial = b""
        self.left_lines = 0
        self.left_bytes = 0
        self.total_left_bytes = 0
        self.kinds: collections.Counter[str] = collections.Counter()
        self.tail: Deque[bytes] = collections.deque(maxlen=TAIL_LINES)
        self.report_at = 0.0

    def feed(self, data: bytes) -> None:
        t = self.clock()
        self.tokens = min(self.burst, self.tokens + (t - self.t) * self.rate) - len(data)
        self.t = t
        if not self.capped:
            if self.tokens >= 0:
                self.write(data)
                return
            self.capped = True
            self.report_at = t + REPORT_S
            if not self.warned:
                self.warned = True
                if self.on_cap:
                    self.on_cap({"at": t, "rate_bytes_s": self.rate, "burst_bytes": self.burst})
            self.write(b"" if data.startswith(b"\n") else b"\n")
            self.write(
                (
                    "===== dapo-ops log capped: output above %d B/s after %d MiB; train.log keeps the step "
                    "lines, a count of what is left out and the last %d lines (all of it: attempt log) =====\n"
                    % (self.rate, self.burst / (1 << 20), TAIL_LINES)
                ).encode()
            )
        self.tokens = max(self.tokens, -self.burst)
        self._absorb(data)
        if t >= self.report_at:
            self._report()
            self.report_at = t + REPORT_S
        if self.tokens >= RESUME_BYTES:
            self.end()

    def _absorb(self, data: bytes) -> None:
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        if len(self.partial) > 1 << 20:
            lines.append(self.partial)
            self.partial = b""
        for ln in lines:
            text = ln.decode("utf-8", "replace")
            if has_marker(text):
                self.write(ln + b"\n")
                continue
            self.left_lines += 1
            self.left_bytes += len(ln) + 1
            key = normalise_line(text.rsplit("\r", 1)[-1])[:200]
            if key in self.kinds or len(self.kinds) < MAX_KINDS:
                self.kinds[key] += 1
            self.tail.append(ln)

    def _report(self) -> None:
        if not self.left_lines:
            return
        top: List[str] = ["%dx %r" % (n, k) for k, n in self.kinds.most_common(3)]
        self.write(
            (
                "===== dapo-ops log capped: %d lines (%d bytes) left out; most repeated: %s =====\n"
                % (self.left_lines, self.left_bytes, "; ".join(top))
            ).encode()
        )
        self.total_left_bytes += self.left_bytes
        self.left_lines = self.left_bytes = 0
        self.kinds = collections.Counter()

    def end(self) -> None:
        """The capped stretch is over (rate back under the bound, or the attempt ended): the summary, then the last
        lines left out, then normal copying again."""
        if not self.capped:
            return
        if self.partial:
            self.tail.append(self.partial)
            self.partial = b""
        self._report()
        if self.tail:
            self.write(
                ("===== dapo-ops log capped: the last %d lines left out follow =====\n" % len(self.tail)).encode()
            )
            self.write(b"\n".join(self.tail) + b"\n")
        self.write(b"===== dapo-ops log cap lifted =====\n")
        self.tail.clear()
        self.capped = False
