"""Issue 44, the classifier's families 1-5 that main's code read as ``crash-other`` (or as a kernel fault / network):
each variant is an error text as a public report printed it (the source is cited at the variant), placed in a verl
run; the verdict is what the thread settled on.

1. native library / ABI mismatches and the JIT toolchain -> ``config-error`` (the container's environment), with the
   version pairing to check in the action;
2. a tracker server answering this client with 404 / 5xx / a GraphQL schema error -> ``config-error``
   ``tracker-version`` (stop at init; keep running while training goes on), never auth-error or network;
3. verl's reward dispatcher without a scorer for the rows' data_source -> ``data-error`` ``reward-source``;
4. Ray's unpickling error hides the real exception -> the error before it (or its class);
5. vLLM's engine death -> the first error before it, classified by it.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import pytest

from dapo_ops.core import classify as C

TB = 'Traceback (most recent call last):\n  File "/usr/local/lib/python3.10/site-packages/x.py", line 1, in <module>\n'
TR = "(TaskRunner pid=4135) "


def _v(text: str, exit_code: int | None = 1):
    return C.classify(text, exit_code=exit_code)


# ------------------------------------------------------------------ family 1: native libraries, ABI, toolchain

FAMILY1 = [
    # Ascend/pytorch#99: torch_npu 2.7.1 with CANN 8.3.RC1, ATB's library (nnal) of another CANN
    (
        TB + '  File "/usr/local/python3/lib/python3.11/site-packages/torch/_ops.py", line 1392, in load_library\n'
        "    ctypes.CDLL(path)\n"
        " OSError: /home/mtp/Ascend/nnal/atb/latest/atb/cxx_abi_1/lib/libtbe_adapter.so: undefined symbol: "
        "_ZN3Mki2DlC1ERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEEb\n",
        "missing-module",
        ("CANN", "ATB"),
    ),
    # vllm-ascend#117: torch_npu 2.5.1.dev20250218 built against another ATB
    (
        TB + "ImportError: /usr/local/python3.10.14/lib/python3.10/site-packages/torch_npu/lib/libtorch_npu.so: "
        "undefined symbol: _ZN3atb15CreateOperationINS_5infer14GroupTopkParamEEEiRKT_PPNS_9OperationE\n",
        "missing-module",
        ("ATB", "CANN"),
    ),
    # triton-ascend#328: torch-npu 2.7.1 against CANN 9.0 (MsprofSysCycleTime)
    (
        TB + "ImportError: /usr/local/lib/python3.11/site-packages/torch_npu/lib/libtorch_npu.so: undefined symbol: "
        "MsprofSysCycleTime\n",
        "missing-module",
        ("torch_npu", "CANN"),
    ),
    # Ascend/pytorch#35: transformers' lazy import wraps it, the library on the next line (torch 2.2 vs torch_npu 2.1)
    (
        "Failed to import transformers.optimization because of the following error (look up to see its traceback):\n"
        "/home/ma-user/anaconda3/envs/PyTorch-2.1.0/lib/python3.9/site-packages/torch_npu/lib/libtorch_npu.so: "
        "undefined symbol: _ZN5torch10ValueErrorC1EPKcz\n",
        "missing-module",
        ("torch_npu", "torch"),
    ),
    # vllm#20361: vllm/_C.abi3.so built for another torch
    (
        TB + "ImportError: /home/pc/data/vllm/vllm/vllm/_C.abi3.so: undefined symbol: "
        "_ZN5torch3jit17parseSchemaOrNameERKSsb\n",
        "missing-module",
        ("torch",),
    ),
    # vllm-ascend#152: ATB's library not found (nnal set_env.sh not sourced)
    (
        TB + "ImportError: libatb.so: cannot open shared object file: No such file or directory\n",
        "runtime-env",
        ("set_env",),
    ),
    # ctypes loading CANN's runtime without set_env.sh
    (
        TB + "OSError: libascendcl.so: cannot open shared object file: No such file or directory\n",
        "runtime-env",
        ("set_env",),
    ),
    # vllm#16984 / pytorch#103417 / Seg-Zero#63: Triton's JIT links its launcher stub with -lcuda
    (
        "/usr/bin/ld: cannot find -lcuda: No such file or directory\ncollect2: error: ld returned 1 exit status\n"
        "subprocess.CalledProcessError: Command '['/usr/bin/gcc', '/tmp/tmpe7nu9b0l/main.c', '-O3', '-shared', '-fPIC', "
        "'-o', '/tmp/tmpe7nu9b0l/cuda_utils.cpython-312-x86_64-linux-gnu.so', '-lcuda']' returned non-zero exit "
        "status 1.\n",
        "toolchain",
        ("libcuda.so", "TRITON_LIBCUDA_PATH"),
    ),
    # the same inside vLLM's worker log prefix (vllm#16984)
    (
        "ERROR 04-22 21:41:28 [worker_base.py:598] /usr/bin/ld: cannot find -lcuda\n"
        "ERROR 04-22 21:41:28 [worker_base.py:598] collect2: error: ld returned 1 exit status\n",
        "toolchain",
        ("libcuda.so",),
    ),
    # Triton <= 2.1 triton/common/build.py libcuda_dirs
    (
        TB + "AssertionError: libcuda.so cannot found!\nPossible files are located at "
        "['/usr/lib/x86_64-linux-gnu/libcuda.so.1'].Please create a symlink of libcuda.so to any of the file.\n",
        "toolchain",
        ("libcuda.so",),
    ),
    # xorbitsai/inference#2925: the real compile error under a BackendCompilerFailed (no build-essential)
    (
        "/tmp/tmpq1/main.c:1:10: fatal error: stdlib.h: No such file or directory\ncompilation terminated.\n"
        + TB
        + "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:\nCalledProcessError: Command "
        "'['/usr/bin/gcc', '/tmp/tmpq1/main.c']' returned non-zero exit status 1.\n",
        "toolchain",
        ("build-essential",),
    ),
    # vllm-ascend#2210: numpy 2.0.2 beside CANN 8.2.1: the op compiler cannot start, torch_npu's set_device fails
    (
        "A module that was compiled using NumPy 1.x cannot be run in\nNumPy 2.0.2 as it may crash. To support both "
        "1.x and 2.x\n"
        + TB
        + "RuntimeError: SetPrecisionMode:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:155 NPU function error: "
        "at_npu::native::AclSetCompileopt(aclCompileOpt::ACL_PRECISION_MODE, precision_mode), error code is 500001\n"
        "[ERROR] 2025-08-05-08:05:26 (PID:504068, Device:0, RankID:-1) ERR00100 PTA call acl api failed\n",
        "numpy-abi",
        ("numpy<2",),
    ),
    # MinerU#2258: the same CANN op-compiler failure without the numpy banner in the tail
    (
        TB + "RuntimeError: Initialize:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:217 NPU function error: "
        "at_npu::native::AclSetCompileopt(aclCompileOpt::ACL_PRECISION_MODE, precision_mode), error code is 500001\n"
        "[ERROR] 2025-04-16-13:15:02 (PID:1, Device:0, RankID:-1) ERR00100 PTA call acl api failed\n",
        "cann-env",
        ("numpy<2", "set_env"),
    ),
    # Ascend/pytorch#29: TBE init fails (tbe.common not importable)
    (
        "[ERROR] TEFUSION(2440326,python):2024-04-08-15:18:43.444.546 [fusion_manager.cc:660]2440326 InitCannKB call "
        "CannKbInit failed. res = [3]. init params: [Ascend910B2, 24, ].\n"
        "[ERROR] TEFUSION(2440326,python):2024-04-08-15:18:43.444.552 [fusion_manager.cc:497]2440326 TbeInit "
        "Failed to call InitCannKB\n",
        "cann-env",
        ("set_env",),
    ),
    # Model-Optimizer#87 / QwenPaw#437: numpy 2 banner and the failure after it
    (
        "A module that was compiled using NumPy 1.x cannot be run in\nNumPy 2.1.2 as it may crash.\n"
        + TB
        + "AttributeError: _ARRAY_API not found\n",
        "numpy-abi",
        ("numpy<2",),
    ),
    # atrain_core#10: numpy 2 removed names
    (
        TB + "AttributeError: `np.NaN` was removed in the NumPy 2.0 release. Use `np.nan` instead.\n",
        "numpy-abi",
        ("numpy<2",),
    ),
]


@pytest.mark.parametrize("text,cause,words", FAMILY1, ids=[f"{i}-{c}" for i, (_, c, _w) in enumerate(FAMILY1)])
def test_family1_native_library_and_abi_mismatches_are_the_containers_environment(text, cause, words):
    """Environment, not a kernel fault and not memory: config-error, stop, and the action (or, for an import, the
    fix) names what to pair with what."""
    v = _v(text)
    assert (v.cls, v.action_kind, v.detail.get("cause")) == ("config-error", "stop", cause), (v.evidence, v.detail)
    said = v.action + " " + v.hint
    for w in words:
        assert w.lower() in said.lower(), (w, v.action)
    assert "kernel" not in v.action.lower()


def test_family1_a_numpy_banner_alone_does_not_hide_a_later_oom():
    """numpy's banner is often only a warning: an OOM after it is still the OOM (the banner is demoted like a caught
    import failure)."""
    text = (
        "A module that was compiled using NumPy 1.x cannot be run in\nNumPy 2.0.0 as it may crash.\n"
        + TB
        + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79 GiB\n"
    )
    assert _v(text).cls == "oom-device"


def test_family1_torchs_numpy_warning_and_vllms_C_warning_are_no_verdict():
    """torch's 'Failed to initialize NumPy: _ARRAY_API not found' UserWarning and vLLM's 'Failed to import from
    vllm._C with ImportError(...undefined symbol...)' WARNING on Ascend (vllm-ascend#1033) are warnings of a healthy
    run: a run that ends with exit 0 is a success, a running one stays inconclusive."""
    text = (
        "/usr/lib/python3/site-packages/torch/_subclasses/functional_tensor.py:276: UserWarning: Failed to initialize "
        "NumPy: _ARRAY_API not found (Triggered internally at /pytorch/torch/csrc/utils/tensor_numpy.cpp:81.)\n"
        "WARNING 05-30 14:36:52 [_custom_ops.py:21] Failed to import from vllm._C with ImportError('/root/vllm/_C.abi3"
        ".so: undefined symbol: _ZN3c108ListType3getE')\n"
        "(TaskRunner pid=1) step:1 - actor/pg_loss:0.1\n"
    )
    assert _v(text, exit_code=None).cls == "crash-other" and _v(text, exit_code=None).detail.get("inconclusive")
    assert _v(text, exit_code=0).cls == "success"


# ------------------------------------------------------------------ family 2: tracker server / client version

FAMILY2_FATAL = [
    # SwanHubX/self-hosted#94: self-hosted v2.6.2, an old SDK (fixed by swanlab 0.7.4)
    (
        TB + "requests.exceptions.RetryError: HTTPConnectionPool(host='192.0.2.7', port=8000): Max retries exceeded "
        "with url: /api/project/alice/runs/abc/sts (Caused by ResponseError('too many 500 error responses'))\n",
        "swanlab",
        "500",
    ),
    # the SDK's ApiError at init (swanlab 0.7 error.py; self-hosted#85's 404 on /api/resources/presigned/put)
    (
        TB + "swanlab.error.ApiError: ('Trace id: mj6i94411qfkqnzu', 'POST http://192.0.2.7/api/resources/presigned/"
        "put', '404 Not Found')\n",
        "swanlab",
        "404",
    ),
    # wandb#6770: client 0.16.1 against an older wandb/local (GraphQL schema)
    (
        TB + 'wandb.errors.CommError: Cannot query field "versionOnThisInstanceString" on type "LocalVersionInfo".\n',
        "wandb",
        "schema",
    ),
    # wandb#7267: the server's own 500 at init
    (
        "wandb: ERROR Error while calling W&B API: An internal error occurred. Please contact support. "
        "(<Response [500]>)\n" + TB + "wandb.errors.CommError: An internal error occurred. Please contact support.\n",
        "wandb",
        "500",
    ),
    # Azure/azure-sdk-for-python#44896: an MLflow 3.x client against a server without the logged-models endpoint
    (
        TB + "mlflow.exceptions.MlflowException: API request to endpoint /api/2.0/mlflow/logged-models failed with "
        "error code 404 != 200. Response body: ''\n",
        "mlflow",
        "404",
    ),
]


@pytest.mark.parametrize("text,tracker,status", FAMILY2_FATAL, ids=[f"{t}-{s}" for _, t, s in FAMILY2_FATAL])
def test_family2_a_tracker_server_rejecting_this_client_at_init_is_neither_auth_nor_network(text, tracker, status):
    v = _v(text)
    assert (v.cls, v.action_kind, v.detail.get("cause")) == ("config-error", "stop", "tracker-version"), v.evidence
    assert (v.detail.get("tracker"), v.detail.get("status")) == (tracker, status)
    assert "version" in v.action and tracker in v.action


@pytest.mark.parametrize(
    "line",
    [
        # SwanHubX/self-hosted#85: SDK 0.7.4 on a v2.5.0 server, while the run goes on
        "swanlab: swanlab api error ('Trace id: mj6i94411qfkqnzu', 'POST http://192.0.2.7/api/resources/presigned/put',"
        " '404 Not Found')",
        # SwanHubX/self-hosted#13: SDK 0.5.6 on a v1.1 server
        "swanlab: swanlab api error, status code: 404, reason: Not Found",
    ],
)
def test_family2_the_same_while_training_goes_on_keeps_running(line):
    text = f"{TR}step:3 - actor/pg_loss:0.1\n{TR}{line}\n{TR}step:4 - actor/pg_loss:0.1\n{TR}{line}\n"
    v = _v(text, exit_code=None)
    assert (v.cls, v.action_kind, v.detail.get("cause")) == ("config-error", "keep-running", "tracker-version")


def test_family2_swanlab_499_and_401_keep_their_classes():
    """The CDN's 499 stays tracker network trouble and a 401 stays an auth error (cases 29 and 33 hold)."""
    net = (
        f"{TR}step:1 - a:1\n{TR}swanlab: swanlab api error, status code: 499, reason: status code 499\n"  # SwanLab#948
    )
    auth = f"{TR}step:1 - a:1\n{TR}swanlab: swanlab api error ('Trace id: 1', 'POST https://api.swanlab.cn/api/house/metrics', '401 Authorization Required')\n"
    assert _v(net, exit_code=None).cls == "network"
    assert _v(auth, exit_code=None).cls == "auth-error"


# ------------------------------------------------------------------ family 3: the reward function names the data

FAMILY3 = [
    # AReaL#105: an empty data_source column
    (TB + "NotImplementedError: Reward function is not implemented for data_source=''\n", "''"),
    # DoctorAgent-RL#10: a data_source verl has no scorer for
    (
        TB + "NotImplementedError: Reward function is not implemented for data_source='medical_consultation'\n",
        "'medical_consultation'",
    ),
    # verl#5558: Ray-wrapped, in _validate (verl/utils/reward_score/__init__.py:107)
    (
        "ray.exceptions.RayTaskError(NotImplementedError): ray::TaskRunner.run() (pid=2991687, ip=192.0.2.69)\n"
        '  File "/appdata/verl/verl/utils/reward_score/__init__.py", line 107, in default_compute_score\n'
        '    raise NotImplementedError(f"Reward function is not implemented for {data_source=}")\n'
        "NotImplementedError: Reward function is not implemented for data_source='gsm8k_local'\n",
        "'gsm8k_local'",
    ),
    # verl <= 0.2 main_ppo.py _select_rm_score_fn: a bare NotImplementedError under its frame
    (
        TB + '  File "/workspace/verl/verl/trainer/main_ppo.py", line 31, in _select_rm_score_fn\n'
        "    raise NotImplementedError\nNotImplementedError\n",
        None,
    ),
    # verl 0.9.1 utils/reward_score/__init__.py:59: data_source None
    (
        TB + '  File "/usr/local/lib/python3.12/site-packages/verl/utils/reward_score/__init__.py", line 59, in '
        'default_compute_score\n    elif data_source in ["math_dapo", "math", "math_dapo_reasoning"] or '
        'data_source.startswith("aime"):\n'
        "AttributeError: 'NoneType' object has no attribute 'startswith'\n",
        None,
    ),
]


@pytest.mark.parametrize("text,source", FAMILY3, ids=[str(i) for i in range(len(FAMILY3))])
def test_family3_a_reward_function_without_a_scorer_for_the_data_source_is_a_data_error(text, source):
    v = _v(text)
    assert (v.cls, v.action_kind, v.detail.get("cause")) == ("data-error", "stop", "reward-source"), v.evidence
    assert v.detail.get("data_source") == source
    assert "custom_reward_function" in v.action and "memory" not in v.action.replace("no memory change", "")


def test_family3_a_bare_notimplementederror_elsewhere_is_not_the_reward():
    text = (
        TB + '  File "/w/verl/models/foo.py", line 3, in forward\n    raise NotImplementedError\nNotImplementedError\n'
    )
    assert _v(text).cls == "crash-other"


# ------------------------------------------------------------------ family 4: Ray's unpickling error hides the error

_UNPICKLE = (
    "ray.exceptions.RaySystemError: System error: Failed to unpickle serialized exception\n"
    "traceback: Traceback (most recent call last):\n"
    '  File "/usr/local/lib/python3.10/site-packages/ray/exceptions.py", line 51, in from_ray_exception\n'
    "    return pickle.loads(ray_exception.serialized_exception)\n"
    "TypeError: {cls}.__init__() missing {n} required {kind} argument{s}: {args}\n\n"
    "The above exception was the direct cause of the following exception:\n\n"
    "RuntimeError: Failed to unpickle serialized exception\n"
)


def test_family4_backendcompilerfailed_behind_rays_unpickling_is_a_torch_compile_failure():
    """verl#2360 / verl#3618 (Ascend, use_remove_padding) / ray#54341 / Tool-Star#11: only Ray's TypeError names the
    class."""
    text = _UNPICKLE.format(cls="BackendCompilerFailed", n=1, kind="positional", s="", args="'inner_exception'")
    v = _v(text)
    assert (v.cls, v.action_kind, v.detail.get("cause")) == ("crash-other", "stop", "torch-compile")
    assert "use_torch_compile=False" in v.action


def test_family4_the_worker_error_before_the_wrapper_is_the_verdict():
    """Mem-alpha#12: an openai APIStatusError could not be unpickled; the worker printed the real error first."""
    text = f"{TR}openai.BadRequestError: Error code: 400 - {{'error': 'max_tokens is too large'}}\n" + _UNPICKLE.format(
        cls="APIStatusError", n=2, kind="keyword-only", s="s", args="'response' and 'body'"
    )
    v = _v(text)
    assert (v.cls, v.detail.get("cause")) == ("crash-other", "ray-unpickle")
    assert "BadRequestError" in v.detail["error"] and "BadRequestError" in v.action


def test_family4_a_root_cause_before_the_wrapper_wins():
    """Seg-Zero#63 then Seg-Zero#7: the ld error in the worker log, then Ray's unpickling of BackendCompilerFailed."""
    text = f"{TR}/usr/bin/ld: cannot find -lcuda\n{TR}collect2: error: ld returned 1 exit status\n" + _UNPICKLE.format(
        cls="BackendCompilerFailed", n=1, kind="positional", s="", args="'inner_exception'"
    )
    v = _v(text)
    assert (v.cls, v.detail.get("cause"), v.detail.get("library")) == ("config-error", "toolchain", "cuda")


# ------------------------------------------------------------------ family 5: vLLM's engine death names its cause

_V0_DEAD = (
    "ERROR 07-01 08:12:10 async_llm_engine.py:52] Engine background task failed\n"
    "ERROR 07-01 08:12:10 async_llm_engine.py:52] Traceback (most recent call last):\n"
    'ERROR 07-01 08:12:10 async_llm_engine.py:52]   File "/opt/conda/lib/python3.10/site-packages/vllm/worker/'
    'model_runner.py", line 1654, in execute_model\n'
    "ERROR 07-01 08:12:10 async_llm_engine.py:52] {err}\n"
    "vllm.engine.async_llm_engine.AsyncEngineDeadError: Task finished unexpectedly. This should never happen! Please "
    "open an issue on Github. See stack trace above for the actual cause.\n"
)
_V1_DEAD = (
    "(EngineCore_0 pid=1) ERROR 08-06 21:18:16 [core.py:700] EngineCore encountered a fatal error.\n"
    "(EngineCore_0 pid=1) ERROR 08-06 21:18:16 [core.py:700] Traceback (most recent call last):\n"
    "(EngineCore_0 pid=1) ERROR 08-06 21:18:16 [core.py:700] {err}\n"
    "(APIServer pid=57071) ERROR 08-06 21:18:16 [async_llm.py:704] vllm.v1.engine.exceptions.EngineDeadError: "
    "EngineCore encountered an issue. See stack trace (above) for the root cause.\n"
)


@pytest.mark.parametrize("tmpl", [_V0_DEAD, _V1_DEAD], ids=["v0-background-task", "v1-engine-dead"])
@pytest.mark.parametrize(
    "err,cls,cause",
    [
        ("RuntimeError: CUDA error: an illegal memory access was encountered", "crash-other", "illegal-memory"),
        ("/usr/bin/ld: cannot find -lcuda", "config-error", "toolchain"),
        ("ValueError: Token id 151665 is out of vocabulary", "crash-other", "engine-dead"),
    ],
)
def test_family5_vllm_engine_death_is_classified_by_the_first_error_before_it(tmpl, err, cls, cause):
    """vLLM V0 async_llm_engine.py _log_task_completion ('Engine background task failed', AsyncEngineDeadError) and
    V1 core.py / v1/engine/exceptions.py ('EngineCore encountered a fatal error.', EngineDeadError)."""
    v = _v(tmpl.format(err=err))
    assert (v.cls, v.detail.get("cause")) == (cls, cause), (v.evidence, v.detail)
    if cause == "engine-dead":
        assert "Token id 151665" in v.detail["error"] and "Token id 151665" in v.action
        assert "EngineDeadError" not in v.detail["error"]


def test_family5_a_device_oom_inside_the_engine_is_the_rollouts_memory():
    v = _v(_V1_DEAD.format(err="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB."))
    assert v.cls in ("oom-kv-cache", "oom-device") and v.action_kind != "stop"


@settings(max_examples=60, deadline=None)
@given(
    name=st.from_regex(r"[A-Z][a-z]{2,9}Error", fullmatch=True),
    msg=st.from_regex(r"[a-z][a-z ]{3,30}[a-z]", fullmatch=True),
    v1=st.booleans(),
)
def test_family5_any_first_error_is_named_not_the_wrapper(name, msg, v1):
    """Property: whatever plain Python error the engine died of, the verdict names that error, never the wrapper,
    and never escalates memory."""
    v = _v((_V1_DEAD if v1 else _V0_DEAD).format(err=f"{name}: {msg}"))
    assert v.action_kind != "escalate-memory"
    if v.detail.get("cause") == "engine-dead":
        assert v.detail["error"].endswith(f"{name}: {msg}")
