"""The ``hosts.toml`` model: :class:`Host` (types, ranges, enums and patterns as msgspec ``Annotated`` metadata,
each with its one-line ``problem`` text: :func:`rule`), the per-table msgspec types (:data:`HostTable`,
:class:`ProxyTable`), the whole file (:class:`HostsFile`) and its JSON Schema (:func:`json_schema`, written to
``docs/hosts.schema.json`` by ``python -m dapo_ops.control.inventory.hosts_file``). Loading and the error messages are
:mod:`dapo_ops.control.inventory.hosts_file`.
"""

import dataclasses
import re
import types
import typing
from dataclasses import dataclass, field
from typing import Annotated, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from dapo_ops.agent.supervisor.config import HOST_TUNABLES
from dapo_ops.core.defaults import HOST, runs_path

# host / container names: safe in -H comma lists, file names and `docker exec <name>` (Docker's own name rule)
# ("$(?!\n)": msgspec matches with Python's re.search, whose "$" also matches before a final newline)
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$(?!\n)"
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
# proxy_jump: an inventory host name or [user@]host[:port] (IPv6 in brackets); no spaces, no leading '-' (an
# ssh option such as -oProxyCommand=... is refused here instead of failing in fabric.Connection)
JUMP_PATTERN = r"^(?:[A-Za-z0-9_][A-Za-z0-9_.-]*@)?(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9_.-]*)(?::[0-9]{1,5})?$"


def rule(problem: str, **constraints) -> Meta:
    """msgspec metadata: constraints and ``problem``, the one-line message template (``{v}`` = the value) used
    when a constraint fails."""
    return Meta(extra={"problem": problem}, **constraints)


def problem_of(tp) -> str | None:
    """The ``problem`` template in a (possibly nested / optional) Annotated type's msgspec metadata."""
    for meta in getattr(tp, "__metadata__", ()):
        if isinstance(meta, Meta) and meta.extra and "problem" in meta.extra:
            return meta.extra["problem"]
    return next((p for a in typing.get_args(tp) if (p := problem_of(a))), None)


_NONEMPTY = dict(pattern=r"\S")  # msgspec matches with re.search
Text = Annotated[str, rule("must not be empty", **_NONEMPTY)]
# container paths reach `docker exec -w` and shell lines (quoted, but a ';' or newline in a path is a mistake or an
# attack): absolute, and only the characters shlex.quote leaves unquoted (Lib/shlex.py _find_unsafe: \w@%+=:,./-)
ContainerPath = Annotated[
    str,
    rule(
        "must be an absolute path inside the container (e.g. '/verl') of letters, digits "
        "and _ @ % + = : , . / - (no spaces, shell metacharacters or newlines), got {v!r}",
        pattern=r"^/[\w@%+=:,./-]*$(?!\n)",
    ),
]
# an address / user starting with '-' would be read by ssh as an option (-oProxyCommand=...): refused here
Address = Annotated[
    str,
    rule(
        "{v!r} is not an IP or DNS name (no spaces; a leading '-' would be an ssh option)", pattern=r"^[^\s-]\S*$(?!\n)"
    ),
]
User = Annotated[
    str,
    rule("{v!r} is not a user name (no spaces; a leading '-' would be an ssh option)", pattern=r"^[^\s-]\S*$(?!\n)"),
]
Port = Annotated[int, rule("must be 1..65535, got {v}", ge=1, le=65535)]
Seconds = Annotated[float, rule("must be > 0 seconds, got {v}", gt=0)]
#: the most accelerators one host has (8 on an Ascend 910B / HGX host, 16 on an Atlas A3 node): a larger count is
#: a typo (``devices = 100000``), refused here rather than as a batch that does not split
MAX_DEVICES = 64
Devices = Annotated[
    int,
    rule(
        "must be 1..%d (accelerators on the host; verl's trainer.n_gpus_per_node), got {v}" % MAX_DEVICES,
        ge=1,
        le=MAX_DEVICES,
    ),
]
# the interpreter reaches `docker exec` and shell lines: a path (/opt/conda/bin/python) or a bare name on PATH
# (python3), of the characters shlex.quote leaves unquoted; never a command line ("python3; touch /tmp/x")
Python = Annotated[
    str,
    rule(
        "must be a path or a bare interpreter name (e.g. python3, /opt/conda/bin/python): letters, "
        "digits and _ @ % + = : , . / - (no spaces, shell metacharacters or options), got {v!r}",
        pattern=r"^[\w@%+=:,./][\w@%+=:,./-]*$(?!\n)",
    ),
]
Container = Annotated[
    str,
    rule(
        "{v!r} is not a valid Docker container name ([A-Za-z0-9][A-Za-z0-9_.-]*)",
        pattern=NAME_PATTERN.replace("^", "^(?:").replace("$", ")?$"),
    ),
]
Accelerator = Annotated[Literal["npu", "gpu"], rule("unknown accelerator {v!r}: use one of npu, gpu")]
Runtime = Annotated[Literal["docker", "host"], rule("unknown runtime {v!r}: use one of docker, host")]
Transport = Annotated[Literal["ssh", "local"], rule("unknown transport {v!r}: use one of ssh, local")]
Jump = Annotated[
    str,
    rule("{v!r} is not [user@]host[:port] or an inventory host name (no spaces, no ssh options)", pattern=JUMP_PATTERN),
]
Env = Annotated[
    dict[Annotated[str, Meta(pattern=ENV_NAME_PATTERN)], str],
    rule("keys must be environment variable names ([A-Za-z_][A-Za-z0-9_]*), values strings"),
]

#: ``[hosts.<name>.supervisor]``: the on-host supervisor's tunables for this host's runs (seconds, except
#: ``stall_factor`` and ``log_*``; :data:`dapo_ops.agent.supervisor.config.DEFAULT_TUNABLES`), e.g.
#: ``stall_floor_s = 300`` on a cluster whose steps legitimately pause, ``retry_delay_s = 30`` where HCCL needs longer
#: to release its links; written into the run spec's ``supervisor`` table
Tunables = Annotated[
    dict[Literal[HOST_TUNABLES], Annotated[float, Meta(gt=0)]],  # type: ignore[valid-type]
    rule("keys: %s; values numbers > 0" % ", ".join(HOST_TUNABLES)),
]


@dataclass(frozen=True)
class Host:
    """One inventory entry: an SSH target and its container (the model of a ``[hosts.<name>]`` table).

    ``user``/``port``/``identity_file``/``known_hosts`` left as None fall back to the ``ssh_config`` file
    (if any), then to OpenSSH defaults (local user, port 22, ``~/.ssh/known_hosts``).
    Units: ``connect_timeout`` in seconds; ``devices`` = accelerator count on the host (>= 1). Every default is
    :data:`dapo_ops.core.defaults.HOST`'s, the one table of host defaults (readers without a Host read it too).
    ``runtime = "host"``: no container (``container`` is ""); ``transport = "local"``: commands run by a local
    subprocess (``address`` may be omitted: "localhost"). ``env``: non-secret variables for host mode.
    """

    name: str
    address: Address
    port: Port | None = HOST["port"]
    user: User | None = HOST["user"]
    identity_file: Text | None = HOST["identity_file"]
    known_hosts: Text | None = HOST["known_hosts"]
    connect_timeout: Seconds = HOST["connect_timeout"]
    container: Container = HOST["container"]
    workdir: ContainerPath = HOST["workdir"]
    python: Python = HOST["python"]
    accelerator: Accelerator = HOST["accelerator"]
    devices: Devices = HOST["devices"]
    runs_dir: ContainerPath | None = HOST["runs_dir"]
    device_mounts: bool = HOST["device_mounts"]
    ssh_config: Text | None = HOST["ssh_config"]
    proxy_jump: Jump | None = HOST["proxy_jump"]
    model_dir: Text | None = HOST["model_dir"]
    data_dir: Text | None = HOST["data_dir"]
    ckpt_dir: Text | None = HOST["ckpt_dir"]
    runtime: Runtime = HOST["runtime"]
    transport: Transport = HOST["transport"]
    supervisor: Tunables | None = HOST["supervisor"]
    env: Env = field(default_factory=dict, hash=False)
    #: where ``container`` came from when it is not the inventory's: ``"--container"`` or ``"CONTAINER"`` (set by the
    #: CLI's ``with_container``, never read from hosts.toml: not a table key), for messages that say what to fix
    container_from: str = field(default="", compare=False)

    @property
    def runs_path(self) -> str:
        """``runs_dir`` or ``<workdir>/dapo_runs`` (inside the container; :func:`dapo_ops.core.defaults.runs_path`)."""
        return runs_path(self.runs_dir, self.workdir)

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


_HINTS = Host.__annotations__  # objects, not strings: no `from __future__ import annotations` here (import time)
_DOCS = {  # for editors (docs/hosts.schema.json); the example hosts.toml says the same in its comments
    "address": "IP or DNS name (optional with transport = 'local')",
    "port": "SSH port (default: ssh_config, 22)",
    "user": "SSH user (allowed to run docker)",
    "identity_file": "private key on the operator's machine",
    "known_hosts": "host keys are verified against it",
    "connect_timeout": "seconds for the SSH connect",
    "container": "the docker exec target; empty only with runtime = 'host'",
    "python": "python in the container",
    "workdir": "in the container: where `import verl` works",
    "accelerator": "npu (Ascend) | gpu (NVIDIA)",
    "devices": "accelerators on the host",
    "runs_dir": "in the container: run dirs (default <workdir>/dapo_runs)",
    "device_mounts": "container.create adds the accelerator devices",
    "ssh_config": "OpenSSH config file to apply",
    "proxy_jump": "bastion: [user@]host[:port] or an inventory host name",
    "model_dir": "host path, bind-mounted",
    "data_dir": "host path, bind-mounted",
    "ckpt_dir": "host path, bind-mounted",
    "transport": "ssh | local subprocess",
    "runtime": "docker: in the container | host: in the host's own shell",
    "env": "non-secret env for runtime = 'host'",
    "supervisor": "the on-host supervisor's tunables for this host's runs (stall_floor_s, retry_delay_s, ...)",
}


def _field_type(f: dataclasses.Field):
    """``f``'s type for one TOML table: optional (UNSET = not given), None dropped (TOML has no null), with a
    description and the default for the JSON Schema."""
    tp = _HINTS[f.name]
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        tp = typing.Union[tuple(a for a in typing.get_args(tp) if a is not type(None))]
    default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
    extra = {} if default in (None, dataclasses.MISSING) else {"default": default}
    return Annotated[tp, Meta(description=_DOCS.get(f.name), extra_json_schema=extra)] | UnsetType


def _host_proxy_check(self) -> None:
    """A host table's ``env`` proxy entries (the per-host proxy of ``runtime = "host"``) follow the one proxy rule
    (:func:`dapo_ops.control.inventory.proxy.problem`, :func:`~dapo_ops.control.inventory.proxy.no_proxy_problem`) and carry no
    credentials: that env is exported on the host's command line (dapo_ops/control/remote/commands.py
    ``_bare_command``). ValueError ``env: <why>`` (msgspec wraps it; :func:`dapo_ops.control.inventory.hosts_file.explain`)."""
    from dapo_ops.control.inventory import proxy
    from dapo_ops.core import redact

    for k, v in (self.env if self.env is not UNSET else {}).items():
        if k.lower() in proxy.PROXY_VARS and v.strip().lower() not in proxy.NONE_ANSWERS:
            why = proxy.problem(v.strip())
            if why:
                raise ValueError(f"env: {k}={proxy.shown(v)!r} is not a proxy URL ({why}); set it to {proxy.FORM}")
            if redact.has_credentials(v):
                raise ValueError(
                    f"env: {k} carries credentials and a host's env is exported on its command line: "
                    f"move the proxy to hosts.toml [proxy] {k.lower()} or the env var {k.lower()} "
                    f"(they reach the run through the 0600 secret.env)"
                )
        elif k.lower() == "no_proxy" and proxy.no_proxy_problem(v):
            raise ValueError(
                f"env: {k}={v!r} is not a no_proxy list ({proxy.no_proxy_problem(v)}); use "
                f"comma-separated host names, IPs or CIDRs (e.g. localhost,.corp,10.0.0.0/8)"
            )


#: Host fields that are not keys of a hosts.toml table: the table's own name, and the CLI's record of a container
#: given by flag or env var
NOT_IN_TABLE = ("name", "container_from")

#: one table of the file ([defaults] or [hosts.<name>]): every Host field but :data:`NOT_IN_TABLE`, each optional
if typing.TYPE_CHECKING:  # fields built from Host at import (defstruct); to mypy it is a Struct class

    class HostTable(msgspec.Struct): ...

else:
    HostTable = msgspec.defstruct(
        "HostTable",
        [(f.name, _field_type(f), UNSET) for f in dataclasses.fields(Host) if f.name not in NOT_IN_TABLE],
        forbid_unknown_fields=True,
        namespace={"__post_init__": _host_proxy_check},
    )


class ProxyTable(msgspec.Struct, forbid_unknown_fields=True):
    """``[proxy]``: exported into the container for downloads (pip, HF hub, SwanLab cloud)."""

    http_proxy: str = ""
    https_proxy: str = ""
    no_proxy: str = ""

    def __post_init__(self):
        """The one proxy rule (:func:`dapo_ops.control.inventory.proxy.problem`, :func:`~dapo_ops.control.inventory.proxy.no_proxy_problem`;
        also used by the settings and quickstart); msgspec turns the ValueError into its ValidationError, whose text
        ``<field>: <problem>`` :func:`dapo_ops.control.inventory.hosts_file.explain` reads."""
        from dapo_ops.control.inventory import proxy

        for k in ("http_proxy", "https_proxy"):
            v = getattr(self, k).strip()
            why = proxy.problem(v) if v.lower() not in proxy.NONE_ANSWERS else ""
            if why:
                raise ValueError(f"{k}: {proxy.shown(v)!r} is not a proxy URL ({why}); set it to {proxy.FORM}")
        why = proxy.no_proxy_problem(self.no_proxy)
        if why:
            raise ValueError(
                f"no_proxy: {self.no_proxy!r} is not a no_proxy list ({why}); use comma-separated host "
                f"names, IPs or CIDRs (e.g. localhost,.corp,10.0.0.0/8)"
            )


class HostsFile(msgspec.Struct, forbid_unknown_fields=True):
    """The whole ``hosts.toml``: ``[defaults]`` (any host field), ``[proxy]``, ``[hosts.<name>]`` tables.

    The JSON Schema's root; :func:`loads` validates table by table (:data:`HostTable`, :class:`ProxyTable`) so that
    a message can name the host (msgspec's error path hides dict keys)."""

    hosts: Annotated[dict[Annotated[str, Meta(pattern=NAME_PATTERN)], HostTable], Meta(min_length=1)]
    defaults: HostTable = msgspec.field(default_factory=HostTable)
    proxy: ProxyTable = msgspec.field(default_factory=ProxyTable)


#: a word of an env name that marks a secret (``HF_TOKEN``, ``API_KEY``; not ``TOKENIZERS_PARALLELISM``): refused in
#: a host's ``env`` (hosts.toml is kept in git), :func:`dapo_ops.control.inventory.hosts_file.loads`
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD")


def _ci(word: str) -> str:
    """A case-insensitive regex for ``word`` without flags (JSON Schema patterns are ECMA-262: no ``(?i)``)."""
    return "".join(
        f"[{c.upper()}{c.lower()}]" if c.isalpha() else c if c in "-_" or c.isalnum() else re.escape(c) for c in word
    )


def _schema_rules(schema: dict) -> dict:
    """The loader's rules that span fields or tables, or live in code (:func:`dapo_ops.control.inventory.proxy.problem`),
    added to msgspec's schema from the same constants: an address (or ``transport = "local"``) per host, a
    container unless ``runtime = "host"`` and none with it, no secret-named ``env`` key, proxy URLs of the
    proxy rule's schemes without credentials, spaces or shell characters in a host's ``env``. What no schema can
    say: that ``ssh_config`` / ``identity_file`` / ``known_hosts`` exist on the operator's machine (the loader and
    ``hosts --check`` say it)."""
    from dapo_ops.control.inventory import proxy

    none = "|".join(_ci(a) if a.isascii() else a for a in sorted(proxy.NONE_ANSWERS) if a)
    port = r"(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3})"
    host = r"(?:\[[0-9A-Fa-f:.]+\]|(?!.*\.\.)[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?)"
    schemes = "|".join(sorted(proxy.SCHEMES, key=len, reverse=True))
    scheme, hostport = rf"(?:(?:{schemes})://)?", rf"{host}(?::{port})?/?"
    proxy_rx = rf"^\s*(?:|(?:{none})|{scheme}{hostport})\s*$"  # a host's env: on its command line, no credentials
    proxy_rx_cred = rf"^\s*(?:|(?:{none})|{scheme}(?:[^\s@/?#]*@)?{hostport})\s*$"
    entry = r"(?:\*|(?:\*\.|\.)?[A-Za-z0-9_.:\[\]-]+|[0-9A-Fa-f:.]+/[0-9]{1,3})"
    no_proxy_rx = rf"^\s*(?:{entry}(?:\s*[,;]\s*{entry})*)?\s*[,;]?\s*$"
    words = "|".join(_ci(w) for w in SECRET_WORDS)
    d = schema["$defs"]
    ht = d["HostTable"]
    env = ht["properties"]["env"]
    env["propertyNames"]["pattern"] = rf"^(?!(?:.*_)?(?:{words})(?:_.*)?$)" + ENV_NAME_PATTERN.lstrip("^")
    env["patternProperties"] = {
        f"^(?:{'|'.join(_ci(k) for k in proxy.PROXY_VARS)})$": {"type": "string", "pattern": proxy_rx},
        f"^{_ci('no_proxy')}$": {"type": "string", "pattern": no_proxy_rx},
    }
    ht["properties"]["proxy_jump"]["pattern"] = JUMP_PATTERN.replace("[0-9]{1,5}", port)
    ht["allOf"] = [
        {
            "if": {"properties": {"runtime": {"const": "host"}}, "required": ["runtime"]},
            "then": {"properties": {"container": {"const": ""}}},
        }
    ]
    for k in ("http_proxy", "https_proxy"):
        d["ProxyTable"]["properties"][k]["pattern"] = proxy_rx_cred  # [proxy]: credentials go to the 0600 env file
    d["ProxyTable"]["properties"]["no_proxy"]["pattern"] = no_proxy_rx
    reachable = {
        "anyOf": [
            {"required": ["address"]},
            {"properties": {"transport": {"const": "local"}}, "required": ["transport"]},
        ]
    }
    bare = {"properties": {"runtime": {"const": "host"}}, "required": ["runtime"]}
    hf = d["HostsFile"]
    hf["allOf"] = [
        {
            "if": {"properties": {"defaults": reachable}, "required": ["defaults"]},
            "then": {},
            "else": {"properties": {"hosts": {"additionalProperties": reachable}}},
        },
        {
            "if": {"properties": {"defaults": bare}, "required": ["defaults"]},
            "then": {},
            "else": {
                "properties": {
                    "hosts": {
                        "additionalProperties": {
                            "if": {"properties": {"container": {"const": ""}}, "required": ["container"]},
                            "then": bare,
                        }
                    }
                }
            },
        },
        {
            "if": {
                "properties": {"defaults": {"properties": {"container": {"const": ""}}, "required": ["container"]}},
                "required": ["defaults"],
            },
            "then": {
                "anyOf": [
                    {"properties": {"defaults": bare}},
                    {
                        "properties": {
                            "hosts": {
                                "additionalProperties": {
                                    "anyOf": [
                                        bare,
                                        {"properties": {"container": {"minLength": 1}}, "required": ["container"]},
                                    ]
                                }
                            }
                        }
                    },
                ]
            },
        },
    ]
    return schema


def json_schema() -> dict:
    """JSON Schema (2020-12) of ``hosts.toml``, generated from :class:`HostsFile` and the loader's cross-field
    rules (:func:`_schema_rules`) (``docs/hosts.schema.json``)."""
    return _schema_rules(
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "dapo-ops hosts.toml",
            **msgspec.json.schema(HostsFile),
        }
    )
