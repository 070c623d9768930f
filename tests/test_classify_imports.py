"""A trainer that dies because it cannot import a module, a compiled extension or a native library: config-error,
cause ``missing-module`` (the ``missing-module`` row of dapo_ops/core/classify/signatures.py, its forms
``IMPORT_FORMS``; the verdict in classify/decide.py ``_missing_module``; the fix table ``MODULE_FIXES`` and texts in
classify/hints.py), never retried unchanged (the failure policy, dapo_ops/core/policy.py).

The real evidence: verl 0.9.1 + Megatron on an H200 (tests/fixtures/real-verl/tool-runs/k-megatron-*, copied
unmodified; the supervisor recorded ``crash-other`` then). The misfire guard: every train.log of a run that
succeeded, whole and cut at many points, classifies as it does without the row; verl's own
``engine is not available: ModuleNotFoundError(...)`` warnings (every healthy run), Transformer Engine's JAX
RuntimeWarning and Megatron's "Apex is not installed" warning never count.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from dapo_ops.agent import runfiles
from dapo_ops.core import classify, features, ladder
from dapo_ops.core.classify import logtail
from dapo_ops.core.classify.signatures import SIGNATURES

RUNS = Path(__file__).resolve().parent / "fixtures" / "real-verl" / "tool-runs"


def attempt_text(name: str, k: int) -> str:
    """Attempt ``k``'s part of a tool-run's train.log (between the supervisor's attempt delimiters)."""
    body = (RUNS / name / "train.log").read_text(encoding="utf-8", errors="replace")
    start = body.index("===== dapo-ops attempt %d start" % k)
    end = body.index("\n", body.index("===== dapo-ops attempt %d end" % k, start))
    return body[start : end + 1]


# ----------------------------------------------------------------------------------------------- the real runs

# scenario -> (module, phase, words of the fix the hint and the action must carry)
REAL = {
    # Megatron-Bridge 0.6.2 training/config.py:53 -> megatron.bridge.data -> builders/energon.py -> megatron.energon,
    # reached from verl/utils/megatron_utils.py:456 make_megatron_module (init_model)
    "k-megatron-energon": ("megatron.energon", "model-load", ("pip install megatron-energon",)),
    # auto_bridge.py:1127 save_hf_weights at the first checkpoint save (global_step_1)
    "k-megatron-modelopt": ("modelopt", "checkpoint-save", ("pip install nvidia-modelopt", "use_dist_checkpointing")),
    # megatron-core tensor_parallel/layers.py:1070 (a RuntimeError, not an ImportError)
    "k-megatron-apex": (
        "fused_weight_gradient_mlp_cuda",
        "model-load",
        ("+actor_rollout_ref.actor.megatron.override_transformer_config.gradient_accumulation_fusion=False", "apex"),
    ),
}


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_megatron_import_failure_is_a_config_error_naming_the_module(name):
    module, phase, fix = REAL[name]
    rec = runfiles.read_run(RUNS / name)
    att = rec["attempts"][0]
    assert att["verdict"]["cls"] == "crash-other"  # what the supervisor said on the real run (before this row)
    v = classify.classify(attempt_text(name, 1), exit_code=att["exit_code"])
    assert (v.cls, v.action_kind) == ("config-error", "stop"), v
    assert v.detail["cause"] == "missing-module" and v.detail["module"] == module, v.detail
    assert v.detail["phase"] == phase, v.detail
    assert module in v.evidence[0], v.evidence  # the innermost import failure first
    for text in (v.action, v.hint):
        assert module in text and "\n" not in text
        for word in fix:
            assert word in text, (word, text)


def test_real_modelopt_failure_at_checkpoint_save_is_not_retried():
    """The modelopt import runs in every HF-format save (after step 1 here): the supervisor stops instead of resuming
    (a resume would save again and fail the same way); ladder.decide with the run's own spec."""
    name = "k-megatron-modelopt"
    spec = runfiles.read_spec(RUNS / name)
    fs = features.FeatureSet.from_json(spec.get("features") or [], spec.get("disabled_features") or ())
    settings = dict(spec["settings"], framework=spec.get("framework"), mode=spec.get("mode"))
    v = classify.classify(attempt_text(name, 1), exit_code=1)
    assert v.detail["ckpt_step"] == 1 and "saving global_step_1" in v.hint
    d = ladder.decide(fs, v.cls, v.detail, 0, spec["max_oom_retries"], {}, settings)
    assert d.action == "stop", d


# ----------------------------------------------------------------------------------------------- healthy runs


def _succeeded_logs() -> list[str]:
    out = []
    for d in sorted(RUNS.iterdir()):
        rec = runfiles.read_run(d) if (d / "run.json").exists() else None
        if rec and rec.get("status") == "succeeded" and (d / "train.log").exists():
            out.append(d.name)
    return out


SUCCEEDED = _succeeded_logs()


def _cuts(text: str) -> list[str]:
    """The text cut at 20 points and just before every ``step:`` line: the tail a live classification sees."""
    lines = text.split("\n")
    points = {len(lines) * k // 20 for k in range(1, 21)}
    points |= {i for i, ln in enumerate(lines) if re.search(r"(?<![\w/])step:\d", ln)}
    return ["\n".join(lines[:p]) for p in sorted(points)]


def test_the_healthy_fixtures_are_the_succeeded_runs_and_carry_the_warnings():
    assert len(SUCCEEDED) >= 15 and "a-success" in SUCCEEDED and "j-learned-start" in SUCCEEDED
    for name in ("a-success", "j-learned-start"):
        text = (RUNS / name / "train.log").read_text(errors="replace")
        assert "UserWarning: torchtitan engine is not available: ModuleNotFoundError(" in text


@pytest.mark.parametrize("name", SUCCEEDED)
def test_no_healthy_run_classifies_differently_than_without_the_row(name, monkeypatch):
    """Every attempt of a succeeded run, whole and cut, with and without an exit code: the same verdict as the
    classifier without the ``missing-module`` row, and no import-failure hit anywhere."""
    text = (RUNS / name / "train.log").read_text(encoding="utf-8", errors="replace")
    assert not [h for h in logtail.scan(logtail.Log(text)) if h.sig.name in ("missing-module", "entry-module")]
    pieces = _cuts(text)
    with_row = [classify.classify(t, exit_code=ec).to_json() for t in pieces for ec in (None, 1)]
    monkeypatch.setattr(logtail, "SIGNATURES", tuple(s for s in SIGNATURES if s.name != "missing-module"))
    without = [classify.classify(t, exit_code=ec).to_json() for t in pieces for ec in (None, 1)]
    assert with_row == without
    assert not any(v["detail"].get("cause") == "missing-module" for v in with_row)


# ----------------------------------------------------------------------------------------------- the kind

TB = (
    "Traceback (most recent call last):\n"
    '  File "/usr/lib/python3.12/site-packages/verl/workers/engine_workers.py", line 645, in init_model\n'
    "    self.actor.reset()\n"
)
RAY_TB = (
    "Error executing job with overrides: ['trainer.n_gpus_per_node=8']\n"
    "Traceback (most recent call last):\n"
    '  File "/usr/lib/python3.12/site-packages/verl/trainer/main_ppo.py", line 93, in run_ppo\n'
    "    ray.get(runner.run.remote(config))\n"
    "ray.exceptions.RayTaskError({cls}): \x1b[36mray::WorkerDict.actor_rollout_init_model()\x1b[39m "
    "(pid=3486, ip=192.0.2.2)\n"
    '  File "/usr/lib/python3.12/site-packages/verl/workers/engine_workers.py", line 645, in init_model\n'
    "    self.actor.reset()\n"
)
HEALTHY_WARNINGS = (
    "\x1b[36m(TaskRunnerV1 pid=2575)\x1b[0m /tmp/site/verl/workers/engine/__init__.py:32: UserWarning: torchtitan "
    "engine is not available: ModuleNotFoundError(\"No module named 'torchtitan'\")\n"
    "\x1b[36m(WorkerDict pid=3486)\x1b[0m /tmp/site/verl/workers/engine/__init__.py:41: UserWarning: veomni engine is "
    "not available: ModuleNotFoundError(\"No module named 'veomni'\")\n"
    "(pid=8035) /tmp/site-mega/transformer_engine/__init__.py:130: RuntimeWarning: Detected a Jax installation but "
    "could not find the shared object file for the Transformer Engine Jax extension library. If this is not "
    "intentional, please reinstall Transformer Engine with `pip install transformer_engine[pytorch]`\n"
    "(pid=8035) /tmp/site-mega/megatron/core/models/backends.py:34: UserWarning: Apex is not installed. Falling back "
    "to Torch Norm\n"
    "(vLLMHttpServer pid=7222) WARNING 12-02 11:49:39 [_custom_ops.py:20] Failed to import from vllm._C with "
    "ModuleNotFoundError(\"No module named 'vllm._C'\")\n"
)

# (log, form, module, name, words the action and hint carry)
KIND = [
    (
        HEALTHY_WARNINGS + TB + "ModuleNotFoundError: No module named 'flash_attn'\n",
        "missing",
        "flash_attn",
        None,
        ("pip install flash-attn", "--features=-flash_attn"),
    ),
    (
        HEALTHY_WARNINGS + RAY_TB.format(cls="ModuleNotFoundError") + "ModuleNotFoundError: No module named "
        "'my_reward_pkg.scoring'; 'my_reward_pkg' is not a package\n",
        "missing",
        "my_reward_pkg.scoring",
        None,
        ("pip install the package that provides 'my_reward_pkg.scoring' in the container",),
    ),
    (
        RAY_TB.format(cls="ImportError") + "ImportError: cannot import name 'AutoModelForVision2Seq' from "
        "'transformers' (/usr/lib/python3.12/site-packages/transformers/__init__.py)\n",
        "name",
        "transformers",
        "AutoModelForVision2Seq",
        ("the version of 'transformers' that has 'AutoModelForVision2Seq'",),
    ),
    (
        TB + "ImportError: /usr/local/lib/python3.12/dist-packages/flash_attn_2_cuda.cpython-312-x86_64-linux-gnu.so: "
        "undefined symbol: _ZN3c104cuda9SetDeviceEi\n",
        "symbol",
        "flash_attn_2_cuda",
        "_ZN3c104cuda9SetDeviceEi",
        ("reinstall flash-attn", "--features=-flash_attn"),
    ),
    (
        TB + "ImportError: /usr/local/lib/python3.12/dist-packages/vllm/_C.abi3.so: undefined symbol: _ZN5torch3jit\n",
        "symbol",
        "vllm._C",
        "_ZN5torch3jit",
        ("install vLLM built for the container's torch / CUDA",),
    ),
    (
        TB + "ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory\n",
        "library",
        "libcudnn.so",
        None,
        ("LD_LIBRARY_PATH",),
    ),
    (
        TB + "ImportError: accelerate>=0.26.0 is required for a normal functioning of this module, but found "
        "accelerate==0.20.0.\n",
        "version",
        "accelerate",
        None,
        ("a version of 'accelerate' that meets the requirement",),
    ),
    (
        TB + "ImportError: FlashAttention2 has been toggled on, but it cannot be used due to the following error: the "
        "package flash_attn seems to be not installed. Please refer to the documentation of "
        "https://huggingface.co/docs/transformers/perf_infer_gpu_one#flashattention-2 to install Flash Attention 2.\n",
        "missing",
        "flash_attn",
        None,
        ("pip install flash-attn",),
    ),
    (
        TB + "RuntimeError: Failed to import transformers.models.qwen2.modeling_qwen2 because of the following error "
        "(look up to see its traceback):\nNo module named 'flash_attn'\n",
        "missing",
        "flash_attn",
        None,
        ("pip install flash-attn",),
    ),
    (
        "ray.exceptions.RaySystemError: System error: No module named 'custom_reward'\n"
        "traceback: Traceback (most recent call last):\n"
        "ModuleNotFoundError: No module named 'custom_reward'\n",
        "missing",
        "custom_reward",
        None,
        ("pip install the package that provides 'custom_reward'",),
    ),
    (
        # vLLM's engine process dies on the import; its parent's wrapper and the collective errors are symptoms
        "(EngineCore_DP0 pid=7571) Traceback (most recent call last):\n"
        "(EngineCore_DP0 pid=7571) ModuleNotFoundError: No module named 'flashinfer'\n"
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n"
        "[rank1]:[E1202 11:51:40 ProcessGroupNCCL.cpp:632] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=7, OpType=ALLREDUCE, Timeout(ms)=600000)\n",
        "missing",
        "flashinfer",
        None,
        ("pip install the package that provides 'flashinfer'",),
    ),
    (
        TB + "ImportError: attempted relative import with no known parent package\n",
        "other",
        None,
        None,
        ("install what the import error in the evidence names",),
    ),
]


@pytest.mark.parametrize("log,form,module,name,words", KIND, ids=[f"{k[1]}-{k[2]}" for k in KIND])
def test_the_kind_is_a_config_error_with_the_module_and_a_fix(log, form, module, name, words):
    for ec in (1, None):
        v = classify.classify(log, exit_code=ec)
        assert (v.cls, v.action_kind, v.detail.get("cause")) == ("config-error", "stop", "missing-module"), v
        assert (v.detail.get("form"), v.detail.get("module"), v.detail.get("name")) == (form, module, name)
        for text in (v.action, v.hint):
            assert "\n" not in text
            assert module is None or f"'{module}'" in text, text
            for w in words:
                assert w in text, (w, text)
        assert v.evidence and "warning" not in v.evidence[0].lower()


NOT_THE_KIND = [
    # verl's and the libraries' optional-import warnings while training goes on / starts up (no exit code yet)
    (HEALTHY_WARNINGS + "step:1 - actor/pg_loss:0.1\n", None, "crash-other", None),
    (HEALTHY_WARNINGS, None, "crash-other", None),
    # an import traceback that training went past is not what stopped it
    (TB + "ModuleNotFoundError: No module named 'liger_kernel'\nstep:3 - actor/pg_loss:0.1\n", 1, "crash-other", None),
    # the warnings, then a real failure of another kind: that kind
    (
        HEALTHY_WARNINGS + TB + "KeyError: 'answer'\n",
        1,
        "crash-other",
        None,
    ),
    # a logged import traceback before a device OOM: the OOM is the cause
    (
        TB + "ModuleNotFoundError: No module named 'apex'\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "139.81 GiB of which 1.1 GiB is free.\n",
        1,
        "oom-device",
        None,
    ),
    # runpy's entry-module messages keep their own cause (both of Lib/runpy.py's wordings)
    (
        "/usr/bin/python3: Error while finding module specification for 'recipe.dapo.main_dapo' "
        "(ModuleNotFoundError: No module named 'recipe')\n",
        1,
        "config-error",
        "entry-module",
    ),
    ("/usr/bin/python3: No module named verl.trainer.main_dapo\n", 1, "config-error", "entry-module"),
    # CANN's libraries that torch_npu cannot open: the runtime-env row reads that line better (the container's
    # environment: config-error since issue 44)
    (
        "(TaskRunner pid=1201) ImportError: libhccl.so: cannot open shared object file: No such file or directory\n",
        1,
        "config-error",
        "runtime-env",
    ),
]


@pytest.mark.parametrize("log,ec,cls,cause", NOT_THE_KIND, ids=[str(i) for i in range(len(NOT_THE_KIND))])
def test_not_the_kind(log, ec, cls, cause):
    v = classify.classify(log, exit_code=ec)
    assert (v.cls, v.detail.get("cause")) == (cls, cause), (v.cls, v.detail, v.evidence)


# ----------------------------------------------------------------------------------------------- properties

_IDENT = st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True)
MODULES = st.lists(_IDENT, min_size=1, max_size=3).map(".".join)
PREFIX = st.sampled_from(["", "(WorkerDict pid=3486, ip=192.0.2.2) ", "\x1b[36m(TaskRunnerV1 pid=2575)\x1b[0m ", "  "])
EXC = st.sampled_from(["ModuleNotFoundError", "ImportError"])
NOISE = st.lists(st.sampled_from(HEALTHY_WARNINGS.splitlines()), max_size=4).map(
    lambda ls: "".join(x + "\n" for x in ls)
)


@hsettings(max_examples=150, deadline=None)
@given(mod=MODULES, prefix=PREFIX, exc=EXC, before=NOISE, after=NOISE, ray=st.booleans(), ec=st.sampled_from([1, None]))
def test_any_fatal_import_line_names_its_module(mod, prefix, exc, before, after, ray, ec):
    head = RAY_TB.format(cls=exc) if ray else TB
    log = before + head + f"{prefix}{exc}: No module named '{mod}'\n" + after
    v = classify.classify(log, exit_code=ec)
    assert (v.cls, v.action_kind, v.detail.get("cause"), v.detail.get("module")) == (
        "config-error",
        "stop",
        "missing-module",
        mod,
    )
    assert f"'{mod}'" in v.action and f"'{mod}'" in v.hint


@hsettings(max_examples=150, deadline=None)
@given(
    mod=MODULES,
    exc=EXC,
    lead=st.sampled_from(
        [
            "/tmp/site/verl/workers/engine/__init__.py:32: UserWarning: x engine is not available: ",
            "WARNING 12-02 11:49:39 [import_utils.py:20] Failed to import with ",
            "INFO:2026-12-02 11:50:46,089:optional dependency missing: ",
            "[W1202 11:51:29] skipped: ",
        ]
    ),
    quote=st.sampled_from(["{exc}(\"No module named '{mod}'\")", "{exc}: No module named '{mod}'"]),
)
def test_an_import_error_inside_a_warning_or_log_record_never_counts(mod, exc, lead, quote):
    line = lead + quote.format(exc=exc, mod=mod)
    for ec in (None, 1):
        v = classify.classify(line + "\n", exit_code=ec)
        assert v.detail.get("cause") != "missing-module", (line, v.detail)
