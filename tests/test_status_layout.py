"""``inv status`` laid out for the terminal it lands on (issue 32 item 2): at 80, 100, 120 and 200 columns the host
names, whole run ids, ETA, throughput with its unit and suffix, every feature and the SwanLab link are on screen,
and each live run has a summary line with its run id. The probe answers are recorded
(tests/fixtures/status/probe-answers.json); the tmux test runs the real program (tests/status_tty.py) in a pane of
each width, so rich sizes itself from a real terminal. No hosts."""

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dapo_ops.cli import status as cli_status
from dapo_ops.control.status import table as st
from dapo_ops.control.status import rows as sv

HERE = Path(__file__).parent
ANSWERS = HERE / "fixtures" / "status" / "probe-answers.json"
RUNNING, FAILED = "20261129-150000-k3v9", "20261128-093012-q7c2"
URL = "https://swanlab.cn/@dapo-team/dapo-ops/runs/k2x9p1q8m3z7w5"
FEATURES = (
    "flash_attn",
    "dynamic_batch",
    "remove_padding",
    "gradient_checkpointing",
    "+offload(oom-retry-1)",
    "+recompute(oom-retry-2)",
)
WIDTHS = (80, 100, 120, 200)


def _rows():
    answers = json.loads(ANSWERS.read_text())
    return [sv.build_row(h, a) for h, a in answers.items()]


def _notes() -> tuple[list[str], list[str]]:
    """The notes every layout prints, and the SwanLab lines the table layout adds to them."""
    rows = _rows()
    swanlab = ["%s %s: swanlab %s" % (r.host, r.run_id, st.swanlab_text(r.swanlab_url)) for r in rows if r.swanlab_url]
    return cli_status.note_lines(rows), swanlab


def _check_screen(text: str, width: int) -> None:
    """The table's (or blocks') lines fit the width; each note is one whole line, its commands unbroken (a copy of a
    backticked command gets no newline; the terminal wraps it on screen)."""
    lines = [ln.rstrip() for ln in text.splitlines()]
    notes, swanlab = _notes()
    assert any(len(n) > 80 for n in notes)  # the fixture has notes that a fold would cut
    too_long = [ln for ln in lines if len(ln) > width and ln not in notes + swanlab]
    assert not too_long, (width, too_long)
    assert not [n for n in notes if n not in lines], (width, text)
    for whole in (
        "npu-node-a01",
        "npu-node-b02",
        RUNNING,
        FAILED,
        URL,
        "44.6k tok/s",
        "1.25M tok/s",
        "1.81k tok",
        "1h28m",
        *FEATURES,
    ):
        assert any(whole in ln for ln in lines), (width, whole, text)
    # one summary line per live run, its whole run id first, copyable for --run / --resume
    summary = [ln for ln in lines if ln.startswith("npu-node-a01 %s: running, step 45/100 (45%%)" % RUNNING)]
    assert len(summary) == 1 and "ETA 1h28m" in text, text
    assert any("try: lower MAX_RESPONSE_LENGTH" in ln for ln in lines)


def test_numbers_get_a_suffix_and_a_unit():
    assert st.fmt_num(44620.3, "tok/s") == "44.6k tok/s"
    assert st.fmt_num(1250000.0, "tok/s") == "1.25M tok/s"
    assert st.fmt_num(999.6) == "1k" and st.fmt_num(812.0, "tok") == "812 tok" and st.fmt_num(0.3125) == "0.312"
    assert st.fmt_num(float("nan")) == "nan"
    c = st.cells(_rows()[0])
    assert (c["tput"], c["resp_len"], c["eta"]) == ("44.6k tok/s", "1.81k tok", "1h28m")


@pytest.mark.parametrize("width", WIDTHS)
def test_every_width_shows_whole_ids_numbers_features_and_link(width):
    buf = io.StringIO()
    cli_status.render_table(_rows(), out=buf, width=width)
    _check_screen(buf.getvalue(), width)
    table = any(ln.split()[:3] == ["host", "run", "state"] for ln in buf.getvalue().splitlines() if ln.strip())
    assert table == (width >= 200), buf.getvalue()  # narrower: one block per run


def test_piped_output_is_one_line_per_row(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    buf = io.StringIO()
    cli_status.render_table(_rows(), out=buf)
    rows = [ln for ln in buf.getvalue().splitlines() if "flash_attn" in ln]
    assert len(rows) == 2 and RUNNING in rows[0] and FAILED in rows[1], buf.getvalue()
    assert "+recompute(oom-retry-2)" in rows[1] and "1.25M tok/s" in rows[1]


def _tmux(sock: str, *args: str, timeout: float = 60) -> str:
    return subprocess.run(
        ["tmux", "-L", sock, "-f", "/dev/null", *args], check=True, capture_output=True, text=True, timeout=timeout
    ).stdout


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is installed by `make deps`")
@pytest.mark.parametrize("width", WIDTHS)
def test_status_in_a_tmux_terminal_of_each_width(tmp_path, width):
    inv = tmp_path / "hosts.toml"
    inv.write_text('[hosts.npu-node-a01]\naddress = "192.0.2.1"\n[hosts.npu-node-b02]\naddress = "192.0.2.2"\n')
    sock = "dapo-ops-status-%d-%d" % (os.getpid(), width)
    # PYTHONPATH: the checkout under test, not whichever dapo_ops the interpreter has installed
    shell = (
        'env -u COLUMNS -u LINES PYTHONPATH=%s %s %s %s %s; echo "exit=$?"; tmux -L %s wait-for -S shown; exec cat'
        % (
            HERE.parent,
            sys.executable,
            HERE / "status_tty.py",
            ANSWERS,
            inv,
            sock,
        )
    )
    try:
        _tmux(sock, "new-session", "-d", "-x", str(width), "-y", "120", "-s", "st", "-c", str(HERE.parent), shell)
        _tmux(sock, "wait-for", "shown")  # the pane signals when the program has exited
        screen = _tmux(sock, "capture-pane", "-p", "-J", "-t", "st", "-S", "0", "-E", "119")
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True)
    assert "exit=0" in screen, screen
    _check_screen(screen.split("exit=0")[0], width)


@pytest.mark.parametrize("width", (80, 200))
def test_an_offline_or_local_swanlab_run_says_what_to_do_without_doubling_the_word(width):
    """A new user's trial: an offline run's row printed ``swanlab swanlab sync <dir>``; the command stays whole."""
    for cmd, what in (("swanlab sync", "offline run, upload it with"), ("swanlab watch", "local run, view it with")):
        row = _rows()[0]
        row.swanlab_url = "%s /verl/dapo_runs/%s/swanlog" % (cmd, RUNNING)
        buf = io.StringIO()
        cli_status.render_table([row], out=buf, width=width)
        text = buf.getvalue()
        assert "swanlab swanlab" not in text, text
        assert "swanlab %s `%s`" % (what, row.swanlab_url) in " ".join(text.split()), text
    assert st.swanlab_text(URL) == URL


@pytest.mark.parametrize("cause", ("write-permission", "disk-full"))
def test_the_verdict_column_names_a_crash_cause(cause):
    """A new user's trial: a full disk and a refused write showed only ``crash-other``; the column names the cause."""
    answer = json.loads(ANSWERS.read_text())["npu-node-b02"]
    answer["run"]["verdict"] = {"cls": "crash-other", "action": "stop", "detail": {"cause": cause}}
    row = sv.build_row("npu-node-b02", answer)
    assert row.verdict == "crash-other"  # the class itself stays the policy's name (--json, watch)
    assert st.cells(row)["verdict"].startswith("crash-other (%s)" % cause), st.cells(row)
