"""Issue 44's minors: what a new user and a hostile operator hit on a fresh clone (operator pass 4). One test per
item, each run against project code; each failed on main's code before its fix. Pure, except the few that run the
``inv`` / ``dapo-ops`` programs as a subprocess (the behaviour is the program's: its exit code, its stderr, a closed
pipe). No host is contacted."""

from __future__ import annotations

import io
import os
import shlex
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from dapo_ops.cli import _common, program
from dapo_ops.cli import preflight as cli_preflight
from dapo_ops.cli import status as cli_status
from dapo_ops.control import settings, userconfig
from dapo_ops.control.inventory import hosts_file as inventory
from dapo_ops.control.launch import request as lr
from dapo_ops.control.launch import service as svc
from dapo_ops.control.launch.refusals import LaunchUsageError
from dapo_ops.control.preflight import inputs as preflight_inputs
from dapo_ops.control.preflight.result import Check
from dapo_ops.control.remote import fanout
from dapo_ops.core import ladder
from config_helpers import no_config

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PROGS = ("inv", "dapo-ops")


def _run(prog: str, argv: list[str], cwd: Path, **env) -> subprocess.CompletedProcess:
    cmd = [str(BIN / "inv"), "-r", str(REPO)] if prog == "inv" else [str(BIN / "dapo-ops")]
    e = {k: v for k, v in os.environ.items() if k not in ("DAPO_OPS_INVENTORY", "COLUMNS")}
    e.update(env, DAPO_OPS_CONFIG=no_config(cwd))
    return subprocess.run(cmd + argv, capture_output=True, text=True, cwd=cwd, timeout=60, env=e)


# ------------------------------------------------------------------ numbers: ASCII digits only, one parser


@pytest.mark.parametrize("raw", ["٣", "1_000", "١٠", "1e3", " "])
def test_a_setting_takes_ascii_digits_only(raw):
    """``--steps '٣'`` and ``--steps 1_000`` were accepted as 3 and 1000 (Python's int() takes both)."""
    with pytest.raises(settings.SettingsError, match="is not an integer"):
        settings.resolve({"steps": raw}, {}, {})
    if raw.strip():  # a blank variable is the empty rule's (refused too, in its own words)
        with pytest.raises(settings.SettingsError, match="TRAIN_STEPS=.* is not an integer"):
            settings.resolve({}, {"TRAIN_STEPS": raw}, {})
    assert settings.resolve({"steps": "12"}, {}, {})["steps"] == 12
    assert settings.parse_float("0.5") == 0.5
    with pytest.raises(ValueError):
        settings.parse_float("٠.٥")


@pytest.mark.parametrize("prog", PROGS)
@pytest.mark.parametrize("raw", ["٣", "1_000"])
def test_a_task_flag_takes_ascii_digits_only(prog, raw, tmp_path):
    """invoke casts a number flag with int(), so the task saw 3 / 1000 (cli/_common.py TaskFlag)."""
    out = _run(prog, ["launch", "--dry-run", "--steps", raw], tmp_path)
    assert out.returncode == _common.EXIT_USAGE, out.stdout + out.stderr
    assert out.stderr.strip().splitlines() == [f"--steps: {raw!r} is not a whole number in ASCII digits"], out.stderr


@pytest.mark.parametrize("raw", [" 5", "5 ", "\t5\n"])
def test_a_number_with_blanks_around_it_is_refused_from_every_source_naming_where_and_the_number(raw):
    """``--steps ' 5'`` was trimmed to 5 while ``int()`` elsewhere would take it too: one rule (settings.INT_RE,
    nothing around the digits) refuses it from the flag, the variable and the config file alike, in one line."""
    for flags, env, file_cfg, where in (
        ({"steps": raw}, {}, {}, "--steps"),
        ({}, {"TRAIN_STEPS": raw}, {}, "TRAIN_STEPS"),
        ({}, {}, {"run": {"steps": raw}}, "[run] steps in the config file"),
    ):
        with pytest.raises(settings.SettingsError) as e:
            settings.resolve(flags, env, file_cfg)
        assert str(e.value) == f"{where}={raw!r} has blanks around the number; set it to 5"
    with pytest.raises(settings.SettingsError, match="has blanks around the number; set it to 0.5"):
        settings.resolve({}, {"GPU_MEMORY_UTILIZATION": raw.replace("5", "0.5")}, {})


@pytest.mark.parametrize("prog", PROGS)
def test_a_task_flag_with_blanks_around_its_number_is_refused(prog, tmp_path):
    """The task flag (cli/_common.py TaskFlag) says the same before any setting is resolved: exit 2, one line."""
    out = _run(prog, ["launch", "--dry-run", "--steps", " 5"], tmp_path)
    assert out.returncode == _common.EXIT_USAGE, out.stdout + out.stderr
    assert out.stderr.strip().splitlines() == ["--steps: ' 5' has blanks around the number; give --steps 5"]


def test_a_refused_long_value_is_cut_in_the_message():
    """A refused 10,000-character value was echoed whole (one rule: settings.shown)."""
    with pytest.raises(settings.SettingsError) as e:
        settings.resolve({"framework": "x" * 10_000}, {}, {})
    msg = str(e.value)
    assert len(msg) < 300 and "(10000 characters)" in msg and "use one of them" in msg, msg
    with pytest.raises(LaunchUsageError) as e2:
        svc.refuse_bad_overrides(["a=" + "b;" * 5000])
    assert len(str(e2.value)) < 500, len(str(e2.value))


# ------------------------------------------------------------------ overrides


def test_an_override_without_a_key_is_refused_in_one_line():
    """``--override '=5'`` passed (Hydra's grammar takes an empty key) and verl died with "Config group override
    must be a string or a list. Got int", read as crash-other."""
    for o in ("=5", "=[1,2]"):
        with pytest.raises(LaunchUsageError, match="names no key; give key=value"):
            svc.refuse_bad_overrides([o])
    svc.refuse_bad_overrides(["trainer.val_before_train=False"])


# ------------------------------------------------------------------ one validation for the dry run and the launch


def _env(tmp_path, cfg_text: str | None = None, **extra) -> dict:
    cfg = tmp_path / "config.toml"
    cfg.write_text(cfg_text or "")  # no text: an empty config (a named one must exist)
    cfg.chmod(0o600)
    return {"DAPO_OPS_CONFIG": str(cfg), "SWANLAB_MODE": "offline", **extra}


def _never():
    raise AssertionError("no host may be selected before this refusal")


def test_the_dry_run_refuses_the_swanlab_host_the_launch_refuses(tmp_path):
    """``SWANLAB_HOST='https://`id`.example' inv launch --dry-run`` exited 0; the launch refused it."""
    env = _env(tmp_path, SWANLAB_HOST="https://`id`.example")
    (tmp_path / "hosts.toml").write_text('[hosts.h1]\naddress = "192.0.2.1"\naccelerator = "gpu"\ndevices = 8\n')

    def select():
        inv = inventory.load(str(tmp_path / "hosts.toml"))
        return inv, inventory.select(inv, None)

    for dry in (True, False):
        with pytest.raises(LaunchUsageError, match="SWANLAB_HOST") as e:
            lr.build(lr.TaskArgs(mode="dapo", flags={}, dry_run=dry), env, select_hosts=select, stdin_isatty=False)
        assert len(str(e.value).splitlines()) == 1
    # cloud mode without a key stays a note of the dry run, not a refusal
    ok = lr.build(
        lr.TaskArgs(mode="dapo", flags={}, dry_run=True),
        {**env, "SWANLAB_MODE": "cloud", "SWANLAB_HOST": ""},
        select_hosts=_never,
    )
    assert isinstance(ok, lr.DryRun)


@pytest.mark.parametrize(
    "hook,what",
    [
        ('{kind = "pager", url = "https://hooks.example/x"}', "kind 'pager' is not one of"),
        ('{kind = "feishu", url = "https://hooks.example/a b"}', "its url holds a blank or control character"),
        ('{kind = "slack", url = "hooks.example/x"}', "its url is not an http(s) URL with a host"),
    ],
)
def test_a_bad_webhook_is_refused_when_the_config_is_read(tmp_path, hook, what):
    """``[notify] webhooks=[{kind="pager"}]`` passed the dry run (the launch refused it) and a URL with a space was
    accepted until its first send, which failed in supervisor.log only. Both are refused when the file is read, by
    every task, without the URL in the message."""
    env = _env(tmp_path, f"[notify]\nwebhooks = [{hook}]\n")
    with pytest.raises(userconfig.UserConfigError, match=what.replace("(", r"\(").replace(")", r"\)")) as e:
        userconfig.load(env["DAPO_OPS_CONFIG"])
    assert "hooks.example" not in str(e.value)
    for dry in (True, False):
        with pytest.raises(LaunchUsageError, match="webhook 0"):
            lr.build(lr.TaskArgs(mode="dapo", flags={}, dry_run=dry), env, select_hosts=_never, stdin_isatty=False)


def test_a_config_file_others_can_read_is_refused_when_it_holds_a_secret(tmp_path):
    """An API key in a 0644 config only warned, and ``--skip-preflight`` launched anyway (bench/soak.md: refused)."""
    env = _env(tmp_path, '[swanlab]\napi_key = "sk-0123456789abcdef"\n')
    Path(env["DAPO_OPS_CONFIG"]).chmod(0o644)
    with pytest.raises(LaunchUsageError, match=r"mode 0644\) and holds \[swanlab\] api_key: run `chmod 600") as e:
        lr.build(lr.TaskArgs(mode="dapo", flags={}, skip_preflight=True), env, select_hosts=_never, stdin_isatty=False)
    assert "sk-0123456789abcdef" not in str(e.value)
    Path(env["DAPO_OPS_CONFIG"]).write_text("[run]\nsteps = 5\n")  # no secret: mode is the user's business
    assert userconfig.load(env["DAPO_OPS_CONFIG"])["run"] == {"steps": 5}


# ------------------------------------------------------------------ the settings table's empty rule: the inventory


def test_an_empty_inventory_variable_is_refused_not_hosts_toml(tmp_path, monkeypatch):
    """``DAPO_OPS_INVENTORY=''`` quietly fell back to ./hosts.toml."""
    (tmp_path / "hosts.toml").write_text('[hosts.h1]\naddress = "192.0.2.1"\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAPO_OPS_INVENTORY", "")
    with pytest.raises(inventory.InventoryError, match="DAPO_OPS_INVENTORY is set but empty; set it to a hosts.toml"):
        inventory.load(None)
    monkeypatch.delenv("DAPO_OPS_INVENTORY")
    assert list(inventory.load(None).hosts) == ["h1"]


# ------------------------------------------------------------------ fixes that name what the tool accepts


def test_preflights_context_fix_names_the_flag_launch_takes():
    """With ``--max-response-length 10000000`` preflight's fix named ``+...max_position_embeddings=...``, an
    override launch refuses (a plan setting: core/overrides.py PLAN_SETTING_KEYS)."""
    model = {
        "ok": True,
        "path": "/m",
        "weights": ["a"],
        "weights_bytes": 1,
        "tokenizer": ["t"],
        "max_position_embeddings": 40960,
    }
    settings = {"max_prompt_length": 2048, "max_response_length": 10_000_000, "extra_overrides": []}
    pv = SimpleNamespace(
        settings=settings, spec={}, s=settings.get
    )  # a PlanView's reads (control/preflight/plan_view.py)
    [c] = [c for c in preflight_inputs._input_checks(None, pv, {"model": model}) if c.name == "model"]
    assert c.status == "fail" and "--max-position-embeddings 10002048" in c.fix and "--max-response-length" in c.fix
    assert "+actor_rollout_ref" not in c.fix


def test_a_tracker_failure_suggests_offline_mode_to_sync_later():
    """A cloud-mode failure suggested ``--swanlab-mode local and sync later``: offline is the mode that syncs."""
    text = " ".join(ladder._RETRY_STOP_SUGGESTIONS[("network", "tracker")].split())
    assert "--swanlab-mode offline" in text and "--swanlab-mode local" not in text


# ------------------------------------------------------------------ the command line


@pytest.mark.parametrize("prog", PROGS)
def test_a_flag_given_twice_is_named(prog, tmp_path):
    """``--framework fsdp --framework megatron`` said invoke's ``No idea what 'megatron' is!``."""
    for argv, line in (
        (
            ["launch", "--dry-run", "--framework", "fsdp", "--framework", "megatron"],
            "--framework was given twice ('fsdp', then 'megatron'); give it once",
        ),
        (["launch", "--dry-run", "-s", "3", "--steps=4"], "--steps was given twice ('3', then '4'); give it once"),
    ):
        out = _run(prog, argv, tmp_path)
        assert out.returncode == _common.EXIT_USAGE, out.stderr
        assert out.stderr.strip().splitlines() == [line], out.stderr


@pytest.mark.parametrize("argv", [["launch", "--help"], ["--list"]])
def test_a_closed_pipe_after_inv_help_is_quiet(argv):
    """``inv launch --help | head -1``: BrokenPipeError traceback from invoke's help printer."""
    cmd = " ".join(shlex.quote(a) for a in [str(BIN / "inv"), "-r", str(REPO), *argv])
    out = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {cmd} | head -1"], capture_output=True, text=True, timeout=60
    )
    assert out.stderr == "" and len(out.stdout.splitlines()) == 1, out.stderr
    assert out.returncode in (0, 141)


def test_only_a_printing_command_line_gets_the_default_sigpipe():
    assert not program.quiet_closed_pipe_for_printouts(["inv", "launch", "--steps", "5"])
    assert not program.quiet_closed_pipe_for_printouts(["inv", "launch", "--", "--help"])


def test_logs_refuses_a_line_count_it_cannot_show(tmp_path):
    """``inv logs -n 99999999999`` quietly returned the 960 lines the log had."""
    out = _run("inv", ["logs", "-n", "99999999999"], tmp_path)
    assert out.returncode == _common.EXIT_USAGE
    assert out.stderr.strip().splitlines() == [
        "logs: --lines 99999999999 is above the maximum 1000000; give at most 1000000 (more than any train.log "
        "holds: the supervisor caps its growth)"
    ]


# ------------------------------------------------------------------ output: encoding and width


def test_output_degrades_to_ascii_instead_of_a_traceback():
    """``PYTHONIOENCODING=ascii inv logs -n 2`` died on tqdm's █ (cli/logs.py LineWriter)."""
    for enc in ("ascii", "latin-1"):
        raw = io.BytesIO()
        st = io.TextIOWrapper(raw, encoding=enc)
        _common.degrade_to_ascii(st)
        st.write("Training Progress:  35%|███▌  | 7/20 […] é\n")
        st.flush()
        text = raw.getvalue().decode(enc)
        assert text.startswith("Training Progress:  35%|####  | 7/20 [...]"), text
    utf = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    _common.degrade_to_ascii(utf)
    assert utf.errors == "strict"  # a stream that can print them is left alone


def test_a_task_under_an_ascii_locale_prints_the_bar_in_ascii():
    code = (
        "import sys\nfrom invoke import Collection\nfrom dapo_ops.cli import program\n"
        "from dapo_ops.cli._common import dapo_task\n"
        "@dapo_task\ndef bar(c):\n    '''Print a bar.'''\n    print('50%|█████     | 5/10')\n"
        "program.make_program(Collection(bar)).run(['dapo-ops', 'bar'])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONIOENCODING": "ascii", "PYTHONPATH": str(REPO)},
    )
    assert out.returncode == 0 and out.stdout == "50%|#####     | 5/10\n", out.stderr


@pytest.mark.parametrize(
    "cols,tty,want",
    [
        ("abc", False, fanout.PIPE_WIDTH),
        ("", False, fanout.PIPE_WIDTH),
        ("٨٠", False, fanout.PIPE_WIDTH),
        ("0", False, fanout.PIPE_WIDTH),
        ("97", False, 97),
    ],
)
def test_one_width_rule(cols, tty, want):
    """``COLUMNS=abc inv status`` was a traceback (cli/status.py int(COLUMNS)); preflight ignored COLUMNS."""
    assert fanout.output_width(io.StringIO(), {"COLUMNS": cols}) == want


def test_status_with_a_bad_columns_renders(monkeypatch):
    from test_status_layout import _rows

    monkeypatch.setenv("COLUMNS", "abc")
    buf = io.StringIO()
    cli_status.render_table(_rows(), out=buf)
    assert buf.getvalue().strip()


def test_preflight_at_80_columns_never_splits_a_path(monkeypatch):
    """At 80 columns preflight's 22 checks took ~85 lines with paths split mid-word."""
    path = "/verl/models/Qwen3-8B-Instruct/config.json"
    checks = [
        Check("model", "ok", f"{path}: 5 weight file(s), 15.26 GiB, tokenizer tokenizer.json"),
        Check(
            "disk",
            "fail",
            "/verl/dapo_runs: 3.1 GiB free, the run needs about 40 GiB (checkpoints)",
            "free space under /verl/dapo_runs or set runs_dir in hosts.toml to a larger disk",
        ),
    ] * 11
    monkeypatch.setenv("COLUMNS", "80")
    buf = io.StringIO()
    cli_preflight.render_host("h1", checks, file=buf)
    text = buf.getvalue()
    for word in (path + ":", "/verl/dapo_runs:", "hosts.toml"):
        assert word in text, text
    assert max(len(ln) for ln in text.splitlines()) <= 80
    assert len(text.splitlines()) <= 1 + 22 * 3, text  # at most three lines a check


def test_the_dry_run_plan_follows_columns_in_a_pipe(monkeypatch):
    """A piped dry run wrapped at 80 (rich's default) while status used 250."""
    monkeypatch.setenv("COLUMNS", "120")
    con = fanout.console(io.StringIO())
    assert con.width == 120
    monkeypatch.delenv("COLUMNS")
    assert fanout.console(io.StringIO()).width == fanout.PIPE_WIDTH
