"""Issue 43 findings 4 and 7 (pure): the Megatron model builder preflight checks follows verl's
``vanilla_mbridge`` (the setting ``vanilla_mbridge``), and preflight's verl-startup step runs under the same CANN
launcher as the training and says so when verl does not import. verl facts are read from the pinned 0.9.1 wheel
(sandbox/fetch_verl_config.py), never a copied constant."""

import sys
from pathlib import Path

import pytest

from dapo_ops.control import settings
from dapo_ops.control.inventory.model import Host
from dapo_ops.control.launch import plan as planning
from dapo_ops.control.preflight import verl as verl_checks
from dapo_ops.control.preflight.plan_view import PlanView, needed_modules
from dapo_ops.core import overrides

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sandbox"))
from fetch_verl_config import verl_config_root  # noqa: E402

RUN_ID = "20261129-151200-a1b2"
NPU8 = Host(
    name="h1", address="198.51.100.11", accelerator="npu", devices=8, workdir="/verl", runs_dir="/runs", container="v"
)
KEY = "actor_rollout_ref.actor.megatron.vanilla_mbridge"


@pytest.fixture(scope="module")
def verl():
    return verl_config_root() / "verl"


def plan(flags=None, env=None):
    st = settings.resolve({"model": "/m", **(flags or {})}, env or {}, {})
    return planning.make_plan(
        planning.draft_plan(
            planning.PlanInputs(settings=st, host=NPU8, mode="dapo", run_id=RUN_ID, swanlab_logger=False)
        ),
        None,
    )


def kv(argv):
    return dict(a.split("=", 1) for a in argv if "=" in a and not a.startswith("--"))


# F4 ------------------------------------------------------------------------------------------------------------
def test_verl_imports_megatron_bridge_only_without_vanilla_mbridge(verl):
    impl = (verl / "workers" / "engine" / "megatron" / "transformer_impl.py").read_text().splitlines()
    i = next(n for n, ln in enumerate(impl) if "if self.vanilla_bridge:" in ln)
    vanilla, other = "\n".join(impl[i : i + 3]), "\n".join(impl[i + 3 : i + 16])
    assert "from verl.models.mcore.mbridge import AutoBridge" in vanilla
    assert "from verl.models.mcore.bridge import AutoBridge" in other
    assert "from mbridge import AutoBridge" in (verl / "models" / "mcore" / "mbridge.py").read_text()
    assert "vanilla_mbridge: False" in (verl / "trainer" / "config" / "engine" / "megatron.yaml").read_text()


def test_vanilla_mbridge_is_a_setting_emitted_as_verls_key_and_preflight_checks_mbridge():
    """main: preflight always required megatron.bridge for Megatron, and the setting had no name."""
    default = plan()
    assert KEY not in kv(default.argv)
    mods = [m for m, _ in needed_modules(PlanView(default.spec, default.argv))]
    assert "megatron.bridge" in mods and "mbridge" not in mods
    for p in (plan(env={"VANILLA_MBRIDGE": "True"}), plan(flags={"vanilla_mbridge": True})):
        assert kv(p.argv)[KEY] == "True"
        mods = [m for m, _ in needed_modules(PlanView(p.spec, p.argv))]
        assert "mbridge" in mods and "megatron.bridge" not in mods
    fsdp = plan(flags={"framework": "fsdp"}, env={"VANILLA_MBRIDGE": "True"})  # no Megatron: no key
    assert KEY not in kv(fsdp.argv)
    assert overrides.PLAN_SETTING_KEYS[KEY] == "vanilla_mbridge"  # a raw --override of it names the setting


def test_a_missing_megatron_bridge_beside_mbridge_says_set_vanilla_mbridge():
    p = plan()
    pv = PlanView(p.spec, p.argv)
    found = {m: "/site/x" for m, _ in needed_modules(pv)}
    found.update({"megatron.bridge": None, "mbridge": "/site/mbridge/__init__.py"})
    (c,) = [c for c in verl_checks._module_checks(pv, {"modules": found}) if c.name == "megatron.bridge"]
    assert c.status == "fail" and "mbridge is (/site/mbridge/__init__.py)" in c.message
    assert c.fix.startswith("set VANILLA_MBRIDGE=True (--vanilla-mbridge)")


# F7 ------------------------------------------------------------------------------------------------------------
def test_the_startup_check_runs_under_the_trainings_cann_launcher(monkeypatch, tmp_path):
    """main ran the compose child (verl's start-up checks) as a bare ``docker exec`` child: on an image whose CANN
    comes only from set_env.sh, ``import torch`` (torch_npu autoload) failed and the step said "skipped"."""
    from dapo_ops.agent import preflight_probe as agent_preflight
    from dapo_ops.core.topology import CANN_LAUNCHER
    from dapo_ops.control.preflight.gather import probe_request

    p = plan()
    assert p.spec["launcher"] == list(CANN_LAUNCHER)
    req = probe_request(NPU8, PlanView(p.spec, p.argv), compose_request={"config_root": "/verl"}, full=True)
    assert req["compose"]["launcher"] == list(CANN_LAUNCHER)
    ran = []
    monkeypatch.setattr(agent_preflight, "_run", lambda argv, **kw: ran.append(argv) or {"rc": 1, "stdout": ""})
    monkeypatch.setattr(agent_preflight, "COMPOSE_CACHE", str(tmp_path))
    agent_preflight._compose(dict(req["compose"]), "fp")
    assert ran[0][: len(CANN_LAUNCHER)] == list(CANN_LAUNCHER)
    assert ran[0][len(CANN_LAUNCHER) :] == [sys.executable, "-m", "dapo_ops.agent.compose"]
    # the cached answer of a bare run is never reused for one under the launcher
    assert agent_preflight._compose_key("fp") != agent_preflight._compose_key("fp", list(CANN_LAUNCHER))


def test_verl_not_importable_is_a_warning_never_ok_beside_skipped():
    import json

    ans = {"errors": [], "skipped": ["dataclass: skipped: verl not importable (No module named 'torch')"]}
    c = verl_checks._startup_check({"stdout": json.dumps({"ok": True, "startup": ans})})
    assert c.status == "warn" and "(No module named 'torch')" in c.message and "skipped" not in c.message
    ok = verl_checks._startup_check({"stdout": json.dumps({"ok": True, "startup": {"errors": [], "skipped": []}})})
    assert ok.status == "ok" and "skipped" not in ok.message
