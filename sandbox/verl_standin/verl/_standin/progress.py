"""A tqdm-format progress bar for the verl STAND-IN (tqdm itself is not in the bench image).

Prints tqdm's default format to stderr with carriage-return redraws, as verl's
``tqdm(total=..., initial=global_steps, desc="Training Progress")`` does when stderr is not a TTY:
``Training Progress:  35%|███▌      | 212/600 [5:41:22<10:24:51, 96.63s/it]``.
"""

from __future__ import annotations

import sys
import time

_PARTS = " ▏▎▍▌▋▊▉█"


def _fmt_time(s: float) -> str:
    s = int(s)
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h:d}:{m:02d}:{sec:02d}" if h else f"{m:02d}:{sec:02d}"


class Progress:
    def __init__(
        self, total: int, initial: int = 0, desc: str = "", prefix: str = "", stream=None, ray_lines: bool = False
    ):
        """``ray_lines``: each redraw reaches the driver log as its own Ray-prefixed line ``<prefix>\\r<bar>\\n``
        and close adds a second redraw on the last line, as in the real verl 0.9.1 logs."""
        self.total, self.n, self.initial, self.desc = total, initial, initial, desc
        self.prefix = prefix
        self.ray_lines = ray_lines
        self.stream = stream or sys.stderr
        self.t0 = time.time()
        self.closed = False
        self._draw()

    def _bar(self, frac: float, width: int = 10) -> str:
        filled = frac * width
        full = int(filled)
        rest = int((filled - full) * 8)
        s = "█" * full
        if full < width:
            s += _PARTS[rest] if rest else " "
            s += " " * (width - full - 1)
        return s[:width]

    def _line(self) -> str:
        elapsed = time.time() - self.t0
        done = self.n - self.initial
        frac = self.n / self.total if self.total else 0
        if done > 0 and elapsed > 0:
            rate = done / elapsed
            rate_s = f"{rate:5.2f}it/s" if rate >= 1 else f"{1 / rate:5.2f}s/it"
            remaining = _fmt_time((self.total - self.n) / rate)
        else:
            rate_s, remaining = "?it/s", "?"
        return (
            f"{self.desc}: {frac * 100:3.0f}%|{self._bar(frac)}| {self.n}/{self.total} "
            f"[{_fmt_time(elapsed)}<{remaining}, {rate_s}]"
        )

    def _draw(self):
        if self.ray_lines:
            self.stream.write(self.prefix + ("\r" if self.n > self.initial else "") + self._line() + "\n")
        else:
            self.stream.write("\r" + self.prefix + self._line())
        self.stream.flush()

    def update(self, k: int = 1):
        self.n += k
        self._draw()

    def close(self):
        if not self.closed:
            if self.ray_lines:
                self.stream.write(self.prefix + "\r" + self._line() + "\r" + self._line() + "\n")
            else:
                self._draw()
                self.stream.write("\n")
            self.stream.flush()
            self.closed = True
