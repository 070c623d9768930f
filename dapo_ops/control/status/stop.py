"""``inv stop`` across hosts: each host's run stopped through the probe's ``stop`` op (:mod:`dapo_ops.agent.runstop`:
own PIDs only), a Ray worker host of a multi-host run told apart from a host with nothing to stop (operator side;
returns :class:`StopResult` values, never prints). ``dapo_ops/cli/status.py`` prints them and ends the Ray sessions
of a multi-host run (``cli/multihost.stop_cluster``)."""

from __future__ import annotations

from dataclasses import dataclass

from dapo_ops.control.status import events
from dapo_ops.control.status import look
from dapo_ops.control.status.rows import SUPERVISOR_DEAD
from dapo_ops.core.runstate import RunStatus


@dataclass
class StopResult:
    """One host's ``stop`` answer. ``kind``: ``stopped``, ``already`` (nothing to stop), ``skipped`` (``--run``
    names a run on another host), ``with-head`` (a Ray worker whose head is stopped with it), ``no-runs`` (nothing recorded:
    reported, not a failure), ``worker`` (a Ray worker of a run whose head was not chosen: nothing stopped) or
    ``failed``;
    ``message`` is the line to show; ``run_dir`` is set for a multi-host run (its Ray sessions end on every host)."""

    host: str
    kind: str
    message: str = ""
    run_dir: str | None = None


def was(res: dict) -> str:
    """What the stopped run was, as ``inv status`` would have shown it: run.json's status (``res["before"]``), or
    ``supervisor-dead`` (:data:`~dapo_ops.control.status.rows.SUPERVISOR_DEAD`) when run.json said an active status
    but the stop found its supervisor gone (the probe's ``supervisor_alive``): not "running -> stopped"."""
    before = res.get("before")
    if res.get("supervisor_alive") is False and not RunStatus.of(before).terminal:
        return SUPERVISOR_DEAD
    return str(before)


def stop_runs(
    chosen: list, run: str = "", grace_s: float = 60.0, connect_timeout: float | None = None
) -> list[StopResult]:
    """SIGTERM each host's run supervisor (or, with a dead supervisor, kill the run's own verl processes and mark
    run.json stopped): the probe's ``stop`` op, waiting ``grace_s`` seconds before SIGKILL. Own PIDs only.
    A host that is a live Ray worker of another host's run stops nothing itself (the head's stop ends the Ray
    sessions on every node): ``with-head`` when its head is chosen too, else ``worker`` naming the command."""
    req = {"op": "stop", "run_id": run or None, "grace_s": float(grace_s), "kill_grace_s": 20.0}
    names = {h.name for h in chosen}
    out = []
    for name, res in look.fan(
        chosen,
        lambda t: look.probe(t, dict(req, host=t.name), timeout=float(grace_s) + 60),
        float(grace_s) + 90,
        connect_timeout,
    ):
        if isinstance(res, str):
            out.append(StopResult(name, "failed", res))
            continue
        if res.get("serves"):
            sv = res["serves"]
            line = events.worker_line(name, sv.get("run_id"), sv.get("head"))
            if sv.get("head") in names:
                out.append(StopResult(name, "with-head", line + "; its Ray session ends with the head's stop"))
            else:
                out.append(
                    StopResult(
                        name,
                        "worker",
                        "%s; nothing stopped: stop the run with `inv stop -H %s,%s` "
                        "(or `inv stop -H %s`)" % (line, sv.get("head"), name, sv.get("head")),
                    )
                )
            continue
        rd = res.get("run_dir")
        err = res.get("error")
        if err:
            line = look.named(name, err)
            if run and len(chosen) > 1 and err.startswith("no run "):
                out.append(StopResult(name, "skipped", line))
            else:
                out.append(StopResult(name, "no-runs" if err.startswith("no runs") else "failed", line, rd))
        elif res.get("already"):
            out.append(
                StopResult(
                    name, "already", "%s: run %s already %s; nothing to stop" % (name, res["run_id"], res["after"]), rd
                )
            )
        else:
            out.append(
                StopResult(
                    name,
                    "stopped",
                    "%s: run %s %s -> %s (%s); checkpoints and logs kept"
                    % (name, res["run_id"], was(res), res["after"], "; ".join(res["actions"])),
                    rd,
                )
            )
    return out
