"""``hosts.toml`` -> :class:`Inventory`: who the hosts are and how to reach each one's container.

The file has a ``[defaults]`` table (every host field may be set there), an optional ``[proxy]`` table
(``http_proxy``, ``https_proxy``, ``no_proxy``) and one ``[hosts.<name>]`` table per host::

    [defaults]
    user = "root"
    identity_file = "~/.ssh/id_ed25519"
    container = "verl"

    [hosts.h1]
    address = "192.0.2.11"

Which file is read: ``--inventory PATH`` > ``$DAPO_OPS_INVENTORY`` > ``./hosts.toml`` (:func:`resolve_path`).

Every problem with the file is an :class:`InventoryError` whose ``str()`` is ONE line naming the file, the
line (when TOML reports it or the key can be found in the text), the host and the field, e.g.
``hosts.toml:12: host 'h1': field 'port': expected an integer 1..65535, got string '22'``.
Loading never contacts a host.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ENV_VAR = "DAPO_OPS_INVENTORY"
DEFAULT_FILE = "hosts.toml"
ACCELERATORS = ("npu", "gpu")
PROXY_KEYS = ("http_proxy", "https_proxy", "no_proxy")
TOP_LEVEL = ("defaults", "proxy", "hosts")

# host / container names: safe in -H comma lists, file names and `docker exec <name>`
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_CONTAINER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")  # Docker's own container-name rule


class InventoryError(ValueError):
    """A problem with the inventory file or a ``-H`` selection; ``str()`` is one line.

    Attributes: ``path`` (file, may be None), ``line`` (1-based or None), ``host`` and ``field`` (or None).
    """

    def __init__(self, message: str, *, path=None, line: int | None = None, host: str | None = None,
                 field: str | None = None, section: str | None = None):
        self.path = str(path) if path is not None else None
        self.line = line
        self.host = host
        self.field = field
        self.reason = message
        where = self.path or "<inventory>"
        if line:
            where += f":{line}"
        parts = [where]
        if host:
            parts.append(f"host '{host}'")
        if section:
            parts.append(section)
        if field:
            parts.append(f"field '{field}'")
        parts.append(message)
        super().__init__(": ".join(parts).replace("\n", " "))


@dataclass(frozen=True)
class Host:
    """One inventory entry: an SSH target and its container.

    ``user``/``port``/``identity_file``/``known_hosts`` left as None fall back to the ``ssh_config`` file
    (if any), then to OpenSSH defaults (local user, port 22, ``~/.ssh/known_hosts``).
    Units: ``connect_timeout`` in seconds; ``devices`` = accelerator count on the host.
    """

    name: str
    address: str
    port: int | None = None
    user: str | None = None
    identity_file: str | None = None
    known_hosts: str | None = None
    connect_timeout: float = 10
    container: str = "verl"
    workdir: str = "/verl"
    python: str = "python3"
    accelerator: str = "npu"
    devices: int = 8
    runs_dir: str | None = None
    device_mounts: bool = True
    ssh_config: str | None = None
    proxy_jump: str | None = None
    model_dir: str | None = None
    data_dir: str | None = None
    ckpt_dir: str | None = None

    @property
    def runs_path(self) -> str:
        """``runs_dir`` or ``<workdir>/dapo_runs`` (inside the container)."""
        return self.runs_dir or f"{self.workdir.rstrip('/')}/dapo_runs"

    @property
    def ssh_target(self) -> str:
        """``user@address:port`` as far as known, for messages."""
        s = self.address
        if ":" in s:
            s = f"[{s}]"
        if self.user:
            s = f"{self.user}@{s}"
        if self.port:
            s = f"{s}:{self.port}"
        return s


# field name -> (type check, description of the expected type, extra validator or None)
def _is_str(v):
    return isinstance(v, str)


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v):
    return (isinstance(v, (int, float))) and not isinstance(v, bool)


def _is_bool(v):
    return isinstance(v, bool)


def _abs_path(v):
    return None if v.startswith("/") else "must be an absolute path inside the container (e.g. '/verl')"


def _port(v):
    return None if 1 <= v <= 65535 else f"must be 1..65535, got {v}"


def _positive(v):
    return None if v > 0 else f"must be > 0 seconds, got {v}"


def _non_negative(v):
    return None if v >= 0 else f"must be >= 0 (accelerators on the host), got {v}"


def _accelerator(v):
    return None if v in ACCELERATORS else f"unknown accelerator '{v}': use one of {', '.join(ACCELERATORS)}"


def _container(v):
    return None if _CONTAINER_RE.fullmatch(v) else f"'{v}' is not a valid Docker container name ([A-Za-z0-9][A-Za-z0-9_.-]*)"


def _nonempty(v):
    return None if v.strip() else "must not be empty"


FIELDS: dict[str, tuple] = {
    "address": (_is_str, "a string", _nonempty),
    "port": (_is_int, "an integer", _port),
    "user": (_is_str, "a string", _nonempty),
    "identity_file": (_is_str, "a string (path)", _nonempty),
    "known_hosts": (_is_str, "a string (path)", _nonempty),
    "connect_timeout": (_is_num, "a number (seconds)", _positive),
    "container": (_is_str, "a string", _container),
    "workdir": (_is_str, "a string (path)", _abs_path),
    "python": (_is_str, "a string", _nonempty),
    "accelerator": (_is_str, "a string", _accelerator),
    "devices": (_is_int, "an integer", _non_negative),
    "runs_dir": (_is_str, "a string (path)", _abs_path),
    "device_mounts": (_is_bool, "true or false", None),
    "ssh_config": (_is_str, "a string (path)", _nonempty),
    "proxy_jump": (_is_str, "a string ([user@]host[:port])", _nonempty),
    "model_dir": (_is_str, "a string (host path)", _nonempty),
    "data_dir": (_is_str, "a string (host path)", _nonempty),
    "ckpt_dir": (_is_str, "a string (host path)", _nonempty),
}
assert set(FIELDS) == {f.name for f in dataclasses.fields(Host)} - {"name"}


@dataclass(frozen=True)
class Inventory:
    """A parsed inventory: ``hosts`` in file order, ``proxy`` settings, ``defaults`` (for ad hoc hosts)."""

    path: Path | None
    hosts: dict[str, Host]
    proxy: dict[str, str] = field(default_factory=dict)
    defaults: dict = field(default_factory=dict)


def _type_name(v) -> str:
    if isinstance(v, bool):
        return "boolean"
    return {int: "integer", float: "float", str: "string", list: "array", dict: "table"}.get(type(v), type(v).__name__)


def _short(v) -> str:
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


class _Lines:
    """Find the line of a key in the raw TOML text (best effort; TOML gives lines only for syntax errors)."""

    _header = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")

    def __init__(self, text: str):
        self.lines = text.splitlines()

    @staticmethod
    def _norm(table: str) -> str:
        return ".".join(p.strip().strip('"').strip("'") for p in table.split("."))

    def find_prefix(self, top: str) -> int | None:
        """1-based line of the first header ``[top]`` or ``[top.<anything>]``."""
        for i, line in enumerate(self.lines, 1):
            m = self._header.match(line)
            if m:
                name = self._norm(m.group(1))
                if name == top or name.startswith(top + "."):
                    return i
        return None

    def find(self, table: str, key: str | None = None) -> int | None:
        """1-based line of ``key`` inside ``[table]`` (or of the header when key is None)."""
        current = None
        header_line = None
        key_re = re.compile(r"^\s*[\"']?" + re.escape(key) + r"[\"']?\s*=") if key else None
        for i, line in enumerate(self.lines, 1):
            m = self._header.match(line)
            if m:
                current = self._norm(m.group(1))
                if current == table:
                    header_line = i
                    if key is None:
                        return i
                continue
            if current == table and key_re and key_re.match(line):
                return i
        return header_line


def resolve_path(path: str | os.PathLike | None = None) -> Path:
    """Which inventory file to read: ``path`` > ``$DAPO_OPS_INVENTORY`` > ``./hosts.toml``."""
    if path:
        return Path(os.path.expanduser(str(path)))
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(os.path.expanduser(env))
    return Path(DEFAULT_FILE)


def load(path: str | os.PathLike | None = None) -> Inventory:
    """Read and validate an inventory file (nothing is contacted).

    :param path: the ``--inventory`` value; None/"" falls back to ``$DAPO_OPS_INVENTORY``, then ``./hosts.toml``.
    :returns: :class:`Inventory` with hosts in file order.
    :raises InventoryError: unreadable file, TOML syntax error, duplicate host, unknown table or field, wrong
        type, missing address, unknown accelerator, negative devices, bad port/path (one line each).
    """
    p = resolve_path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        how = "pass --inventory PATH or set DAPO_OPS_INVENTORY" if not path else "check the --inventory path"
        raise InventoryError(f"cannot read the inventory ({e.strerror or e}); {how}", path=p) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InventoryError(f"not UTF-8 text (byte {e.start}); save the file as UTF-8", path=p) from None
    return loads(text, p)


_TOML_LINE = re.compile(r"\(at line (\d+), column (\d+)\)")
_TWICE = re.compile(r"Cannot declare \(([^)]*)\) twice")


def loads(text: str, path: str | os.PathLike | None = None) -> Inventory:
    """Parse inventory TOML ``text``; ``path`` is only used in messages. See :func:`load`."""
    p = Path(path) if path is not None else None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        msg = str(e)
        m = _TOML_LINE.search(msg)
        line = int(m.group(1)) if m else None
        base = _TOML_LINE.sub("", msg).strip()
        t = _TWICE.search(base)
        if t:
            keys = [k.strip().strip("'\"") for k in t.group(1).split(",") if k.strip()]
            if len(keys) == 2 and keys[0] == "hosts":
                raise InventoryError(
                    f"duplicate host name: [hosts.{keys[1]}] is defined twice; give each host a unique name",
                    path=p, line=line, host=keys[1]) from None
            raise InventoryError(f"table [{'.'.join(keys)}] is defined twice; merge the two tables",
                                 path=p, line=line) from None
        if "Cannot overwrite a value" in base:
            raise InventoryError("a key is set twice in the same table; keep one", path=p, line=line) from None
        raise InventoryError(f"TOML syntax error: {base}", path=p, line=line) from None
    return _build(data, _Lines(text), p)


def _check_field(name: str, value, *, p, lines: _Lines, table: str, host: str | None):
    def err(msg):
        return InventoryError(msg, path=p, line=lines.find(table, name), host=host, field=name)

    if name not in FIELDS:
        valid = ", ".join(FIELDS)
        return err(f"unknown field (valid fields: {valid})")
    check, expected, extra = FIELDS[name]
    if not check(value):
        return err(f"expected {expected}, got {_type_name(value)} {_short(value)}")
    if extra is not None:
        problem = extra(value)
        if problem:
            return err(problem)
    return None


def _build(data: dict, lines: _Lines, p: Path | None) -> Inventory:
    for key in data:
        if key not in TOP_LEVEL:
            raise InventoryError(f"unknown table or key '{key}' (valid: [defaults], [proxy], [hosts.<name>])",
                                 path=p, line=lines.find_prefix(key) or _key_line(lines, key))
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise InventoryError("'defaults' must be a table: [defaults]", path=p, line=_key_line(lines, "defaults"))
    for name, value in defaults.items():
        e = _check_field(name, value, p=p, lines=lines, table="defaults", host=None)
        if e:
            raise InventoryError(e.reason, path=p, line=e.line, section="[defaults]", field=name)
    proxy = data.get("proxy", {})
    if not isinstance(proxy, dict):
        raise InventoryError("'proxy' must be a table: [proxy]", path=p, line=_key_line(lines, "proxy"))
    for k, v in proxy.items():
        if k not in PROXY_KEYS:
            raise InventoryError(f"unknown proxy setting (valid: {', '.join(PROXY_KEYS)})", path=p,
                                 line=lines.find("proxy", k), section="[proxy]", field=k)
        if not isinstance(v, str):
            raise InventoryError(f"expected a string, got {_type_name(v)} {_short(v)}", path=p,
                                 line=lines.find("proxy", k), section="[proxy]", field=k)
    hosts_tbl = data.get("hosts", {})
    if not isinstance(hosts_tbl, dict):
        raise InventoryError("'hosts' must be tables: [hosts.<name>]", path=p, line=_key_line(lines, "hosts"))
    hosts: dict[str, Host] = {}
    for hname, entry in hosts_tbl.items():
        table = f"hosts.{hname}"
        if not _NAME_RE.fullmatch(hname):
            raise InventoryError("invalid host name: use letters, digits, '_', '.', '-' (no '@', ':' or ',')",
                                 path=p, line=lines.find(table), host=hname)
        if not isinstance(entry, dict):
            raise InventoryError(f"expected a table [hosts.{hname}], got {_type_name(entry)}", path=p,
                                 line=_key_line(lines, hname), host=hname)
        for name, value in entry.items():
            e = _check_field(name, value, p=p, lines=lines, table=table, host=hname)
            if e:
                raise e
        merged = {**defaults, **entry}
        if "address" not in merged:
            raise InventoryError("missing address: add address = \"<IP or DNS name>\" to the table", path=p,
                                 line=lines.find(table), host=hname, field="address")
        hosts[hname] = Host(name=hname, **merged)
    if not hosts:
        raise InventoryError("no hosts: add at least one [hosts.<name>] table with an address", path=p)
    for hname, h in list(hosts.items()):  # proxy_jump may name another inventory host
        if h.proxy_jump in hosts:
            if h.proxy_jump == hname:
                raise InventoryError("proxy_jump names the host itself", path=p,
                                     line=lines.find(f"hosts.{hname}", "proxy_jump"), host=hname, field="proxy_jump")
            hosts[hname] = dataclasses.replace(h, proxy_jump=hosts[h.proxy_jump].ssh_target)
    return Inventory(path=p, hosts=hosts, proxy={k: proxy.get(k, "") for k in PROXY_KEYS}, defaults=dict(defaults))


def _key_line(lines: _Lines, key: str) -> int | None:
    rx = re.compile(r"^\s*[\"']?" + re.escape(key) + r"[\"']?\s*[=.]")
    for i, line in enumerate(lines.lines, 1):
        if rx.match(line):
            return i
    return None


_ADHOC = re.compile(r"^(?:(?P<user>[^@\s]+)@)?(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[^:@\[\]\s]+))(?::(?P<port>\d+))?$")


def _is_ip(s: str) -> bool:
    try:
        ipaddress.ip_address(s)
        return True
    except ValueError:
        return False


def parse_adhoc(spec: str, inv: Inventory | None = None) -> Host:
    """Build a :class:`Host` for an ad hoc ``[user@]host[:port]`` (IPv6 as ``[addr]``), using the inventory's
    ``[defaults]`` for every other field. The host's name is ``spec`` itself.

    :raises InventoryError: the string is not of that form, or the port is out of range.
    """
    m = _ADHOC.fullmatch(spec)
    if not m:
        raise InventoryError(f"'{spec}' is neither an inventory host name nor user@host:port", path=inv and inv.path)
    fields = dict(inv.defaults) if inv else {}
    fields["address"] = m.group("v6") or m.group("host")
    if m.group("user"):
        fields["user"] = m.group("user")
    if m.group("port"):
        port = int(m.group("port"))
        if not 1 <= port <= 65535:
            raise InventoryError(f"port {port} in '{spec}' must be 1..65535", path=inv and inv.path)
        fields["port"] = port
    return Host(name=spec, **fields)


def looks_adhoc(item: str) -> bool:
    """True when a ``-H`` item is meant as ``user@host:port`` rather than an inventory name."""
    return "@" in item or ":" in item or item.startswith("[") or _is_ip(item)


def select(inv: Inventory, spec: str | None) -> list[Host]:
    """Hosts named by a ``-H`` value.

    :param spec: comma list of inventory names and/or ad hoc ``user@host:port``; None or "" = every host in the
        inventory, in file order. Duplicates are dropped, order is kept.
    :raises InventoryError: an unknown name (the message lists the known ones).
    """
    if not spec or not spec.strip():
        return list(inv.hosts.values())
    out: list[Host] = []
    seen: set[str] = set()
    for item in (s.strip() for s in spec.split(",")):
        if not item or item in seen:
            continue
        seen.add(item)
        if item in inv.hosts:
            out.append(inv.hosts[item])
        elif looks_adhoc(item):
            out.append(parse_adhoc(item, inv))
        else:
            known = ", ".join(inv.hosts) or "none"
            raise InventoryError(
                f"unknown host '{item}' in -H (known: {known}); use an inventory name or user@host:port",
                path=inv.path)
    if not out:
        raise InventoryError(f"-H '{spec}' names no host", path=inv.path)
    return out


def empty(defaults: dict | None = None) -> Inventory:
    """An inventory with no hosts (for ad hoc ``-H user@host:port`` when no file exists)."""
    return Inventory(path=None, hosts={}, proxy={k: "" for k in PROXY_KEYS}, defaults=dict(defaults or {}))
