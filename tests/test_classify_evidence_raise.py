"""A new user's trial: run.json's evidence of a bad --model was a traceback source line,
``raise texts.fake_exc("RayTaskError","HFValidationError",msg)``, not the exception line. Pure."""

from dapo_ops.core.classify import classify

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
