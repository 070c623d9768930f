"""The ONE way code reaches a training container: the bundle, and the one-line calls into it.

The bundle is every ``.py`` under ``dapo_ops/core`` and ``dapo_ops/agent`` (stdlib only: the training image
needs nothing but a ``python3``), installed once per content hash under
``<runs_dir>/.dapo_ops/<version>-<content hash>/dapo_ops/`` (docs/design.md "Stdlib-only rule"): an edited
module never reuses a stale copy, an unchanged bundle is not copied again. Everything remote is then one shell
line (model: SkyPilot's ``sky/skylet``: one installed runtime, gated by its version)::

    test -f <bundle>/dapo_ops/.complete || { echo dapo-ops-bundle-missing >&2; exit 97; };
    PYTHONPATH=<bundle>${PYTHONPATH:+:$PYTHONPATH} exec python3 -m dapo_ops.agent.<op> <args>

(:func:`op_line`, ops in :data:`OPS`). :func:`run_op` runs it and, only when the bundle is missing (exit
:data:`MISSING_RC` with :data:`MISSING_MARK`), installs it (:func:`install`) and runs it once more: a look at a host
stays one round trip once the bundle is there. The container's own ``PYTHONPATH`` stays after the bundle (verl
found through it, e.g. a bare host's ``/opt/verl-site``).

The supervisor is started by the op :mod:`dapo_ops.agent.runstart` (``inv launch``'s one start call): in its own
session, all three streams redirected, so nothing dies when the op, ``docker exec`` or SSH end; the op answers once
verl has started (no polling from the operator side).
"""

from __future__ import annotations

import base64
import hashlib
import io
import posixpath
import shlex
import time
from pathlib import Path
from typing import Callable

from dapo_ops import __version__

from dapo_ops.control.remote.errors import RemoteError, is_no_space, space_fix
from dapo_ops.control.remote.errors import python_cannot_run

PKG_DIR = Path(__file__).resolve().parents[2]  # dapo_ops/ (this file: dapo_ops/control/remote/bundle.py)
#: the shipped tiers: everything under them (and the package's own ``__init__``) runs inside the training image
SHIPPED = ("core", "agent")
COMPLETE_MARK = ".complete"
#: the ops of the bundle: ``python3 -m dapo_ops.agent.<op>`` (each a module of ``dapo_ops/agent`` with a ``main``)
OPS = (
    "supervisor",
    "runprobe",
    "runstop",
    "runlogs",
    "preflight_probe",
    "compose",
    "download",
    "verlinfo",
    "occupancy",
    "raysession",
    "runfiles",
    "runstart",
)
#: exit status and stderr word of an op line whose bundle is not installed (no op exits 97 itself)
MISSING_RC = 97
MISSING_MARK = "dapo-ops-bundle-missing"


#: this process's read of its own package's bundle: (stat signature, files, hash) (:func:`bundle_files`)
_OWN: list = []


def bundle_files(pkg_dir: Path | None = None) -> dict[str, bytes]:
    """``{"<path relative to dapo_ops/>": content}``: ``__init__.py`` and every ``.py`` under :data:`SHIPPED`.

    The bundle is the folders, not an import closure: whatever lands in ``core/`` or ``agent/`` ships
    (``tests/test_stdlib_only.py`` keeps them stdlib-only). The package's own bundle is read once per process
    and again only when a file's size or mtime changes (a fleet look calls this once per host: ~8 ms of reading
    and hashing each time otherwise); callers get their own dict.
    """
    d = Path(pkg_dir) if pkg_dir else PKG_DIR
    paths = [d / "__init__.py"] + [f for tier in SHIPPED for f in sorted((d / tier).rglob("*.py"))]
    if d != PKG_DIR:
        return {f.relative_to(d).as_posix(): f.read_bytes() for f in paths}
    sig = tuple((str(f), st.st_size, st.st_mtime_ns) for f in paths for st in (f.stat(),))
    if not _OWN or _OWN[0] != sig:
        files = {f.relative_to(d).as_posix(): f.read_bytes() for f in paths}
        _OWN[:] = [sig, files, _hash(files)]
    return dict(_OWN[1])


def bundle_hash(files: dict[str, bytes]) -> str:
    """12 hex digits of SHA-256 over the sorted file names and contents."""
    if _OWN and files == _OWN[1]:
        return _OWN[2]
    return _hash(files)


def _hash(files: dict[str, bytes]) -> str:
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode() + b"\0" + files[name] + b"\0")
    return h.hexdigest()[:12]


def bundle_dir(runs_dir: str, files: dict[str, bytes] | None = None) -> str:
    """``<runs_dir>/.dapo_ops/<version>-<hash>``: the directory that goes on ``PYTHONPATH`` (container path)."""
    files = bundle_files() if files is None else files
    return f"{runs_dir.rstrip('/')}/.dapo_ops/{__version__}-{bundle_hash(files)}"


def bundle_tar(files: dict[str, bytes]) -> bytes:
    """A gzip tar with ``dapo_ops/<module>.py`` entries (mode 0644, fixed mtime)."""
    import tarfile  # here: only an install builds the tar, a look never does

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name in sorted(files):
            info = tarfile.TarInfo(f"dapo_ops/{name}")
            info.size = len(files[name])
            info.mode = 0o644
            info.mtime = 0
            tar.addfile(info, io.BytesIO(files[name]))
    return buf.getvalue()


def install_command(bdir: str, python: str = "python3", staged: str | None = None) -> str:
    """Shell command (run inside the container) that unpacks ``staged`` (default ``<bdir>.tar.gz.b64``: base64
    of :func:`bundle_tar`, text survives every stdin path) into ``bdir`` atomically, and removes ``staged``.

    Unpacks into ``<bdir>.tmp-<pid>`` and renames, so an interrupted copy never leaves a half bundle. Several
    installs at once (two launches on a fresh host) each stage their own file (:func:`install`); the first rename
    wins and the others keep its bundle (a bundle with its ``.complete`` marker is never replaced: an op may be
    running from it).
    """
    q = shlex.quote
    return f"{q(python)} -c {q(_INSTALL_PY)} {q(bdir)} {q(staged or bdir + '.tar.gz.b64')}"


#: the installer program of :func:`install_command` (argv: bundle dir, staged base64 tar)
_INSTALL_PY = (
    "import os,sys,tarfile,shutil,base64,io\n"
    "d,t=sys.argv[1],sys.argv[2]\n"
    "m=os.path.join(d,'dapo_ops','" + COMPLETE_MARK + "')\n"
    "try:\n"
    " if os.path.exists(m): sys.exit(0)\n"
    " tmp=d+'.tmp-%d'%os.getpid()\n"
    " tarfile.open(fileobj=io.BytesIO(base64.b64decode(open(t,'rb').read()))).extractall(tmp)\n"
    " open(os.path.join(tmp,'dapo_ops','" + COMPLETE_MARK + "'),'w').close()\n"
    " try: os.rename(tmp,d)\n"
    " except OSError:\n"
    "  if not os.path.exists(m): shutil.rmtree(d,ignore_errors=True); os.rename(tmp,d)\n"
    "  else: shutil.rmtree(tmp,ignore_errors=True)\n"
    "finally:\n"
    " try: os.remove(t)\n"
    " except OSError: pass\n"
)


def present_command(bdir: str) -> str:
    """Shell test that succeeds when the bundle is already installed."""
    return f"test -f {shlex.quote(bdir + '/dapo_ops/' + COMPLETE_MARK)}"


def install(
    target, bdir: str, python: str = "python3", *, files: dict[str, bytes] | None = None, timeout: float = 60
) -> None:
    """Copy the bundle ``bdir`` into ``target``'s container (two commands: the base64 tar through stdin, then
    :func:`install_command`). A bundle already there is kept.

    :raises dapo_ops.control.remote.errors.RemoteError: on any remote failure; a ``python`` that cannot run is named as the
        inventory field to fix (:func:`dapo_ops.control.remote.errors.python_cannot_run`).
    """
    import secrets

    files = bundle_files() if files is None else files
    staged = f"{bdir}.tar.gz.b64.{secrets.token_hex(4)}"  # its own file: a concurrent install stages another
    try:
        target.put_text(base64.b64encode(bundle_tar(files)).decode("ascii"), staged, mode=0o644, timeout=timeout)
    except RemoteError as e:
        raise _no_space(target, e, staged, bdir) or e from None
    try:
        target.run(install_command(bdir, python, staged), timeout=timeout, workdir="")
    except RemoteError as e:  # the interpreter itself cannot run: say which inventory field to fix
        why = python_cannot_run(target, python, e.result) if e.kind == "command" and e.result is not None else None
        if why:
            raise RemoteError("command", target.name, why, exit_code=e.exit_code, result=e.result) from None
        raise _no_space(target, e, bdir, bdir) or e from None


def _no_space(target, e: RemoteError, path: str, bdir: str) -> RemoteError | None:
    """The one-line :class:`RemoteError` for a bundle write that failed for want of space (``cat: write error: No
    space left on device`` from :meth:`Target.put_text`, ENOSPC from the unpacking): the path and the fix, as
    preflight's ``bundle`` check words it (:func:`dapo_ops.control.remote.errors.space_fix`); None for any other
    failure."""
    res = e.result
    if e.kind != "command" or not is_no_space(
        " ".join([e.message, res.stderr or "", res.stdout or ""] if res else [e.message])
    ):
        return None
    runs = posixpath.dirname(posixpath.dirname(bdir.rstrip("/")))  # <runs_dir>/.dapo_ops/<version>-<hash>
    return RemoteError(
        "command",
        target.name,
        f"no space left on device writing the dapo-ops bundle to {path} {target.where}: {space_fix(runs)}",
        exit_code=e.exit_code,
        result=res,
    )


def ensure_bundle(target, runs_dir: str, python: str = "python3", *, timeout: float = 60) -> str:
    """Copy the bundle into ``target``'s container unless present; return its directory (for PYTHONPATH).

    :param target: a :class:`dapo_ops.control.remote.target.Target`.
    :raises dapo_ops.control.remote.errors.RemoteError: on any remote failure.
    """
    files = bundle_files()
    bdir = bundle_dir(runs_dir, files)
    res = target.run(present_command(bdir), check=False, timeout=timeout, workdir="")
    if res.exited != 0:
        install(target, bdir, python, files=files, timeout=timeout)
    return bdir


def op_argv(python: str, op: str, args=(), *, site: bool = True) -> list[str]:
    """``[python, (-S,) -m, dapo_ops.agent.<op>, *args]``; ``site=False`` skips site-packages (a stdlib-only op).

    :raises ValueError: ``op`` is not one of :data:`OPS`.
    """
    if op not in OPS:
        raise ValueError(f"unknown bundle op {op!r} (one of {', '.join(OPS)})")
    return [python, *([] if site else ["-S"]), "-m", f"dapo_ops.agent.{op}", *[str(a) for a in args]]


def op_line(bdir: str, python: str, op: str, args=(), *, site: bool = True) -> str:
    """The shell line (run in the container, or a bare host's shell) that runs op ``op`` from bundle ``bdir``:
    exit :data:`MISSING_RC` with :data:`MISSING_MARK` on stderr when the bundle is not installed, else ``exec``
    the op with the bundle first on ``PYTHONPATH`` (the environment's own entries kept after it). Every value is
    ``shlex.quote``-d."""
    q = shlex.quote
    mark = q(bdir + "/dapo_ops/" + COMPLETE_MARK)
    return (
        f"test -f {mark} || {{ echo {MISSING_MARK} {q(bdir)} >&2; exit {MISSING_RC}; }}; "
        f"PYTHONPATH={q(bdir)}${{PYTHONPATH:+:$PYTHONPATH}} exec "
        + " ".join(q(a) for a in op_argv(python, op, args, site=site))
    )


def bundle_missing(res) -> bool:
    """True when ``res`` (an op line's result) says the bundle is not installed."""
    return res.exited == MISSING_RC and MISSING_MARK in (res.stderr or "")


def run_op(
    target,
    op: str,
    args=(),
    *,
    runs_dir: str | None = None,
    python: str | None = None,
    site: bool = True,
    check: bool = True,
    timeout: float = 60,
    stdin: bytes | None = None,
    around: Callable[[str], tuple[str, bytes | None]] | None = None,
    on_install_error: Callable[[RemoteError], None] | None = None,
    **run_kw,
):
    """Run bundle op ``op`` with ``args`` in ``target``'s container (bare host: its shell) through
    ``target.run``: ONE command when the bundle is installed; when it is missing, :func:`install` and once more.

    ``runs_dir`` (default the host's ``runs_path``) picks the bundle dir, ``python`` (default the host's) runs it;
    ``stdin`` (bytes) is the op's stdin (``docker exec -i``: what must never be on a command line, e.g. the run's
    spec and secrets for :mod:`dapo_ops.agent.runstart`); ``run_kw`` goes to
    :meth:`dapo_ops.control.remote.target.Target.run` (``env``, ``secret_env``, ``workdir``, ``state_on_failure``,
    ``look``). ``around(op line) -> (host command, its stdin)``: a caller whose one round trip does more on the
    host around the op (preflight's ``docker inspect`` when the exec fails,
    :func:`dapo_ops.control.preflight.gather.collect`) builds that host command from the op line with the Target's
    command builders (:meth:`~dapo_ops.control.remote.target.Target.exec_command`,
    :meth:`~dapo_ops.control.remote.target.Target.with_secret_file`); it runs with ``host_run`` and the bundle is
    missing when :data:`MISSING_MARK` is on its stderr (the host command may exit 0 after the op).
    ``on_install_error(e)``: a bundle that cannot be installed is handed to it and the first result is returned (a
    caller that reports the install's failure beside what that result says, e.g. the container's state), instead of
    raising. Returns its result (``.stdout``, ``.stderr``, ``.exited``).

    :raises dapo_ops.control.remote.errors.RemoteError: remote failures; kind ``command`` when ``check`` and the op
        exits non-zero, or when the bundle cannot be installed.
    """
    h = target.host
    python = python or h.python
    files = bundle_files()
    bdir = bundle_dir(runs_dir or h.runs_path, files)
    line = op_line(bdir, python, op, args, site=site)

    def once():
        if around is None:
            return target.run(line, check=False, timeout=timeout, stdin=stdin, **run_kw)
        cmd, body = around(line)
        return target.host_run(cmd, timeout=timeout, check=False, stdin=body)

    res = once()
    if bundle_missing(res) or (around is not None and MISSING_MARK in (res.stderr or "")):
        try:
            install(target, bdir, python, files=files, timeout=max(timeout, 60))
        except RemoteError as e:
            if on_install_error is None:
                raise
            on_install_error(e)
            return res
        res = once()
    if check and res.exited != 0:
        lines = [ln.strip() for ln in (res.stderr or res.stdout or "").splitlines() if ln.strip()]
        raise RemoteError(
            "command",
            target.name,
            f"`python3 -m dapo_ops.agent.{op}` exited {res.exited} "
            f"{target.where}: {lines[-1][:200] if lines else 'no output'}",
            exit_code=res.exited,
            result=res,
        )
    return res


def start_op(target, op: str, args=(), *, out_stream, err_stream=None, site: bool = True):
    """Start bundle op ``op`` in ``target``'s container with a pty on the SSH side and return at once: the
    :class:`invoke.runners.Promise` of :meth:`dapo_ops.control.remote.target.Target.stream` (output to
    ``out_stream`` as it comes). For an op that streams until something ends (``inv logs -f``:
    ``runlogs follow``). The bundle is not installed here: a stream has no second try, so the caller asks a
    :func:`run_op` of the same bundle first (``logs -f`` resolves the log with the status probe). An op line whose
    bundle is missing prints :data:`MISSING_MARK` and exits :data:`MISSING_RC`.

    :raises dapo_ops.control.remote.errors.RemoteError: the host cannot be reached.
    """
    h = target.host
    return target.stream(
        op_line(bundle_dir(h.runs_path), h.python, op, args, site=site), out_stream=out_stream, err_stream=err_stream
    )


def stdin_install_line(bdir: str, python: str = "python3") -> str:
    """Shell line (in a container) that installs bundle ``bdir`` from the base64 tar on its stdin unless present:
    the same :func:`install_command`, for a host command that serves several containers in one round trip
    (``inv container.list``)."""
    q = shlex.quote
    return (
        f"{present_command(bdir)} || {{ mkdir -p {q(posixpath.dirname(bdir))} && s={q(bdir + '.tar.gz.b64')}.$$ "
        f'&& cat > "$s" && {q(python)} -c {q(_INSTALL_PY)} {q(bdir)} "$s"; }}'
    )


def bundle_b64(files: dict[str, bytes] | None = None) -> bytes:
    """The base64 text of :func:`bundle_tar` (what :func:`install_command` reads)."""
    return base64.b64encode(bundle_tar(bundle_files() if files is None else files))


def local_install(dest_root: str | Path) -> str:
    """Install the bundle under a local directory (tests, benches); returns the bundle dir."""
    files = bundle_files()
    bdir = Path(bundle_dir(str(dest_root), files))
    pkg = bdir / "dapo_ops"
    if not (pkg / COMPLETE_MARK).exists():
        pkg.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (pkg / name).parent.mkdir(parents=True, exist_ok=True)
            (pkg / name).write_bytes(data)
        (pkg / COMPLETE_MARK).write_text(str(time.time()))
    return str(bdir)
