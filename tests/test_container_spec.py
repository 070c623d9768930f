"""The exact docker run line per accelerator (container.create builds it from container_spec)."""

import shlex
from types import SimpleNamespace

import pytest

from dapo_ops.control.inventory import container_spec as cs


def _host(**kw):
    base = dict(
        name="h1",
        accelerator="npu",
        devices=8,
        device_mounts=True,
        runs_dir="/verl/dapo_runs",
        workdir="/verl",
        model_dir="/data/models",
        data_dir="/data/datasets",
        ckpt_dir="/data/ckpt",
    )
    base.update(kw)
    return SimpleNamespace(**base)


KEEP = "sh -c 'trap \"exit 0\" TERM INT; while :; do sleep 3600 & wait $!; done'"


def test_full_ascend_line():
    argv, env = cs.docker_run_argv(
        _host(),
        "quay.io/ascend/verl:8.3.rc1-910b",
        "verl",
        proxy={
            "http_proxy": "http://10.0.0.1:3128",
            "https_proxy": "http://10.0.0.1:3128",
            "no_proxy": "localhost,127.0.0.1",
        },
    )
    assert env == {}
    devs = " ".join(f"--device /dev/davinci{i}" for i in range(8))
    expected = (
        "docker run -d --name verl --network host --ipc host --shm-size 64g --label dapo-ops.managed=1 "
        f"{devs} --device /dev/davinci_manager --device /dev/devmm_svm --device /dev/hisi_hdc "
        "-v /usr/local/Ascend/driver:/usr/local/Ascend/driver:ro -v /usr/local/dcmi:/usr/local/dcmi:ro "
        "-v /usr/local/bin/npu-smi:/usr/local/bin/npu-smi:ro "
        "-e http_proxy=http://10.0.0.1:3128 -e HTTP_PROXY=http://10.0.0.1:3128 "
        "-e https_proxy=http://10.0.0.1:3128 -e HTTPS_PROXY=http://10.0.0.1:3128 "
        "-e no_proxy=localhost,127.0.0.1 -e NO_PROXY=localhost,127.0.0.1 "
        "-v /data/models:/data/models -v /data/datasets:/data/datasets -v /data/ckpt:/verl/dapo_runs "
        "--workdir /verl quay.io/ascend/verl:8.3.rc1-910b " + KEEP
    )
    assert cs.render(argv) == shlex.join(shlex.split(expected))
    assert shlex.split(cs.render(argv)) == argv


def test_device_count_follows_host_and_mounts_can_be_off():
    argv, _ = cs.docker_run_argv(_host(devices=2), "img", "c1")
    assert [a for a in argv if a.startswith("/dev/davinci") and a[-1].isdigit()] == ["/dev/davinci0", "/dev/davinci1"]
    argv, _ = cs.docker_run_argv(_host(device_mounts=False), "img", "c1")
    assert not any("davinci" in a or "Ascend" in a or a == "--gpus" for a in argv)
    assert "--network" in argv and "--ipc" in argv


def test_nvidia_uses_gpus_all():
    argv, _ = cs.docker_run_argv(
        _host(accelerator="gpu", model_dir=None, data_dir=None, ckpt_dir=None), "verlai/verl:vllm", "verl"
    )
    line = cs.render(argv)
    assert "--gpus all" in line and "davinci" not in line
    # runs_dir is mounted from the same host path when no ckpt_dir is set: checkpoints outlive the container
    assert "-v /verl/dapo_runs:/verl/dapo_runs" in line


def test_proxy_with_credentials_stays_out_of_argv():
    argv, env = cs.docker_run_argv(_host(), "img", "verl", proxy={"https_proxy": "http://u:secret@p:3128"})
    assert not any("secret" in a for a in argv)
    assert env == {"https_proxy": "http://u:secret@p:3128", "HTTPS_PROXY": "http://u:secret@p:3128"}
    assert argv.count("-e") == 2 and "https_proxy" in argv


def test_bad_inputs_are_one_line_errors():
    with pytest.raises(cs.ContainerSpecError, match="accelerator"):
        cs.docker_run_argv(_host(accelerator="tpu"), "img", "verl")
    with pytest.raises(cs.ContainerSpecError, match="name"):
        cs.docker_run_argv(_host(), "img", "bad name;rm")
    with pytest.raises(cs.ContainerSpecError, match="volume"):
        cs.docker_run_argv(_host(), "img", "verl", volumes=["relative:/x"])
    argv, _ = cs.docker_run_argv(_host(), "img", "verl", volumes=["/usr/bin:/usr/bin:ro"])
    assert "/usr/bin:/usr/bin:ro" in argv
