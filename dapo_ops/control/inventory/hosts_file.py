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

The model is :class:`Host` (types, ranges, enums and patterns as msgspec ``Annotated`` metadata); each table of the
file is validated by msgspec against :data:`HostTable` (every field optional) / :class:`ProxyTable`, and
:class:`HostsFile` is the whole file (``docs/hosts.schema.json`` is ``msgspec.json.schema(HostsFile)``, see
:func:`json_schema`); all of them live in :mod:`dapo_ops.control.inventory.model` (import them from there). Every
problem is an :class:`InventoryError` whose ``str()`` is ONE line naming the file,
the line (TOML's, or the key found in the text), the host and the field, e.g.
``hosts.toml:12: host 'h1': field 'port': expected an integer, got string '22'``. Loading never contacts a host.
"""

import dataclasses
import ipaddress
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
from msgspec import UNSET

from dapo_ops.core.defaults import HOST
from dapo_ops.control.inventory.model import (
    NAME_PATTERN,
    SECRET_WORDS,
    Host,
    HostsFile,
    HostTable,
    ProxyTable,
    json_schema,
    problem_of,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ENV_VAR = "DAPO_OPS_INVENTORY"
DEFAULT_FILE = "hosts.toml"
PROXY_KEYS = ("http_proxy", "https_proxy", "no_proxy")


class InventoryError(ValueError):
    """A problem with the inventory file or a ``-H`` selection; ``str()`` is one line.

    Attributes: ``path`` (file, may be None), ``line`` (1-based or None), ``host`` and ``field`` (or None).
    """

    def __init__(
        self,
        message: str,
        *,
        path=None,
        line: int | None = None,
        host: str | None = None,
        field: str | None = None,
        section: str | None = None,
    ):
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


class TomlLines:
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

    def key_line(self, key: str) -> int | None:
        """1-based line of the first ``key =`` or ``key.`` anywhere (a top-level key)."""
        rx = re.compile(r"^\s*[\"']?" + re.escape(key) + r"[\"']?\s*[=.]")
        return next((i for i, line in enumerate(self.lines, 1) if rx.match(line)), None)


_EXPECTED = {
    "int": "an integer",
    "float": "a number",
    "str": "a string",
    "bool": "true or false",
    "object": "a table",
    "array": "an array",
}
_MSGSPEC_ERR = re.compile(r"^(?P<what>.*?)(?: - at `(?P<at>[^`]*)`(?: in `(?P<in>[^`]*)`)?)?$")


def explain(err: msgspec.ValidationError, table: dict, model: type[msgspec.Struct]) -> tuple[str, str]:
    """Turn msgspec's error for one TOML ``table`` (a dict) converted to the Struct ``model`` into
    ``(field, one-line reason)``: an unknown field lists the valid ones; a failed constraint gives the field's
    :func:`rule` ``problem`` (else msgspec's own text)."""
    m = _MSGSPEC_ERR.match(str(err))
    assert m is not None  # every part of the pattern but `what` is optional: it matches any one-line message
    what, at = m.group("what"), m.group("in") or m.group("at") or "$"
    unknown = re.fullmatch(r"Object contains unknown field `(.*)`", what)
    if unknown and at == "$":
        return unknown.group(1), f"unknown field (valid fields: {', '.join(model.__struct_fields__)})"
    if at == "$" and re.match(r"^\w+: ", what):  # a Struct's own check (ProxyTable.__post_init__): "<field>: <why>"
        return tuple(what.split(": ", 1))
    km = re.match(r"^\$\.(\w+)", at)
    # a table converted to a Struct whose fields all have defaults: what is left is an error at one of its fields
    assert km is not None, str(err)
    key = km.group(1)
    value = table.get(key)
    typed = re.fullmatch(r"Expected `(\w+)(?: \| null)?`, got `\w+`", what)
    if typed and at == f"$.{key}":
        return key, f"expected {_EXPECTED.get(typed.group(1), typed.group(1))}, got {_type_name(value)} {_short(value)}"
    problem = problem_of(next((f.type for f in msgspec.structs.fields(model) if f.name == key), None))
    return key, problem.format(v=value) if problem else what[:1].lower() + what[1:]


def resolve_path(path: str | os.PathLike | None = None) -> Path:
    """Which inventory file to read: ``path`` > ``$DAPO_OPS_INVENTORY`` > ``./hosts.toml``.

    :raises InventoryError: ``$DAPO_OPS_INVENTORY`` is set but empty (or blank): the settings table's empty-value
        rule (:data:`dapo_ops.control.settings.EMPTY_RULES` ``refuse``: an empty value is never the default's
        ``./hosts.toml`` in silence; ``DAPO_OPS_INVENTORY=$INV`` with INV unset is a forgotten path)."""
    if path:
        return Path(os.path.expanduser(str(path)))
    env = os.environ.get(ENV_VAR)
    if env is not None and not env.strip():
        raise InventoryError(
            f"{ENV_VAR} is set but empty; set it to a hosts.toml path (e.g. {ENV_VAR}=/etc/dapo-ops/hosts.toml), "
            f"or unset it (`unset {ENV_VAR}`) for ./{DEFAULT_FILE}"
        )
    if env:
        return Path(os.path.expanduser(env))
    return Path(DEFAULT_FILE)


def load(path: str | os.PathLike | None = None) -> Inventory:
    """Read and validate an inventory file (nothing is contacted).

    :param path: the ``--inventory`` value; None/"" falls back to ``$DAPO_OPS_INVENTORY``, then ``./hosts.toml``.
    :returns: :class:`Inventory` with hosts in file order.
    :raises InventoryError: unreadable file, TOML syntax error, duplicate host, unknown table or field, wrong
        type, missing address, a value out of its range/enum/pattern (one line each; see :func:`loads`).
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


def toml_error(e: tomllib.TOMLDecodeError) -> tuple[str, int | None]:
    """``(message without the position, 1-based line or None)`` of a tomllib error."""
    m = _TOML_LINE.search(str(e))
    return _TOML_LINE.sub("", str(e)).strip(), int(m.group(1)) if m else None


def loads(text: str, path: str | os.PathLike | None = None) -> Inventory:
    """Parse inventory TOML ``text``; ``path`` is only used in messages. See :func:`load`.

    Besides the model's per-field rules: an address is required (in the host or [defaults]) unless
    ``transport = "local"``; ``runtime = "host"`` refuses a container set in the same table; ``env`` names that
    look like secrets (KEY, TOKEN, SECRET, PASSWORD) are refused (hosts.toml is kept in git); ``proxy_jump`` may
    name another inventory host (it becomes that host's ``user@address:port``).
    """
    p = Path(path) if path is not None else None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        base, line = toml_error(e)
        t = _TWICE.search(base)
        if t:
            keys = [k.strip().strip("'\"") for k in t.group(1).split(",") if k.strip()]
            if len(keys) == 2 and keys[0] == "hosts":
                raise InventoryError(
                    f"duplicate host name: [hosts.{keys[1]}] is defined twice; give each host a unique name",
                    path=p,
                    line=line,
                    host=keys[1],
                ) from None
            raise InventoryError(
                f"table [{'.'.join(keys)}] is defined twice; merge the two tables", path=p, line=line
            ) from None
        if "Cannot overwrite a value" in base:
            raise InventoryError("a key is set twice in the same table; keep one", path=p, line=line) from None
        raise InventoryError(f"TOML syntax error: {base}", path=p, line=line) from None
    return _build(data, TomlLines(text), p)


def _table(value, typ, lines: TomlLines, table: str, **where) -> dict:
    """Validate one TOML table against the Struct ``typ`` (then the rules between a host table's fields); return
    the fields it gives. ``where``: ``path``, ``host``, ``section`` of the :class:`InventoryError` raised."""

    def err(key, reason):
        return InventoryError(reason, line=lines.find(f"{table}.{key}") or lines.find(table, key), field=key, **where)

    if not isinstance(value, dict):
        raise InventoryError(
            f"'{table}' must be a table [{table}], got {_type_name(value)} {_short(value)}",
            line=lines.key_line(table.split(".")[-1]),
            **where,
        )
    try:
        t = {k: v for k, v in msgspec.structs.asdict(msgspec.convert(value, typ)).items() if v is not UNSET}
    except msgspec.ValidationError as e:
        key, reason = explain(e, value, typ)
        if typ is ProxyTable and reason.startswith("unknown field"):
            reason = f"unknown proxy setting (valid: {', '.join(PROXY_KEYS)})"
        raise err(key, reason) from None
    if t.get("runtime") == "host" and t.get("container"):
        raise err("container", 'runtime = "host" runs without a container: remove container (or set it to "")')
    cfg = t.get("ssh_config")
    if cfg and not os.path.isfile(os.path.expanduser(cfg)):  # remote/target.py reads it at connect (fabric.Config)
        what = "is not a file" if os.path.exists(os.path.expanduser(cfg)) else "does not exist"
        raise err(
            "ssh_config",
            f"ssh_config file {cfg} {what}: fix the path (an OpenSSH client config file, "
            f"e.g. ~/.ssh/config) or remove ssh_config",
        )
    port = re.search(r":([0-9]+)$", t.get("proxy_jump") or "")
    if port and not 1 <= int(port.group(1)) <= 65535:
        raise err("proxy_jump", f"port {port.group(1)} must be 1..65535")
    secret = next((k for k in t.get("env", {}) if set(SECRET_WORDS) & set(k.upper().split("_"))), None)
    if secret:
        raise err("env", f"{secret} looks like a secret and hosts.toml is kept in git: keep secrets out of it")
    return t


def _build(data: dict, lines: TomlLines, p: Path | None) -> Inventory:
    for key in data:
        if key not in HostsFile.__struct_fields__:
            raise InventoryError(
                f"unknown table or key '{key}' (valid: [defaults], [proxy], [hosts.<name>])",
                path=p,
                line=lines.find_prefix(key) or lines.key_line(key),
            )
    defaults = _table(data.get("defaults", {}), HostTable, lines, "defaults", path=p, section="[defaults]")
    proxy = _table(data.get("proxy", {}), ProxyTable, lines, "proxy", path=p, section="[proxy]")
    hosts_tbl = data.get("hosts", {})
    if not isinstance(hosts_tbl, dict):
        raise InventoryError("'hosts' must be tables: [hosts.<name>]", path=p, line=lines.key_line("hosts"))
    hosts: dict[str, Host] = {}
    for hname, entry in hosts_tbl.items():
        table = f"hosts.{hname}"
        if not re.fullmatch(NAME_PATTERN, hname):
            raise InventoryError(
                "invalid host name: use letters, digits, '_', '.', '-' (no '@', ':' or ',')",
                path=p,
                line=lines.find(table),
                host=hname,
            )
        own = _table(entry, HostTable, lines, table, path=p, host=hname)
        merged = {**defaults, **own, "env": {**defaults.get("env", {}), **own.get("env", {})}}
        if merged.get("runtime") == "host" and "container" not in own:
            merged["container"] = ""  # a default container does not apply to a bare-metal host
        if merged.get("transport") == "local":
            merged.setdefault("address", "localhost")
        if "address" not in merged:
            raise InventoryError(
                'missing address: add address = "<IP or DNS name>" to the table',
                path=p,
                line=lines.find(table),
                host=hname,
                field="address",
            )
        if merged.get("runtime", HOST["runtime"]) == "docker" and merged.get("container") == "":
            raise InventoryError(
                'container is empty: name the container, or set runtime = "host" (no container)',
                path=p,
                line=lines.find(table, "container"),
                host=hname,
                field="container",
            )
        hosts[hname] = Host(name=hname, **merged)
    if not hosts:
        raise InventoryError("no hosts: add at least one [hosts.<name>] table with an address", path=p)
    for hname, h in list(hosts.items()):  # proxy_jump may name another inventory host
        if h.proxy_jump in hosts:
            if h.proxy_jump == hname:
                raise InventoryError(
                    "proxy_jump names the host itself",
                    path=p,
                    line=lines.find(f"hosts.{hname}", "proxy_jump"),
                    host=hname,
                    field="proxy_jump",
                )
            hosts[hname] = dataclasses.replace(h, proxy_jump=hosts[h.proxy_jump].ssh_target)
    return Inventory(path=p, hosts=hosts, proxy={k: proxy.get(k, "") for k in PROXY_KEYS}, defaults=defaults)


def key_file_problem(h: Host, field: str, *, accept_new_host_keys: bool = False) -> str:
    """Why the operator-side file ``h.<field>`` (``identity_file`` or ``known_hosts``) cannot serve a connect
    (``""`` when it can or is not set): the private key must be a file (remote/target.py ``connect`` refuses it
    too, kind ``auth``); known_hosts must be a file, unless ``accept_new_host_keys`` may create it (its directory
    then must exist or be creatable). The one rule of ``hosts --check`` (:func:`check_key_files`) and the connect."""
    value = getattr(h, field)
    if not value:
        return ""
    path = Path(os.path.expanduser(value))
    if path.is_file():
        return ""
    what = "is not a file" if path.exists() else "does not exist"
    if field == "identity_file":
        return f"identity file {value} {what}: fix identity_file (the SSH private key on this machine)"
    if not path.exists() and accept_new_host_keys:
        return ""
    return (
        f"known_hosts file {value} {what}: host keys are verified against it; fix the path, or create it "
        f"(touch {value}) and connect once with --accept-new-host-keys (after checking the fingerprints)"
    )


def check_key_files(inv: Inventory, hosts: list[Host], *, accept_new_host_keys: bool = False) -> None:
    """``hosts --check``: the key files each host's connect reads on this machine (:func:`key_file_problem`);
    nothing is contacted. Raises :class:`InventoryError` (one line: file:line, host or [defaults], field)."""
    lines = None
    if inv.path is not None:
        try:
            lines = TomlLines(Path(inv.path).read_text(encoding="utf-8"))
        except OSError:
            lines = None
    for h in hosts:
        for fld in ("identity_file", "known_hosts"):
            why = key_file_problem(h, fld, accept_new_host_keys=accept_new_host_keys)
            if not why:
                continue
            own = lines and h.name in inv.hosts and lines.find(f"hosts.{h.name}", fld)
            if lines and own and own != lines.find(f"hosts.{h.name}"):
                raise InventoryError(why, path=inv.path, line=own, host=h.name, field=fld)
            line = lines.find("defaults", fld) if lines else None
            raise InventoryError(
                why,
                path=inv.path,
                line=line,
                section="[defaults]" if line else None,
                host=None if line else h.name,
                field=fld,
            )


_ADHOC = re.compile(
    r"^(?:(?P<user>[^@\s]+)@)?(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[^:@\[\]\s]+))(?::(?P<port>\d+))?$"
)


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
    if fields.get("runtime") == "host":
        fields["container"] = ""  # as for inventory hosts: no container on a bare-metal host
    return Host(name=spec, **fields)


def looks_adhoc(item: str) -> bool:
    """True when a ``-H`` item is meant as ``user@host:port`` rather than an inventory name."""
    return "@" in item or ":" in item or item.startswith("[") or _is_ip(item)


def select(inv: Inventory, spec: str | None) -> list[Host]:
    """Hosts named by a ``-H`` value.

    :param spec: comma list of inventory names and/or ad hoc ``user@host:port``; None or "" = every host in the
        inventory, in file order; order is kept.
    :raises InventoryError: an unknown name (the message lists the known ones); an empty entry (``h1,,h2``,
        ``h1,``: a host name left out, e.g. ``-H h1,$H2`` with ``H2`` unset, is never dropped in silence).
    """
    if not spec or not spec.strip():
        return list(inv.hosts.values())
    items = [s.strip() for s in spec.split(",")]
    _refuse_empty_entry(spec, items, inv)
    _refuse_duplicate(spec, items, inv)
    out: list[Host] = []
    for item in items:
        if item in inv.hosts:
            out.append(inv.hosts[item])
        elif looks_adhoc(item):
            out.append(parse_adhoc(item, inv))
        else:
            known = ", ".join(inv.hosts) or "none"
            # a command printed after `--inventory X` names X's hosts: pasted without it, it reads this file (a trial)
            raise InventoryError(
                f"unknown host '{item}' in -H (known: {known}); use an inventory name or user@host:port, or the "
                f"inventory that names it (--inventory <hosts.toml>, or export {ENV_VAR}=<hosts.toml>)",
                path=inv.path,
            )
    if not out:
        raise InventoryError(f"-H '{spec}' names no host", path=inv.path)
    return out


def _refuse_duplicate(spec: str, items: list[str], inv: Inventory) -> None:
    """Raise :class:`InventoryError` naming the first host the ``-H`` list ``spec`` names twice."""
    twice = [x for i, x in enumerate(items) if x in items[:i]]
    if twice:
        raise InventoryError(
            f"-H '{spec}' names {twice[0]} twice: name each host once (a typo for another host? e.g. -H h1,h2)",
            path=inv.path,
        )


def _refuse_empty_entry(spec: str, items: list[str], inv: Inventory) -> None:
    """Raise :class:`InventoryError` naming the first empty entry of the ``-H`` list ``spec`` (split into ``items``)."""
    if "" in items:
        raise InventoryError(
            f"-H '{spec}': entry {items.index('') + 1} is empty (a doubled or trailing comma, or a host name left "
            f"out): give a comma list of hosts with no empty entry, e.g. -H h1,h2",
            path=inv.path,
        )


def empty(defaults: dict | None = None) -> Inventory:
    """An inventory with no hosts (for ad hoc ``-H user@host:port`` when no file exists)."""
    return Inventory(path=None, hosts={}, proxy={k: "" for k in PROXY_KEYS}, defaults=dict(defaults or {}))


if __name__ == "__main__":  # python -m dapo_ops.control.inventory.hosts_file > docs/hosts.schema.json
    import json

    print(json.dumps(json_schema(), indent=2))
