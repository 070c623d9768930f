"""One reader of a Hydra override (dapo_ops/core/hydra_override.py) and every site that reads an override's key.

The reader agrees with hydra-core's own ``OverridesParser`` (the grammar verl's ``@hydra.main`` uses) on the op, the
key and the value of every override Hydra takes, and refuses the ones Hydra refuses for their prefix (``+~k``).
Then the sites: on main's code the fit (core/fastfit.py, through memfit.override_values: ``+`` stripped only) read
``~actor_rollout_ref.rollout.max_num_seqs`` as "not the user's" and chose max_num_seqs itself while the learned
start (core/learned.py: ``+~`` stripped) read it as the user's; the supervisor's save/validation clock and the
stall verdict's user files read ``~key=value`` (a guarded DELETE) as the key's value; the ladder's budget took the
FIRST override of a key where Hydra applies the last; ``~+key`` passed the spec check and ``~ key`` the launch's
Hydra check, to die at verl's start. Each test below fails on main's code.
"""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import OverrideType
from hydra.errors import OverrideParseException
from hypothesis import given, settings as hsettings, strategies as st

from dapo_ops.agent.supervisor import stall
from dapo_ops.agent.supervisor.machine import Supervisor
from dapo_ops.control import settings
from dapo_ops.control.launch.refusals import LaunchUsageError
from dapo_ops.control.launch.service import refuse_bad_overrides
from dapo_ops.core import defaults, fastfit, features, learned, memfit, memladder, overrides, profiles
from dapo_ops.core.hydra_override import ADD, CHANGE, DELETE, FORCE_ADD, Override, last_by_key, parse_override, truth
from dapo_ops.control.launch.plan import PlanError
from plan_helpers import plan_for

ROOT = Path(__file__).resolve().parents[1]
QWEN3_1_7B = json.loads((ROOT / "bench" / "memory_fit_models.json").read_text())["qwen3-1.7b"]
NSEQ = "actor_rollout_ref.rollout.max_num_seqs"
OPS = {OverrideType.CHANGE: CHANGE, OverrideType.ADD: ADD, OverrideType.FORCE_ADD: FORCE_ADD, OverrideType.DEL: DELETE}
HYDRA = OverridesParser.create()


def test_the_four_ops_as_written():
    assert parse_override("actor_rollout_ref.rollout.n=8") == Override(CHANGE, "actor_rollout_ref.rollout.n", "8")
    assert parse_override("+trainer.x='a b'") == Override(ADD, "trainer.x", "'a b'")
    assert parse_override("+trainer.x='a b'").text == "a b"  # type: ignore[union-attr]
    assert parse_override("++trainer.x= 5").text == "5"  # type: ignore[union-attr]
    assert parse_override(f"~{NSEQ}") == Override(DELETE, NSEQ, None)
    d = parse_override(f"~{NSEQ}=256")
    assert d == Override(DELETE, NSEQ, "256") and d.text is None and d.head == f"~{NSEQ}"  # the value only guards
    for bad in ("trainer.x", "+trainer.x", "=5", "~", "+~trainer.x=1", "~+trainer.x", "~~trainer.x", "+++a=1", ""):
        assert parse_override(bad) is None, bad
    assert last_by_key(["a.b=1", "x", "++a.b=2", "~c"]) == {
        "a.b": Override(FORCE_ADD, "a.b", "2"),
        "c": Override(DELETE, "c", None),
    }


PREFIXES = ["", "+", "++", "~", "+~", "~+", "~~", "+++"]
KEYS = ["trainer.save_freq", NSEQ, "model_engine", "hydra.searchpath", "a_b.c-d.0", "db@pkg"]
VALUES = [None, "", "5", " 7", "-3", "'a b'", '"x=y"', "True", "null", "fsdp2", "[1,2]", "${data.max_prompt_length}"]


@hsettings(max_examples=300, deadline=None)
@given(st.sampled_from(PREFIXES), st.sampled_from(KEYS), st.sampled_from(VALUES))
def test_the_reader_agrees_with_hydras_own_parser(prefix, key, value):
    """Hydra 1.3's ``OverridesParser`` (hydra/grammar/OverrideParser.g4): what it takes, the reader takes with the same
    op, key (``key_or_group``, with ``@package``) and value; what it refuses for its prefix, the reader refuses."""
    text = prefix + key + ("" if value is None else "=" + value)
    ours = parse_override(text)
    try:
        hydra = HYDRA.parse_overrides([text])[0]
    except OverrideParseException:
        assert ours is None, text
        return
    assert ours is not None, text
    assert ours.op == OPS[hydra.type]
    assert ours.key == hydra.key_or_group + (f"@{hydra.package}" if hydra.package is not None else "")
    if ours.deletes:
        assert ours.text is None
    elif isinstance(hydra.value(), (str, int)) and not isinstance(hydra.value(), bool):
        assert ours.text == str(hydra.value())


BOOLISH = ["0", "1", "-0", "+1", "0_0", "1_0", "true", "False", "TRUE", "null", "NULL", "no", "yes", "off", "",
           "'false'", '""', "0.0", "1e3", ".5", "nan", "-inf", "0x1", " false ", "1.", "007", "1__0", "1_", "_1",
           "1e", "e3", ".e3", "1.5e-3", "+.5", "Infinity", "-nan", "0e0", "0.", "-0.0e1_0", "[]", "{}", "[ ]", "[0]"]  # fmt: skip


@hsettings(max_examples=200, deadline=None)
@given(st.sampled_from(["", "+", "++", "~"]), st.sampled_from(BOOLISH))
def test_truth_is_the_python_truthiness_of_the_value_hydra_gives(prefix, value):
    """verl 0.9.1 tests its model flags by truthiness, with no type coercion (hydra_override.truth): ``=0`` is off,
    ``=no`` is on. The reader's truth equals ``bool`` of hydra-core's own parsed value; a deletion has none."""
    text = f"{prefix}actor_rollout_ref.model.use_remove_padding=" + value
    try:
        hydra = HYDRA.parse_overrides([text])[0]
    except OverrideParseException:
        return
    o = parse_override(text)
    assert o is not None
    if o.deletes:
        assert truth(o) is None
    else:
        assert truth(o) is bool(hydra.value()), text


def _fit(extra):
    spec = defaults.complete_spec(
        {
            "framework": "fsdp",
            "mode": "dapo",
            "profile": "0.9",
            "settings": {
                "n_gpus_per_node": 1,
                "max_prompt_length": 512,
                "max_response_length": 2048,
                "rollout_tp": 1,
                "train_batch_size": 32,
                "ppo_mini_batch_size": 8,
                "rollout_n": 8,
                "steps": 20,
                "extra_overrides": list(extra),
            },
        }
    )
    return fastfit.choose(memfit.Model.from_config(QWEN3_1_7B), spec, features.resolve("", False), 139.8)


MEMO = {"rung": {"features": [], "setting_changes": {"rollout_max_num_seqs": 64, "memory_rungs": []}}}


@pytest.mark.parametrize("form", [f"{NSEQ}=300", f"+{NSEQ}=300", f"++{NSEQ}=300", f"~{NSEQ}", f"~{NSEQ}=256"])
def test_every_form_of_an_override_is_the_users_choice_of_the_key_for_the_fit_and_the_learned_start(form):
    """Each op names the key for both readers: the fit keeps max_num_seqs as the user's (it would otherwise be
    emitted by the plan and then deleted by the user's ``~key``, or trip its ``~key=256`` guard: Hydra's "Could not
    delete from config. The value of ... is 160 and not 256"), and a learned memo that sets it is not used. On main
    the fit chose max_num_seqs under both ``~`` forms while the learned start called it the user's."""
    c = _fit([form])
    assert "rollout_max_num_seqs" not in c.settings
    kept = {k.name: k for k in c.kept}["max_num_seqs"]
    assert learned.conflicts(MEMO, (), {}, [form]) == [f"it changes {NSEQ}, which you set with --override"]
    if form.startswith("~"):  # deleted: verl runs RolloutConfig's default (verl/workers/config/rollout.py:206)
        assert kept.value == fastfit.VERL_MAX_NUM_SEQS_DELETED == 1024
        assert kept.why.startswith(f"you removed it with --override ~{NSEQ}")
        assert memfit.override_values({"settings": {"extra_overrides": [form]}}) == {NSEQ: None}
    else:
        assert kept.value == 300 and kept.why.startswith(f"you set it with --override {NSEQ}=300")
    # the user's override reaches verl's argv, last, and the plan sets no max_num_seqs of its own
    spec = dict(defaults.complete_spec({"framework": "fsdp", "mode": "dapo", "profile": "0.9"}))
    spec["settings"] = dict(spec["settings"], extra_overrides=[form], **c.settings)
    argv = overrides.verl_argv(spec, c.features)
    assert argv[-1] == form and [a for a in argv if NSEQ in a] == [form]


def test_a_guarded_delete_is_no_value_for_the_supervisor_clock_or_the_stall_verdict():
    """``~trainer.test_freq=5`` deletes the key (verl then fails reading it, trainer_base.py:491), it does not make
    validation run every 5 steps; ``~reward.custom_reward_function.path=/x/r.py`` leaves no user code to name."""
    s = {"save_freq": 10, "test_freq": 10}
    clock = Supervisor._clock_settings  # reads the run's settings only

    def run(extra):
        return clock(types.SimpleNamespace(_settings=lambda: dict(s, extra_overrides=extra)))  # type: ignore[arg-type]

    assert run(["~trainer.test_freq=5"]) == {"save_freq": 10, "test_freq": 10}
    assert run(["++trainer.test_freq='4'", "trainer.save_freq=8"]) == {"save_freq": 8, "test_freq": 4}
    assert stall.user_files(["~reward.custom_reward_function.path=/x/r.py"]) == ()
    assert stall.user_files(["reward.custom_reward_function.path='/x/my_reward.py'"]) == ("my_reward.py",)


def test_the_last_override_of_a_budget_is_the_one_the_ladder_starts_from():
    """Hydra applies overrides in order (config_loader_impl.py _apply_overrides_to_config): the last one is what verl
    runs with, so the ladder's next budget starts from it (main: the first)."""
    key = memladder.ACTOR_BUDGET
    s = {"max_prompt_length": 512, "max_response_length": 2048, "extra_overrides": [f"{key}=4096", f"++{key}=8192"]}
    assert memladder.current_budget(s) == 8192
    deleted = dict(s, extra_overrides=[f"{key}=4096", f"~{key}"])  # no value of the user's: the plan's default
    assert memladder.current_budget(deleted) == profiles.token_budgets(512, 2048)[key] != 4096


def test_an_override_with_two_prefixes_or_a_blank_after_the_tilde_is_refused_before_verl():
    """Hydra refuses ``~+key`` and ``~ key`` (LexerNoViableAltException at verl's start); main let the first through
    check_spec (it starts with ``~``) and skipped the second in the launch's Hydra check (no ``=``)."""
    st = settings.resolve({"steps": 10}, {}, {})
    plan = dict(settings=st, host=None, mode="dapo", run_id="20260101-000000-abcd", swanlab_logger=False)
    plan_for(**plan, extra_overrides=["~trainer.test_freq"])  # the spec check takes a plain deletion
    with pytest.raises(PlanError, match="'~[+]trainer.test_freq' is not key=value"):
        plan_for(**plan, extra_overrides=["~+trainer.test_freq"])
    with pytest.raises(LaunchUsageError, match=r"is not a valid Hydra override"):
        refuse_bad_overrides(["~ trainer.test_freq"])
    refuse_bad_overrides(["~trainer.test_freq", "~trainer.test_freq=10"])  # Hydra takes both
