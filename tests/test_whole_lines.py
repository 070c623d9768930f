"""What a user reads about a run is whole: the verdict's cause and fix in ``inv status`` (table notes, ``--run``), in
``inv watch``'s lines and its ending, never cut with an ellipsis; files named by their full path (a new user's trial:
"no common frame: the driver stands in…", "stop with…", "read stacks-attempt-2.txt" with no path)."""

from __future__ import annotations

import io

from dapo_ops.agent.supervisor import escalate
from dapo_ops.cli import status as cli_status
from dapo_ops.control.status import events
from dapo_ops.control.status import rows as sv
from dapo_ops.control.status.watch import Watch
from dapo_ops.core import ladder
from dapo_ops.core.classify.hints import action_text
from dapo_ops.core.features import FeatureSet

RUN_DIR = "/verl/dapo_runs/20261207-180000-abcd"
STACKS = RUN_DIR + "/stacks-attempt-2.txt"


def _flat(text: str) -> str:
    return " ".join(text.split())


def _hang_verdict() -> dict:
    """The trial's plain hang: one dump, the driver in its own trainer loop, no worker dumped (stand-in ``hang``)."""
    ents = [{"pid": 41, "role": "driver", "kind": "compute", "where": "StandinTrainer._fit (trainer.py:903)"}]
    return escalate.stall_verdict(61.0, 60.0, [2.0], 1, 30, ents, STACKS)


def _row(verdict: dict, attempt: int = 2, status: str = "running") -> sv.StatusRow:
    run = {
        "run_id": "20261207-180000-abcd",
        "status": status,
        "attempt": attempt,
        "step": 1,
        "total_steps": 30,
        "step_times": [2.0],
        "last_progress_at": 1000.0,
        "started_at": 900.0,
        "features": [{"name": "flash_attn", "source": "default"}],
        "verdict": verdict,
        "pids": {"supervisor": 10, "verl_pgid": 11},
    }
    return sv.build_row("h1", {"run": run, "tail": "", "now": 1001.0, "supervisor_alive": True, "verl_alive": True})


def test_a_hang_verdict_reaches_status_and_watch_whole_with_the_dumps_full_path():
    v = _hang_verdict()
    action = v["action"]
    assert len(action) > 120  # what the old one-line cut made "no common frame: the driver stands in…"
    assert "(stack dumps: %s)" % STACKS in action  # the full path, not the bare file name
    row = _row(v)
    assert row.hint == action and "\u2026" not in row.hint
    out = io.StringIO()
    cli_status.render_table([row], out=out, width=100)
    printed = _flat(out.getvalue())
    assert _flat(action) in printed and "\u2026" not in printed, printed
    # watch: the verdict's line, and the ending of a watch that stops on this row's state
    before = _row(None, attempt=2)
    lines = events.events(before, row)
    assert any(_flat(action) in _flat(ln) for ln in lines), lines
    w = Watch([type("H", (), {"name": "h1"})()])
    dead = _row(v)
    dead.state, dead.ended = sv.SUPERVISOR_DEAD, None
    w.done["h1"] = dead
    _code, message = w.outcome()
    assert _flat(action) in _flat(message), message


def test_the_demos_oom_action_is_whole_in_status():
    action = action_text("oom-device", {"phase": "actor-update"})
    assert len(action) > 120 and action.endswith("stop with suggestions when none is left")
    row = _row({"cls": "oom-device", "action": action, "hint": "long paragraph"})
    assert row.hint == action
    out = io.StringIO()
    cli_status.render_table([row], out=out, width=90)
    assert _flat(action) in _flat(out.getvalue())


def test_a_hang_that_stops_after_its_retry_names_the_dumps_by_full_path():
    d = ladder.decide(FeatureSet.from_json([]), "hang", _hang_verdict()["detail"], 0, 3, {"hang": 1}, {})
    assert d.action == "stop"
    assert STACKS in d.suggestions[0], d.suggestions


def test_the_features_column_shows_the_ladders_rungs_the_current_attempt_runs():
    """A learned start (offload) then two OOM-ladder setting rungs: the trial's status showed only
    ``offload(learned)``; the column now says what attempt 3 runs, the ladder's rungs marked as such."""
    from dapo_ops.control.status import table

    off = {"rung": "offload", "phase": "update", "source": "learned", "changes": {}}
    budget = {"token_budgets": {"actor_rollout_ref.actor.ppo_max_token_len_per_gpu": 10240}}
    r1 = {"rung": "update-batch", "phase": "update", "source": "oom-retry-1", "changes": budget}
    r2 = {"rung": "offload-policy", "phase": "update", "source": "oom-retry-2", "changes": {"fsdp_offload_policy": 1}}
    feats = [{"name": "flash_attn", "source": "default"}, {"name": "offload", "source": "learned"}]
    attempts = [
        {"n": 1, "features": feats, "setting_changes": {"memory_rungs": [off]}, "verdict": {"cls": "oom-device"}},
        {"n": 2, "features": feats, "setting_changes": {**budget, "memory_rungs": [off, r1]}},
        {"n": 3, "features": feats, "setting_changes": {**budget, "memory_rungs": [off, r1, r2]}},
    ]
    row = _row(None, attempt=3)
    row.attempts = sv._attempt_rows(attempts)
    cell = table.cells(row)["features"]
    assert cell == "flash_attn,offload(learned),+update-batch(oom-retry-1),+offload-policy(oom-retry-2)", cell
    out = io.StringIO()
    cli_status.render_table([row], out=out, width=200)
    assert "+offload-policy(oom-retry-2)" in out.getvalue()
    row.attempt = 1  # the first attempt ran only the learned start
    assert table.cells(row)["features"] == "flash_attn,offload(learned)"


def test_the_oom_retry_limit_is_named_by_the_source_it_came_from():
    """``--max-oom-retries 1`` ended in "after 1 OOM retries (MAX_OOM_RETRIES=1)": a variable the user never set.
    The plan records the value in its source's words (the settings layer's flag / env / config / default), the
    supervisor hands it to the ladder, and the stop and the dry run quote it."""
    from dapo_ops.agent.supervisor import machine
    from dapo_ops.control import settings
    from dapo_ops.core import defaults
    from plan_helpers import plan_for

    def spec_of(flags, env, file_cfg):
        st = settings.resolve(flags, env, file_cfg)
        return plan_for(settings=st, host=None, mode="dapo", run_id="20261207-180000-abcd", swanlab_logger=False).spec

    assert spec_of({"max_oom_retries": 1}, {}, {})["max_oom_retries_from"] == "--max-oom-retries 1"
    assert spec_of({}, {"MAX_OOM_RETRIES": "1"}, {})["max_oom_retries_from"] == "MAX_OOM_RETRIES=1"
    from_file = spec_of({}, {}, {"run": {"max_oom_retries": 3}})["max_oom_retries_from"]
    assert from_file == "[run] max_oom_retries = 3 in the config file", from_file
    assert spec_of({}, {}, {})["max_oom_retries_from"] == "the default max_oom_retries=2"

    spec = spec_of({"max_oom_retries": 1, "framework": "fsdp"}, {}, {})
    sup = machine.Supervisor.__new__(machine.Supervisor)
    sup.spec, sup.rec, sup.run_dir = defaults.RunSpec.read(spec), {"setting_changes": {}}, "/verl/dapo_runs/x"
    s = sup._settings()
    d = ladder.decide(FeatureSet.from_json(spec["features"]), "oom-device", {"phase": "update"}, 1, 1, {}, s)
    assert d.action == "stop" and "after 1 OOM retries (--max-oom-retries 1)" in d.reason, d.reason
    assert "MAX_OOM_RETRIES" not in d.reason


def test_a_data_file_with_shell_metacharacters_is_shown_whole_and_quoted_never_run(tmp_path):
    """``--train-file '/x/$(touch /tmp/pwned).parquet'``: preflight's row read ``data:pwned).parquet``. The row now
    names the whole path, quoted; the probe's own check of that file (the agent, as the container runs it) executes
    nothing, and the op line that carries it quotes it."""
    import json
    import shlex

    from dapo_ops.agent import parquet
    from dapo_ops.control.preflight import inputs
    from dapo_ops.control.remote import bundle

    marker = tmp_path / "pwned"
    path = "/x/$(touch %s).parquet" % marker
    d = parquet.check_parquet(path)  # what the probe answers for it in the container
    assert d["path"] == path and not d["ok"], d
    [c] = [c for c in inputs._input_checks(None, None, {"data": [d]}) if c.name.startswith("data")]
    assert c.name == "data:" + shlex.quote(path), c.name
    assert shlex.quote(path) in c.message and "pwned).parquet" not in c.name.replace(shlex.quote(path), "")
    line = bundle.op_line("/b", "python3", "preflight_probe", [json.dumps({"data": [path]})])
    assert json.loads(shlex.split(line)[-1]) == {"data": [path]}  # one quoted word: no shell expansion
    assert not marker.exists()
    plain = [c for c in inputs._input_checks(None, None, {"data": [dict(d, path="/d/train.parquet")]})]
    assert plain[0].name == "data:train.parquet"


def test_the_troubleshooting_doc_and_the_ending_line_of_a_refused_write_and_a_dead_worker_are_one_text():
    """docs/troubleshooting.md (the policy table) quoted the older, general wording of these two stops while their
    ending lines said more (the path; the dead worker): the ending line is now the policy rule's own text, which the
    doc renders with its fields as ``<field>``."""
    import re
    from pathlib import Path

    from dapo_ops.agent.supervisor.record import ending_line
    from dapo_ops.core import policy
    from dapo_ops.core.runstate import RunStatus

    doc = (Path(__file__).resolve().parents[1] / "docs" / "troubleshooting.md").read_text()
    settings = {"run_id": "20261207-180000-abcd", "hosts": ["h1"], "ckpt_dir": RUN_DIR + "/checkpoints"}
    cases = [
        ({"cause": "write-permission", "path": RUN_DIR + "/checkpoints/global_step_4"}, "write_path"),
        ({"cause": "worker-died", "actor": "WorkerDict", "worker_pid": 4242, "node": "10.0.0.2"}, "dead_worker"),
    ]
    for detail, field in cases:
        d = ladder.decide(FeatureSet(), "crash-other", detail, 0, 2, {}, settings)
        line = ending_line(RunStatus.FAILED, d.reason, 3, 6)
        assert d.action == "stop" and line == "failed: %s at step 3/6" % d.reason, line
        row = next(ln for ln in doc.splitlines() if "`cause` = `%s`" % detail["cause"] in ln)
        shown = re.sub(r"\$\{?(\w+)\}?", r"<\1>", policy.rule("crash-other", detail).reason)
        assert shown in row and "<%s>" % field in shown, (shown, row)  # the doc quotes the ending's text
        value = {"write_path": detail.get("path"), "dead_worker": "WorkerDict pid 4242 on 10.0.0.2"}[field]
        assert d.reason == shown.replace("<%s>" % field, str(value)), d.reason
        assert action_text("crash-other", detail).startswith("stop: " + d.reason)  # the verdict's action too


def _supervisor_settings(runtime: str) -> dict:
    """The settings the supervisor hands the ladder for a run planned on a host of ``runtime`` (docker | host)."""
    from types import SimpleNamespace

    from dapo_ops.agent.supervisor import machine
    from dapo_ops.control import settings
    from dapo_ops.core import defaults
    from plan_helpers import plan_for

    host = SimpleNamespace(name="h1", runtime=runtime, container="trainbox" if runtime == "docker" else None)
    st = settings.resolve({"framework": "fsdp"}, {}, {})
    spec = plan_for(settings=st, host=host, mode="dapo", run_id="20261207-180000-abcd", swanlab_logger=False).spec
    assert spec["runtime"] == runtime
    sup = machine.Supervisor.__new__(machine.Supervisor)
    sup.spec, sup.rec, sup.run_dir = defaults.RunSpec.read(spec), {"setting_changes": {}}, RUN_DIR
    return sup._settings()


def test_disk_full_permission_and_dead_worker_suggestions_are_commands_that_run_as_they_are():
    """They said "in the run's container, `ls -ld ...`": a line that runs nowhere as is. A container host's
    suggestions are now ``docker exec <container> sh -c '...'`` (the one spelling of a host command, the one the
    Target runs), a bare host's the command itself."""
    import shlex

    from dapo_ops.core import hostcmd

    docker, bare = _supervisor_settings("docker"), _supervisor_settings("host")
    write = {"cause": "write-permission", "path": RUN_DIR + "/checkpoints/global_step_4"}
    full = {"cause": "disk-full", "path": RUN_DIR + "/checkpoints/global_step_4"}
    died = {"cause": "worker-died", "actor": "WorkerDict", "worker_pid": 4242}
    for detail in (write, full, died):
        for s, container in ((docker, "trainbox"), (bare, "")):
            said = "\n".join(ladder.decide(FeatureSet(), "crash-other", detail, 0, 2, {}, s).suggestions)
            assert "in the run's container" not in said and "<" not in said, said
            cmds = [c for c in said.split("`") if c.startswith(("docker exec", "ls ", "df ", "du ", "ray "))]
            assert cmds, said
            for c in cmds:
                if container:
                    words = shlex.split(c)
                    assert words[:3] == ["docker", "exec", container] and words[3:5] == ["sh", "-c"], c
                    assert c == hostcmd.in_container(words[5], container)
                else:
                    assert not c.startswith("docker"), c
    ckpt = docker["ckpt_dir"]
    said = "\n".join(ladder.decide(FeatureSet(), "crash-other", write, 0, 2, {}, docker).suggestions)
    assert "on h1: `docker exec trainbox sh -c 'ls -ld %s && id" % ckpt in said, said


def test_no_suggestion_prints_a_run_id_placeholder_as_a_command():
    """Settings without a run id gave "`inv launch --resume <run_id>`" and "`inv logs --run <run_id> --errors`"."""
    import pytest

    died = {"cause": "worker-died", "actor": "WorkerDict", "worker_pid": 4242}
    for cls, detail in (("crash-other", died), ("crash-other", {"cause": "disk-full", "path": "/r/c"})):
        d = ladder.decide(FeatureSet(), cls, detail, 0, 2, {}, {"hosts": ["h1"]})
        assert d.action == "stop" and d.suggestions
        assert not any("<run_id>" in s or "--resume" in s or "inv logs" in s for s in d.suggestions), d.suggestions
    with pytest.raises(ValueError):
        ladder.resume_command({"hosts": ["h1"]})
