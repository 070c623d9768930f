"""The `hosts` fan-out task end to end on the 3 sandbox hosts, through the real CLIs (`inv` and `dapo-ops`)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.bench


def row(out: str, host: str) -> str:
    rows = [ln for ln in out.splitlines() if f" {host} " in ln]
    assert len(rows) == 1, f"expected one row for {host}:\n{out}"
    return rows[0]


@pytest.fixture
def verl_version(sandbox):
    return sandbox.exec(
        "h1", "python3 -c 'import verl; print(verl.__version__)'", workdir="/verl", check=True
    ).stdout.strip()


def test_all_hosts_ok(sandbox, verl_version, cli):
    out = cli("dapo-ops", "hosts", "-H", ",".join(sandbox.hosts), "--inventory", sandbox.inventory)
    assert out.returncode == 0, out.stderr
    for h in sandbox.hosts:
        r = row(out.stdout, h)
        assert " ok " in r and "running" in r and verl_version in r and sandbox.addresses[h] in r


def test_core_H_selects_hosts(sandbox, cli):
    out = cli("dapo-ops", "-H", "h1,h3", "hosts", "--inventory", sandbox.inventory)
    assert out.returncode == 0, out.stderr
    assert " h2 " not in out.stdout
    row(out.stdout, "h1"), row(out.stdout, "h3")


def test_sshd_killed_one_row_says_refused_others_succeed_exit_nonzero(sandbox, cli):
    sandbox.kill_sshd("h2")
    try:
        out = cli("inv", "hosts", "-H", ",".join(sandbox.hosts), "--inventory", sandbox.inventory)
    finally:
        sandbox.start_sshd("h2")
    assert out.returncode == 1
    assert " ok " in row(out.stdout, "h1") and " ok " in row(out.stdout, "h3")
    r2 = row(out.stdout, "h2")
    assert "FAIL refused" in r2 and f"connection to root@{sandbox.addresses['h2']}:22 refused" in r2
    assert out.stderr.strip() == "1 of 3 hosts failed: h2 (refused)"


def test_stopped_and_missing_containers_get_their_own_messages(sandbox, cli):
    sandbox.ssh("h2", "docker kill verl", check=True)
    # `docker kill` returns once the signal is sent; the precondition is a container that IS stopped
    sandbox.ssh(
        "h2",
        "for i in $(seq 50); do [ \"$(docker inspect -f '{{.State.Status}}' verl)\" = exited ] && exit 0; "
        "sleep 0.1; done; exit 1",
        check=True,
    )
    sandbox.ssh("h3", "docker rename verl verl-away", check=True)
    try:
        out = cli("dapo-ops", "-H", ",".join(sandbox.hosts), "hosts", "--inventory", sandbox.inventory)
    finally:
        sandbox.ssh("h3", "docker rename verl-away verl")
        sandbox.reset("h2")
    assert out.returncode == 1
    assert " ok " in row(out.stdout, "h1")
    r2, r3 = row(out.stdout, "h2"), row(out.stdout, "h3")
    assert "FAIL container-stopped" in r2 and "container 'verl' is exited (exit code 137)" in r2
    assert "FAIL container-missing" in r3 and "container 'verl' does not exist (Docker: Error" in r3
    assert "No such object: verl" in r3 or "No such container: verl" in r3  # docker inspect's / exec's wording
    assert out.stderr.strip() == "2 of 3 hosts failed: h2 (container-stopped), h3 (container-missing)"


def test_link_down_is_unreachable_within_the_connect_timeout(sandbox, cli):
    sandbox.link("h3", False)
    try:
        out = cli("dapo-ops", "-t", "2", "-H", "h1,h3", "hosts", "--inventory", sandbox.inventory)
    finally:
        sandbox.link("h3", True)
    assert out.returncode == 1
    assert " ok " in row(out.stdout, "h1")
    r3 = row(out.stdout, "h3")
    assert "FAIL unreachable" in r3
    assert "timed out after 2 s" in r3 or "No route to host" in r3


def test_missing_workdir_is_named_not_blamed_on_python(sandbox, cli, tmp_path):
    """docker exec -w <missing dir> exits 126 with runc's reason on STDOUT; the row names the workdir and the fix
    (hosts.toml `workdir`), not "python3 not runnable" (new-user trial)."""
    text = (
        open(sandbox.inventory)
        .read()
        .replace(
            f'address = "{sandbox.addresses["h3"]}"', f'address = "{sandbox.addresses["h3"]}"\nworkdir = "/nonexist"'
        )
    )
    inv = tmp_path / "hosts.toml"
    inv.write_text(text)
    out = cli("dapo-ops", "hosts", "-H", "h3", "--inventory", str(inv))
    assert out.returncode == 1
    r3 = row(out.stdout, "h3")
    assert "FAIL workdir-missing" in r3, out.stdout
    assert "workdir /nonexist does not exist in container 'verl'" in r3 and "fix workdir in hosts.toml" in r3
    assert "not runnable" not in out.stdout
    assert out.stderr.strip() == "1 of 1 hosts failed: h3 (workdir-missing)"
    # preflight: its probe's exec fails the same way, and its check names the workdir too (not `python`)
    pf = cli("inv", "preflight", "-H", "h3", "--inventory", str(inv), "--json", "--swanlab-mode", "disabled")
    assert pf.returncode == 1, pf.stdout + pf.stderr
    checks = {c["name"]: c for c in json.loads(pf.stdout)["hosts"]["h3"]["checks"]}
    assert checks["workdir"]["status"] == "fail" and "python" not in checks, checks
    assert "workdir /nonexist does not exist" in checks["workdir"]["message"]
