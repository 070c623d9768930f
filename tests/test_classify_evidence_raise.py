"""A new user's trial: run.json's evidence of a bad --model was a traceback source line,
``raise texts.fake_exc("RayTaskError","HFValidationError",msg)``, not the exception line. Pure."""

from pathlib import Path

import pytest

from dapo_ops.core.classify import classify, classify_file
from dapo_ops.core.classify.logtail import Log, traceback_line

TB = """Traceback (most recent call last):
  File "/verl/verl/_standin/trainer.py", line 457, in _check_inputs
    raise texts.fake_exc("RayTaskError", "HFValidationError", msg)
ray.exceptions.RayTaskError(HFValidationError): ray::TaskRunner.run() (pid=1, ip=192.0.2.17)
  File "/verl/verl/utils/tokenizer.py", line 58, in hf_tokenizer
huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': '/m/x'.
"""


def test_a_config_errors_evidence_is_the_exception_line_never_a_raise_source_line():
    v = classify(TB, exit_code=1)
    assert v.cls == "config-error" and v.detail["key"] == "actor_rollout_ref.model.path", v
    assert v.evidence and not any(e.startswith("raise ") for e in v.evidence), v.evidence
    assert "HFValidationError" in v.evidence[0], v.evidence


CASES = Path(__file__).resolve().parent / "cases"


@pytest.mark.parametrize(
    "case,cls,evidence",
    [
        (
            "variants/v-auth-wandb-old-no-tty-run-wandb-login.log",
            "auth-error",
            "wandb.errors.error.UsageError: api_key not configured (no-tty).  Run wandb login",
        ),
        (
            "variants/v-auth-wandb-usageerror-errors-errors-main-task.log",
            "auth-error",
            "wandb.errors.errors.UsageError: api_key not configured (no-tty). call wandb.login(key=[your_api_key])",
        ),
        ("handed/case-32-hf-proxy-unreachable.log", "network", "requests.exceptions.ProxyError: (MaxRetryError("),
    ],
)
def test_every_verdicts_evidence_is_the_exception_line_never_the_frames_source_line(case, cls, evidence):
    """Real tracebacks print the raising source line under its frame (``raise UsageError("api_key not configured
    (no-tty) ...")``, ``raise ProxyError(e, request=request)``) above the exception line, and the signature matched
    both: the auth-error and network verdicts quoted the source line (only config errors skipped it)."""
    v = classify_file(CASES / case, exit_code=1)
    assert v.cls == cls, v.to_json()
    assert v.evidence[0].startswith(evidence), v.evidence
    assert not any(e.lstrip().startswith(("raise ", 'File "')) for e in v.evidence), v.evidence


def test_a_traceback_line_is_a_frame_or_the_source_under_it_not_the_exception_line():
    log = Log(
        "\n".join(
            [
                "Traceback (most recent call last):",
                '  File "/verl/verl/utils/fs.py", line 303, in local_mkdir_safe',
                "    os.makedirs(path, exist_ok=True)",
                '  File "<frozen os>", line 225, in makedirs',
                "PermissionError: [Errno 13] Permission denied: '/ck/global_step_2'",
                'ERROR 11-29 12:00:00 [multiproc_executor.py:824]   File "/v/model_runner_v1.py", line 2451, in f',
                "ERROR 11-29 12:00:00 [multiproc_executor.py:824]     raise ValueError(",
                "ERROR 11-29 12:00:00 [multiproc_executor.py:824] ValueError: No available memory for the cache blocks.",
            ]
        )
    )
    assert [traceback_line(log, i) for i in range(len(log.lines))] == [
        False,
        True,
        True,
        True,
        False,
        True,
        True,
        False,
    ]
