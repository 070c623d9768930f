"""launch / one-step-off without hosts: dry run on a fresh clone, flag precedence, the detached start command,
and the stdlib bundle running the supervisor with nothing but the standard library."""

import base64
import json
import shlex
import os
import subprocess
import sys
from pathlib import Path

import pytest

import fake_ops
from dapo_ops.core import features
from dapo_ops.control.remote import bundle as remote_bundle
from dapo_ops.agent import runfiles
from dapo_ops.core import runstate
from plan_helpers import plan_for
from config_helpers import no_config

REPO = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent


def inv(args, tmp_path, env_extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAPO_OPS_", "SWANLAB_", "TRAIN_STEPS"))}
    env["DAPO_OPS_CONFIG"] = no_config(tmp_path, "no-config.toml")
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "invoke", "-r", str(REPO), *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )


def test_dry_run_on_fresh_clone_without_hosts(tmp_path):
    res = inv(["launch", "--dry-run", "--steps", "100"], tmp_path)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "trainer.total_training_steps=100" in out
    assert "trainer.resume_mode=auto" in out
    assert "offload" in out and "recompute" in out  # the ladder that would follow
    assert "/dapo_runs/" in out and "train.log" in out


def test_one_step_off_dry_run(tmp_path):
    res = inv(
        [
            "one-step-off",
            "--dry-run",
            "--steps",
            "4",
            "--trainer-gpus",
            "4",
            "--rollout-gpus",
            "4",
            "--framework",
            "fsdp",
        ],
        tmp_path,
    )
    assert res.returncode == 0, res.stderr
    assert "actor_rollout_ref.hybrid_engine=False" in res.stdout
    assert "trainer.total_training_steps=4" in res.stdout
    assert (
        "trainer.v1.trainer_mode=separate_async" in res.stdout and "algorithm.filter_groups.enable=True" in res.stdout
    )
    assert "actor_rollout_ref.rollout.n_gpus_per_node=4" in res.stdout
    assert "trainer.v1.separate_async.parameter_sync_step=4" in res.stdout


def test_mode_flag_picks_the_dapo_trainer_mode_and_the_plan_says_it(tmp_path):
    res = inv(["launch", "--dry-run", "--steps", "4"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert (
        "trainer.v1.trainer_mode=colocate_async" in res.stdout
        and "trainer_mode=colocate_async: single-async" in res.stdout
    )
    res = inv(["launch", "--dry-run", "--steps", "4", "--mode", "sync"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert "trainer.v1.trainer_mode=sync" in res.stdout and "max_off_policy_threshold" not in res.stdout
    res = inv(["launch", "--dry-run", "--steps", "4"], tmp_path, {"DAPO_MODE": "sync"})
    assert "trainer.v1.trainer_mode=sync" in res.stdout
    res = inv(["one-step-off", "--dry-run", "--mode", "sync"], tmp_path)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
    assert "--mode sync does not apply to one-step-off" in res.stderr
    res = inv(["one-step-off", "--dry-run", "--train-batch-size", "32"], tmp_path, {"PARAMETER_SYNC_STEP": "4"})
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
    assert "train_batch_size=32 must equal parameter_sync_step=4 x ppo_mini_batch_size=16" in res.stderr


def test_flag_beats_env_beats_default(tmp_path):
    res = inv(["launch", "--dry-run"], tmp_path, {"TRAIN_STEPS": "7"})
    assert res.returncode == 0, res.stderr
    assert "trainer.total_training_steps=7" in res.stdout
    res = inv(["launch", "--dry-run", "--steps", "9"], tmp_path, {"TRAIN_STEPS": "7"})
    assert "trainer.total_training_steps=9" in res.stdout


def test_bad_value_is_one_line_and_nonzero(tmp_path):
    res = inv(["launch", "--dry-run", "--framework", "tensorflow"], tmp_path)
    assert res.returncode != 0
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "framework" in lines[0]
    res = inv(["launch", "--dry-run", "--features", "warp_drive"], tmp_path)
    assert res.returncode != 0 and "warp_drive" in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_launch_without_inventory_refuses_in_one_line(tmp_path):
    res = inv(["launch", "--steps", "3"], tmp_path, {"SWANLAB_MODE": "disabled"})
    assert res.returncode != 0
    assert len(res.stderr.strip().splitlines()) == 1


def test_launch_without_H_on_three_hosts_says_it_is_one_run_across_every_host(tmp_path):
    """Issue 32 item 6: the refusal of `inv launch` (no -H) carries the dry run's "(no -H: every host ...)"; the
    batch problem is found before any host is contacted (TEST-NET addresses: a connect would hang, not refuse)."""
    hosts = tmp_path / "hosts.toml"
    hosts.write_text("".join(f'[hosts.h{i}]\naddress = "192.0.2.{10 + i}"\n' for i in (1, 2, 3)))
    res = inv(
        ["launch", "--steps", "20", "--framework", "fsdp", "--inventory", str(hosts)],
        tmp_path,
        {"SWANLAB_MODE": "disabled"},
    )
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.strip() == (
        "planning a 3-node run on a Ray cluster across h1,h2,h3 (no -H: every host of the inventory; -H h1 plans one "
        "host, --independent one run per host): responses per mini-batch do not split evenly over 24 trainer "
        "devices (3 nodes x 8): ppo_mini_batch_size=16 x "
        "rollout_n=8 = 128 (try --ppo-mini-batch-size 18 or 15) (each must be a multiple of 3; or change "
        "--rollout-n / the hosts)"
    )


def test_bundle_contents_hash_and_closure():
    files = remote_bundle.bundle_files()
    for name in (
        "agent/supervisor/__init__.py",
        "core/runstate.py",
        "core/features.py",
        "core/ladder.py",
        "core/overrides.py",
        "core/profiles.py",
        "core/classify/__init__.py",
        "agent/notify.py",
        "__init__.py",
    ):
        assert name in files
    assert not any(n.startswith(("control/", "cli/")) for n in files)  # operator side stays home
    d = remote_bundle.bundle_dir("/verl/dapo_runs/", files)
    assert d.startswith("/verl/dapo_runs/.dapo_ops/") and d.endswith(remote_bundle.bundle_hash(files))
    changed = dict(files, **{"agent/supervisor/__init__.py": files["agent/supervisor/__init__.py"] + b"\n"})
    assert remote_bundle.bundle_hash(changed) != remote_bundle.bundle_hash(files)


def test_the_own_bundle_is_read_once_but_an_edit_is_seen_in_the_same_process(tmp_path, monkeypatch):
    import shutil

    pkg = tmp_path / "dapo_ops"
    shutil.copytree(remote_bundle.PKG_DIR, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(remote_bundle, "PKG_DIR", pkg)
    monkeypatch.setattr(remote_bundle, "_OWN", [])
    first = remote_bundle.bundle_files()
    first["core/runstate.py"] = b"mutated by a caller"  # a caller's dict is its own
    assert remote_bundle.bundle_files()["core/runstate.py"] == (pkg / "core" / "runstate.py").read_bytes()
    before = remote_bundle.bundle_dir("/r")
    (pkg / "core" / "runstate.py").write_bytes((pkg / "core" / "runstate.py").read_bytes() + b"\n# edited\n")
    after = remote_bundle.bundle_dir("/r")
    assert after != before and after == remote_bundle.bundle_dir("/r", remote_bundle.bundle_files(pkg))


def test_bundle_install_script_unpacks_atomically(tmp_path):
    files = remote_bundle.bundle_files()
    bdir = remote_bundle.bundle_dir(str(tmp_path / "runs"), files)
    Path(bdir).parent.mkdir(parents=True)
    Path(bdir + ".tar.gz.b64").write_bytes(base64.b64encode(remote_bundle.bundle_tar(files)))
    subprocess.run(["sh", "-c", remote_bundle.install_command(bdir, sys.executable)], check=True)
    assert subprocess.run(["sh", "-c", remote_bundle.present_command(bdir)]).returncode == 0
    assert sorted(
        p.relative_to(Path(bdir, "dapo_ops")).as_posix() for p in Path(bdir, "dapo_ops").rglob("*.py")
    ) == sorted(files)
    assert not Path(bdir + ".tar.gz.b64").exists()


def test_bundle_installs_at_once_all_succeed_and_leave_one_bundle(tmp_path):
    """Two launches on a fresh host install the bundle at the same moment: each stages its own file
    (remote_bundle.install), every installer exits 0, one bundle stays, no staged file or temp dir is left (the
    shared staging name made the second installer fail with FileNotFoundError)."""
    files = remote_bundle.bundle_files()
    bdir = remote_bundle.bundle_dir(str(tmp_path / "runs"), files)
    Path(bdir).parent.mkdir(parents=True)
    data = base64.b64encode(remote_bundle.bundle_tar(files))
    procs = []
    for k in range(6):
        staged = f"{bdir}.tar.gz.b64.{k}"
        Path(staged).write_bytes(data)
        procs.append(
            subprocess.Popen(
                ["sh", "-c", remote_bundle.install_command(bdir, sys.executable, staged)],
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    errs = [(p.wait(timeout=60), p.stderr.read()) for p in procs]
    assert all(rc == 0 for rc, _ in errs), errs
    assert subprocess.run(["sh", "-c", remote_bundle.present_command(bdir)]).returncode == 0
    assert sorted(p.name for p in Path(bdir).parent.iterdir()) == [Path(bdir).name]


def test_supervisor_runs_from_the_bundle_with_stdlib_only(tmp_path):
    """The shipped copy alone (python -S: no site-packages) builds the real verl argv and supervises a run."""
    bdir = remote_bundle.local_install(tmp_path / "runs")
    rid = runstate.new_run_id()
    run_dir = tmp_path / "runs" / rid
    run_dir.mkdir()
    fs = features.resolve(None)
    spec = {
        "version": 1,
        "run_id": rid,
        "host": "local",
        "container": "none",
        "mode": "dapo",
        "framework": "fsdp",
        "profile": "0.9",
        "accelerator": "gpu",
        "workdir": str(tmp_path),
        "python": "python3",
        "run_dir": str(run_dir),
        "settings": {
            "steps": 3,
            "ckpt_dir": str(run_dir / "checkpoints"),
            "model_path": "/m",
            "train_file": "/t",
            "val_file": "/v",
            "trainer_gpus": 4,
            "rollout_gpus": 4,
            "nnodes": 1,
            "n_gpus_per_node": 8,
            "max_prompt_length": 2048,
            "max_response_length": 8192,
            "save_freq": 1,
            "rollout_tp": 2,
            "gpu_memory_utilization": 0.6,
            "project": "p",
            "experiment": rid,
            "extra_overrides": [],
        },
        "features": fs.to_json(),
        "disabled_features": [],
        "max_oom_retries": 2,
        "hang_timeout_s": 600,
        "logger": ["console"],
        "env": {},
        "notify": {},
        "ray": None,
        "supervisor": {"poll_interval_s": 0.1, "retry_delay_s": 0.1},
    }
    runfiles.write_json_atomic(run_dir / "spec.json", spec)
    (run_dir / "fake.json").write_text(json.dumps({"step_time": 0.02}))
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": os.pathsep.join([bdir, str(TESTS)])}
    probe = (
        "import json,sys; from dapo_ops.core import overrides; from dapo_ops.core import features; s=json.load(open(sys.argv[1])); "
        "print(json.dumps(overrides.build_command(s, features.FeatureSet.from_json(s['features']))))"
    )
    res = subprocess.run(
        [sys.executable, "-S", "-c", probe, str(run_dir / "spec.json")],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    argv = json.loads(res.stdout)
    assert "trainer.resume_mode=auto" in argv and "trainer.total_training_steps=3" in argv
    res = subprocess.run(
        [
            sys.executable,
            "-S",
            "-m",
            "dapo_ops.agent.supervisor",
            str(run_dir),
            "--command-factory",
            "fake_verl:factory",
        ],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    rec = runfiles.read_run(run_dir)
    assert rec["status"] == "succeeded", res.stderr
    assert rec["step"] == 3


@pytest.mark.parametrize("task", ["launch", "one-step-off"])
def test_help_lists_the_runbook_flags_long_only(tmp_path, task):
    res = inv([task, "--help"], tmp_path)
    assert res.returncode == 0, res.stderr
    for flag in (
        "--steps",
        "--framework",
        "--model",
        "--train-file",
        "--val-file",
        "--trainer-gpus",
        "--rollout-gpus",
        "--max-response-length",
        "--features",
        "--[no-]offload",
        "--max-oom-retries",
        "--container",
        "--dry-run",
        "--skip-preflight",
        "--hosts",
        "--link-wait",
        "--override",
    ):
        assert flag in res.stdout, flag
    assert "--=" not in res.stdout  # invoke ran out of short letters once: short flags are off


def _one_line(res):
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.returncode == 2 and len(lines) == 1, (res.returncode, res.stderr)
    return lines[0]


def test_a_known_secret_in_an_override_is_refused_and_never_printed(tmp_path):
    key = "sk-live-0123456789abcdef"
    res = inv(["launch", "--dry-run", "--override", f"+trainer.tok={key}"], tmp_path, {"SWANLAB_API_KEY": key})
    line = _one_line(res)
    assert line.startswith("--override +trainer.tok=...: the value holds a secret") and key not in res.stdout + line


@pytest.mark.parametrize(
    "override,starts",
    [
        ("+trainer.api_key=abc123", "--override +trainer.api_key=...: the key looks secret"),
        ("+~trainer.api_key=sk-LIVE-123", "--override +~trainer.api_key=...: the key looks secret"),  # not Hydra
        ("~+trainer.api_key=sk-LIVE-123", "--override ~+trainer.api_key=...: the key looks secret"),
        ("+trainer.hf_token:=sk-LIVE-123", "--override +trainer.hf_token:=...: the key looks secret"),  # a typo
        ("+trainer.hfToken=sk-LIVE-123", "--override +trainer.hfToken=...: the key looks secret"),  # camelCase
        ("+trainer.mypassword=sk-LIVE-123", "--override +trainer.mypassword=...: the key looks secret"),
        (
            "+actor_rollout_ref.model.hf_token=x",
            "--override +actor_rollout_ref.model.hf_token=...: the key looks secret",
        ),
        (
            "trainer.experiment_name=${oc.env:SWANLAB_API_KEY}",
            "--override trainer.experiment_name=...: the value calls OmegaConf's resolver 'oc.env'",
        ),
        (
            "trainer.experiment_name='x-\\${oc.env:HOME}'",
            "--override trainer.experiment_name=...: the value calls OmegaConf's resolver 'oc.env'",
        ),  # escaped: live after :145
        ("+x.y='${oc.decode:\\'{a: 1}\\'}'", "--override +x.y=...: the value calls OmegaConf's resolver 'oc.decode'"),
        ("+x.y=[a,'${a.${oc.env:HOME}}']", "--override +x.y=...: the value calls OmegaConf's resolver 'oc.env'"),
        ("+x.y='${'", "--override +x.y=...: the value holds '${' that is not a valid OmegaConf interpolation"),
    ],
)
def test_an_override_with_a_secret_key_or_a_resolver_is_refused_in_one_line(tmp_path, override, starts):
    """issue 32 item 1: `+trainer.api_key=...` is refused like a secret flag; `${oc.env:...}` would read verl's
    environment (the SwanLab key) into the config verl prints to train.log."""
    line = _one_line(inv(["launch", "--dry-run", "--override", override], tmp_path))
    assert line.startswith(starts), line
    assert "LIVE" not in line


def test_an_override_may_interpolate_config_keys_and_name_verls_own_key_fields(tmp_path):
    res = inv(
        [
            "launch",
            "--dry-run",
            "--override",
            "+trainer.note=${data.max_prompt_length}",
            "--override",
            "data.prompt_key=question",
        ],
        tmp_path,
    )
    assert res.returncode == 0, res.stderr
    assert (
        "+trainer.note='${data.max_prompt_length}'" in res.stdout
        or "+trainer.note=${data.max_prompt_length}" in res.stdout
    )


def test_verl_name_keys_are_exactly_verls_secret_looking_keys():
    """VERL_NAME_KEYS (allowed despite a key/token word) = the keys of the pinned verl 0.9.1 ppo_trainer config that
    the redaction rule calls secret; a new verl key shows up here."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from dapo_ops.control.launch import service as svc
    from dapo_ops.core.redact import is_secret_name

    sys.path.insert(0, str(REPO / "sandbox"))
    from fetch_verl_config import verl_config_root

    root = str(verl_config_root())
    old = os.getcwd()
    try:
        os.chdir(root)
        with initialize_config_dir(config_dir=f"{root}/verl/trainer/config", version_base=None):
            cfg = compose(
                config_name="ppo_trainer", overrides=[f"hydra.searchpath=[file://{root}/verl/trainer/config]"]
            )
    finally:
        os.chdir(old)

    def keys(c, p=""):
        for k in c.keys():
            node = c._get_node(k)
            full = f"{p}.{k}" if p else str(k)
            yield from (keys(node, full) if OmegaConf.is_dict(node) else (full,))

    assert {k for k in keys(cfg) if is_secret_name(k)} == set(svc.VERL_NAME_KEYS)


def test_an_override_hydra_cannot_parse_is_refused_naming_it(tmp_path):
    line = _one_line(inv(["launch", "--dry-run", "--override", "trainer.experiment_name=a;b"], tmp_path))
    assert "'trainer.experiment_name=a;b' is not a valid Hydra override" in line
    # a key a setting owns: its real fix at once (quoting it for Hydra only led to the next refusal; new-user trial)
    assert "use --experiment (EXPERIMENT_NAME) instead of --override" in line
    line = _one_line(inv(["launch", "--dry-run", "--override", "data.prompt_key=a;b"], tmp_path))
    assert "'data.prompt_key=a;b' is not a valid Hydra override" in line
    assert shlex.split(line.split("e.g. --override ", 1)[1]) == ["data.prompt_key='a;b'"]  # shell-quoted as a whole
    res = inv(["launch", "--dry-run", "--override", "data.prompt_key='a;b'"], tmp_path)
    assert res.returncode == 0, res.stderr


def test_pool_sizes_are_refused_outside_one_step_off(tmp_path):
    line = _one_line(inv(["launch", "--dry-run", "--trainer-gpus", "2", "--rollout-gpus", "2"], tmp_path))
    assert line.startswith("--trainer-gpus and --rollout-gpus size the pools of one-step-off")
    assert "inv one-step-off --trainer-gpus N --rollout-gpus N" in line


def test_a_bad_swanlab_host_flag_is_named_as_the_flag_and_steps_have_a_bound(tmp_path):
    line = _one_line(inv(["launch", "--dry-run", "--swanlab-host", "192.0.2.1:8000"], tmp_path))
    assert "(from --swanlab-host)" in line and "from env" not in line
    line = _one_line(inv(["launch", "--dry-run", "--steps", "99999999999999999999"], tmp_path))
    # issue 32 minor: the flag that set it is named (was "TRAIN_STEPS=... must be ..." although --steps was used)
    assert line == "--steps=99999999999999999999 is above the maximum 1000000; use a value <= 1000000"
    line = _one_line(inv(["launch", "--dry-run", "--swanlab-host", "not a url"], tmp_path))
    # issue 32 minor: was "write http://not a url ..." as the fix
    assert "is not a server address" in line and "http://not a url" not in line


@pytest.mark.parametrize(
    "args,env,needle",
    [
        (["--model", ""], {}, "--model '' is empty; give a value (e.g. --model Qwen3-8B), or drop --model"),
        (["--framework", ""], {}, "--framework '' is empty; give one of megatron | fsdp"),
        (["--project", ""], {}, "--project '' is empty"),
        (["--features", ",,,"], {}, "--features=',,,' names no feature"),
        ([], {"TRAIN_STEPS": ""}, "TRAIN_STEPS is set but empty"),
        ([], {"MODEL_PATH": ""}, "MODEL_PATH is set but empty"),
        ([], {"FRAMEWORK": ""}, "FRAMEWORK is set but empty"),
    ],
)
def test_launch_refuses_a_value_given_empty_in_one_line(tmp_path, args, env, needle):
    """issue 32 item 3: `TRAIN_STEPS= inv launch` started 100 steps, `--model ''` trained Qwen3-8B (an invoke
    string flag given '' was indistinguishable from one left off)."""
    line = _one_line(inv(["launch", "--dry-run", *args], tmp_path, env))
    assert line.startswith(needle), line


# ------------------------------------------------------------------ the launch service (control/launch/service.py), no SSH


class _Occupancy:
    """A Target whose container answers the occupancy check with ``answer`` (and records the command)."""

    def __init__(self, answer):
        from types import SimpleNamespace

        self.host = SimpleNamespace(name="h1", runs_path="/verl/dapo_runs", python="python3")
        self.name, self.container, self.answer, self.calls = "h1", "verl", answer, []

    def run(self, argv, **kw):
        from types import SimpleNamespace

        self.calls.append(argv)
        return SimpleNamespace(exited=0, stdout=json.dumps(self.answer) + "\n", stderr="")


@pytest.mark.parametrize(
    "answer,starts",
    [
        ({"active": {"run_id": "20261129-151200-a1b2"}}, "run 20261129-151200-a1b2 is already active on h1"),
        ({"verl": [{"run_id": "20261129-151200-a1b2", "pids": 3, "pgid": 77}]}, "h1: verl of run 20261129-151200-a1b2"),
        ({"ray": [{"run_id": "20261129-151200-a1b2", "head": "h0"}]}, "h1 is already a Ray node of multi-host run"),
    ],
)
def test_a_busy_container_is_a_typed_refusal_not_a_print(answer, starts, capsys):
    from dapo_ops.control.launch import service as svc
    from dapo_ops.control.launch import refusals as launch_errors

    t = _Occupancy(answer)
    with pytest.raises(launch_errors.LaunchRefused) as e:
        svc.refuse_if_busy(t, "python3")
    assert e.value.kind == "active-run" and str(e.value).startswith(starts) and "\n" not in str(e.value)
    # the bundle's op line (remote_bundle.run_op: the one way into the container)
    [line] = t.calls
    assert line == remote_bundle.op_line(
        remote_bundle.bundle_dir("/verl/dapo_runs"), "python3", "occupancy", ["/verl/dapo_runs", "h1", "--sweep"]
    )
    assert capsys.readouterr() == ("", "")
    assert svc.refuse_if_busy(_Occupancy({"active": None}), "python3") == {"active": None}


def test_override_refusals_raise_one_line_usage_errors():
    from dapo_ops.control.launch import service as svc
    from dapo_ops.control.launch import refusals as launch_errors

    with pytest.raises(launch_errors.LaunchUsageError) as e:
        svc.refuse_secret_overrides(["trainer.x=abc-SECRET-123"], ["SECRET-123"])
    assert "SECRET" not in str(e.value) and str(e.value).startswith("--override trainer.x=...")
    with pytest.raises(launch_errors.LaunchUsageError, match="not a valid Hydra override"):
        svc.refuse_bad_overrides(["trainer.x=a;b"])
    svc.refuse_bad_overrides(["trainer.x=1", "not-key-value"])  # fine / left to check_spec
    assert svc.known_secrets({"swanlab": {"api_key": "k" * 8}}, env={}) == ["k" * 8]


def test_a_resumed_run_takes_what_is_not_given_now_from_the_run_it_continues():
    from dapo_ops.control.launch import resume
    from dapo_ops.control import settings as settings_mod

    now = settings_mod.resolve({"steps": 60, "max_response_length": 2048}, {}, {})
    old = {
        "framework": "fsdp",
        "settings": {
            "model_path": "/m/mine",
            "framework": "fsdp",
            "steps": 40,
            "max_response_length": 4096,
            "train_file": "/d/t.parquet",
            "n_gpus_per_node": 4,
        },
    }
    st = resume.resumed_settings(now, old)
    assert (st["model"], st.source("model")) == ("/m/mine", "resume")
    assert (st["framework"], st["train_file"]) == ("fsdp", "/d/t.parquet")
    # given now wins; layout keys the plan derives from the hosts are compared by resume.check, never taken
    assert (st["steps"], st.source("steps"), st["max_response_length"]) == (60, "flag", 2048)
    assert st.get("n_gpus_per_node") == now.get("n_gpus_per_node")
    assert now["model"] != "/m/mine"  # the request's own settings are not changed


def test_a_secret_in_any_run_setting_is_refused_in_one_line(cli, tmp_path):
    key = "sk-secret-0123456789abcdef"
    res = cli(
        "dapo-ops",
        "launch",
        "--dry-run",
        "--experiment",
        f"exp-{key}",
        env={"SWANLAB_API_KEY": key, "DAPO_OPS_CONFIG": no_config(tmp_path)},
    )
    assert res.returncode == 2 and "--experiment" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert key not in res.stdout + res.stderr


# A new user's trial: --override of a key the plan sets (trainer.total_training_steps, the model path, the data files,
# the experiment name, the resume keys) came last in verl's argv and won silently against the tool's own setting.
@pytest.mark.parametrize(
    "override,line",
    [
        ("trainer.total_training_steps=5", "--override trainer.total_training_steps=5: use --steps (TRAIN_STEPS)"),
        (
            "actor_rollout_ref.model.path=/m/other",
            "--override actor_rollout_ref.model.path=...: use --model (MODEL_PATH)",
        ),
        ("data.train_files=/d/x.parquet", "--override data.train_files=...: use --train-file (TRAIN_FILE)"),
        ("trainer.experiment_name=mine", "--override trainer.experiment_name=...: use --experiment (EXPERIMENT_NAME)"),
        ("+trainer.project_name=p", "--override +trainer.project_name=...: use --project (PROJECT_NAME)"),
        (
            "actor_rollout_ref.rollout.gpu_memory_utilization=0.7",
            "--override actor_rollout_ref.rollout.gpu_memory_utilization=0.7: use --gpu-memory-utilization "
            "(GPU_MEMORY_UTILIZATION)",
        ),
        (
            "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=4",
            "--override actor_rollout_ref.actor.megatron.tensor_model_parallel_size=4: use TRAINER_TP (or "
            "trainer_tp in [run] of the config file)",
        ),
        (
            "trainer.resume_mode=disable",
            "--override trainer.resume_mode=...: dapo-ops sets trainer.resume_mode itself: auto, so every retry "
            "resumes from the run's last checkpoint (continue an earlier run with --resume RUN_ID); drop the "
            "override",
        ),
        ("~trainer.logger", "--override ~trainer.logger: dapo-ops sets trainer.logger itself: the supervisor reads"),
        ("trainer.default_local_dir=/x", "--override trainer.default_local_dir=...: dapo-ops sets"),
    ],
)
def test_an_override_of_a_key_the_plan_sets_is_refused_naming_the_setting(tmp_path, override, line):
    got = _one_line(inv(["launch", "--dry-run", "--override", override], tmp_path))
    assert got.startswith(line), got


def test_generic_overrides_and_the_ladder_managed_keys_stay_open(tmp_path):
    res = inv(
        [
            "launch",
            "--dry-run",
            "--override",
            "trainer.val_before_train=True",
            "--override",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
            "--override",
            "+actor_rollout_ref.actor.optim.weight_decay=0.1",
        ],
        tmp_path,
        {"SWANLAB_MODE": "disabled"},
    )
    assert res.returncode == 0, res.stderr
    assert "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2" in res.stdout


def test_every_refused_override_key_is_one_the_plan_sets_from_that_setting():
    """The two tables of core/overrides.py name keys the plan really emits (in some mode x framework x accelerator x
    profile), and each setting key follows its setting: changing the setting changes that key's value."""
    from dapo_ops.control import settings
    from dapo_ops.control.inventory.model import Host
    from dapo_ops.core import overrides

    npu, gpu = Host(name="n", address="x", devices=8), Host(name="g", address="x", accelerator="gpu", devices=8)
    base = {"max_position_embeddings": 40960, "rollout_tp": 1}
    cases = [
        ("dapo", "megatron", npu, "0.9"),
        ("one-step-off", "fsdp", gpu, "0.9"),
        ("one-step-off", "fsdp", gpu, "0.8"),
    ]

    def argv(mode, framework, host, profile, **changed):
        # vanilla_mbridge: the key is emitted only when set (verl's default False: Megatron-Bridge)
        mega = {"trainer_tp": 2, "trainer_pp": 2, "vanilla_mbridge": True} if framework == "megatron" else {}
        st = settings.resolve({**base, **mega, "framework": framework, "profile": profile, **changed}, {}, {})
        # a KL loss needs the reference policy: its Megatron keys are emitted then (profiles.drop_inert)
        kl = ["actor_rollout_ref.actor.use_kl_loss=True"] if framework == "megatron" else []
        p = plan_for(
            settings=st,
            host=host,
            mode=mode,
            run_id="20261202-000000-abcd",
            swanlab_logger=False,
            profile=profile,
            extra_overrides=kl,
        )
        return {
            a.split("=", 1)[0].lstrip("+"): a.split("=", 1)[1] for a in p.argv if "=" in a and not a.startswith("-")
        }

    plans = [(c, argv(*c)) for c in cases]
    for key in list(overrides.PLAN_SETTING_KEYS) + list(overrides.PLAN_FIXED_KEYS):
        assert any(key in a for _, a in plans), key
    other = {
        "steps": 7,
        "model": "/m/x",
        "train_file": "/d/t.parquet",
        "val_file": "/d/v.parquet",
        "max_prompt_length": 1024,
        "max_response_length": 4096,
        "train_batch_size": 32,
        "ppo_mini_batch_size": 8,
        "rollout_n": 4,
        "rollout_tp": 2,
        "gpu_memory_utilization": 0.5,
        "rollout_eager": True,
        "trainer_tp": 4,
        "trainer_pp": 1,
        "max_position_embeddings": 32768,
        "max_staleness": 3,
        "parameter_sync_step": 2,
        "rollout_gpus": 2,
        "project": "p2",
        "experiment": "e2",
        "save_freq": 5,
        "max_actor_ckpt_to_keep": 2,
        "vanilla_mbridge": False,
    }
    for key, name in overrides.PLAN_SETTING_KEYS.items():
        assert name in settings.BY_NAME, name
        if name in ("trainer_mode", "framework"):
            continue  # a change of those changes the trainer / entry (test_plan.py)
        case, a = next((c, a) for c, a in plans if key in a)
        # verl needs train_batch_size = parameter_sync_step x ppo_mini_batch_size (runspec.check_spec)
        batch = {"train_batch_size": 32} if name == "parameter_sync_step" else {}
        changed = argv(*case, **{name: other[name]}, **batch)
        assert changed.get(key) != a[key], (key, name)


@pytest.mark.parametrize("version,want", [(2, "fsdp2"), (1, "fsdp"), (None, "fsdp")])
def test_a_resume_keeps_the_fsdp_strategy_its_checkpoint_was_written_with(monkeypatch, version, want):
    """A run an older tool version started with actor.strategy=fsdp2 on one device (the plan picks fsdp there now):
    its --resume keeps fsdp2, read from the checkpoint's own record (verl 0.9.1 fsdp_checkpoint_manager.py:409-416
    writes global_step_N/actor/fsdp_config.json); fsdp and fsdp2 checkpoints do not load into each other. No record
    (or no checkpoint): the plan's choice."""
    from types import SimpleNamespace

    from dapo_ops.control import settings
    from dapo_ops.control.launch import resume
    from dapo_ops.control.inventory.model import Host

    one_gpu = Host(name="g", address="x", accelerator="gpu", devices=1, runs_dir="/r")
    st = settings.resolve({"framework": "fsdp", "rollout_tp": 1, "steps": 10}, {}, {})
    plan = plan_for(settings=st, host=one_gpu, mode="dapo", run_id="20261202-000000-new0", swanlab_logger=False)
    assert "actor_rollout_ref.actor.strategy=fsdp" in plan.argv  # the plan's own choice on one device
    old = {"mode": "dapo", "framework": "fsdp", "settings": {"ckpt_dir": "/r/old/checkpoints", "steps": 10}}
    answers = {
        "/r/old/checkpoints/latest_checkpointed_iteration.txt": "4\n",
        "/r/old/run.json": '{"status": "stopped", "step": 4}',
    }
    if version:
        answers["/r/old/checkpoints/global_step_4/actor/fsdp_config.json"] = json.dumps(
            {"FSDP_version": version, "world_size": 1}
        )

    class T:
        host = SimpleNamespace(runs_path="/r", python="python3")

        def run(self, cmd, **kw):  # the bundle op `runfiles resume-facts` over these files (fake_ops)
            return fake_ops.runfiles_answer(fake_ops.op_of(cmd)[1:], answers)

    monkeypatch.setattr(resume.runstate, "run_dir_for", lambda runs, rid: f"{runs}/{rid}")
    answers["/r/old/spec.json"] = json.dumps(old)
    facts = resume.read_facts(T(), "old")
    assert facts.strategy == (want if version else None)
    plan = plan_for(settings=resume.resumed_settings(st, facts.spec), host=one_gpu, mode="dapo", run_id="20261202-000000-new0", swanlab_logger=False, resume=facts)  # fmt: skip
    line = plan.resume_line
    assert f"actor_rollout_ref.actor.strategy={want}" in plan.argv
    # the supervisor's later attempts build their argv from the spec: they keep it too
    from dapo_ops.core import overrides

    assert f"actor_rollout_ref.actor.strategy={want}" in overrides.build_command(
        dict(plan.spec, attempt=2), plan.features
    )
    # a one-device plan pins its strategy (issue 43 F1: the ladder and a rollback keep what the checkpoints hold)
    assert plan.spec.get("strategy") == want
    assert ("keeps actor strategy fsdp2 (its checkpoint's FSDP version; fsdp would not load it)" in line) == (
        want == "fsdp2"
    ), line


@pytest.mark.parametrize(
    "override, prefix", [("+~trainer.foo=1", "+~"), ("++~trainer.foo=1", "++~"), ("+++trainer.x=1", "+++")]
)
def test_an_override_with_a_prefix_hydra_lacks_is_told_so_not_to_quote_its_value(tmp_path, override, prefix):
    """A new user's ``--override +~trainer.foo=1`` was told to quote the value (``'+~trainer.foo='"'"'1'"'"''``),
    which fails the same way: the fault is the prefix (Hydra's grammar: none, ``+``, ``++`` or ``~``)."""
    res = inv(["launch", "--dry-run", "--override", override], tmp_path)
    line = _one_line(res)
    assert res.returncode == 2
    assert line == (
        f"--override {override.partition('=')[0]}=...: {prefix!r} is not a Hydra prefix; use key=value, "
        "+key=value (add), ++key=value (add or set) or ~key (delete)"
    )


@pytest.mark.parametrize("override", ["+trainer.x=a,b", "trainer.project_name=choice(a,b)", "+x=range(1,3)"])
def test_a_hydra_sweep_override_is_refused_before_verl_refuses_it(tmp_path, override):
    """``--override +trainer.x=a,b`` is Hydra's simple choice sweep: verl's ``@hydra.main`` single run refuses it
    ("Ambiguous value for argument ... --multirun") at its start, after the launch; the dry run accepted it.
    A list (``[a,b]``) or a quoted value (``'a,b'``) is one value and passes."""
    res = inv(["launch", "--dry-run", "--override", override], tmp_path)
    assert res.returncode == 2 and "is a Hydra sweep" in _one_line(res)
    for one in ("+trainer.x=[a,b]", "+trainer.x='a,b'"):
        assert inv(["launch", "--dry-run", "--override", one], tmp_path).returncode == 0


@pytest.mark.parametrize("empty", ("", " "))
def test_an_empty_override_is_refused_in_one_line(tmp_path, empty):
    """A new user's trial: `--override ''` (a "$VAR" unset) was dropped silently; it is refused like any malformed
    override."""
    line = _one_line(inv(["launch", "--dry-run", "--override", empty], tmp_path))
    assert line.startswith("--override %r is empty; give key=value" % empty), line
