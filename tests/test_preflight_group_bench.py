"""One compose per group of identical hosts, on real sandbox hosts (sshd + dockerd + the stand-in verl container
each): identical hosts compose once and each gets its own per-host rows; a host whose verl config differs (one
yaml edited in its container) composes on its own in a second round and its check reflects ITS config; overrides
that do not compose fail on every host of the group; one host is one round trip. The round trips are counted at
:func:`dapo_ops.control.preflight.gather.collect` (the real one, wrapped); composes from the probe answers."""

from __future__ import annotations

import json
import shutil

import pytest

from dapo_ops.control.inventory import hosts_file as inventory
from dapo_ops.control.launch import plan as planning
from dapo_ops.control.preflight.result import worst
from dapo_ops.control.preflight import group
from dapo_ops.control.preflight import gather as preflight_probe
from inputs_helpers import make_model, make_parquet

pytestmark = pytest.mark.bench
IN = "/verl/dapo_runs/pf-inputs"  # container path (bind-mounted from the host's runs dir)
ROLLOUT_YAML = "/verl/verl/trainer/config/rollout/rollout.yaml"  # defines enforce_eager (verl 0.9.1 line 52)
HOSTS = ("h1", "h2", "h3")


@pytest.fixture
def fleet(sandbox):
    for h in HOSTS:
        sandbox.reset(h)
        base = sandbox.runs_dir(h) / "pf-inputs"
        shutil.rmtree(base, ignore_errors=True)
        make_model(base / "model", max_pos=16384)
        make_parquet(base / "train.parquet", 256)
        make_parquet(base / "val.parquet", 4)
    yield sandbox
    for h in HOSTS:
        sandbox.reset(h)


@pytest.fixture
def counted(monkeypatch):
    """Every host round trip of run_fleet: ``[(host, request keys)]`` (the real collect runs)."""
    calls = []
    real = preflight_probe.collect

    def spy(target, req, **kw):
        calls.append((target.host.name, sorted(req)))
        return real(target, req, **kw)

    monkeypatch.setattr(group, "collect", spy)
    return calls


def _fleet(sandbox, names, *, extra=()):
    inv = inventory.load(sandbox.inventory)
    hosts = [inv.hosts[n] for n in names]
    s = {
        "model": f"{IN}/model",
        "train_file": f"{IN}/train.parquet",
        "val_file": f"{IN}/val.parquet",
        "framework": "fsdp",
        "steps": 4,
        "save_freq": 2,
        "max_prompt_length": 512,
        "max_response_length": 1024,
    }
    jobs = {
        h.name: group.HostJob(
            plan=planning.make_plan(
                planning.draft_plan(
                    planning.PlanInputs(
                        settings=s,
                        host=h,
                        mode="dapo",
                        run_id="20261201-000000-grp0",
                        swanlab_logger=False,
                        extra_overrides=list(extra),
                    )
                )
            )
        )
        for h in hosts
    }
    facts: dict = {}
    checks = group.run_fleet(hosts, jobs, timeout=170, facts_out=facts, reuse=True)
    return {n: {c.name: c for c in cs} for n, cs in checks.items()}, facts


def _composed_on(facts) -> list[str]:
    """Hosts whose own probe ran the compose op (a shared answer carries ``from``)."""
    return sorted(
        n for n, f in facts.items() if "compose" in (f.get("probe") or {}) and "from" not in f["probe"]["compose"]
    )


def test_identical_hosts_compose_once(fleet, counted):
    checks, facts = _fleet(fleet, HOSTS)
    assert _composed_on(facts) == ["h1"]
    assert sorted(n for n, _ in counted) == ["h1", "h2", "h3"]  # one round trip each, no second round
    assert checks["h1"]["overrides"].status == "ok" and "composed on" not in checks["h1"]["overrides"].message
    for h in ("h2", "h3"):
        ov = checks[h]["overrides"]
        assert ov.status == "ok" and "composed on h1 (same verl config and hydra)" in ov.message
        # the rest of the rows are each host's own
        assert checks[h]["container"].status == "ok" and checks[h]["devices"].status == "ok"
        assert facts[h]["probe"]["hostname"] != facts["h1"]["probe"]["hostname"]
    fps = {facts[h]["probe"]["compose_fp"] for h in HOSTS}
    assert len(fps) == 1 and None not in fps


def test_one_host_is_one_round_trip(fleet, counted):
    checks, facts = _fleet(fleet, ["h2"])
    assert counted == [("h2", counted[0][1])] and "compose" in counted[0][1]
    assert _composed_on(facts) == ["h2"] and checks["h2"]["overrides"].status == "ok"


def test_a_host_with_another_verl_config_composes_on_its_own(fleet, counted):
    # h2's container: rollout.yaml without enforce_eager (the plan overrides actor_rollout_ref.rollout.enforce_eager)
    fleet.exec("h2", f"sed -i 's/^enforce_eager:/enforce_eager_renamed:/' {ROLLOUT_YAML}", check=True)
    try:
        checks, facts = _fleet(fleet, HOSTS)
    finally:
        fleet.exec("h2", f"sed -i 's/^enforce_eager_renamed:/enforce_eager:/' {ROLLOUT_YAML}", check=True)
    assert _composed_on(facts) == ["h1", "h2"]
    assert sorted(n for n, _ in counted) == ["h1", "h2", "h2", "h3"]  # h2: a second round trip, compose only
    assert facts["h2"]["probe"]["compose_fp"] != facts["h1"]["probe"]["compose_fp"]
    ov2 = checks["h2"]["overrides"]
    assert ov2.status == "fail" and "enforce_eager" in ov2.message and "composed on" not in ov2.message and ov2.fix
    assert checks["h1"]["overrides"].status == "ok"
    assert checks["h3"]["overrides"].status == "ok" and "composed on h1" in checks["h3"]["overrides"].message
    assert checks["h2"]["devices"].status == "ok"  # round 1's rows kept


def test_overrides_that_fail_fail_on_every_host_of_the_group(fleet, counted):
    checks, facts = _fleet(fleet, HOSTS, extra=["actor_rollout_ref.actor.not_a_key=1"])
    assert _composed_on(facts) == ["h1"] and len(counted) == 3
    for h in HOSTS:
        ov = checks[h]["overrides"]
        assert ov.status == "fail" and "not_a_key" in ov.message and ov.fix
        assert worst(list(checks[h].values())) == "fail"
    assert "composed on h1" in checks["h3"]["overrides"].message


def test_cli_fleet_rows(fleet, cli):
    r = cli(
        "inv",
        "preflight",
        "--inventory",
        str(fleet.inventory),
        "-H",
        ",".join(HOSTS),
        "--model",
        f"{IN}/model",
        "--train-file",
        f"{IN}/train.parquet",
        "--val-file",
        f"{IN}/val.parquet",
        "--framework",
        "fsdp",
        "--max-response-length",
        "1024",
        "--swanlab-mode",
        "disabled",
        "--json",
        drop_env=("SWANLAB",),
        timeout=300,
    )
    data = json.loads(r.stdout)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr
    ov = {h: {c["name"]: c for c in data["hosts"][h]["checks"]}["overrides"] for h in HOSTS}
    assert ov["h1"]["status"] == "ok" and "composed on" not in ov["h1"]["message"]
    assert all(ov[h]["status"] == "ok" and "composed on h1" in ov[h]["message"] for h in ("h2", "h3"))
