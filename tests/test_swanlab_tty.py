"""The interactive SwanLab prompt, driven through a real pseudo-terminal (pty.fork)."""

from __future__ import annotations

import os
import pty
import select
import stat
import sys
import time


from dapo_ops.control import userconfig

KEY = "sk-dapo-SECRET-123456789"
CHILD = (
    "import sys\n"
    "from dapo_ops.control import swanlab_settings as swanlab_cfg\n"
    "notes = []\n"
    "try:\n"
    "    s = swanlab_cfg.resolve_for_launch(notes=notes)\n"
    "except swanlab_cfg.SwanlabConfigError as e:\n"
    "    print('ERROR', e); sys.exit(2)\n"
    "print('RESULT', repr(s), sorted(s.sources.items()))\n"
    "print('NOTES', notes)\n"
    "print('LOGGERS', s.loggers())\n"
)


class Pty:
    def __init__(self, env):
        pid, fd = pty.fork()
        if pid == 0:  # child: stdin/stdout/stderr are the pty slave, which is also the controlling tty
            os.execve(sys.executable, [sys.executable, "-c", CHILD], env)
        self.pid, self.fd, self.out = pid, fd, b""

    def expect(self, needle: bytes, wait_s: float = 60.0) -> bytes:
        end = time.monotonic() + wait_s
        while needle not in self.out:
            left = end - time.monotonic()
            if left <= 0:
                raise AssertionError(f"did not see {needle!r}; got {self.out!r}")
            r, _, _ = select.select([self.fd], [], [], left)
            if r:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:  # EIO: child closed the pty
                    chunk = b""
                if not chunk:
                    raise AssertionError(f"child exited before {needle!r}; got {self.out!r}")
                self.out += chunk
        return self.out

    def send(self, text: str):
        os.write(self.fd, text.encode() + b"\r")

    def finish(self) -> int:
        while True:
            try:
                r, _, _ = select.select([self.fd], [], [], 30)
                chunk = os.read(self.fd, 4096) if r else b""
            except OSError:
                chunk = b""
            if not chunk:
                break
            self.out += chunk
        _, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        return os.waitstatus_to_exitcode(status)


def _env(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SWANLAB_", "DAPO_OPS_"))}
    env["XDG_CONFIG_HOME"] = str(tmp_path)  # the default path, not there yet: the prompt's save creates it
    env["HOME"] = str(tmp_path)
    return env


def test_tty_prompt_reads_key_without_echo_and_saves_0600(tmp_path):
    env = _env(tmp_path)
    t = Pty(env)
    t.expect(b"SwanLab host")
    t.send("http://192.0.2.10:8000")
    t.expect(b"API key (input hidden)")
    before_key = len(t.out)
    t.send(KEY)
    t.expect(b"[y/N]")
    typed_region = t.out[before_key:]
    t.send("y")
    rc = t.finish()
    text = t.out.decode("utf-8", "replace")
    assert rc == 0, text
    # the host was echoed (normal input), the key was not (getpass turns echo off)
    assert "http://192.0.2.10:8000" in text
    assert KEY.encode() not in typed_region
    assert KEY not in text, "the key must never be echoed or printed"
    assert "api_key='***'" in text and "('api_key', 'prompt')" in text
    assert "LOGGERS ['console', 'swanlab']" in text
    cfg = tmp_path / "dapo-ops" / "config.toml"
    assert stat.S_IMODE(cfg.stat().st_mode) == 0o600
    assert userconfig.load(cfg)["swanlab"] == {"host": "http://192.0.2.10:8000", "api_key": KEY}

    # second launch: the saved file wins over the prompt (no question asked)
    t2 = Pty(env)
    rc2 = t2.finish()
    text2 = t2.out.decode("utf-8", "replace")
    assert rc2 == 0 and "SwanLab host" not in text2 and "('api_key', 'file')" in text2


def test_no_tty_child_gets_the_one_line_error(tmp_path):
    import subprocess

    out = subprocess.run(
        [sys.executable, "-c", CHILD],
        env=_env(tmp_path),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1 and "SWANLAB_API_KEY" in lines[0] and "--swanlab-mode" in lines[0]
    assert not (tmp_path / "dapo-ops").exists()
