"""What a new user's trial of the clean clone found (2026-12-07, issue 44's "tried as a new user would"), each
through the real ``inv`` program in a subprocess (no hosts: the dry run and the usage checks need none)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from config_helpers import no_config

REPO = Path(__file__).resolve().parents[1]


def inv(*args: str, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SWANLAB_", "DAPO_OPS_"))}
    env["DAPO_OPS_CONFIG"] = no_config(tempfile.mkdtemp(prefix="dapo-no-config-"))  # no operator config
    return subprocess.run(
        [sys.executable, "-m", "invoke", "-r", str(REPO), *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_a_full_disk_under_stdout_is_one_line_not_a_traceback():
    """``inv status > /dev/full`` ended in rich's ``OSError: [Errno 28] No space left on device`` traceback."""
    with open("/dev/full", "w") as full:
        r = inv("launch", "--dry-run", stdout=full)
    assert r.returncode == 1
    assert "Traceback" not in r.stderr and r.stderr.strip().count("\n") == 0, r.stderr
    assert "cannot write the output: No space left on device" in r.stderr


def test_the_suggested_quoting_of_a_bad_override_runs_nothing_when_pasted():
    """The suggestion was ``--override "trainer.foo='$(touch /tmp/pwned)'"``: double quotes, so pasting it ran the
    command substitution on the operator's machine. Now the whole argument is shell-quoted: a shell hands it over
    literally and Hydra parses it as a quoted string."""
    r = inv("launch", "--dry-run", "--override", "trainer.foo=$(touch /tmp/pwned)")
    assert r.returncode == 2 and "--override " in r.stderr
    suggested = r.stderr.split("e.g. --override ", 1)[1].strip()
    [arg] = shlex.split(suggested)
    assert arg == "trainer.foo='$(touch /tmp/pwned)'"
    echoed = subprocess.run(["bash", "-c", f"printf %s {suggested}"], capture_output=True, text=True, check=True)
    assert echoed.stdout == arg  # bash ran no substitution
    assert OverridesParser.create().parse_overrides([arg])[0].value() == "$(touch /tmp/pwned)"


def test_a_key_a_setting_owns_is_refused_for_that_first_whatever_its_quoting():
    """``--override 'trainer.project_name=$(x)'`` asked for Hydra quoting, then (quoted) said ``use --project``: two
    rounds to the real fix."""
    r = inv("launch", "--dry-run", "--override", "trainer.project_name=$(touch /tmp/pwned)")
    assert r.returncode == 2 and "use --project" in r.stderr, r.stderr


def test_a_ten_thousand_digit_step_count_is_too_large_not_non_digits():
    r = inv("launch", "--dry-run", "--steps", "9" * 10_000)
    assert r.returncode == 2 and "is too large (10000 digits)" in r.stderr, r.stderr[-300:]
    assert "not a whole number" not in r.stderr


def test_an_empty_dapo_ops_config_is_refused_like_an_empty_inventory():
    """``DAPO_OPS_CONFIG=''`` was ignored in silence (the default config file read instead) while
    ``DAPO_OPS_INVENTORY=''`` is refused: the settings table's empty-value rule holds for both."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SWANLAB_", "DAPO_OPS_"))}
    r = subprocess.run(
        [sys.executable, "-m", "invoke", "-r", str(REPO), "launch", "--dry-run"],
        capture_output=True,
        text=True,
        env=dict(env, DAPO_OPS_CONFIG=" "),
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode != 0 and "DAPO_OPS_CONFIG is set but empty" in r.stderr, r.stderr[-500:]
    assert "Traceback" not in r.stderr
