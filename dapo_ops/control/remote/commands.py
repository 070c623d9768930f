"""The host command lines of :class:`dapo_ops.control.remote.target.Target`, quoted for the host's shell.

``docker exec [-i] [-t] [-w DIR] [-e K=V ...] [--env-file F] <container> sh -c <cmd>`` (or ``<container> argv...``
when ``cmd`` is a list: each element arrives as one argv element, byte for byte), or for a bare host
(``runtime = "host"``) ``( cd <workdir> && export <host env> <env> && [set -a && . "$f" && set +a &&] sh -c <cmd> )``.
Everything that reaches a shell is ``shlex.quote``-d (:func:`q`); environment names are checked
(:func:`check_env`, ``ValueError`` for a bad name or a NUL byte).
"""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING

from dapo_ops.core import hostcmd

if TYPE_CHECKING:
    from dapo_ops.control.inventory.model import Host

_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def q(s) -> str:
    """``shlex.quote`` of ``str(s)``."""
    return shlex.quote(str(s))


def check_env(env: dict | None, what: str) -> dict[str, str]:
    """``env`` with str values (None -> ""). :raises ValueError: a name is not ``[A-Za-z_][A-Za-z0-9_]*`` or a value
    holds a NUL byte (``what`` names the table in the message)."""
    out = {}
    for k, v in (env or {}).items():
        if not isinstance(k, str) or not _ENV_KEY.fullmatch(k):
            raise ValueError(f"{what} name {k!r} is not a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*)")
        v = "" if v is None else str(v)
        if "\x00" in v:
            raise ValueError(f"{what} {k} contains a NUL byte, which no environment can carry")
        out[k] = v
    return out


class CommandLines:
    """Mixed into :class:`~dapo_ops.control.remote.target.Target`: builds (never runs) its host command lines
    from ``self.host`` (inventory :class:`~dapo_ops.control.inventory.hosts_file.Host`), ``self.container`` and ``self.bare``."""

    if TYPE_CHECKING:  # provided by the class it is mixed into (Target)
        host: Host
        container: str | None

        @property
        def bare(self) -> bool: ...

    def exec_command(
        self,
        cmd: str | list[str],
        *,
        env: dict | None = None,
        workdir: str | None = None,
        interactive: bool = False,
        tty: bool = False,
        env_file: str | None = None,
    ) -> str:
        """The quoted host command line for ``docker exec`` (no secrets: ``env`` values appear in it); for
        ``runtime = "host"`` the host shell line of :meth:`_bare_command` (``interactive``/``tty`` are the
        transport's business there)."""
        if self.bare:
            return self._bare_command(cmd, env=env, workdir=workdir, env_file=env_file)
        parts = []
        if interactive:
            parts.append("-i")
        if tty:
            parts.append("-t")
        if workdir:
            parts += ["-w", workdir]
        for k, v in check_env(env, "env").items():
            parts += ["-e", f"{k}={v}"]
        options = " ".join(q(p) for p in parts)
        if env_file:  # a shell expansion such as "$f", deliberately not quoted
            options = (options + " " if options else "") + f"--env-file {env_file}"
        return hostcmd.in_container(cmd, str(self.container), options)  # a docker host: never the bare line

    def look_command(self, cmd: str) -> str:
        """The quoted host command line for a short read-only look (a bundle op such as the status probe): the
        same ``sh -c <cmd>`` in the container, entered with ``nsenter`` (util-linux) into the running container's
        mount and PID namespaces when the SSH user is root, else with ``docker exec`` (:meth:`exec_command`) in the
        same host command. Same stdout, stderr and exit status either way (tests/test_look_bench.py).

        Why: on the sandbox bench a ``docker exec`` costs ~0.10 s of host CPU (docker CLI, dockerd, containerd,
        shim, runc), ``docker inspect`` ~0.03 s (the Go CLI starting), ``nsenter`` ~0.003 s; a fleet look pays it
        once per host (bench/status.py). ``nsenter -r -w`` takes the container init's root and working directory;
        ``PATH`` is the container's own (its init's ``/proc/<pid>/environ``), so ``python3`` is the image's.

        The init PID comes from ``docker inspect`` and is remembered in ``/run/dapo-ops/look-<container>`` (root's
        tmpfs, one line per Docker endpoint ``$DOCKER_HOST|$DOCKER_CONTEXT``, so two engines on one machine never
        share an entry) with the PID's start time (``/proc/<pid>/stat`` field 22), the container's PATH and its
        ``config.v2.json`` (beside ``HostnamePath``), whose mtime ``/run/dapo-ops/cfg-<container id>`` takes
        (``touch -r``). An entry is used only while the PID lives with that start time and ``config.v2.json`` is
        not newer than that mark:
        a restarted container has a new PID, a removed one has none, ``docker rename`` rewrites the config;
        anything else asks ``docker inspect`` again. The check is shell builtins only (no process). Root may
        enter any namespace, so this needs no right the ``docker`` group did not give. A host that refuses
        ``nsenter`` (user namespaces, seccomp) answers ``nsenter: ...`` on stderr:
        :meth:`~dapo_ops.control.remote.target.Target.run` then uses ``docker exec`` for that Target.
        """
        if self.bare:
            return self._bare_command(cmd, env=None, workdir="", env_file=None)
        c = q(self.container)
        k = q(f"/run/dapo-ops/look-{self.container}")
        fmt = q("{{if .State.Running}}{{.State.Pid}} {{.HostnamePath}}{{end}}")
        return " ".join(
            (
                # the cached entry of this Docker endpoint: "<endpoint> <pid> <start> <config.v2.json> <PATH>"
                f'p=; n=$(command -v nsenter 2>/dev/null) && [ "$(id -u)" = 0 ] && {{ k={k};',
                'dh="${DOCKER_HOST:-}|${DOCKER_CONTEXT:-}"; while read -r d p st cf cp; do [ "$d" = "$dh" ] && break;',
                'p=; done 2>/dev/null < "$k";',
                # valid while that PID has that start time and the config is not newer than its mark (builtins only)
                '{ [ -n "$p" ] && { read -r ln < "/proc/$p/stat"; } 2>/dev/null && set -- ${ln##*) } &&',
                r'eval "[ \"\${20}\" = \"\$st\" ]" && m=${cf%/*} && m=/run/dapo-ops/cfg-${m##*/} && [ -f "$m" ] &&',
                '! [ "$cf" -nt "$m" ]; } || {',
                f'p=; x=$(docker inspect -f {fmt} {c} 2>/dev/null) && [ -n "$x" ] && p=${{x%% *}} && cf=${{x#* }} &&',
                'cf=${cf%/*}/config.v2.json && cp=$(tr "\\000" "\\n" < "/proc/$p/environ" | sed -n "s/^PATH=//p") &&',
                '{ read -r ln < "/proc/$p/stat"; } 2>/dev/null && set -- ${ln##*) } && eval "st=\\${20}" && [ -f "$cf" ] &&',
                'mkdir -p /run/dapo-ops && { grep -v -F "$dh " "$k" 2>/dev/null; printf \'%s %s %s %s %s\\n\' "$dh" "$p"',
                '"$st" "$cf" "$cp"; } > "$k.$$" && mv -f "$k.$$" "$k" && m=${cf%/*} && touch -r "$cf" "/run/dapo-ops/cfg-${m##*/}";',
                "}; };",
                'if [ -n "$p" ] && [ "$p" != 0 ]; then',
                'PATH="${cp:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}"',
                f'"$n" -t "$p" -m -p -r -w sh -c {q(cmd)};',
                f"else {self.exec_command(cmd, workdir='')}; fi",
            )
        )

    def host_env(self, env: dict | None = None) -> dict[str, str]:
        """The inventory ``env`` table merged with a call's ``env`` (the call wins; ``PYTHONPATH`` is joined,
        the call's entries first). Only bare hosts have one (docker hosts: the call's ``env``)."""
        base = dict(getattr(self.host, "env", None) or {}) if self.bare else {}
        call = check_env(env, "env")
        out = {**check_env(base, "inventory env"), **call}
        if "PYTHONPATH" in base and "PYTHONPATH" in call and base["PYTHONPATH"] and call["PYTHONPATH"]:
            out["PYTHONPATH"] = call["PYTHONPATH"] + ":" + base["PYTHONPATH"]
        return out

    def _bare_command(
        self, cmd: str | list[str], *, env: dict | None, workdir: str | None, env_file: str | None
    ) -> str:
        """``( cd <wd> && export K=V... && [set -a && . <env_file> && set +a &&] sh -c <cmd> )`` (all quoted)."""
        steps = []
        if workdir:
            steps.append(f"cd {q(workdir)}")
        merged = self.host_env(env)
        if merged:
            steps.append("export " + " ".join(f"{k}={q(v)}" for k, v in merged.items()))
        if env_file:
            steps.append(f"set -a && . {env_file} && set +a")  # "$f": a shell expansion, deliberately unquoted
        if isinstance(cmd, str):
            steps.append("sh -c " + q(cmd))
        else:
            if not cmd:
                raise ValueError("empty argv")
            steps.append(" ".join(q(a) for a in cmd))
        return "( " + " && ".join(steps) + " )"
