"""Unit tests of dapo_ops.core.classify: contract, per-line OOM check, traps, tail reading, robustness, CLIs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dapo_ops.core import classify as C
from dapo_ops.core import policy
from dapo_ops.core.classify.decide import decide as classify_decide

ROOT = Path(__file__).resolve().parents[1]
CASES = Path(__file__).parent / "cases"
VENV_BIN = Path(sys.executable).parent

CUDA_OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 13.91 GiB. GPU 0 has a total capacity of "
    "79.11 GiB of which 8.85 GiB is free."
)
NPU_OOM = (
    "RuntimeError: NPU out of memory. Tried to allocate 4.64 GiB (NPU 3; 60.96 GiB total capacity; 52.18 GiB "
    "already allocated; 3.02 GiB free; 56.84 GiB reserved in total by PyTorch)"
)


# ------------------------------------------------------------------ contract


def test_classes_kinds_and_table_agree():
    assert len(C.CLASSES) == 14 and len(set(C.CLASSES)) == 14  # + diverged (item 1), data-ran-out (item 4)
    assert set(C.CLASS_TABLE) == set(C.CLASSES)
    for cls in C.CLASSES:
        row = C.CLASS_TABLE[cls]
        assert row["symptoms"] and row["cause"] and row["tool"] and row["you"]
    escalating = [c for c, rules in policy.POLICY.items() if any(r.kind is policy.Kind.ESCALATE_MEMORY for r in rules)]
    assert escalating == ["oom-device"]


def test_verdict_to_json_roundtrip():
    v = C.classify(CUDA_OOM, exit_code=1)
    data = json.loads(json.dumps(v.to_json()))
    assert set(data) == {"cls", "action_kind", "action", "hint", "evidence", "detail"}
    assert C.Verdict(**data) == v


# ------------------------------------------------------------------ is_device_oom_line


@pytest.mark.parametrize(
    "line",
    [
        CUDA_OOM,
        NPU_OOM,
        "\x1b[36m(WorkerDict pid=4630, ip=192.0.2.21)\x1b[0m " + NPU_OOM,
        "[rank3]: torch.OutOfMemoryError: NPU out of memory. NPUWorkspaceAllocator tried to allocate 1.00 GiB",
        "RuntimeError: cuda out of memory. tried to allocate 20.00 mib (gpu 0; 15.78 gib total capacity)",
        "(WorkerDict pid=1) [ERROR] 2025-11-02-07:41:19 (PID:1502, Device:2, RankID:2) ERR01006 OPS memory error",
        "EL0004: [PID: 1502] 2025-11-02-07:41:19.331.204 Failed to allocate memory.",
        "RuntimeError: CUDA error: out of memory",
    ],
)
def test_is_device_oom_line_fires(line):
    assert C.is_device_oom_line(line)


@pytest.mark.parametrize(
    "line",
    [
        "Error executing job with overrides: ['actor_rollout_ref.actor.fsdp_config.param_offload=False', "
        "'trainer.experiment_name=cuda out of memory repro']",
        "+ python3 -m verl.trainer.main_ppo trainer.experiment_name='NPU out of memory test' param_offload=True",
        "(TaskRunner pid=1)                        'experiment_name': 'CUDA out of memory sweep',",
        "(TaskRunner pid=1) {'oom_retries': 2, 'offload': True, 'gpu_memory_utilization': 0.6}",
        "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
        "Refer to the documentation on how to address the out of memory issue: https://docs.ray.io/...",
        "The actor is dead ... There are some potential root causes. (1) The process is killed by SIGKILL by OOM killer "
        "due to high memory usage. (2) ray stop --force is called. (3) The worker is crashed unexpectedly due to SIGSEGV "
        "or other unexpected errors.",
        "RuntimeError: NPU out of memory. Tried to allocate 8388608.00 GiB (NPU 0; 60.96 GiB total capacity)",
        "(TaskRunner pid=1) step:3 - perf/max_memory_allocated_gb:61.2 - perf/max_memory_reserved_gb:70.1",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "Malloc pin memory failed, host out of memory",
        "",
    ],
)
def test_is_device_oom_line_ignores_echo_and_boilerplate(line):
    assert not C.is_device_oom_line(line)


def test_is_device_oom_line_agrees_with_corpus():
    """Every device/KV OOM case has at least one line that fires; success/config cases have none."""
    for expect in sorted(CASES.glob("*/*.expect")):
        cls = expect.read_text().splitlines()[0].split(":", 1)[1].strip()
        text = expect.with_suffix(".log").read_text(encoding="utf-8")
        if "===== dapo-ops attempt" in text:  # earlier attempts may hold another class's lines
            text = text[text.rfind("===== dapo-ops attempt 2 start") :]
        lines = text.splitlines()
        fired = [ln for ln in lines if C.is_device_oom_line(ln)]
        if cls == "oom-device":
            assert fired, expect.name
        if cls in ("success", "config-error", "data-error", "auth-error", "oom-ray", "network"):
            assert not fired, (expect.name, fired)


# ------------------------------------------------------------------ precedence and traps


def test_success_beats_error_words_and_exit_code():
    log = "(TaskRunner pid=1) Total training steps: 3\n(TaskRunner pid=1) step:3 - x:1\n"
    assert C.classify(log).cls == "success"
    assert C.classify(log + "RuntimeError: boom during teardown\n", exit_code=1).detail["teardown_error"] is True
    assert C.classify("step:5 - a:1\n", planned_total=5).cls == "success"
    assert C.classify("step:4 - a:1\n", planned_total=5).cls == "crash-other"


def test_exit_zero_is_success_unless_a_root_cause_is_printed():
    assert C.classify("step:4 - a:1\nsome warning: error words\n", exit_code=0).cls == "success"
    # `| tee` pipelines report 0 even when python died: the printed root cause decides
    assert C.classify("step:4 - a:1\n" + CUDA_OOM + "\n", exit_code=0).cls == "oom-device"


def test_container_oomkilled_beats_text():
    v = C.classify(
        "step:4 - a:1\nray.exceptions.ActorDiedError: The actor died unexpectedly\n",
        exit_code=137,
        container_state={"OOMKilled": True},
    )
    assert (v.cls, v.action_kind) == ("oom-host", "rollback-offload")
    v = C.classify("step:4\n", container_state={"State": None, "oom_killed": "true"})
    assert v.cls == "oom-host"


def test_bare_137_is_sigkill_not_host_oom():
    for state in (None, {"OOMKilled": False}):
        v = C.classify("step:4 - a:1\n", exit_code=137, container_state=state)
        assert (v.cls, v.detail["cause"]) == ("crash-other", "sigkill")
    assert C.classify("step:4 - a:1\n", exit_code=-9).detail["exit_code"] == 137
    assert C.classify("step:4 - a:1\nKilled\n", exit_code=137).cls == "oom-host"


def test_earliest_root_cause_wins_and_collectives_are_symptoms():
    timeout = (
        "[rank1]:[E1 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=77, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600009 milliseconds"
    )
    v = C.classify(timeout + "\n[rank0]: " + CUDA_OOM + "\n", exit_code=1)
    assert v.cls == "oom-device"
    v = C.classify(timeout + "\n", exit_code=1)
    assert (v.cls, v.detail["init"]) == ("hccl-timeout", False)
    both = "[rank2]: ValueError: Total available GPUs 4.0 is less than total desired GPUs 8\n[rank0]: " + CUDA_OOM
    assert C.classify(both, exit_code=1).cls == "config-error"


def test_error_followed_by_progress_is_not_fatal():
    log = f"step:1 - a:1\n(WorkerDict pid=3) {CUDA_OOM}\nstep:2 - a:1\n"
    v = C.classify(log)
    assert v.cls == "crash-other" and v.detail.get("inconclusive")


def test_kv_direction_and_phase():
    kv = (
        "(Worker_TP0 pid=9) ERROR 02-07 18:18:59 [multiproc_executor.py:824] " + NPU_OOM + "\n"
        "(EngineCore_DP0 pid=8) ERROR 02-07 18:18:59 [core.py:866] EngineCore failed to start.\n"
    )
    v = C.classify(kv, exit_code=1)
    assert (v.cls, v.action_kind, v.detail["kv_direction"]) == ("oom-kv-cache", "adjust-rollout-memory", "lower")
    assert "offload" not in v.action.replace("never offload", "")


def test_config_keys_with_ladder_words_are_not_oom():
    log = (
        "Could not override 'actor_rollout_ref.actor.oom_offload_gb'.\n"
        "To append to your config use +actor_rollout_ref.actor.oom_offload_gb=4\n"
        "Key 'oom_offload_gb' is not in struct\n    full_key: actor_rollout_ref.actor.oom_offload_gb\n"
    )
    v = C.classify(log, exit_code=1)
    assert (v.cls, v.detail["key"]) == ("config-error", "actor_rollout_ref.actor.oom_offload_gb")


def test_repeated_and_carriage_return_lines():
    log = (
        "(TaskRunner pid=1) Training Progress:  50%|█   | 1/2 [00:01<00:01]\r"
        "(TaskRunner pid=1) Training Progress: 100%|██| 2/2 [00:02<00:00]\rstep:2 - a:1\n"
        "(WorkerDict pid=2) thread: Resource temporarily unavailable [system:11] [repeated 4x across cluster] "
        "(Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to disable log deduplication.)\n"
    )
    assert C.classify(log).cls == "success"
    v = C.classify(log.replace("100%|██| 2/2", "50%|█ | 1/2").replace("step:2", "step:1"), exit_code=1)
    assert (v.cls, v.detail["cause"]) == ("crash-other", "thread-limit")
    assert v.evidence == ["thread: Resource temporarily unavailable [system:11]"]


def test_nonfatal_tracker_401_while_running():
    log = "step:4 - a:1\n(TaskRunner pid=1) swanlab: swanlab api error ('Trace id: 1', 'POST https://api.swanlab.cn/api/house/metrics', '401 Authorization Required')\n"
    v = C.classify(log)
    assert (v.cls, v.action_kind, v.detail["fatal"]) == ("auth-error", "keep-running", False)


# ------------------------------------------------------------------ robustness

# ``classify()`` turns any exception into a ``classifier-error`` verdict, so these call the decision itself
# (``dapo_ops.core.classify.decide.decide``, which lets an exception through): an input that makes it raise fails.


def _sound(v) -> None:
    assert v.cls in C.CLASSES, v
    assert v.action_kind == policy.kind(v.cls, v.detail).value, v
    assert v.action and "\n" not in v.action and v.hint


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_decide_handles_any_text(text):
    _sound(classify_decide(text, None, None, None))
    C.is_device_oom_line(text)


@settings(max_examples=200, deadline=None)
@given(
    st.binary(),
    st.one_of(st.none(), st.integers(-300, 300)),
    st.one_of(
        st.none(),
        st.dictionaries(
            st.sampled_from(["OOMKilled", "ExitCode", "Status", "exists"]),
            st.one_of(st.booleans(), st.integers(), st.text(max_size=5)),
        ),
    ),
)
def test_decide_handles_bytes_and_odd_inputs(data, code, state):
    _sound(classify_decide(data, code, state, None))


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                CUDA_OOM,
                NPU_OOM,
                "step:3 - a:1",
                "Total training steps: 3",
                "\x1b[31m",
                "(WorkerDict pid=1) ",
                "\r",
                "Killed",
                "ray.exceptions.ActorDiedError: x",
                "Error executing job with overrides: ['a=b']",
                "Could not override 'x.y'.",
                "[repeated 2x across cluster]",
                "===== dapo-ops attempt 2 start x =====",
            ]
        ),
        max_size=30,
    )
)
def test_decide_handles_shuffled_fragments(parts):
    v = classify_decide("\n".join(parts), 1, None, None)
    _sound(v)
    last = max((i for i, p in enumerate(parts) if p.startswith("===== dapo-ops attempt")), default=-1)
    if "step:3 - a:1" not in parts[last + 1 :]:  # exit 1 and no step line in the judged attempt: never a success
        assert v.cls != "success", v


# ------------------------------------------------------------------ classify_file tail


def test_classify_file_reads_only_the_tail(tmp_path):
    p = tmp_path / "train.log"
    head = "(WorkerDict pid=1) " + CUDA_OOM + "\n"
    filler = "(TaskRunner pid=1) step:1 - a:1\n" * 2000
    tail = "(TaskRunner pid=1) Total training steps: 9\n(TaskRunner pid=1) step:9 - a:1\n"
    p.write_text(head + filler + tail)
    assert C.classify_file(p, tail_bytes=4096).cls == "success"
    assert C.classify_file(p, tail_bytes=10 << 20, exit_code=1).cls == "success"
    p.write_text(tail + filler + head)
    assert C.classify_file(p, tail_bytes=4096, exit_code=1).cls == "oom-device"


def test_classify_file_drops_partial_first_line(tmp_path):
    p = tmp_path / "t.log"
    p.write_text("x" * 100 + "ValueError: Total available GPUs 4.0 is less than total desired GPUs 8\nstep:2 - a:1\n")
    # the tail starts inside the error line: it must not be half-read
    v = C.classify_file(p, tail_bytes=40, exit_code=1)
    assert v.cls == "crash-other"


def test_classify_file_errors(tmp_path):
    with pytest.raises(OSError):
        C.classify_file(tmp_path / "missing.log")
    with pytest.raises(OSError):
        C.classify_file(tmp_path)


# ------------------------------------------------------------------ stdlib only / module CLI


def test_module_is_stdlib_only_and_runs_standalone(tmp_path):
    code = (
        "import sys; sys.path.insert(0, %r); import dapo_ops.core.classify as c; "
        "print(c.classify(open(%r).read(), exit_code=1).cls)"
    ) % (str(ROOT), str(CASES / "handed" / "case-04-npu-oom-update-actor-raywrapped.log"))
    out = subprocess.run([sys.executable, "-S", "-I", "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "oom-device"


def test_python_m_json_output():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "dapo_ops.core.classify",
            str(CASES / "handed" / "case-06-vllm-maxlen-exceeds-kvcache.log"),
            "--exit-code",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert (data["cls"], data["detail"]["kv_direction"]) == ("oom-kv-cache", "raise")


# ------------------------------------------------------------------ operator CLIs


def _cli(*argv, prog="dapo-ops"):
    exe = VENV_BIN / prog
    return subprocess.run(
        [str(exe), *argv], capture_output=True, text=True, timeout=120, cwd=ROOT, env=dict(os.environ, NO_COLOR="1")
    )


@pytest.mark.parametrize("prog", ["dapo-ops", "inv"])
def test_cli_prints_the_oom_phase(prog):
    log = ROOT / "tests" / "fixtures" / "real-verl" / "verl-run-3-oom.log"
    out = _cli("classify", str(log), prog=prog)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "class: oom-device" and "phase: weight-sync" in lines[:5], out.stdout


@pytest.mark.parametrize("prog", ["dapo-ops", "inv"])
def test_cli_first_two_lines(prog):
    out = _cli("classify", str(CASES / "handed" / "case-12-host-oom-killed-137.log"), "--exit-code", "137", prog=prog)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "class: oom-host"
    assert lines[1].startswith("action: ") and len(lines[1]) > 20
    assert "evidence:" in out.stdout and "hint:" in out.stdout


def test_cli_flags_and_errors(tmp_path):
    log = tmp_path / "t.log"
    log.write_text("(TaskRunner pid=1) step:4 - a:1\n")
    out = _cli("classify", str(log), "--exit-code", "137", "--oom-killed", "true")
    assert out.stdout.splitlines()[0] == "class: oom-host"
    out = _cli("classify", "--logfile", str(log), "--exit-code", "137", "--oom-killed", "false", "--json")
    assert out.stdout.splitlines()[0] == "class: crash-other"
    assert json.loads("\n".join(out.stdout.splitlines()[2:]))["detail"]["cause"] == "sigkill"
    out = _cli("classify", str(tmp_path / "nope.log"))
    assert out.returncode != 0 and out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1 and "cannot read" in out.stderr
    out = _cli("classify", str(log), "--exit-code", "boom")
    assert out.returncode != 0 and len(out.stderr.strip().splitlines()) == 1


# ------------------------------------------------------------------ OOM phase, device codes, physical sense


def _oom_in(frames, accel="cuda"):
    line = C_OOM_CUDA if accel == "cuda" else C_OOM_NPU
    body = ["(TaskRunner pid=1) step:2 - a:1", "(WorkerDict pid=5) Traceback (most recent call last):"]
    body += [f'(WorkerDict pid=5)   File "/verl/{f}.py", line 10, in {fn}' for f, fn in frames]
    return "\n".join(body + [f"(WorkerDict pid=5) {line}"]) + "\n"


C_OOM_CUDA = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
    "of 79.19 GiB of which 1.02 GiB is free."
)
C_OOM_NPU = (
    "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 0; 60.96 GiB total capacity; "
    "57.00 GiB already allocated; 1.00 GiB free)"
)


@pytest.mark.parametrize("accel", ["cuda", "npu"])
@pytest.mark.parametrize(
    "frames,phase",
    [
        ([("trainer", "fit"), ("fsdp_workers", "update_actor"), ("dp_actor", "update_policy")], "update"),
        ([("fsdp_workers", "compute_ref_log_prob"), ("dp_actor", "_forward_micro_batch")], "log-prob"),
        # priority, not nesting order: a wake-up inside generate_sequences is the weight sync
        (
            [("fsdp_workers", "generate_sequences"), ("sharding_manager", "__enter__"), ("vllm_rollout", "wake_up")],
            "weight-sync",
        ),
        (
            [
                ("main_ppo", "run"),
                ("ray_trainer", "_load_checkpoint"),
                ("fsdp_checkpoint_manager", "load_checkpoint"),
                ("module", "load_state_dict"),
            ],
            "checkpoint-load",
        ),
        (
            [
                ("fsdp_workers", "init_model"),
                ("fsdp_workers", "_build_model_optimizer"),
                ("modeling_utils", "from_pretrained"),
            ],
            "model-load",
        ),
        ([("fsdp_workers", "save_checkpoint"), ("fsdp_checkpoint_manager", "save_checkpoint")], "checkpoint-save"),
        ([("trainer", "fit"), ("torch/nn/modules/module", "_call_impl")], "unknown"),
    ],
)
def test_oom_phase_from_frames_cuda_and_npu(frames, phase, accel):
    v = C.classify(_oom_in(frames, accel), exit_code=1)
    assert (v.cls, v.detail["phase"]) == ("oom-device", phase), v.detail
    assert phase in C.PHASES


def test_oom_phase_from_the_driver_traceback_after_the_worker_error():
    log = (
        _oom_in([("vllm/v1/worker/gpu_worker", "worker_busy_loop")])
        + 'Traceback (most recent call last):\n  File "/verl/verl/checkpoint_engine/base.py", line 519, in update_weights\n'
        + "ray.exceptions.RayTaskError: ray::WorkerDict.actor_rollout_update_weights()\n"
    )
    assert C.classify(log, exit_code=1).detail["phase"] == "weight-sync"


def test_oom_phase_from_progress_lines_without_frames():
    log = "(TaskRunner pid=1) Resuming from /ckpt/global_step_40\n(WorkerDict pid=2) " + C_OOM_NPU + "\n"
    v = C.classify(log, exit_code=1)
    assert (v.cls, v.action_kind, v.detail["phase"]) == ("oom-device", "stop", "checkpoint-load")


@pytest.mark.parametrize(
    "line,cat",
    [
        ("EL0004: Failed to allocate memory.", "memory"),
        ("OPS function error: aclnnMatmul, error code is 207001", "memory"),
        ("[ERROR] ERR02006 DIST memory error", "memory"),
        ("EI0011: insufficient device memory for HCCL buffer", "memory"),
        ("EI0015: ranktable detect failed", "communication"),  # an EI code never seen before: the family decides
        ("EJ0004: RoCE link down", "communication"),
        ("ERR02017 DIST unknown error", "communication"),
        ("NPU function error: SUSPECT REMOTE ERROR, error code is 507057", "communication"),
        ("EL0001: device 3 is absent", "device-unavailable"),
        ("aclrtSetDevice(device_id_), error code is 107001", "device-unavailable"),
        ("ERR00009 PTA resource unavailable", "device-unavailable"),
        ("EZ9999: Inner Error!", "kernel-fault"),
        # EE1002 / 507046 / 107020 are timeouts of a wait (the stream's tasks, a collective, never finished), not faulty
        # kernels: Ascend/pytorch#48, #43 (tests/cases/variants/v-hccl-ee1002-*, v-hccl-eh9999-task-timeout-*)
        ("EE1002: Stream synchronize timeout.", "communication"),
        ("NPU warning, error code is 507046", "communication"),
        ("NPU warning, error code is 107020", "communication"),
        ("EE1001: The argument is invalid.", "kernel-fault"),
        ("error code is 507035", "kernel-fault"),
        ("E40021: Failed to compile Op [Add]", "kernel-fault"),
        ("[torch_memory_saver.cpp] CUresult error: 2 (out of memory)", "memory"),
        ("step:3 - actor/pg_loss:0.01 - e1234 - global_step_12", None),
    ],
)
def test_device_code_families(line, cat):
    from dapo_ops.core.classify import device_codes

    assert device_codes.category_of(line.lower()) == cat


@pytest.mark.parametrize(
    "line,cause",
    [
        (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 120.00 GiB. GPU 0 has a total capacity of 79.19 GiB "
            "of which 70.00 GiB is free.",
            "impossible-allocation",
        ),
        (
            "RuntimeError: NPU out of memory. Tried to allocate 2.00 MiB (NPU 0; 0 bytes total capacity; 0 bytes already "
            "allocated; 0 bytes free)",
            "device-unavailable",
        ),
    ],
)
def test_oom_that_makes_no_physical_sense_is_not_memory_pressure(line, cause):
    assert not C.is_device_oom_line(line)
    v = C.classify("(WorkerDict pid=1) " + line + "\n", exit_code=1)
    assert (v.cls, v.action_kind, v.detail["cause"]) == ("crash-other", "stop", cause)


# Memory safety by family (tests/cases/variants/SOURCES.md names the reports): host RAM never escalates device
# memory; a hardware / kernel fault, a lost node or a missing runtime is never an OOM; a device OOM stays one
# whatever CUDA boilerplate follows it.
@pytest.mark.parametrize(
    "text,want",
    [
        # host RAM: c10 alloc_cpu.cpp's two wordings, numpy's MemoryError (old and new class name), the kernel's ENOMEM
        (
            "RuntimeError: [enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: not enough memory: you tried to "
            "allocate 31850496000 bytes.",
            ("oom-host", "rollback-offload", "host-alloc"),
        ),
        (
            "MemoryError: Unable to allocate 2.05 GiB for an array with shape (501, 550174) and data type float64",
            ("oom-host", "rollback-offload", "host-alloc"),
        ),
        (
            "numpy._core._exceptions._ArrayMemoryError: Unable to allocate 32.0 GiB for an array with shape "
            "(2048, 2048, 2048, 4) and data type uint8",
            ("oom-host", "rollback-offload", "host-alloc"),
        ),
        ("OSError: [Errno 12] Cannot allocate memory", ("oom-host", "rollback-offload", "host-alloc")),
        # Ray's memory monitor named only by the worker exit type (ray common.proto WorkerExitType)
        (
            "The actor is dead because its worker process has died. Worker exit type: NODE_OUT_OF_MEMORY",
            ("oom-ray", "rollback-offload", None),
        ),
        # hardware / kernel faults: not memory pressure
        (
            "RuntimeError: CUDA error: uncorrectable ECC error encountered\nCompile with `TORCH_USE_CUDA_DSA` to enable "
            "device-side assertions.",
            ("crash-other", "stop", "device-fault"),
        ),
        (
            "RuntimeError: cuda runtime error (39) : uncorrectable ECC error encountered at "
            "/pytorch/aten/src/THC/THCCachingHostAllocator.cpp:265",
            ("crash-other", "stop", "device-fault"),
        ),
        ("RuntimeError: CUDA error: unspecified launch failure", ("crash-other", "stop", "illegal-memory")),
        ("RuntimeError: CUDA error: misaligned address", ("crash-other", "stop", "illegal-memory")),
        (
            "ncclUnhandledCudaError: Call to CUDA function failed.\nLast error:\nCuda failure 'an illegal memory access was "
            "encountered'",
            ("crash-other", "stop", "illegal-memory"),
        ),
        ("RuntimeError: CUDA error: device-side assert triggered", ("crash-other", "stop", "device-assert")),
        # the TORCH_USE_CUDA_DSA advice after a CUDA OOM is not a device-side assert
        (
            "RuntimeError: CUDA error: out of memory\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
            ("oom-device", "escalate-memory", None),
        ),
        # NCCL's own buffers did not fit (older 'NCCL Error 1' wording): a device OOM, not a collective symptom
        (
            "RuntimeError: NCCL Error 1: unhandled cuda error\nLast error:\nCuda failure 'out of memory'",
            ("oom-device", "escalate-memory", None),
        ),
        ("RuntimeError: NCCL Error 1: unhandled cuda error", ("hccl-timeout", "retry-once", None)),
        # a lost node: Ray's "(OOM, preempted node, etc.)" is a list of possibilities, not a host OOM
        (
            "The node with node id: 75b2 and address: 192.0.2.7 and node name: 192.0.2.7 has been marked dead because the "
            "detector has missed too many heartbeats from it. This can happen when a \t(1) raylet crashes unexpectedly "
            "(OOM, preempted node, etc.) \n(2) raylet has lagging heartbeats due to slow network or busy workload.",
            ("crash-other", "stop", "node-died"),
        ),
        (
            "ray.exceptions.LocalRayletDiedError: The task's local raylet died. Check raylet.out for more information.",
            ("crash-other", "stop", "node-died"),
        ),
        # the runtime is missing, not the memory
        (
            "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a "
            "driver from http://www.nvidia.com/Download/index.aspx",
            ("crash-other", "stop", "device-unavailable"),
        ),
        (
            "RuntimeError: The NVIDIA driver on your system is too old (found version 11040).",
            ("config-error", "stop", "runtime-env"),
        ),
        (
            "ImportError: libascendcl.so: cannot open shared object file: No such file or directory",
            ("config-error", "stop", "runtime-env"),
        ),
        (
            "ImportError: libatb.so: cannot open shared object file: No such file or directory",  # vllm-ascend#152
            ("config-error", "stop", "runtime-env"),
        ),
        # another library's harmless probe for CUDA libraries is no root cause: the device OOM after it still escalates
        (
            "W tensorflow/stream_executor/platform/default/dso_loader.cc:64] Could not load dynamic library "
            "'libcudart.so.11.0'; dlerror: libcudart.so.11.0: cannot open shared object file: No such file or directory\n"
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB",
            ("oom-device", "escalate-memory", None),
        ),
        # a Hub lookup of a path that is no repo: the model path, not the network
        (
            "huggingface_hub.errors.RepositoryNotFoundError: 401 Client Error. (Request ID: Root=1-abc)\n\nRepository Not "
            "Found for url: https://huggingface.co/api/models/models/Qwen2.5-7B/revision/main.",
            ("config-error", "stop", "model-path"),
        ),
    ],
)
def test_memory_safety_and_runtime_families(text, want):
    v = C.classify(
        "(WorkerDict pid=1, ip=192.0.2.5) " + text.replace("\n", "\n(WorkerDict pid=1, ip=192.0.2.5) ") + "\n",
        exit_code=1,
    )
    assert (v.cls, v.action_kind, v.detail.get("cause")) == want, (v.evidence, v.detail)
    if want[0] != "oom-device":
        assert not any(C.is_device_oom_line(ln) for ln in text.split("\n")), text


@pytest.mark.parametrize(
    "text,want",
    [
        # datasets arrow_dataset.py _check_if_features_can_be_aligned (concatenate_datasets, verl rl_dataset.py:180)
        (
            "ValueError: The features can't be aligned because the key prompt of features {'prompt': Value(dtype='string')} "
            "has unexpected type - List(...) (expected either Value(dtype='string') or Value(\"null\").",
            ("data-error", "stop", "schema"),
        ),
        # HCCL's own plog record on stdout: a communicator that never came up
        (
            "[ERROR] HCCL(60570,):2025-12-04-14:46:07.911.325 [hccl_comm.cc:115] [60570][HcclComm][Init]errNo"
            "[0x0000000005000007] hccl initialize failed",
            ("hccl-timeout", "retry-once", None),
        ),
    ],
)
def test_data_and_collective_families(text, want):
    v = C.classify("(WorkerDict pid=1) " + text + "\n", exit_code=1)
    assert (v.cls, v.action_kind, v.detail.get("cause")) == want, (v.evidence, v.detail)
    if want[0] == "hccl-timeout":
        assert v.detail["init"] is True


def test_memory_words_and_advice_are_not_an_oom():
    for line in (
        "torch_npu.memory: [ERROR] [7] Get a block from the existing pool failed. This error log can be ignored.",
        "WARNING 11-02 02:02:02 [gpu_worker.py:120] this may cause CUDA out of memory errors",
        "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
    ):
        assert not C.is_device_oom_line(line), line
    assert C.is_device_oom_line("torch.OutOfMemoryError: Tried to allocate 4.64 GiB.")


def test_troubleshooting_doc_hook_renders_other_modules_sections(monkeypatch):
    import types

    mod = types.ModuleType("dapo_ops.core._doc_probe")
    mod.troubleshooting_section = lambda: "## Probe section\n\n| a | b |"
    monkeypatch.setitem(sys.modules, "dapo_ops.core._doc_probe", mod)
    monkeypatch.setattr(C, "DOC_SECTION_MODULES", ("dapo_ops.core._doc_probe",))
    md = C.troubleshooting_md()
    assert "\n## Probe section\n" in md and md.index("## Device error codes") < md.index("## Probe section")


# ------------------------------------------------------------------ data tables are checked (no assert: python -O)


def test_signature_rows_are_checked():
    from dapo_ops.core.classify import signatures as S

    good = ("x", "network", S.ROOT, "abc", r"abc")
    assert [s.name for s in S.build_signatures([good])] == ["x"]
    bad_rows = [
        ("x", "no-such-class", S.ROOT, "abc", r"abc"),  # unknown class
        ("x", "network", 9, "abc", r"abc"),  # unknown tier
        ("x", "network", S.ROOT, "ABC", r"abc"),  # upper-case needle: never found in lower-cased text
        ("x", "network", S.ROOT, (), r"abc"),  # no needle
        ("x", "network", S.ROOT, "abc", r"(abc"),  # bad regex
        ("x", "network", S.ROOT, "abc", r"abc", {"fatl": False}),  # unknown option
        ("x", "network", S.ROOT, "abc"),  # short row
    ]
    for row in bad_rows:
        with pytest.raises(C.ClassifierTableError):
            S.build_signatures([row])
    with pytest.raises(C.ClassifierTableError, match="duplicate"):
        S.build_signatures([good, good])
    assert {s.cls for s in S.SIGNATURES} <= set(C.CLASSES)


def test_device_code_rows_are_checked():
    from dapo_ops.core.classify import device_codes

    with pytest.raises(C.ClassifierTableError, match="category"):
        device_codes._compile([("fam", r"\bez\d{4}\b", "no-such-category", "m", "src")])
    assert len(device_codes._compile(device_codes.FAMILIES)) == len(device_codes.FAMILIES)


def test_hint_tables_are_checked():
    from dapo_ops.core.classify import hints

    hints.check_texts(hints.HINT_RULES, hints.HINTS)
    texts = dict(hints.HINTS, **{"network": "A connection to ${no_such_field} failed."})
    with pytest.raises(C.ClassifierTableError, match="unknown field"):
        hints.check_texts(hints.HINT_RULES, texts)
    with pytest.raises(C.ClassifierTableError, match="no rules or no default"):
        hints.check_texts(hints.HINT_RULES, {k: v for k, v in hints.HINTS.items() if k != "success"})
    rules = dict(hints.HINT_RULES, network=(("cause", "ssh", "network/no-such-text"),))
    with pytest.raises(C.ClassifierTableError, match="names no text"):
        hints.check_texts(rules, hints.HINTS)


def test_phase_and_doc_tables_are_checked(monkeypatch):
    from dapo_ops.core.classify import docs, phase

    monkeypatch.setattr(phase, "PHASE_CONTEXT_RULES", phase.PHASE_CONTEXT_RULES + (("warmup", re.compile("x")),))
    with pytest.raises(C.ClassifierTableError, match="warmup"):
        phase._check_rules()
    monkeypatch.setattr(docs, "PHASE_SIGNS", {p: "x" for p in reversed(C.PHASES)})
    with pytest.raises(C.ClassifierTableError, match="PHASE_SIGNS"):
        docs.check_tables()
    monkeypatch.setattr(docs, "CLASS_TABLE", {k: v for k, v in docs.CLASS_TABLE.items() if k != "success"})
    with pytest.raises(C.ClassifierTableError, match="CLASS_TABLE"):
        docs.check_tables()


def test_table_checks_survive_python_O():
    code = (
        "import sys; sys.path.insert(0, %r); from dapo_ops.core.classify import signatures as S; "
        "S.build_signatures([('x', 'no-such-class', S.ROOT, 'abc', 'abc')])"
    ) % str(ROOT)
    out = subprocess.run([sys.executable, "-O", "-S", "-I", "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "ClassifierTableError" in out.stderr, out.stderr


@pytest.mark.parametrize(
    "text,want",
    [
        # swanlab 0.10 with SWANLAB_INTERACTIVE=false and no key (reference swanlab.md): fatal credentials, not a crash
        (
            "RuntimeError: Failed to initialize SwanLab in online mode: no API key was provided, and interactive prompts "
            "are disabled.",
            ("auth-error", "stop", "key-missing"),
        ),
        # the key was passed and refused by its server (wandb's wording): not "pass the key", which it was
        ("wandb: ERROR API key verification failed", ("auth-error", "stop", "key-rejected")),
        # vLLM's sampler warm-up OOM names the engine's own knobs: the rollout engine's memory, never the training ladder
        (
            "RuntimeError: CUDA out of memory occurred when warming up sampler with 256 dummy requests. Please try lowering "
            "`max_num_seqs` or `gpu_memory_utilization` when initializing the engine.",
            ("oom-kv-cache", "adjust-rollout-memory", None),
        ),
    ],
)
def test_engine_and_tracker_wordings_without_frames(text, want):
    v = C.classify(
        "(TaskRunner pid=1) Using dataset class: RLHFDataset\n(WorkerDict pid=2) " + text + "\n", exit_code=1
    )
    assert (v.cls, v.action_kind, v.detail.get("cause")) == want, (v.evidence, v.detail)
    if want[2] == "key-missing":
        assert "no key in the container" in v.action and "pass the key as an env var" in v.action
    if want[2] == "key-rejected":
        assert "rejected the credentials" in v.action and "pass the key" not in v.action
    if want[0] == "oom-kv-cache":
        assert (v.detail["kv_direction"], v.detail["phase"]) == ("lower", "rollout-init")


@pytest.mark.parametrize(
    "text",
    [
        # verl 0.3-0.4 ray_trainer.py _check_resource_available (the f-string lacks the space before "cannot")
        "ValueError: Resource pool global_pool: 8*2cannot be satisfied in this ray cluster",
        # verl 0.9.1 single_controller/ray/base.py:261 extract_pg_from_exist
        "AssertionError: no enough nodes for request: searching 1 th node",
    ],
)
def test_resource_pool_shortfalls_are_topology_config(text):
    v = C.classify("(TaskRunner pid=1) " + text + "\n", exit_code=1)
    assert (v.cls, v.action_kind, v.detail.get("cause"), v.detail.get("key")) == (
        "config-error",
        "stop",
        "gpus",
        "trainer.n_gpus_per_node",
    ), (v.evidence, v.detail)


def test_bare_device_oom_while_the_engine_captures_cuda_graphs_is_the_engines_memory():
    """vLLM prints "Capturing CUDA graph shapes" (vllm/v1/worker/gpu_model_runner.py capture_model) just before a
    frameless OOM: the rollout engine's start-up (phase rollout-init), never the training memory ladder."""
    log = (
        "(TaskRunner pid=1) Using dataset class: RLHFDataset\n"
        "(WorkerDict pid=2) INFO 06-01 10:00:00 [gpu_model_runner.py:2000] Capturing CUDA graph shapes:  40%|"
        "####      | 27/67 [00:03<00:05,  7.81it/s]\n"
        "(WorkerDict pid=2) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 256.00 MiB. GPU 0 has a "
        "total capacity of 79.10 GiB of which 100.00 MiB is free.\n"
    )
    v = C.classify(log, exit_code=1)
    assert (v.cls, v.action_kind, v.detail["phase"], v.detail["kv_direction"]) == (
        "oom-kv-cache",
        "adjust-rollout-memory",
        "rollout-init",
        "lower",
    ), (v.evidence, v.detail)


@pytest.mark.parametrize(
    "text,key",
    [
        # verl 0.9.1 workers/config/actor.py: the micro batch times the SP size must cover the data-parallel ranks
        (
            "ValueError: ppo_micro_batch_size (4) * ulysses_sequence_parallel_size (1) must be >= n_gpus (8)",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
        ),
        # verl 0.9.1 models/transformers/monkey_patch.py:344 (Ulysses shards attention heads)
        (
            "AssertionError: num_attention_heads 28 must be divisible by ulysses_sp_size 8",
            "actor_rollout_ref.actor.ulysses_sequence_parallel_size",
        ),
        # verl 0.9.1 workers/engine_workers.py:660
        (
            "AssertionError: rollout world_size: 4 is not divisible by infer_world_size: 8",
            "actor_rollout_ref.rollout.tensor_model_parallel_size",
        ),
    ],
)
def test_size_relations_at_start_up_are_config_errors_naming_the_key(text, key):
    v = C.classify("(WorkerDict pid=1) " + text + "\n", exit_code=1)
    assert (v.cls, v.action_kind, v.detail.get("key")) == ("config-error", "stop", key), (v.evidence, v.detail)


def test_a_phase_less_device_oom_says_which_ladder_and_after_which_step():
    """The step in a verdict is the last metrics line: the OOM came after it. A log that names no phase gets the
    phase-less ladder (dapo_ops/core/memladder.py: + offload, then + recompute), said so, not 'phase unknown'."""
    log = (
        "(TaskRunner pid=1) step:7 - actor/pg_loss:0.1 - response_length/mean:100.0\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "79.10 GiB of which 1.50 GiB is free.\n"
    )
    v = C.classify(log, exit_code=1)
    assert v.cls == "oom-device" and v.detail.get("step") == 7
    assert "(no phase in the log: + offload, then + recompute)" in v.action and "unknown" not in v.action, v.action
    assert " after step 7" in (v.hint or "") and " in unknown" not in (v.hint or ""), v.hint


def test_an_oom_after_the_training_bar_is_not_the_checkpoint_load_that_ended_before_it():
    """verl prints 'Resuming from ...' before its checkpoint load (trainer_base.py:392) and creates the 'Training
    Progress' bar in fit (:451), after the load: a phase-less device OOM under the bar is not checkpoint-load (a
    retry skips validation, so the resume line now sits a few lines above the OOM; the sandbox's offload ->
    recompute escalation stopped as checkpoint-load before this rule)."""
    log = "\n".join(
        [
            "(TaskRunnerV1 pid=138) INFO:2026-12-02 02:20:13,847:Resuming from /r/checkpoints/global_step_2, setting "
            "global step to 2",
            "(TaskRunnerV1 pid=138) Training Progress:  40%|####      | 2/5 [00:00<?, ?it/s]",
            "(WorkerDict pid=547) Traceback (most recent call last):",
            '(WorkerDict pid=547)   File "/usr/lib/python3/site-packages/transformers/models/qwen2/modeling_qwen2.py", '
            "line 302, in forward",
            "(WorkerDict pid=547) RuntimeError: NPU out of memory. Tried to allocate 3.12 GiB (NPU 6; 60.96 GiB total "
            "capacity; 52.18 GiB already allocated)",
        ]
    )
    v = C.classify(log, exit_code=1)
    assert v.cls == "oom-device" and v.detail.get("phase") in (None, "unknown"), v.detail
    # without the bar, the resume line is still the context it was (a load that ran out)
    v = C.classify("\n".join(log.splitlines()[:1] + log.splitlines()[2:]), exit_code=1)
    assert v.cls == "oom-device" and v.detail.get("phase") == "checkpoint-load", v.detail


def test_a_missing_entry_module_is_a_config_error_naming_the_module():
    """``python -m recipe.dapo.main_dapo`` on a verl without the recipe submodule (sandbox trial, 2026-12-02: the
    verdict was crash-other with only 'exit code 1' as evidence). runpy's own message only: verl's 'engine is not
    available: ModuleNotFoundError(...)' warnings of every healthy run must not match."""
    from dapo_ops.core import classify as C

    text = (
        "Traceback (most recent call last):\n"
        "/usr/bin/python3: Error while finding module specification for 'recipe.dapo.main_dapo' "
        "(ModuleNotFoundError: No module named 'recipe')\n"
    )
    v = C.classify(text, exit_code=1)
    assert v.cls == "config-error" and v.detail.get("cause") == "entry-module", v
    assert any("recipe.dapo.main_dapo" in e for e in v.evidence)
    assert "recipe submodule" in v.to_json()["hint"] and "VERL_PROFILE" in v.to_json()["hint"]
    healthy = (
        "(WorkerDict pid=1) UserWarning: megatron engine is not available: "
        "ModuleNotFoundError(\"No module named 'megatron'\")\n"
        "step:1 - actor/pg_loss:0.1\n"
    )
    assert C.classify(healthy, exit_code=None).cls != "config-error"


# ------------------------------------------------------------------ Hydra overrides that cannot be applied

_HYDRA_TAIL = "\n\nSet the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.\n"


def _hydra_refusal(*overrides: str) -> str:
    """The message hydra-core itself raises applying ``overrides`` to a struct config shaped like verl's (the
    ``ConfigCompositionException`` verl's ``@hydra.main`` prints before the HYDRA_FULL_ERROR line)."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import ConfigCompositionException
    from omegaconf import OmegaConf

    cfg = OmegaConf.create(
        {"trainer": {"total_epochs": 15, "n_gpus_per_node": 8}, "actor_rollout_ref": {"rollout": {"n": 4}}}
    )
    OmegaConf.set_struct(cfg, True)
    parsed = OverridesParser.create().parse_overrides(list(overrides))
    with pytest.raises(ConfigCompositionException) as e:
        ConfigLoaderImpl._apply_overrides_to_config(parsed, cfg)
    cause = e.value.__cause__
    return str(e.value) + ("\n" + str(cause) if cause is not None and "not in struct" in str(cause) else "")


@pytest.mark.parametrize(
    "override,key,op,fix",
    [
        ("~foo", "foo", "delete", "drop that --override"),
        ("~trainer.total_epochs=3", "trainer.total_epochs", "delete-value", "drop the value (`~trainer.total_epochs`)"),
        ("+trainer.total_epochs=3", "trainer.total_epochs", "append", "`++trainer.total_epochs=VALUE`"),
        (
            "actor_rollout_ref.rollout.nn=16",
            "actor_rollout_ref.rollout.nn",
            "override",
            "`+actor_rollout_ref.rollout.nn",
        ),
    ],
)
def test_hydra_override_refusals_name_the_key_and_the_fix(override, key, op, fix):
    """Every way hydra-core 1.3 refuses to apply an override (its own message, not a copy) is a config error that
    names the key and how to fix the override; ``~foo`` of an absent key was ``crash-other (exit code 1)``."""
    log = "+ python3 -m verl.trainer.main_ppo trainer.n_gpus_per_node=1 %s\n%s%s" % (
        override,
        _hydra_refusal(override),
        _HYDRA_TAIL,
    )
    v = C.classify(log, exit_code=1)
    assert (v.cls, v.action_kind, v.detail["key"], v.detail["cause"], v.detail["op"]) == (
        "config-error",
        "stop",
        key,
        "hydra-override",
        op,
    ), v
    assert fix in v.action and key in v.action and "\n" not in v.action
    assert fix in v.hint


def test_hydra_group_override_is_a_group_not_a_key():
    """defaults_list.py's refusals of a config group override (``Did you mean ...?`` / ``No match in the defaults
    list``) say the group, not "not a key" with ``+key`` advice."""
    for text in (
        "Could not override 'rollout'.\nDid you mean to override one of hf, vllm?\n"
        "To append to your default list use +rollout=vllmm",
        "Could not delete 'rollout'. No match in the defaults list",
        "Override rollout@x=vllm looks like a config group override, but config group 'rollout' does not exist.",
    ):
        v = C.classify(text + _HYDRA_TAIL, exit_code=1)
        assert (v.cls, v.detail["key"], v.detail["op"]) == ("config-error", "rollout", "group"), (text, v)
        assert "config group" in v.action and "+rollout" not in v.action


def test_every_tracker_fix_names_what_the_user_sets_and_the_mode_that_syncs_later():
    """A new user's trial: auth-error's 'what you do' (docs/troubleshooting.md) told a private server's user to set
    SWANLAB_API_HOST / SWANLAB_WEB_HOST, which dapo-ops derives from the SWANLAB_HOST the user sets (and would
    override); the network/tracker hint said 'SWANLAB_MODE=local and `swanlab sync` later' while the ladder's stop
    said offline is the mode that syncs (swanlab prints 'Run `swanlab sync <dir>` to sync this run' for an offline
    run; local is the dashboard). Every text now reads both from core/policy.py."""
    from dapo_ops.core import ladder, policy
    from dapo_ops.core.classify import docs, hints

    texts = {
        "auth-error you": docs.CLASS_TABLE["auth-error"]["you"],
        "network you": docs.CLASS_TABLE["network"]["you"],
        "auth-error hint": hints.HINTS["auth-error"],
        "network/tracker hint": hints.HINTS["network/tracker"],
        "ladder stop": ladder._RETRY_STOP_SUGGESTIONS[("network", "tracker")],
    }
    for name, text in texts.items():
        assert policy.SWANLAB_HOST_WORDS in text and policy.SWANLAB_OFFLINE_WORDS in text, name
    with_sync = dict(texts, keep_running=hints.HINTS["network/keep-running"])
    for name, text in with_sync.items():
        assert "SWANLAB_MODE=local" not in text and "SWANLAB_API_HOST / SWANLAB_WEB_HOST" not in text, name
        assert policy.SWANLAB_OFFLINE_WORDS in text, name
    assert "SWANLAB_MODE=local" not in (ROOT / "docs" / "troubleshooting.md").read_text()


def test_escapes_written_out_as_text_are_stripped_like_esc():
    """A syslog copy writes ESC as ``#033`` (rsyslog's control-character escape), ``cat -v`` as ``^[``: the same CSI
    colour codes as a terminal's, stripped by the one grammar regex (vllm-project/vllm#1160)."""
    from dapo_ops.core import logformat

    assert logformat.strip_ansi("#033[2m#033[33m(raylet)#033[0m Refer to") == "(raylet) Refer to"
    assert logformat.normalise_line("^[[36m(TaskRunner pid=1)^[[0m step:3 - a:1") == "step:3 - a:1"
    assert logformat.strip_ansi("issue #0334 [x]") == "issue #0334 [x]"


def test_raylet_oom_summary_wrapped_inside_tasks_actors_is_oom_ray():
    """The raylet's 'N Workers (tasks / actors) killed due to memory pressure (OOM)' copied at a fixed width can break
    inside the parenthetical; the rest of the line still names Ray's memory monitor (vllm-project/vllm#1160)."""
    text = (
        "#033[2m#033[33m(raylet)#033[0m [2023-09-23 10:11:20,566 E 412 412] (raylet) node_manager.cc:3007: 2 Workers"
        " (tasks /\n actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID:"
        " abd4\n"
    )
    v = C.classify(text, exit_code=1)
    assert (v.cls, v.action_kind) == ("oom-ray", "rollback-offload"), v.evidence


def test_swanlab_object_upload_error_while_steps_go_on_is_nonfatal_network():
    """SwanLab's object upload failing ('swanlab: Upload error: ... PutObject ...', SwanHubX/SwanLab#1348) between
    two step lines is tracker network trouble: keep training, never a restart or a silence."""
    text = (
        "(TaskRunner pid=1) step:9 - actor/pg_loss:0.03\n"
        "(TaskRunner pid=1) swanlab: Upload error: An error occurred (UserNetworkTooSlow) when calling the PutObject"
        " operation: User network is too slow.\n"
        "(TaskRunner pid=1) step:10 - actor/pg_loss:0.02\n"
    )
    v = C.classify(text)
    assert (v.cls, v.action_kind, v.detail.get("fatal")) == ("network", "keep-running", False), v.evidence


def test_a_bare_exception_line_is_the_crash_evidence():
    """Python prints ``AssertionError`` alone for an ``assert`` with no message: the generic exception row needed a
    colon, so such a worker crash's evidence was only "exit code 1" (a helper's read of verl's bare asserts)."""
    from dapo_ops.core.classify import classify

    log = (
        "step:1 - actor/pg_loss:0.1\n"
        "Traceback (most recent call last):\n"
        '  File "/verl/verl/workers/actor/dp_actor.py", line 300, in update_policy\n'
        "    assert micro_batch is not None\n"
        "AssertionError\n"
    )
    v = classify(log, 1)
    assert v.cls == "crash-other" and v.evidence[0] == "AssertionError", (v.cls, v.evidence)
