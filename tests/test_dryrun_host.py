"""``inv launch --dry-run -H h1`` shows the launch's own plan (a new user's trial: the dry run showed
``param_offload=False``, the launch then ran True on a learned start; a ``--resume`` the launch refused for its data
feed was a dry run of rc 0). With ``-H`` the dry run reads the facts the launch reads before starting anything
(``service.gather_facts``: busy check, the quick checks' probe with the device memory, config.json and memos) and
finishes the plan the launch finishes (``build_plan``): its start rungs, fastest fit and refusals are the launch's.
Without ``-H`` no host is contacted and the plan says what it could not know. Pure: the fake container of
tests/test_launch_once.py."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from dapo_ops.control.launch import dryrun
from dapo_ops.control.launch import service as svc
from dapo_ops.control.launch.refusals import LaunchRefused
from dapo_ops.control.preflight import checks as preflight_checks
from dapo_ops.control.preflight.result import FAIL, Check
from dapo_ops.control.remote import target as target_mod
from dapo_ops.control.swanlab_settings import SwanlabSettings
from test_launch_once import FLAGS, HOST, FakeTarget, launch_env  # noqa: F401  (a fixture)

HOSTS_TOML = """
[defaults]
address = "198.51.100.11"
accelerator = "gpu"
devices = 1
workdir = "/work"
runs_dir = "/runs"

[hosts.h1]
"""


ENV = {"SWANLAB_MODE": "disabled"}


class CtxTarget(FakeTarget):
    def __init__(self, host, container=None):
        super().__init__(host)
        self.container = container or "verl"
        TARGETS.append(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


TARGETS: list[CtxTarget] = []


def _dry(tmp_path, hosts="h1", **kw):
    inv = tmp_path / "hosts.toml"
    inv.write_text(HOSTS_TOML)
    buf = io.StringIO()
    con = Console(file=buf, width=400, color_system=None, force_terminal=False, highlight=False)
    plan = dryrun.dry_run(
        dict(FLAGS), mode="dapo", hosts=hosts, inventory=str(inv), env=ENV, file_cfg={}, console=con, **kw
    )
    return plan, buf.getvalue()


def test_a_dry_run_with_a_host_shows_the_plan_the_launch_runs(monkeypatch, tmp_path, launch_env):  # noqa: F811
    TARGETS.clear()
    monkeypatch.setattr(target_mod, "Target", CtxTarget)
    plan, text = _dry(tmp_path)
    # the launch of the same request on the same facts (MEMORY: Qwen3-8B does not fit one 80 GiB device as planned)
    req = svc.LaunchRequest(mode="dapo", settings=_settings(), sw=SwanlabSettings(mode="disabled"))
    launched = svc.gather_facts(FakeTarget(HOST), req).plan
    rid = lambda argv: [a for a in argv if plan.run_spec.run_id not in a and launched.run_spec.run_id not in a]  # noqa: E731
    assert any(ln.startswith("memory-fit: starts on rung(s)") for ln in launched.memory)
    assert rid(plan.argv) == rid(launched.argv)
    assert [ln for ln in plan.memory if "memory-fit" in ln] == [ln for ln in launched.memory if "memory-fit" in ln]
    assert "memory-fit: starts on rung(s)" in text and "the launch will still check: " in text
    # it read and started nothing: the busy check without its sweep, no start op, nothing written
    (t,) = TARGETS
    ops = [c[1] for c in t.calls if c[0] == "run"]
    assert any("dapo_ops.agent.occupancy" in o and "--sweep" not in o for o in ops), ops
    assert not any("runstart" in o for o in ops) and not t.written
    # what the launch would refuse, the dry run refuses in the launch's words (exit 1 in the task)
    monkeypatch.setattr(
        preflight_checks,
        "quick",
        lambda *a, **kw: [Check("data-feed", FAIL, "8 rows // batch 8 = 1 step(s)/epoch x 2 epochs = 2 steps < --steps 40", "drop trainer.total_epochs")],
    )  # fmt: skip
    with pytest.raises(LaunchRefused, match=r"^h1: preflight data-feed failed: 8 rows") as e:
        _dry(tmp_path)
    assert e.value.kind == "preflight"
    # --skip-preflight: the launch would go ahead; the dry run says what it let through
    _, text = _dry(tmp_path, skip_preflight=True)
    assert "skipped: preflight data-feed failed: 8 rows" in text


def test_a_dry_run_without_a_host_contacts_none_and_says_what_it_could_not_know(monkeypatch, tmp_path):
    TARGETS.clear()
    monkeypatch.setattr(target_mod, "Target", CtxTarget)
    plan, text = _dry(tmp_path, hosts="")
    assert not TARGETS
    assert "not checked here (no -H host): the container, devices" in text
    assert "`inv launch --dry-run -H <host> ...`" in text


def _settings():
    from dapo_ops.control import settings

    return settings.resolve(dict(FLAGS), ENV, {})


def test_the_no_config_fit_line_says_the_packed_attention_cap_holds_here():
    """Without config.json (a dry run without -H) the ``fit: not chosen here`` line said the command's token budgets
    were the defaults the launch starts from, while the packed-attention cap (fastfit.packed_cap) had already lowered
    them on an sdpa run, as the launch does: the line says the cap holds, and the command carries it."""
    from dapo_ops.control import settings
    from plan_helpers import plan_for

    st = settings.resolve({"framework": "fsdp", "features": "-flash_attn", "max_response_length": 8192}, {}, {})
    p = plan_for(settings=st, host=None, mode="dapo", run_id="20261129-151200-a1b2", swanlab_logger=False)
    cap = [ln for ln in p.memory if ln.startswith("fit: ") and "packed micro-batch" in ln]
    assert cap, p.memory
    (line,) = [ln for ln in p.memory if ln.startswith("fit: not chosen here")]
    assert "the packed-attention cap of the fit: lines above" in line and "with that cap applied" in line, line
    assert "the others in the command below are the defaults" not in line
