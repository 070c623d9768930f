"""verl 0.9.1's own start-up checks of a config value (dapo_ops/core/classify/startcheck.py): an exception raised under
validate_config, a config dataclass's __post_init__, the V1 replay buffer, the RL dataset's file-format check or the
resume-mode check, before the first training step, is ``config-error`` (cause ``verl-check``, stopped, never retried)
naming the key and value; the same exception type anywhere else stays what it was. Pure: the driver report as Hydra
prints it over verl's frames (tests/fixtures/real-verl/tool-runs/d-update-oom/train.log:1080-1222 for the shape)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dapo_ops.core import policy
from dapo_ops.core.classify import classify, classify_file
from dapo_ops.core.classify.logtail import fatal_signature

CASES = Path(__file__).resolve().parent / "cases" / "variants"
S = "/usr/local/lib/python3.12/dist-packages"


@pytest.mark.parametrize(
    "case,key,value,words",
    [
        (
            "v-config-verl-check-max-off-policy-threshold",
            "trainer.v1.sampler.max_off_policy_threshold",
            "-1",
            "integer > 0, or null",
        ),
        ("v-config-verl-check-csv-train-files", "data.train_files", "/data/gsm8k/train.csv", ".parquet"),
        ("v-config-verl-check-resume-mode-unknown", "trainer.resume_mode", "foo", "auto, disable or resume_path"),
        (
            "v-config-verl-check-lr-scheduler-bare-assert",
            "actor_rollout_ref.actor.optim.lr_scheduler_type",
            "linear",
            '"constant", "cosine"',
        ),
    ],
)
def test_a_start_up_check_is_a_config_error_naming_key_value_and_fix(case, key, value, words):
    v = classify_file(CASES / f"{case}.log", exit_code=1)
    assert (v.cls, v.action_kind, v.detail.get("cause")) == ("config-error", policy.Kind.STOP, "verl-check"), v
    assert (v.detail["key"], v.detail["value"]) == (key, value), v.detail
    assert f"{key}={value}" in v.action and words in v.action and "\n" not in v.action, v.action
    assert "never retried unchanged" in v.action and f"{key}={value}" in v.hint, v.hint
    # the exception line (or verl's ERROR record of it) is the evidence, never a frame or its source line
    assert not any(e.startswith(("File ", "raise ")) for e in v.evidence), v.evidence


def test_the_runs_ending_line_names_the_rejected_key_value_and_fix():
    """A second new user's trial (`--override actor_rollout_ref.actor.loss_agg_mode=foo`): `inv watch` / `inv status`
    / `inv logs` ended "verl's own start-up check rejected a config value: not retried; fix the key and value the
    verdict names" while no line they print named it (only launch's own 'failed at once' line did)."""
    from dapo_ops.core import ladder
    from dapo_ops.core.features import FeatureSet

    v = classify_file(CASES / "v-config-verl-check-resume-mode-unknown.log", exit_code=1)
    d = ladder.decide(FeatureSet(), v.cls, v.detail, 0, 2, {}, {"run_id": "R", "hosts": ["h1"]})
    assert d.action == "stop", d
    assert "trainer.resume_mode=foo" in d.reason and "auto, disable or resume_path" in d.reason, d.reason
    assert "the verdict names" not in d.reason and "\n" not in d.reason, d.reason


def test_a_csv_val_file_names_the_val_key():
    text = (CASES / "v-config-verl-check-csv-train-files.log").read_text()
    text = text.replace("data.train_files=/data/gsm8k/train.csv", "data.train_files=/data/gsm8k/train.parquet")
    text = text.replace("data.val_files=/data/gsm8k/test.parquet", "data.val_files=/data/gsm8k/train.csv")
    v = classify(text, exit_code=1)
    assert (v.cls, v.detail["key"], v.detail["value"]) == ("config-error", "data.val_files", "/data/gsm8k/train.csv")


def _driver_report(
    frames: str, exc: str, overrides: str = "['actor_rollout_ref.actor.loss_agg_mode=token-sum']"
) -> str:
    """What verl's driver prints when validate_config (trainer/main_ppo.py:177, before Ray) raises."""
    return (
        f"Error executing job with overrides: {overrides}\n"
        "Traceback (most recent call last):\n"
        f'  File "{S}/verl/trainer/main_ppo.py", line 177, in main\n'
        "    validate_config(\n"
        f'  File "{S}/verl/utils/config.py", line 164, in validate_config\n'
        "    actor_config = omega_conf_to_dataclass(config.actor_rollout_ref.actor)\n"
        "                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        f'  File "{S}/verl/utils/config.py", line 64, in omega_conf_to_dataclass\n'
        "    config_object = OmegaConf.to_object(cfg_merged)\n"
        f'  File "{S}/omegaconf/dictconfig.py", line 765, in _to_object\n'
        "    result = object_type(**init_field_items)\n"
        '  File "<string>", line 30, in __init__\n'
        f"{frames}"
        f"{exc}\n\nSet the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.\n"
    )


def test_a_dataclass_post_init_value_error_in_the_driver_names_the_override():
    text = _driver_report(
        f'  File "{S}/verl/workers/config/actor.py", line 220, in __post_init__\n'
        '    raise ValueError(f"Invalid loss_agg_mode: {self.loss_agg_mode}")\n',
        "ValueError: Invalid loss_agg_mode: token-sum",
    )
    v = classify(text, exit_code=1)
    assert (v.cls, v.detail["cause"], v.detail["key"], v.detail["value"]) == (
        "config-error",
        "verl-check",
        "actor_rollout_ref.actor.loss_agg_mode",
        "token-sum",
    ), v
    assert v.evidence == ["ValueError: Invalid loss_agg_mode: token-sum"]


def test_without_an_override_the_key_the_message_spells_out_is_named():
    """A value from the user config file (no override names it): the dotted key of verl's message."""
    text = _driver_report(
        f'  File "{S}/verl/trainer/ppo/v1/trainer_base.py", line 197, in _resolve_filter_groups_metric\n'
        '    raise ValueError("algorithm.filter_groups.metric must be set when group filtering is enabled")\n',
        "ValueError: algorithm.filter_groups.metric must be set when group filtering is enabled",
        overrides="[]",
    )
    v = classify(text, exit_code=1)
    assert (v.cls, v.detail["key"], v.detail.get("value")) == ("config-error", "algorithm.filter_groups.metric", None)
    assert "algorithm.filter_groups.metric (" in v.action, v.action


def test_an_assertion_after_training_steps_stays_a_crash():
    v = classify_file(CASES / "v-crash-assert-in-sampler-after-steps.log", exit_code=1)
    assert v.cls == "crash-other" and v.detail.get("cause") != "verl-check", v
    # the same replay-buffer text with the step lines gone and its frame the constructor's is the start-up check
    text = (CASES / "v-crash-assert-in-sampler-after-steps.log").read_text()
    text = "\n".join(ln for ln in text.split("\n") if " step:" not in ln)
    text = text.replace("line 608, in sample", "line 166, in __init__")
    assert classify(text, exit_code=1).cls == "config-error"


def test_an_assertion_in_a_workers_compute_before_the_first_step_stays_a_crash():
    v = classify_file(CASES / "v-crash-bare-assert-in-update-before-first-step.log", exit_code=1)
    assert v.cls == "crash-other" and v.detail.get("cause") != "verl-check", v


def test_a_value_error_outside_a_check_frame_is_no_config_error():
    """verl's frames in a check module, but the innermost frame is a library's (pyarrow reading a corrupt parquet):
    not verl's check."""
    text = _driver_report(
        f'  File "{S}/verl/workers/config/model.py", line 200, in __post_init__\n'
        "    self.hf_config = AutoConfig.from_pretrained(self.local_hf_config_path)\n"
        f'  File "{S}/transformers/configuration_utils.py", line 662, in _get_config_dict\n'
        "    raise ValueError(\n",
        "ValueError: Unrecognized model in /models/x. Should have a `model_type` key in its config.json",
    )
    assert classify(text, exit_code=1).cls == "crash-other"


def test_the_live_line_check_never_counts_a_bare_exception_line():
    """The supervisor's per-line fatal check (logtail.fatal_signature) has no frames to judge by: an AssertionError /
    ValueError line alone is no fatal signature; the start-up check's own messages are."""
    assert fatal_signature("AssertionError: Invalid max off policy threshold: -1, must be an integer") is None
    assert fatal_signature("ValueError: Invalid loss_agg_mode: token-sum") is None
    assert fatal_signature("ValueError: Unsupported file format: /data/x.csv").name == "data-format"
