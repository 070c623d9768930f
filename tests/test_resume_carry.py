"""A ``--resume`` carries over everything the earlier run was launched with (a new user's trial).

``inv launch -H h2 --steps 6 --framework fsdp --save-freq 2 --override actor_rollout_ref.actor.optim.lr=3e-6``, then
``inv launch -H h2 --resume <id> --steps 10``: the resumed run trained with lr 1e-06 (its spec had
``extra_overrides: []``), ``--features=-flash_attn`` came back as flash_attention_2 (the README's own fix for a
missing flash-attn, so the resume would crash), ``--hang-timeout 300`` as 1800, ``--max-oom-retries 1`` as 2, a
custom reward's ``--override reward.custom_reward_function.path=...`` and a data-ran-out run's
``trainer.total_epochs=1`` were dropped, and ``--dry-run --resume`` printed a plan of the defaults
(``model_engine=megatron``, a new experiment and checkpoint dir). ``control/launch/resume.py`` carried only a hand
list. Pure: the earlier run's spec is a real plan's, read through ``resume.read_facts`` from a fake container.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

import fake_ops
from dapo_ops.control import settings
from dapo_ops.control.inventory.model import Host
from dapo_ops.control.launch import plan as planning
from dapo_ops.control.launch import resume
from dapo_ops.control.launch.refusals import LaunchRefused
from dapo_ops.core import defaults
from config_helpers import no_config

GPU = Host(name="h2", address="x", accelerator="gpu", devices=2, runs_dir="/r")
NPU = Host(name="n1", address="x", accelerator="npu", devices=8, runs_dir="/r")
OLD_ID, NEW_ID = "20261202-000000-0a1d", "20261202-000100-0b2e"
LR = "actor_rollout_ref.actor.optim.lr"
REWARD = "reward.custom_reward_function.path"
EPOCHS = "trainer.total_epochs"
ATTN = "+actor_rollout_ref.model.override_config.attn_implementation"
FIRST = {"steps": 6, "framework": "fsdp", "save_freq": 2, "rollout_tp": 1}
FIRST_OVERRIDES = (f"{LR}=3e-6", f"{REWARD}=/verl/bad_reward.py", f"{EPOCHS}=1")


def _old_plan(flags: dict, overrides=FIRST_OVERRIDES, host=GPU):
    return planning.make_plan(
        planning.draft_plan(
            planning.PlanInputs(
                settings=settings.resolve(flags, {}, {}),
                host=host,
                mode="dapo",
                run_id=OLD_ID,
                swanlab_logger=False,
                extra_overrides=overrides,
            )
        )
    )


def _facts(monkeypatch, old_spec: dict, step: str = "4", record: dict | None = None) -> resume.ResumeFacts:
    """The earlier run as ``resume.read_facts`` reads it (the bundle op ``runfiles resume-facts``); ``record``: more
    of its run.json (the features its ladder added)."""
    monkeypatch.setattr(resume.runstate, "run_dir_for", lambda runs, rid: f"{runs}/{rid}")
    files = {
        f"/r/{OLD_ID}/spec.json": json.dumps(old_spec),
        f"/r/{OLD_ID}/run.json": json.dumps({"status": "failed", "step": int(step or 0), **(record or {})}),
    }
    if step:  # "": the run saved no checkpoint (no tracker)
        files[f"{old_spec['settings']['ckpt_dir']}/latest_checkpointed_iteration.txt"] = step + "\n"

    class Container:
        host = SimpleNamespace(runs_path="/r", name="h2", python="python3")

        def run(self, cmd, **kw):
            return fake_ops.runfiles_answer(fake_ops.op_of(cmd)[1:], files)

    return resume.read_facts(Container(), OLD_ID)


def _resume(facts, flags: dict, overrides=(), host=GPU, env=None):
    """``inv launch -H h2 --resume OLD_ID`` with ``flags`` (and ``env``) as the launch plans it (service.plan_inputs:
    the settings and overrides of ``resume.resumed``, then make_plan with ``resume=`` and ``resume.check``)."""
    st, extra = resume.resumed(settings.resolve(flags, env or {}, {}), overrides, facts)
    p = planning.make_plan(
        planning.draft_plan(
            planning.PlanInputs(
                settings=st,
                host=host,
                mode="dapo",
                run_id=NEW_ID,
                swanlab_logger=False,
                extra_overrides=extra,
                resume=facts,
            )
        )
    )
    resume.check(p, facts)
    return p


def test_a_resume_trains_with_the_overrides_features_and_limits_of_the_run_it_continues(monkeypatch):
    old = _old_plan({**FIRST, "features": "-flash_attn", "hang_timeout": 300, "max_oom_retries": 1})
    assert f"{ATTN}=sdpa" in old.argv and f"{LR}=3e-6" in old.argv
    p = _resume(_facts(monkeypatch, old.spec), {"steps": 10})
    assert f"{LR}=3e-6" in p.argv and f"{REWARD}=/verl/bad_reward.py" in p.argv and f"{EPOCHS}=1" in p.argv
    assert p.spec["settings"]["extra_overrides"] == list(FIRST_OVERRIDES)
    assert f"{ATTN}=sdpa" in p.argv and "flash_attn" in p.spec["disabled_features"]
    assert (p.spec["hang_timeout_s"], p.spec["max_oom_retries"]) == (300, 1)
    assert p.spec["framework"] == "fsdp" and "model_engine=megatron" not in p.argv
    assert p.spec["settings"]["steps"] == 10 and p.spec["settings"]["save_freq"] == 2
    assert p.spec["settings"]["ckpt_dir"] == old.spec["settings"]["ckpt_dir"] and p.spec["resume_of"] == OLD_ID


def test_an_override_given_now_replaces_the_earlier_one_of_its_key_and_the_others_stay(monkeypatch):
    facts = _facts(monkeypatch, _old_plan(FIRST).spec)
    p = _resume(facts, {"steps": 10}, [f"++{LR}=1e-5", "trainer.val_before_train=True"])
    assert p.spec["settings"]["extra_overrides"] == [
        f"{REWARD}=/verl/bad_reward.py",
        f"{EPOCHS}=1",
        f"++{LR}=1e-5",
        "trainer.val_before_train=True",
    ]
    assert f"{LR}=3e-6" not in p.argv and f"++{LR}=1e-5" in p.argv


def test_a_setting_or_feature_given_now_wins_over_the_earlier_runs(monkeypatch):
    old = _old_plan({**FIRST, "features": "-flash_attn,offload", "hang_timeout": 300, "max_oom_retries": 1})
    facts = _facts(monkeypatch, old.spec)
    p = _resume(facts, {"steps": 10, "features": "flash_attn", "hang_timeout": 600})
    assert f"{ATTN}=flash_attention_2" in p.argv and "flash_attn" not in p.spec["disabled_features"]
    assert {"name": "offload", "source": "explicit"} in p.spec["features"]  # the one not named now stays
    assert (p.spec["hang_timeout_s"], p.spec["max_oom_retries"]) == (600, 1)
    off = _resume(facts, {"steps": 10, "features": "-offload"})
    assert "offload" in off.spec["disabled_features"] and "offload" not in {f["name"] for f in off.spec["features"]}
    assert f"{ATTN}=sdpa" in off.argv  # -flash_attn of the earlier run stays


# a value other than the default for every setting a resume carries, in the setting's form (a spec keeps some at its
# top level or in env, core/defaults.py SPEC / plan.run_env)
_OTHER = {
    "steps": 7,
    "framework": "megatron",
    "model": "/m/other",
    "train_file": "/d/t.parquet",
    "val_file": "/d/v.parquet",
    "trainer_gpus": 4,
    "rollout_gpus": 4,
    "max_response_length": 1024,
    "max_prompt_length": 512,
    "features": "-flash_attn,offload",
    "max_oom_retries": 5,
    "save_freq": 3,
    "test_freq": 4,
    "rollout_tp": 4,
    "trainer_tp": 4,
    "trainer_pp": 2,
    "rollout_eager": True,
    "vanilla_mbridge": True,
    "gpu_memory_utilization": 0.45,
    "train_batch_size": 32,
    "ppo_mini_batch_size": 8,
    "rollout_n": 4,
    "micro_batch_size": 2,
    "max_position_embeddings": 4096,
    "trainer_mode": "sync",
    "max_staleness": 3,
    "parameter_sync_step": 4,
    "max_actor_ckpt_to_keep": 0,
    "hccl_connect_timeout": 600,
    "hccl_exec_timeout": 900,
    "hccl_host_socket_port_range": "",
    "hccl_npu_socket_port_range": "62000-62050",
    "memory_fit": "warn",
    "allow_short_data": True,
    "hang_timeout": 120,
    "project": "proj2",
    "experiment": "exp2",
    "profile": "0.9",
}


def test_every_setting_of_the_table_is_carried_by_a_resume_or_named_with_its_reason():
    """Derived from the settings table: each setting the earlier run was given comes back from its spec (a new
    setting must be carried, or named in resume.NOT_CARRIED with why)."""
    assert set(_OTHER) | set(resume.NOT_CARRIED) == set(settings.BY_NAME), "a setting neither carried nor excused"
    assert not set(_OTHER) & set(resume.NOT_CARRIED)
    old = _old_plan({k: v for k, v in _OTHER.items() if k != "offload"}, (), host=NPU)
    got = resume.resumed_settings(settings.resolve({}, {}, {}), old.spec)
    for name, want in _OTHER.items():
        if name == "features":
            # the NPU Megatron run had remove_padding off with -flash_attn (IMPLIED_OFF): it stays off too
            assert set(got[name].split(",")) == {"offload", "-flash_attn", "-remove_padding"}, got[name]
        else:
            assert got[name] == want, (name, got[name], want)
        assert got.source(name) == "resume", name


def test_carried_settings_come_back_unchanged_from_a_run_of_the_defaults():
    old = _old_plan({}, (), host=NPU)
    now = settings.resolve({}, {}, {})
    got = resume.resumed_settings(now, old.spec)
    # what the plan resolved: paths against the workdir, the run id as experiment, the Megatron sizes by model and
    # device memory, the profile of the host's verl
    resolved = {"model", "train_file", "val_file", "experiment", "trainer_tp", "trainer_pp", "profile"}
    for name in settings.BY_NAME:
        if name in resolved:
            assert got[name] == resume._earlier_value(name, old.run_spec), name
            continue
        assert got[name] == now[name], (name, got[name], now[name])


def test_a_resume_that_would_log_in_another_swanlab_mode_unasked_is_refused_in_one_line(monkeypatch):
    spec = defaults.complete_spec(dict(_old_plan(FIRST).spec, env={"SWANLAB_MODE": "local"}))
    facts = _facts(monkeypatch, spec)
    with pytest.raises(LaunchRefused) as e:
        resume.check_logging(facts, "cloud", given=False)
    assert e.value.kind == "resume" and "\n" not in str(e.value)
    assert str(e.value) == (
        f"run {OLD_ID} logged to SwanLab in mode local, this launch would use mode cloud: resume it with "
        "--swanlab-mode local (or give --swanlab-mode to choose another)"
    )
    resume.check_logging(facts, "cloud", given=True)  # asked for: allowed
    resume.check_logging(facts, "local", given=False)


def test_a_dry_run_of_a_resume_shows_the_plan_the_resume_runs(monkeypatch, tmp_path):
    """``inv launch -H h2 --resume <fsdp run> --dry-run`` printed ``model_engine=megatron``, a new experiment and a
    fresh checkpoint dir: it planned without the earlier run. It now reads it on the host (reads only)."""
    from dapo_ops.control.launch import dryrun

    old = _old_plan({**FIRST, "features": "-flash_attn", "hang_timeout": 300})
    facts = _facts(monkeypatch, old.spec)
    seen = []
    monkeypatch.setattr(resume, "read_facts", lambda t, rid: seen.append((t.name, t.container, rid)) or facts)
    _occupancy(monkeypatch, {"active": None, "verl": [], "ray": [], "cleaned": []})  # the container is free
    inv = tmp_path / "hosts.toml"
    inv.write_text('[hosts.h2]\naddress = "x"\naccelerator = "gpu"\ndevices = 2\nruns_dir = "/r"\n')
    from rich.console import Console
    import io

    buf = io.StringIO()
    p = dryrun.dry_run(
        {"steps": 10},
        mode="dapo",
        hosts="",  # no -H: planned without the launch probe; the resume is read on the inventory's host
        inventory=str(inv),
        env={"SWANLAB_MODE": "disabled"},
        console=Console(file=buf, width=400, color_system=None),
        resume_id=OLD_ID,
    )
    out = buf.getvalue()
    assert seen == [("h2", "verl", OLD_ID)]
    assert "model_engine=megatron" not in p.argv and f"{LR}=3e-6" in p.argv and f"{ATTN}=sdpa" in p.argv
    assert f"trainer.experiment_name={OLD_ID}" in p.argv
    assert f"checkpoints:   {old.spec['settings']['ckpt_dir']}" in out
    assert f"resume:        run {OLD_ID}'s checkpoints in {old.spec['settings']['ckpt_dir']}, from global_step_4" in out
    with pytest.raises(LaunchRefused, match="would train nothing"):  # refused as the launch refuses it
        dryrun.dry_run(
            {"steps": 3},
            mode="dapo",
            hosts="",
            inventory=str(inv),
            env={"SWANLAB_MODE": "disabled"},
            console=Console(file=io.StringIO()),
            resume_id=OLD_ID,
        )


def test_no_offload_given_now_starts_the_resume_without_the_offload_it_carried(monkeypatch):
    """``--resume ID --no-offload`` (or ``ENABLE_OFFLOAD=false``) kept the earlier run's offload, explicit or added by
    its OOM ladder (a second trial): given now it wins; the ladder may still add offload later (not disabled)."""
    off = "actor_rollout_ref.actor.fsdp_config.param_offload"
    old = _old_plan({**FIRST, "offload": True})
    assert f"{off}=True" in old.argv
    p = _resume(_facts(monkeypatch, old.spec), {"steps": 10})
    assert f"{off}=True" in p.argv  # not given now: carried
    for flags, env in (({"steps": 10, "offload": False}, {}), ({"steps": 10}, {"ENABLE_OFFLOAD": "false"})):
        p = _resume(_facts(monkeypatch, old.spec), flags, env=env)
        assert f"{off}=False" in p.argv and not p.features.has("offload"), (flags, env)
        assert "offload" not in p.features.disabled
    laddered = _old_plan(FIRST)
    added = [*laddered.spec["features"], {"name": "offload", "source": "oom-retry-1"}]
    facts = _facts(monkeypatch, laddered.spec, record={"features": added})
    assert _resume(facts, {"steps": 10}).features.source_of("offload") == "oom-retry-1"
    p = _resume(facts, {"steps": 10, "offload": False})
    assert not p.features.has("offload") and f"{off}=False" in p.argv
    # a run whose user said -offload (never) keeps it under --no-offload (a review: it was erased)
    never = _old_plan({**FIRST, "features": "-offload"})
    p = _resume(_facts(monkeypatch, never.spec), {"steps": 10, "offload": False})
    assert "offload" in p.features.disabled


def test_a_tilde_given_now_removes_an_override_the_earlier_run_added(monkeypatch):
    """``--override '+trainer.my_extra=hello'`` at launch, ``--override '~trainer.my_extra'`` on resume: the carried
    ``+`` was dropped but ``~trainer.my_extra`` was emitted alone, and verl's compose refused it ("does not exist"):
    the carried override could not be removed (a second trial). ``~k`` of a key the earlier run added drops it; ``~k``
    of a key verl's config has stays a deletion (what Hydra does with it)."""
    old = _old_plan(FIRST, (*FIRST_OVERRIDES, "+trainer.my_extra=hello"))
    p = _resume(_facts(monkeypatch, old.spec), {"steps": 10}, ("~trainer.my_extra",))
    assert p.spec["settings"]["extra_overrides"] == list(FIRST_OVERRIDES)
    assert not any("my_extra" in a for a in p.argv)
    p = _resume(_facts(monkeypatch, old.spec), {"steps": 10}, ("trainer.my_extra=bye",))
    assert p.spec["settings"]["extra_overrides"][-2:] == ["+trainer.my_extra=hello", "trainer.my_extra=bye"]
    p = _resume(_facts(monkeypatch, old.spec), {"steps": 10}, (f"~{EPOCHS}",))
    assert p.spec["settings"]["extra_overrides"][-1] == f"~{EPOCHS}" and f"{EPOCHS}=1" not in p.argv


def test_a_resume_keeps_its_runs_values_over_the_config_file_and_names_what_flags_or_env_changed(monkeypatch):
    """A config file's ``[run]`` values (``max_response_length = 4096``, ``save_freq = 3``) replaced the run's own
    unsaid, and env vars too (a second trial): a config file is a standing default and the run's value wins; a flag
    or env var given now wins and the resume line names each value it changed; ``--experiment`` / ``--project``
    given with another value are refused (the SwanLab run goes on under the run's)."""
    old = _old_plan({**FIRST, "max_response_length": 8192})
    facts = _facts(monkeypatch, old.spec)
    st, extra = resume.resumed(
        settings.resolve({"steps": 10}, {}, {"run": {"max_response_length": 4096, "save_freq": 3}}), (), facts
    )
    assert (st["max_response_length"], st["save_freq"]) == (8192, 2)
    st = settings.resolve({"steps": 10, "save_freq": 5}, {"MAX_RESPONSE_LENGTH": "4096"}, {})
    rs, extra = resume.resumed(st, (), facts)
    assert (rs["max_response_length"], rs["save_freq"]) == (4096, 5)
    p = _resume(facts, {"steps": 10, "save_freq": 5}, env={"MAX_RESPONSE_LENGTH": "4096"})
    assert resume.replaced(rs, facts.spec, p.spec) == [
        "max_response_length 8192 -> 4096 (MAX_RESPONSE_LENGTH)",
        "save_freq 2 -> 5 (--save-freq)",
    ]
    # the same model given again as the env's relative name (the runbook's MODEL_PATH still exported): no change
    same = _resume(facts, {"steps": 10}, env={"MODEL_PATH": old.spec["settings"]["model_path"].rsplit("/", 1)[-1]})
    assert "model" not in (same.resume_line or "").split("given now:")[-1], same.resume_line
    assert p.resume_line.endswith(
        "; given now: max_response_length 8192 -> 4096 (MAX_RESPONSE_LENGTH), save_freq 2 -> 5 (--save-freq)"
    )
    for flags, env, where in (({"experiment": "newexp"}, {}, "--experiment"), ({}, {"PROJECT_NAME": "p2"}, "")):
        with pytest.raises(LaunchRefused) as e:
            resume.resumed(settings.resolve({"steps": 10, **flags}, env, {}), (), facts)
        assert "a resume keeps the run's" in str(e.value) and where in str(e.value) and "\n" not in str(e.value)


def test_a_layout_refusal_gives_the_command_that_resumes_the_run_as_it_ran(monkeypatch):
    """A resume planned on other devices than the checkpoint's was refused with "launch on the same host(s) with the
    same settings" and no command (a second trial): the line names the run's own resume command."""
    old = _old_plan(FIRST)
    four = Host(name="h3", address="x", accelerator="gpu", devices=4, runs_dir="/r")
    with pytest.raises(LaunchRefused) as e:
        _resume(_facts(monkeypatch, old.spec), {"steps": 10}, host=four)
    assert "need the same layout: " in str(e.value) and f"`inv launch -H h2 --resume {OLD_ID}`" in str(e.value)


def test_a_run_that_saved_no_checkpoint_resumes_with_another_layout_framework_or_model(monkeypatch):
    """A config error verl raises at start-up (rollout TP that does not divide the devices, too few devices) stops
    the run before its first save, and its stop ends with the run's ``--resume``: the same resume given the fix was
    refused "checkpoints need the same layout" for checkpoints the run never wrote. No checkpoint, no state to
    break: only another mode is refused (the run's command differs)."""
    old = _old_plan(FIRST)
    four = Host(name="h3", address="x", accelerator="gpu", devices=4, runs_dir="/r")
    p = _resume(_facts(monkeypatch, old.spec, step=""), {"steps": 10}, host=four)
    assert p.spec["settings"]["n_gpus_per_node"] == 4, p.spec["settings"]
    p = _resume(_facts(monkeypatch, old.spec, step=""), {"steps": 10, "framework": "megatron"})
    assert p.spec["framework"] == "megatron"
    # with a checkpoint the same change is still refused
    with pytest.raises(LaunchRefused, match="need the same layout"):
        _resume(_facts(monkeypatch, old.spec, step="4"), {"steps": 10}, host=four)


def test_a_resume_given_no_steps_is_told_its_runs_total_not_a_flag_it_did_not_give(monkeypatch):
    """The run's total comes with the resume; at its checkpoint already, the refusal said "--steps 6" to a user who
    gave none (a review): it names the run's own steps and what to give."""
    old = _old_plan(FIRST)
    with pytest.raises(LaunchRefused) as e:
        _resume(_facts(monkeypatch, old.spec, "6"), {})
    assert "so its 6 steps would train nothing" in str(e.value) and "give --steps above 6" in str(e.value)
    with pytest.raises(LaunchRefused) as e:
        _resume(_facts(monkeypatch, old.spec, "6"), {"steps": 5})
    assert "so --steps 5 would train nothing" in str(e.value)


def test_a_dry_run_of_a_resume_refuses_another_swanlab_mode_as_the_launch_does(monkeypatch, tmp_path):
    """The launch refuses a resume that would log to SwanLab in another mode than its run unasked
    (``resume.check_logging``); its dry run printed a clean plan (a review)."""
    import io

    from rich.console import Console

    from dapo_ops.control.launch import dryrun

    old = _old_plan(FIRST)
    spec = dict(old.spec, env={**old.spec["env"], "SWANLAB_MODE": "local"})
    facts = _facts(monkeypatch, spec)
    monkeypatch.setattr(resume, "read_facts", lambda t, rid: facts)
    _occupancy(monkeypatch, {"active": None, "verl": [], "ray": [], "cleaned": []})
    monkeypatch.setenv("DAPO_OPS_CONFIG", no_config(tmp_path))
    inv = tmp_path / "hosts.toml"
    inv.write_text('[hosts.h2]\naddress = "x"\naccelerator = "gpu"\ndevices = 2\nruns_dir = "/r"\n')
    kw = dict(mode="dapo", hosts="", inventory=str(inv), console=Console(file=io.StringIO()), resume_id=OLD_ID)
    with pytest.raises(LaunchRefused, match="logged to SwanLab in mode local"):
        dryrun.dry_run({"steps": 10}, env={"SWANLAB_API_KEY": "k" * 32}, **kw)
    dryrun.dry_run({"steps": 10}, env={"SWANLAB_MODE": "local"}, **kw)  # the same mode: planned


def _occupancy(monkeypatch, answer: dict) -> list:
    """The container's answer to the bundle op ``occupancy`` (``dapo_ops/agent/occupancy.py``); returns the list the
    op's arguments are appended to, one list per call."""
    from dapo_ops.control.remote import bundle

    calls: list = []

    def run_op(target, op, args=(), **kw):
        assert op == "occupancy", op
        calls.append(list(args))
        return SimpleNamespace(exited=0, stdout=json.dumps(answer) + "\n", stderr="")

    monkeypatch.setattr(bundle, "run_op", run_op)
    return calls


def test_a_dry_run_of_a_resume_of_a_run_still_active_is_refused_in_the_launchs_words(monkeypatch, tmp_path):
    """``inv launch --dry-run --resume <id>`` of a run still active printed a clean plan while the launch refused it
    as busy (a review): the dry run asks the container the launch's question (service.refuse_if_busy, the one rule,
    without the sweep: a dry run ends nothing) and refuses with the same line."""
    import io

    from rich.console import Console

    from dapo_ops.control.launch import dryrun, service

    old = _old_plan(FIRST)
    facts = _facts(monkeypatch, old.spec)
    monkeypatch.setattr(resume, "read_facts", lambda t, rid: facts)
    active = {"active": {"run_id": OLD_ID, "pid": 4242}, "verl": [], "ray": [], "cleaned": []}
    calls = _occupancy(monkeypatch, active)
    monkeypatch.setenv("DAPO_OPS_CONFIG", no_config(tmp_path))
    inv = tmp_path / "hosts.toml"
    inv.write_text('[hosts.h2]\naddress = "x"\naccelerator = "gpu"\ndevices = 2\nruns_dir = "/r"\n')
    out = io.StringIO()
    kw = dict(mode="dapo", hosts="", inventory=str(inv), console=Console(file=out), resume_id=OLD_ID)
    with pytest.raises(LaunchRefused) as dry:
        dryrun.dry_run({"steps": 10}, env={"SWANLAB_MODE": "disabled"}, **kw)
    assert out.getvalue() == "" and calls == [["/r", "h2"]]  # no plan printed; nothing swept
    target = SimpleNamespace(host=Host(name="h2", address="x", runs_dir="/r"), container="verl")
    with pytest.raises(LaunchRefused) as real:
        service.refuse_if_busy(target, "python3")  # what the launch's quick checks refuse it with
    assert calls[-1] == ["/r", "h2", "--sweep"]
    assert (
        (dry.value.kind, str(dry.value))
        == (real.value.kind, str(real.value))
        == (
            "active-run",
            f"run {OLD_ID} is already active on h2 (container verl); follow it with `inv status -H h2` or stop it "
            f"with `inv stop -H h2 --run {OLD_ID}`",
        )
    )


def test_a_resume_turns_on_no_feature_the_run_had_off_unless_it_is_named_now():
    """An NPU Megatron run launched with ``-flash_attn`` ran with ``remove_padding`` off too (core/features.py
    IMPLIED_OFF; its spec's ``disabled_features`` holds both). Resumed with ``--features flash_attn`` it turned
    ``remove_padding`` back on although nobody asked (a review): it stays off unless named now. On a GPU a
    ``-remove_padding`` given beside ``-flash_attn`` was dropped by the same rule and is kept now."""
    from dapo_ops.core import features

    npu = defaults.RunSpec.read(
        {"framework": "megatron", "accelerator": "npu", "disabled_features": ["flash_attn", "remove_padding"]}
    )
    now = resume.resumed_features("flash_attn", None, npu)
    fs = features.resolve(now, implied_off=features.implies_off("0.9", "megatron", "npu"))
    assert fs.has("flash_attn") and "remove_padding" in fs.disabled and not fs.has("remove_padding")
    named = resume.resumed_features("flash_attn,remove_padding", None, npu)  # named now: on
    assert features.resolve(named, implied_off=True).has("remove_padding")
    kept = resume.resumed_features("", None, npu)  # nothing given now: both stay off
    assert {"flash_attn", "remove_padding"} <= features.resolve(kept, implied_off=True).disabled
    gpu = defaults.RunSpec.read(
        {"framework": "megatron", "accelerator": "gpu", "disabled_features": ["flash_attn", "remove_padding"]}
    )
    assert "remove_padding" in features.resolve(resume.resumed_features("", None, gpu)).disabled


def test_a_multi_host_dry_run_of_a_resume_refuses_another_swanlab_mode_as_the_launch_does(monkeypatch, tmp_path):
    """The multi-host ``inv launch --dry-run --resume <id> -H a,b`` skipped the SwanLab-mode refusal the one-host dry
    run and the launch apply (``resume.check_logging``; a review): it printed a plan for a resume the launch refuses.
    Both dry runs check it in one place (``dryrun.check_resume_logging``)."""
    from dapo_ops.control.launch import multihost_service

    old = _old_plan(FIRST)
    spec = dict(
        old.spec,
        env={**old.spec["env"], "SWANLAB_MODE": "local"},
        settings={**old.spec["settings"], "nnodes": 2},  # a 2-node run of 2 devices a node: h2 + h3
    )
    facts = _facts(monkeypatch, spec)
    monkeypatch.setattr(resume, "read_facts", lambda t, rid: facts)
    _occupancy(monkeypatch, {"active": None, "verl": [], "ray": [], "cleaned": []})
    monkeypatch.setenv("DAPO_OPS_CONFIG", no_config(tmp_path))
    inv = tmp_path / "hosts.toml"
    host = '\naddress = "x"\naccelerator = "gpu"\ndevices = 2\nruns_dir = "/r"\n'
    inv.write_text(f"[hosts.h2]{host}[hosts.h3]{host}")
    kw = dict(mode="dapo", hosts="h2,h3", inventory=str(inv), file_cfg={}, resume_id=OLD_ID)
    with pytest.raises(LaunchRefused, match="logged to SwanLab in mode local.*--swanlab-mode local"):
        multihost_service.dry_run_plan({"steps": 10}, env={"SWANLAB_API_KEY": "k" * 32}, **kw)
    plan, _ = multihost_service.dry_run_plan({"steps": 10}, env={"SWANLAB_MODE": "local"}, **kw)  # the same mode
    assert plan.run_spec.settings["nnodes"] == 2
    # it contacts no host: it says what it did not check and the command that does (a new user's trial: a multi-host
    # dry run exited 0 on a run the hosts' data-feed check then refused, with no word that nothing was checked)
    unchecked = [n for n in plan.notes if n.startswith("not checked here")]
    assert len(unchecked) == 1 and "the data feed" in unchecked[0], plan.notes
    assert "`inv preflight -H h2,h3`" in unchecked[0], unchecked


def test_a_resume_in_another_swanlab_mode_is_refused_for_that_before_the_hosts_preflight(monkeypatch):
    """Resuming an offline-SwanLab run with no ``--swanlab-mode`` (a key set, so cloud) was refused first by the
    quick checks' tracker DNS check ("fix [proxy] in hosts.toml ..."); the real cause (``resume.check_logging``)
    showed only with ``--skip-preflight``. The request's own refusal now comes before the host's checks."""
    from dapo_ops.control.launch import service

    old = _old_plan(FIRST)
    facts = _facts(monkeypatch, dict(old.spec, env={**old.spec["env"], "SWANLAB_MODE": "offline"}))
    monkeypatch.setattr(resume, "read_facts", lambda t, rid: facts)
    checked = []

    def host_checks(*a, **k):
        checked.append(a)
        raise LaunchRefused("preflight", "h2: preflight swanlab failed: cannot resolve; fix [proxy] in hosts.toml")

    monkeypatch.setattr(service, "quick_checks", host_checks)
    sw = SimpleNamespace(mode="cloud", sources={"mode": "default"}, public_env=lambda **k: {})
    req = service.LaunchRequest(mode="dapo", settings=settings.resolve({"steps": 10}, {}, {}), sw=sw, resume=OLD_ID)
    with pytest.raises(LaunchRefused) as e:
        service.gather_facts(SimpleNamespace(host=GPU, container=""), req)
    assert e.value.kind == "resume" and "logged to SwanLab in mode offline" in str(e.value), str(e.value)
    assert "--swanlab-mode offline" in str(e.value) and checked == []


def test_a_resume_with_another_model_is_refused_like_another_framework(monkeypatch):
    """``--resume R --model /other`` was accepted as "given now" while ``--framework`` is refused on resume: the
    checkpoints hold the earlier model's weights, so a resume with another model is another run."""
    old = _old_plan(FIRST)
    facts = _facts(monkeypatch, dict(old.spec))
    with pytest.raises(LaunchRefused) as e:
        _resume(facts, {"steps": 10, "model": "/models/other"})
    msg = str(e.value)
    assert "\n" not in msg and f"run {OLD_ID} trained model {old.spec['settings']['model_path']}" in msg, msg
    assert "not /models/other" in msg and "resume it without --model / MODEL_PATH" in msg, msg
    # the same model given again is no change
    _resume(facts, {"steps": 10, "model": old.spec["settings"]["model_path"]})


def test_resuming_a_run_that_a_later_run_resumed_is_refused_naming_the_later_run(monkeypatch, tmp_path):
    """A new user's trial: run R (lr 2e-6, -flash_attn) was resumed with ``--override ...lr=3e-6 --features
    flash_attn`` as run R2 (same checkpoint dir), stopped; then ``--resume R`` went back to lr 2e-6 and sdpa on R2's
    checkpoints, with no word. The resume of R is refused in one line naming the newest later run on R's checkpoints
    and the command that resumes it, read in the same resume-facts round trip (the bundle op ``runfiles
    resume-facts``); resuming that run is not refused, nor is R when a later run has checkpoints of its own."""
    monkeypatch.setattr(resume.runstate, "run_dir_for", lambda runs, rid: f"{runs}/{rid}")
    third = "20261202-000200-0c3f"
    r = _old_plan({**FIRST, "features": "-flash_attn"}, overrides=(f"{LR}=2e-6",))
    ckpt = r.spec["settings"]["ckpt_dir"]
    files = {
        f"/r/{OLD_ID}/spec.json": json.dumps(r.spec),
        f"/r/{OLD_ID}/run.json": json.dumps({"status": "stopped", "step": 4}),
        f"{ckpt}/latest_checkpointed_iteration.txt": "4\n",
    }
    calls: list[str] = []

    class Container:
        host = SimpleNamespace(runs_path="/r", name="h2", python="python3")

        def run(self, cmd, **kw):
            calls.append(fake_ops.op_of(cmd)[0])
            return fake_ops.runfiles_answer(fake_ops.op_of(cmd)[1:], files)

    r2 = _resume(resume.read_facts(Container(), OLD_ID), {"features": "flash_attn"}, overrides=(f"{LR}=3e-6",))
    assert r2.spec["resume_of"] == OLD_ID and r2.spec["settings"]["ckpt_dir"] == ckpt
    files[f"/r/{NEW_ID}/spec.json"] = json.dumps(r2.spec)
    files[f"/r/{NEW_ID}/run.json"] = json.dumps({"status": "stopped", "step": 6})
    # a later run of its own (another checkpoint dir) is no reason to refuse
    other = _old_plan(FIRST, overrides=()).spec
    own = dict(other["settings"], ckpt_dir=f"/r/{third}/checkpoints")
    files[f"/r/{third}/spec.json"] = json.dumps(dict(other, run_id=third, settings=own))
    assert resume.read_facts(Container(), NEW_ID).run_id == NEW_ID
    calls.clear()
    with pytest.raises(LaunchRefused) as e:
        resume.read_facts(Container(), OLD_ID)
    line = str(e.value)
    assert e.value.kind == "resume" and "\n" not in line
    assert line.startswith(
        f"run {OLD_ID} on h2 was resumed later: run {NEW_ID} (stopped) continues its checkpoints ({ckpt})"
    )
    assert f"resume {NEW_ID} instead: `inv launch -H h2 --resume {NEW_ID}`" in line, line
    assert calls == ["runfiles"]  # the one resume-facts round trip
    # a resume of the resume (same checkpoint dir, resume_of R2) is the newest: it is the one named
    files[f"/r/{third}/spec.json"] = json.dumps(dict(r2.spec, run_id=third, resume_of=NEW_ID))
    with pytest.raises(LaunchRefused, match=f"resume {third} instead: `inv launch -H h2 --resume {third}`"):
        resume.read_facts(Container(), OLD_ID)
    # the op itself, over a real runs dir (os.listdir)
    from dapo_ops.agent import runfiles

    for path, text in files.items():
        if path.startswith("/r/"):
            (tmp_path / path[3:]).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / path[3:]).write_text(text)
    got = runfiles.resume_facts(str(tmp_path / OLD_ID))["later"]
    assert [x["run_id"] for x in got] == [third, NEW_ID] and got[1]["status"] == "stopped"


def test_a_later_resume_that_trained_no_step_does_not_block_resuming_the_run(monkeypatch):
    """A new user's trial: ``--resume R`` ran out of data at once (no step trained, no checkpoint written); then
    ``--resume R --override trainer.total_epochs=2`` was refused as "resumed later" by that failed attempt. It is
    not refused, and the resume: line says it supersedes that attempt; a later run that trained a step still refuses."""
    monkeypatch.setattr(resume.runstate, "run_dir_for", lambda runs, rid: f"{runs}/{rid}")
    r = _old_plan(FIRST, overrides=())
    ckpt = r.spec["settings"]["ckpt_dir"]
    files = {
        f"/r/{OLD_ID}/spec.json": json.dumps(r.spec),
        f"/r/{OLD_ID}/run.json": json.dumps({"status": "failed", "step": 6}),
        f"{ckpt}/latest_checkpointed_iteration.txt": "6\n",
        f"/r/{NEW_ID}/spec.json": json.dumps(dict(r.spec, run_id=NEW_ID, resume_of=OLD_ID)),
        f"/r/{NEW_ID}/run.json": json.dumps(
            {"status": "failed", "step": 6, "attempts": [{"step_reached": 6, "resumed_from": 6}]}
        ),
    }

    class Container:
        host = SimpleNamespace(runs_path="/r", name="h2", python="python3")

        def run(self, cmd, **kw):
            return fake_ops.runfiles_answer(fake_ops.op_of(cmd)[1:], files)

    facts = resume.read_facts(Container(), OLD_ID)
    assert facts.supersedes == (NEW_ID,), facts
    p = _resume(facts, {"steps": 10}, overrides=(f"{EPOCHS}=2",))
    assert f"supersedes the failed attempt {NEW_ID} (trained no step" in p.resume_line, p.resume_line
    # the same later run having trained a step (7 from 6) still refuses
    files[f"/r/{NEW_ID}/run.json"] = json.dumps(
        {"status": "failed", "step": 7, "attempts": [{"step_reached": 7, "resumed_from": 6}]}
    )
    with pytest.raises(LaunchRefused, match="was resumed later"):
        resume.read_facts(Container(), OLD_ID)
