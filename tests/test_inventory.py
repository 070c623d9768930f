"""hosts.toml parsing and -H selection (pure: nothing is contacted)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dapo_ops.control import inventory
from dapo_ops.control.inventory import Host, InventoryError

REPO = Path(__file__).resolve().parents[1]

GOOD = """\
[defaults]
user = "root"
port = 22
identity_file = "~/.ssh/id_ed25519"
container = "verl"
accelerator = "npu"
devices = 8

[proxy]
http_proxy = "http://192.0.2.1:3128"

[hosts.h1]
address = "192.0.2.11"

[hosts.h2]
address = "192.0.2.12"
port = 2222
accelerator = "gpu"
"""


def write(tmp_path, text, name="hosts.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


class TestLoad:
    def test_defaults_apply_and_hosts_override_them(self, tmp_path):
        inv = inventory.load(write(tmp_path, GOOD))
        assert list(inv.hosts) == ["h1", "h2"]
        h1, h2 = inv.hosts["h1"], inv.hosts["h2"]
        assert (h1.port, h1.user, h1.accelerator, h1.devices) == (22, "root", "npu", 8)
        assert (h2.port, h2.accelerator) == (2222, "gpu")
        assert inv.proxy == {"http_proxy": "http://192.0.2.1:3128", "https_proxy": "", "no_proxy": ""}
        assert h1.runs_path == "/verl/dapo_runs"

    def test_explicit_path_beats_env_which_beats_cwd(self, tmp_path, monkeypatch):
        a = write(tmp_path, GOOD, "a.toml")
        b = write(tmp_path, GOOD.replace("h1", "envhost"), "b.toml")
        (tmp_path / "hosts.toml").write_text(GOOD.replace("h1", "cwdhost"))
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("DAPO_OPS_INVENTORY", str(b))
        assert "h1" in inventory.load(a).hosts
        assert "envhost" in inventory.load(None).hosts
        monkeypatch.delenv("DAPO_OPS_INVENTORY")
        assert "cwdhost" in inventory.load(None).hosts

    def test_repo_example_parses(self):
        inv = inventory.load(REPO / "hosts.toml")
        assert len(inv.hosts) == 2
        assert all(h.accelerator == "npu" and h.devices == 8 for h in inv.hosts.values())


# One row per bad input: (id, file text, regex the ONE-line message must match, expected line number or None)
BAD = [
    ("unknown-field", '[hosts.h1]\naddress = "a"\nadress2 = "b"\n', r"host 'h1': field 'adress2': unknown field", 3),
    ("unknown-field-in-defaults", '[defaults]\nusr = "root"\n[hosts.h1]\naddress = "a"\n',
     r"\[defaults\]: field 'usr': unknown field", 2),
    ("wrong-type-port", '[hosts.h1]\naddress = "a"\nport = "22"\n',
     r"host 'h1': field 'port': expected an integer, got string '22'", 3),
    ("wrong-type-bool-as-int", '[hosts.h1]\naddress = "a"\ndevices = true\n',
     r"field 'devices': expected an integer, got boolean", 3),
    ("wrong-type-device-mounts", '[hosts.h1]\naddress = "a"\ndevice_mounts = "yes"\n',
     r"field 'device_mounts': expected true or false", 3),
    ("missing-address", '[defaults]\nuser = "root"\n\n[hosts.h1]\nport = 22\n',
     r"host 'h1': field 'address': missing address", 4),
    ("duplicate-name", '[hosts.h1]\naddress = "a"\n\n[hosts.h2]\naddress = "b"\n\n[hosts.h1]\naddress = "c"\n',
     r"host 'h1': duplicate host name: \[hosts.h1\] is defined twice", 7),
    ("duplicate-key", '[hosts.h1]\naddress = "a"\naddress = "b"\n', r"a key is set twice", 3),
    ("unknown-accelerator", '[hosts.h1]\naddress = "a"\naccelerator = "tpu"\n',
     r"host 'h1': field 'accelerator': unknown accelerator 'tpu': use one of npu, gpu", 3),
    ("negative-devices", '[hosts.h1]\naddress = "a"\ndevices = -1\n',
     r"host 'h1': field 'devices': must be >= 1", 3),
    ("port-out-of-range", '[hosts.h1]\naddress = "a"\nport = 70000\n', r"field 'port': must be 1..65535", 3),
    ("relative-workdir", '[hosts.h1]\naddress = "a"\nworkdir = "verl"\n', r"field 'workdir': must be an absolute", 3),
    ("bad-container-name", '[hosts.h1]\naddress = "a"\ncontainer = "-rm"\n',
     r"field 'container': '-rm' is not a valid Docker container name", 3),
    ("bad-host-name", '[hosts."a,b"]\naddress = "a"\n', r"host 'a,b': invalid host name", None),
    ("unknown-table", '[host.h1]\naddress = "a"\n', r"unknown table or key 'host'", 1),
    ("unknown-proxy-key", '[proxy]\nftp_proxy = "x"\n[hosts.h1]\naddress = "a"\n',
     r"\[proxy\]: field 'ftp_proxy': unknown proxy setting", 2),
    ("proxy-not-a-url", '[proxy]\nhttp_proxy = "not a url"\n[hosts.h1]\naddress = "a"\n',
     r"\[proxy\]: field 'http_proxy': 'not a url' is not a proxy URL \(contains a space\); set it to scheme://", 2),
    ("proxy-bad-port", '[proxy]\nhttps_proxy = "http://u:pw-toml@p:70000"\n[hosts.h1]\naddress = "a"\n',
     r"field 'https_proxy': 'http://u:\*\*\*@p:70000' is not a proxy URL \(bad port", 2),
    ("proxy-bad-no-proxy", '[proxy]\nno_proxy = "localhost 10.0.0.0/8"\n[hosts.h1]\naddress = "a"\n',
     r"\[proxy\]: field 'no_proxy': 'localhost 10.0.0.0/8' is not a no_proxy list", 2),
    ("host-env-proxy-bad", '[hosts.h1]\naddress = "a"\nruntime = "host"\nenv = {https_proxy = "not a url"}\n',
     r"host 'h1': field 'env': https_proxy='not a url' is not a proxy URL \(contains a space\)", 4),
    ("host-env-proxy-credentials", '[defaults]\nenv = {HTTP_PROXY = "http://u:pw-env9@p:1"}\n[hosts.h1]\naddress = "a"\n',
     r"\[defaults\]: field 'env': HTTP_PROXY carries credentials .* hosts.toml \[proxy\] http_proxy", 2),
    ("host-env-no-proxy-bad", '[hosts.h1]\naddress = "a"\nenv = {no_proxy = "a b"}\n',
     r"field 'env': no_proxy='a b' is not a no_proxy list", 3),
    ("no-hosts", '[defaults]\nuser = "root"\n', r"no hosts: add at least one \[hosts.<name>\]", None),
    ("toml-syntax-error", '[hosts.h1]\naddress = "a\nport = 22\n', r"TOML syntax error", 2),
    ("not-utf8", None, r"not UTF-8 text", None),
    # issue 17: refused at load, file:line like every other field
    ("zero-devices", '[hosts.h1]\naddress = "a"\ndevices = 0\n', r"host 'h1': field 'devices': must be >= 1", 3),
    ("proxy-jump-ssh-option", '[hosts.h1]\naddress = "a"\nproxy_jump = "root@h:22 -oProxyCommand=touch /tmp/x"\n',
     r"host 'h1': field 'proxy_jump': 'root@h:22 -oProxyCommand=touch /tmp/x' is not \[user@\]host\[:port\]", 3),
    ("proxy-jump-leading-dash", '[defaults]\nproxy_jump = "-oProxyCommand=x"\n[hosts.h1]\naddress = "a"\n',
     r"\[defaults\]: field 'proxy_jump': '-oProxyCommand=x' is not", 2),
    ("proxy-jump-port-range", '[hosts.h1]\naddress = "a"\nproxy_jump = "ops@bastion:99999"\n',
     r"field 'proxy_jump': port 99999 must be 1..65535", 3),
    # new-user trial: shell / ssh-option shapes refused at load (inventory_model.py ContainerPath, Address, User)
    ("workdir-shell-metachar", '[hosts.h1]\naddress = "a"\nworkdir = "/verl; touch /tmp/pwned"\n',
     r"host 'h1': field 'workdir': must be an absolute path .*no spaces, shell metacharacters or newlines\), "
     r"got '/verl; touch /tmp/pwned'", 3),
    ("workdir-newline", '[hosts.h1]\naddress = "a"\nworkdir = "/verl\\n"\n', r"field 'workdir': must be an absolute", 3),
    ("workdir-dollar", '[defaults]\nworkdir = "/$(id)"\n[hosts.h1]\naddress = "a"\n',
     r"\[defaults\]: field 'workdir': must be an absolute", 2),
    ("runs-dir-space", '[hosts.h1]\naddress = "a"\nruns_dir = "/verl/my runs"\n', r"field 'runs_dir': must be", 3),
    ("address-ssh-option", '[hosts.h1]\naddress = "-oProxyCommand=touch /tmp/x"\n',
     r"host 'h1': field 'address': '-oProxyCommand=touch /tmp/x' is not an IP or DNS name .*ssh option", 2),
    ("address-newline", '[hosts.h1]\naddress = "a\\n"\n', r"field 'address': 'a\\n' is not an IP", 2),
    ("user-ssh-option", '[hosts.h1]\naddress = "a"\nuser = "-oX"\n',
     r"host 'h1': field 'user': '-oX' is not a user name .*ssh option", 3),
    ("container-newline", '[hosts.h1]\naddress = "a"\ncontainer = "verl\\n"\n',
     r"field 'container': 'verl\\n' is not a valid Docker container name", 3),
    ("defaults-not-a-table", 'defaults = 3\n[hosts.h1]\naddress = "a"\n', r"'defaults' must be a table", 1),
    ("unknown-runtime", '[hosts.h1]\naddress = "a"\nruntime = "podman"\n',
     r"field 'runtime': unknown runtime 'podman': use one of docker, host", 3),
    ("unknown-transport", '[hosts.h1]\naddress = "a"\ntransport = "mosh"\n',
     r"field 'transport': unknown transport 'mosh'", 3),
    ("host-runtime-with-container", '[hosts.h1]\naddress = "a"\nruntime = "host"\ncontainer = "verl"\n',
     r"host 'h1': field 'container': runtime = \"host\" runs without a container", 4),
    ("docker-runtime-empty-container", '[hosts.h1]\naddress = "a"\ncontainer = ""\n',
     r"host 'h1': field 'container': container is empty", 3),
    ("env-bad-name", '[hosts.h1]\naddress = "a"\nenv = {"A-B" = "x"}\n',
     r"host 'h1': field 'env': keys must be environment variable names", 3),
    ("env-not-string", '[hosts.h1]\naddress = "a"\n[hosts.h1.env]\nN = 1\n', r"host 'h1': field 'env': ", 3),
    ("env-secret", '[hosts.h1]\naddress = "a"\nenv = {HF_TOKEN = "hf_x"}\n',
     r"field 'env': HF_TOKEN looks like a secret", 3),
]


@pytest.mark.parametrize("text,pattern,line", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_is_one_line_naming_file_line_host_field(tmp_path, text, pattern, line):
    p = tmp_path / "hosts.toml"
    if text is None:
        p.write_bytes(b'[hosts.h1]\naddress = "\xff"\n')
    else:
        p.write_text(text)
    with pytest.raises(InventoryError) as ei:
        inventory.load(p)
    msg = str(ei.value)
    assert "\n" not in msg
    assert msg.startswith(str(p)), msg
    assert re.search(pattern, msg), msg
    if line is not None:
        assert ei.value.line == line, msg
        assert msg.startswith(f"{p}:{line}: "), msg


def test_unreadable_file_names_the_path_and_the_fix(tmp_path):
    p = tmp_path / "nope.toml"
    with pytest.raises(InventoryError) as ei:
        inventory.load(p)
    assert str(ei.value).startswith(str(p))
    assert "cannot read" in str(ei.value) and "--inventory" in str(ei.value)


def test_directory_instead_of_file_is_reported(tmp_path):
    with pytest.raises(InventoryError, match="cannot read"):
        inventory.load(tmp_path)


class TestSelect:
    @pytest.fixture
    def inv(self, tmp_path):
        return inventory.load(write(tmp_path, GOOD))

    def test_no_spec_means_every_host_in_file_order(self, inv):
        assert [h.name for h in inventory.select(inv, None)] == ["h1", "h2"]
        assert [h.name for h in inventory.select(inv, "")] == ["h1", "h2"]

    def test_comma_list_keeps_order_and_drops_duplicates(self, inv):
        assert [h.name for h in inventory.select(inv, "h2, h1,h2,")] == ["h2", "h1"]

    def test_adhoc_user_host_port_takes_the_defaults(self, inv):
        (h,) = inventory.select(inv, "ops@198.51.100.7:2200")
        assert (h.name, h.user, h.address, h.port, h.container, h.identity_file) == (
            "ops@198.51.100.7:2200", "ops", "198.51.100.7", 2200, "verl", "~/.ssh/id_ed25519")

    def test_adhoc_ipv6_in_brackets(self, inv):
        (h,) = inventory.select(inv, "[2001:db8::5]:22")
        assert (h.address, h.port) == ("2001:db8::5", 22)

    def test_unknown_name_lists_the_known_ones(self, inv):
        with pytest.raises(InventoryError, match=r"unknown host 'h9' in -H \(known: h1, h2\)"):
            inventory.select(inv, "h1,h9")

    def test_adhoc_port_out_of_range(self, inv):
        with pytest.raises(InventoryError, match="must be 1..65535"):
            inventory.select(inv, "root@10.0.0.1:99999")


def test_host_fields_match_the_design_contract():
    documented = ("name, address, port, user, identity_file, known_hosts, connect_timeout, container, workdir, "
                  "python, accelerator, devices, runs_dir, device_mounts, ssh_config, proxy_jump, model_dir, "
                  "data_dir, ckpt_dir, runtime, transport, env").split(", ")
    assert list(Host.__dataclass_fields__) == documented


def test_proxy_jump_may_name_another_inventory_host(tmp_path):
    inv = inventory.load(write(tmp_path, '[defaults]\nuser = "root"\n[hosts.bastion]\naddress = "192.0.2.1"\n'
                                         'port = 2200\n[hosts.h1]\naddress = "10.0.0.5"\nproxy_jump = "bastion"\n'))
    assert inv.hosts["h1"].proxy_jump == "root@192.0.2.1:2200"


def test_bare_metal_and_local_hosts(tmp_path):
    inv = inventory.load(write(tmp_path, '[defaults]\ncontainer = "verl"\nenv = {HF_HOME = "/data/hf", A = "1"}\n'
                                         '[hosts.bm]\naddress = "192.0.2.5"\nruntime = "host"\n'
                                         'env = {A = "2", TOKENIZERS_PARALLELISM = "false"}\n'
                                         '[hosts.me]\ntransport = "local"\n'))
    bm, me = inv.hosts["bm"], inv.hosts["me"]
    assert (bm.runtime, bm.container, bm.transport) == ("host", "", "ssh")  # the default container does not apply
    assert bm.env == {"HF_HOME": "/data/hf", "A": "2", "TOKENIZERS_PARALLELISM": "false"}  # merged with [defaults]
    assert (me.runtime, me.container, me.transport, me.address) == ("docker", "verl", "local", "localhost")
    assert len({bm, me, bm}) == 2  # hashable although env is a dict


def test_adhoc_host_takes_a_host_runtime_from_defaults_without_a_container(tmp_path):
    inv = inventory.load(write(tmp_path, '[defaults]\nruntime = "host"\n[hosts.h1]\naddress = "a"\n'))
    (h,) = inventory.select(inv, "root@198.51.100.7")
    assert (h.runtime, h.container, inv.hosts["h1"].container) == ("host", "", "")


def test_json_schema_in_docs_is_generated_from_the_model_and_agrees_with_it(tmp_path):
    import json
    import tomllib

    jsonschema = pytest.importorskip("jsonschema")
    schema = inventory.json_schema()
    assert json.loads((REPO / "docs" / "hosts.schema.json").read_text()) == schema, \
        "regenerate it: python -m dapo_ops.control.inventory > docs/hosts.schema.json"
    validator = jsonschema.Draft202012Validator(schema)
    assert not list(validator.iter_errors(tomllib.loads((REPO / "hosts.toml").read_text())))
    for text, *_ in [b[1:] for b in BAD if b[0] in (
            "unknown-field", "wrong-type-port", "zero-devices", "proxy-jump-ssh-option", "unknown-accelerator",
            "relative-workdir", "bad-container-name", "bad-host-name", "unknown-table", "env-bad-name")]:
        assert list(validator.iter_errors(tomllib.loads(text))), text
