"""hosts.toml parsing and -H selection (pure: nothing is contacted)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dapo_ops.control.inventory import hosts_file as inventory
from dapo_ops.control.inventory import model as inventory_model
from dapo_ops.control.inventory.hosts_file import InventoryError
from dapo_ops.control.inventory.model import Host

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


# The corpus of bad inventories: tests/fixtures/bad_hosts/<id>.toml, each ending in comment lines that say who
# refuses it (``load``: the loader; ``check``: `hosts --check`, a file on the operator's machine), the regex the ONE
# line must match, its line number, and ``schema: n/a (why)`` where no JSON Schema can say it (TOML syntax, files).
BAD_DIR = Path(__file__).resolve().parent / "fixtures" / "bad_hosts"


def _corpus() -> list[tuple[str, bytes, dict]]:
    rows = []
    for f in sorted(BAD_DIR.glob("*.toml")):
        raw = f.read_bytes()
        meta = dict(m.groups() for m in re.finditer(rb"^# (refused-by|message|line|schema): (.*)$", raw, re.M))
        rows.append((f.stem, raw, {k.decode(): v.decode() for k, v in meta.items()}))
    return rows


CORPUS = _corpus()
BAD = [(i, raw, m) for i, raw, m in CORPUS if m["refused-by"] == "load"]


@pytest.mark.parametrize("raw,meta", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_is_one_line_naming_file_line_host_field(tmp_path, raw, meta):
    p = tmp_path / "hosts.toml"
    p.write_bytes(raw)
    with pytest.raises(InventoryError) as ei:
        inventory.load(p)
    msg = str(ei.value)
    assert "\n" not in msg
    assert msg.startswith(str(p)), msg
    assert re.search(meta["message"], msg), msg
    if "line" in meta:
        assert ei.value.line == int(meta["line"]), msg
        assert msg.startswith(f"{p}:{meta['line']}: "), msg


CHECK = [(i, raw, m) for i, raw, m in CORPUS if m["refused-by"] == "check"]


@pytest.mark.parametrize("raw,meta", [b[1:] for b in CHECK], ids=[b[0] for b in CHECK])
def test_key_files_on_this_machine_are_refused_by_the_check(tmp_path, raw, meta):
    """The files a connect reads here (identity_file, known_hosts): the loader takes them (a dry run elsewhere
    needs no key), `hosts --check` refuses them in one line (inventory.check_key_files, issue 32 item 8)."""
    p = tmp_path / "hosts.toml"
    p.write_bytes(raw)
    inv = inventory.load(p)
    with pytest.raises(InventoryError) as ei:
        inventory.check_key_files(inv, list(inv.hosts.values()))
    msg = str(ei.value)
    assert "\n" not in msg and re.search(meta["message"], msg), msg
    assert msg.startswith(f"{p}:{meta['line']}: "), msg


def test_the_corpus_is_the_issue_32_size_and_each_file_says_who_refuses_it():
    assert len(CORPUS) >= 43
    assert all(m.get("refused-by") in ("load", "check") and m.get("message") for _, _, m in CORPUS)


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

    def test_comma_list_keeps_order_and_refuses_a_host_named_twice(self, inv):
        """``-H h1,h1`` was accepted as h1 alone (a new user's trial): most likely a typo for another host, and a
        multi-host run on fewer hosts than listed is another topology: refused in one line naming the host."""
        assert [h.name for h in inventory.select(inv, "h2, h1")] == ["h2", "h1"]
        with pytest.raises(inventory.InventoryError) as e:
            inventory.select(inv, "h2, h1,h2")
        assert "\n" not in str(e.value) and "-H 'h2, h1,h2' names h2 twice: name each host once" in str(e.value)

    @pytest.mark.parametrize("spec,n", [("h1,,h2", 2), ("h1,", 2), (",h1", 1), ("h1, ,h2", 2)])
    def test_an_empty_entry_is_refused_not_dropped(self, inv, spec, n):
        """``-H h1,,h2`` ran on h1 and h2 in silence (a new user's trial): a host left out (``-H h1,$H2,h3``)."""
        with pytest.raises(inventory.InventoryError) as e:
            inventory.select(inv, spec)
        msg = str(e.value)
        assert "\n" not in msg and f"-H '{spec}': entry {n} is empty" in msg and "e.g. -H h1,h2" in msg, msg

    def test_adhoc_user_host_port_takes_the_defaults(self, inv):
        (h,) = inventory.select(inv, "ops@198.51.100.7:2200")
        assert (h.name, h.user, h.address, h.port, h.container, h.identity_file) == (
            "ops@198.51.100.7:2200",
            "ops",
            "198.51.100.7",
            2200,
            "verl",
            "~/.ssh/id_ed25519",
        )

    def test_adhoc_ipv6_in_brackets(self, inv):
        (h,) = inventory.select(inv, "[2001:db8::5]:22")
        assert (h.address, h.port) == ("2001:db8::5", 22)

    def test_unknown_name_lists_the_known_ones(self, inv):
        with pytest.raises(InventoryError, match=r"unknown host 'h9' in -H \(known: h1, h2\)") as e:
            inventory.select(inv, "h1,h9")
        # a command printed after --inventory X, pasted without it (a new user's trial): the line names the way back
        assert "--inventory <hosts.toml>, or export DAPO_OPS_INVENTORY=<hosts.toml>" in str(e.value), e.value

    def test_adhoc_port_out_of_range(self, inv):
        with pytest.raises(InventoryError, match="must be 1..65535"):
            inventory.select(inv, "root@10.0.0.1:99999")


def test_host_fields_match_the_design_contract():
    documented = (
        "name, address, port, user, identity_file, known_hosts, connect_timeout, container, workdir, "
        "python, accelerator, devices, runs_dir, device_mounts, ssh_config, proxy_jump, model_dir, "
        "data_dir, ckpt_dir, runtime, transport, supervisor, env, container_from"
    ).split(", ")
    assert list(Host.__dataclass_fields__) == documented


def test_proxy_jump_may_name_another_inventory_host(tmp_path):
    inv = inventory.load(
        write(
            tmp_path,
            '[defaults]\nuser = "root"\n[hosts.bastion]\naddress = "192.0.2.1"\n'
            'port = 2200\n[hosts.h1]\naddress = "10.0.0.5"\nproxy_jump = "bastion"\n',
        )
    )
    assert inv.hosts["h1"].proxy_jump == "root@192.0.2.1:2200"


def test_bare_metal_and_local_hosts(tmp_path):
    inv = inventory.load(
        write(
            tmp_path,
            '[defaults]\ncontainer = "verl"\nenv = {HF_HOME = "/data/hf", A = "1"}\n'
            '[hosts.bm]\naddress = "192.0.2.5"\nruntime = "host"\n'
            'env = {A = "2", TOKENIZERS_PARALLELISM = "false"}\n'
            '[hosts.me]\ntransport = "local"\n',
        )
    )
    bm, me = inv.hosts["bm"], inv.hosts["me"]
    assert (bm.runtime, bm.container, bm.transport) == ("host", "", "ssh")  # the default container does not apply
    assert bm.env == {"HF_HOME": "/data/hf", "A": "2", "TOKENIZERS_PARALLELISM": "false"}  # merged with [defaults]
    assert (me.runtime, me.container, me.transport, me.address) == ("docker", "verl", "local", "localhost")
    assert len({bm, me, bm}) == 2  # hashable although env is a dict


def test_adhoc_host_takes_a_host_runtime_from_defaults_without_a_container(tmp_path):
    inv = inventory.load(write(tmp_path, '[defaults]\nruntime = "host"\n[hosts.h1]\naddress = "a"\n'))
    (h,) = inventory.select(inv, "root@198.51.100.7")
    assert (h.runtime, h.container, inv.hosts["h1"].container) == ("host", "", "")


def test_json_schema_in_docs_is_generated_from_the_model_and_agrees_with_it():
    import json

    jsonschema = pytest.importorskip("jsonschema")
    schema = inventory_model.json_schema()
    assert json.loads((REPO / "docs" / "hosts.schema.json").read_text()) == schema, (
        "regenerate it: python -m dapo_ops.control.inventory.hosts_file > docs/hosts.schema.json"
    )
    jsonschema.Draft202012Validator.check_schema(schema)


GOOD_FILES = {
    "repo-example": None,  # hosts.toml of the repo
    "tests-good": GOOD,
    "bare-metal-and-local": '[defaults]\ncontainer = "verl"\nenv = {HF_HOME = "/data/hf"}\n[hosts.bm]\naddress = "b"\n'
    'runtime = "host"\nenv = {TOKENIZERS_PARALLELISM = "false", https_proxy = "None", '
    'NO_PROXY = "localhost, .corp,10.0.0.0/8"}\n[hosts.me]\ntransport = "local"\n',
    "host-runtime-in-defaults": '[defaults]\nruntime = "host"\ncontainer = ""\n[hosts.h1]\naddress = "a"\n',
    "address-in-defaults": '[defaults]\naddress = "a"\nport = 22\n[hosts.h1]\n[hosts.h2]\nport = 2222\n',
    "proxy-with-credentials": '[proxy]\nhttp_proxy = "http://u:pw@p:3128"\nhttps_proxy = "none"\n'
    'no_proxy = "*.corp,[::1]:8080"\n[hosts.h1]\naddress = "a"\npython = "/opt/conda/bin/python3.10"\n'
    'proxy_jump = "ops@bastion:2200"\ndevices = 16\n',
}


@pytest.mark.parametrize("name", list(GOOD_FILES))
def test_good_files_pass_the_loader_and_the_schema(tmp_path, name):
    import tomllib

    jsonschema = pytest.importorskip("jsonschema")
    text = GOOD_FILES[name] if GOOD_FILES[name] is not None else (REPO / "hosts.toml").read_text()
    inventory.loads(text, tmp_path / "hosts.toml")
    errs = list(jsonschema.Draft202012Validator(inventory_model.json_schema()).iter_errors(tomllib.loads(text)))
    assert not errs, [e.message for e in errs]


SCHEMA_ROWS = [(i, raw) for i, raw, m in CORPUS if "schema" not in m]


@pytest.mark.parametrize("raw", [r for _, r in SCHEMA_ROWS], ids=[i for i, _ in SCHEMA_ROWS])
def test_the_schema_refuses_every_bad_file_the_loader_refuses(raw):
    """One validator, two results (issue 32 item 8): docs/hosts.schema.json is generated from the loader's model
    and rules and refuses the same corpus (all but the rows marked ``schema: n/a``: TOML syntax and files)."""
    import tomllib

    jsonschema = pytest.importorskip("jsonschema")
    data = tomllib.loads(raw.decode("utf-8"))
    assert list(jsonschema.Draft202012Validator(inventory_model.json_schema()).iter_errors(data))


def test_a_hosts_supervisor_table_reaches_the_run_spec_and_the_supervisors_tunables(tmp_path):
    """``[hosts.<name>.supervisor]``: what the stall / hang hints tell an operator to raise (stall_floor_s,
    stall_factor) and the retry delay HCCL may need, per host; written into the spec only when set."""
    from dapo_ops.agent.supervisor import config as sup_config
    from dapo_ops.control import settings
    from dapo_ops.control.launch import plan
    from dapo_ops.core import defaults

    p = tmp_path / "hosts.toml"
    p.write_text(
        '[hosts.h1]\naddress = "10.0.0.1"\naccelerator = "gpu"\ndevices = 1\n'
        "[hosts.h1.supervisor]\nstall_floor_s = 300\nretry_delay_s = 30\n"
        '[hosts.h2]\naddress = "10.0.0.2"\naccelerator = "gpu"\ndevices = 1\n'
    )
    inv = inventory.load(str(p))
    st = settings.resolve({"steps": 3}, {"FRAMEWORK": "fsdp", "ROLLOUT_TP": "1"}, {})

    def spec(name: str) -> dict:
        inputs = plan.PlanInputs(
            settings=st, host=inv.hosts[name], mode="dapo", run_id="20261207-000000-abcd", swanlab_logger=False
        )
        return plan.draft_plan(inputs).spec

    s1, s2 = spec("h1"), spec("h2")
    assert s1["supervisor"] == {"stall_floor_s": 300.0, "retry_delay_s": 30.0} and "supervisor" not in s2
    tun = sup_config.tunables(defaults.RunSpec.read(s1))
    assert (tun["stall_floor_s"], tun["retry_delay_s"], tun["stall_factor"]) == (300.0, 30.0, 5.0)
    assert sup_config.tunables(defaults.RunSpec.read(s2))["retry_delay_s"] == 3.0  # GPU's own


def test_the_stall_and_hang_hints_name_what_an_operator_can_set():
    from dapo_ops.agent.supervisor import escalate

    v = escalate.stall_verdict(120.0, 60.0, [11.0], 1, 6, [], "stacks-attempt-1.txt", stall_by="no-step")
    assert "[hosts.<name>.supervisor]" in v["hint"] and "spec supervisor" not in v["hint"]
    h = escalate.hang_verdict(900.0, 3, 6)
    assert "--hang-timeout" in h["hint"] and "HANG_TIMEOUT" in h["hint"]
