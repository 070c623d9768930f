"""``inv prepare``: make sure the model and data files of the run settings exist where the container sees them.

Per host (in parallel), ONE ``docker exec`` running the bundle op ``python3 -m dapo_ops.agent.download``
(:func:`dapo_ops.agent.download.prepare`) inside the container: what
is complete is kept without any request; what is missing is fetched **inside the container** through the
inventory's proxy from the hub the host can reach (``--hf-endpoint`` > ``HF_ENDPOINT`` of the operator >
the container's own ``HF_ENDPOINT`` > huggingface.co; ``huggingface_hub`` when the container has it, else
stdlib urllib on the ``<endpoint>/<repo>/resolve/main/<file>`` layout), downloaded to ``<file>.part``, resumed,
verified (model: ``config.json`` + weights + tokenizer; parquet: verl's RL schema) and only then renamed.

Hub sources: ``--model-repo`` / ``--train-repo`` / ``--val-repo`` (and ``--train-repo-file`` / ``--val-repo-file``
for the file inside the dataset repo), else the known defaults of the runbook (:data:`KNOWN_DATA`, Qwen models).
"""

from __future__ import annotations

import json as jsonlib
import os
import posixpath

from rich.table import Table
from rich.text import Text

from dapo_ops.control.remote import fanout
import dapo_ops.control.launch.plan
from dapo_ops.control.launch.service import LaunchFacts, LaunchRequest, draft_for
from dapo_ops.control.swanlab_settings import SwanlabSettings
from dapo_ops.agent import preflight_probe
from dapo_ops.control.remote import bundle
from dapo_ops.control.inventory import proxy
from dapo_ops.core import runstate
from dapo_ops.control.remote.fanout import Row
from dapo_ops.cli._common import (
    EXIT_FAILED,
    EXIT_USAGE,
    connect_timeout_override,
    fail,
    fanout_task,
    run_settings,
    select_hosts,
)

#: file name -> (hub dataset repo, path in the repo): the runbook's defaults (verl/utils/dataset/rl_dataset.py, recipe
#: ``dapo/prepare_dapo_data.sh``), already in verl's RL format.
KNOWN_DATA = {
    "dapo-math-17k.parquet": ("BytedTsinghua-SIA/DAPO-Math-17k", "data/dapo-math-17k.parquet"),
    "aime-2024.parquet": ("BytedTsinghua-SIA/AIME-2024", "data/aime-2024.parquet"),
}


def model_repo_for(path: str) -> str:
    """Hub repo guessed from a model dir name: ``.../Qwen3-8B`` -> ``Qwen/Qwen3-8B``; ``""`` when unknown."""
    base = posixpath.basename(path.rstrip("/"))
    if base.lower().startswith(("qwen2", "qwen3", "qwq")):
        return f"Qwen/{base}"
    return ""


def build_request(
    plan,
    *,
    model_repo: str = "",
    train_repo: str = "",
    train_repo_file: str = "",
    val_repo: str = "",
    val_repo_file: str = "",
    endpoint: str = "",
) -> dict:
    """The in-container request for :func:`dapo_ops.agent.download.prepare` from a plan and the repo flags. Pure."""
    s = plan.spec["settings"]
    req: dict = {
        "model": {"path": s["model_path"], "repo": model_repo or model_repo_for(s["model_path"])},
        "data": [],
        "prompt_key": "prompt",
    }
    if endpoint:
        req["endpoint"] = endpoint
    seen = set()
    for key, repo, rfile in (("train_file", train_repo, train_repo_file), ("val_file", val_repo, val_repo_file)):
        path = s.get(key)
        if not path or path in seen:
            continue
        seen.add(path)
        base = posixpath.basename(path)
        known = KNOWN_DATA.get(base, ("", ""))
        r = repo or known[0]
        f = rfile or (known[1] if not repo or repo == known[0] else "") or base
        req["data"].append({"path": path, "repo": r, "file": f})
    return req


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def item_problem(it: dict) -> str:
    """The one-line problem of a prepared item, ``""`` when it is usable."""
    if it.get("error"):
        return it["error"]
    chk = it.get("check") or {}
    if not chk.get("ok", True):
        return (chk.get("problems") or ["unusable"])[0]
    return ""


def prepare_one(target, req: dict, env: dict, secret_env: dict, timeout: float) -> Row:
    h = target.host
    res = bundle.run_op(
        target,
        "download",
        [jsonlib.dumps(req)],
        python=h.python,
        env=env,
        secret_env=secret_env or None,
        timeout=timeout,
        check=False,
    )
    try:
        out = preflight_probe.parse_output(res.stdout)
    except ValueError as e:
        err = [ln for ln in (res.stderr or "").splitlines() if ln.strip()]
        return Row(ok=False, kind="prepare", message=f"{e}" + (f": {err[-1].strip()}" if err else ""))
    items = out.get("items") or []
    bad = [item_problem(it) for it in items if item_problem(it)]
    return Row(
        ok=not bad,
        kind="" if not bad else "inputs",
        message=bad[0] if bad else "",
        data={"items": items, "endpoint": out.get("endpoint"), "elapsed_s": out.get("elapsed_s")},
    )


@fanout_task(
    help={
        "model": "model dir in the container (env MODEL_PATH)",
        "train_file": "training parquet (env TRAIN_FILE)",
        "val_file": "validation parquet (env VAL_FILE)",
        "model_repo": "hub repo of the model, e.g. Qwen/Qwen3-8B (default: guessed from the dir name)",
        "train_repo": "hub dataset repo of train_file (default for dapo-math-17k.parquet: BytedTsinghua-SIA/DAPO-Math-17k)",
        "train_repo_file": "file inside train_repo (default: data/<name> for known sets, else the file name)",
        "val_repo": "hub dataset repo of val_file (default for aime-2024.parquet: BytedTsinghua-SIA/AIME-2024)",
        "val_repo_file": "file inside val_repo",
        "hf_endpoint": "hub URL, e.g. a mirror (default: $HF_ENDPOINT, then the container's, then huggingface.co)",
        "json": "print JSON {host: {items: [...]}} instead of the table",
        "timeout": "seconds for the downloads on each host",
    }
)
def prepare(
    c,
    model="",
    train_file="",
    val_file="",
    model_repo="",
    train_repo="",
    train_repo_file="",
    val_repo="",
    val_repo_file="",
    hf_endpoint="",
    json=False,
    hosts="",
    inventory="",
    accept_new_host_keys=False,
    timeout=7200,
):
    """Make sure model and data exist in each container; fetch what is missing (resumable, verified)."""
    flags = {k: v for k, v in dict(model=model, train_file=train_file, val_file=val_file).items() if v}
    st = run_settings(c, flags)
    inv, chosen = select_hosts(c, hosts, inventory)
    endpoint = hf_endpoint or os.environ.get("HF_ENDPOINT", "")
    try:
        penv = proxy.container_proxy_env(inv.proxy, os.environ, [h.address for h in chosen])
    except proxy.ProxyError as e:
        fail(str(e), EXIT_USAGE)
    public, secret = proxy.split_secret(penv)
    hf_token = os.environ.get("HF_TOKEN")
    if hf_token:
        secret["HF_TOKEN"] = hf_token
    reqs = {}
    containers: dict = {}
    run_id = runstate.new_run_id()
    # the paths and container a launch of these settings would use: its request's draft (no SwanLab: no run starts)
    req = LaunchRequest(mode="dapo", settings=st, sw=SwanlabSettings(mode="disabled"), inv_proxy=inv.proxy)
    for h in chosen:
        try:
            plan = draft_for(LaunchFacts(host=h, run_id=run_id), req)
        except dapo_ops.control.launch.plan.PlanError as e:
            fail(f"{h.name}: {e}", EXIT_USAGE)
        containers[h.name] = plan.spec.get("container")
        reqs[h.name] = build_request(
            plan,
            model_repo=model_repo,
            train_repo=train_repo,
            train_repo_file=train_repo_file,
            val_repo=val_repo,
            val_repo_file=val_repo_file,
            endpoint=endpoint,
        )

    def one(t):
        t.container = containers.get(t.host.name) or t.container  # CONTAINER setting wins
        return prepare_one(t, reqs[t.host.name], public, secret, float(timeout))

    results = fanout.run(
        chosen,
        one,
        timeout=float(timeout) + 60,
        accept_new_host_keys=accept_new_host_keys,
        connect_timeout=connect_timeout_override(c),
    )
    if json:
        out = {
            r.host.name: (r.row.data if r.row.data else {"error": r.row.kind, "message": r.row.message})
            for r in results
        }
        print(jsonlib.dumps(out, indent=1, default=str))
    else:
        t = Table(title="prepare", title_justify="left", pad_edge=False)
        for col in ("host", "item", "path", "status", "size", "fetched", "detail"):
            t.add_column(col, no_wrap=col not in ("detail", "path"), overflow="fold")
        for r in results:
            items = r.row.data.get("items")
            if items is None:
                t.add_row(
                    Text(r.host.name),
                    Text("-"),
                    Text("-"),
                    Text(f"FAIL {r.row.kind}", style="bold red"),
                    "",
                    "",
                    Text(r.row.message),
                )
                continue
            for it in items:
                chk = it.get("check") or {}
                prob = item_problem(it)
                size = chk.get("total_bytes") or chk.get("bytes") or 0
                extra = f"{chk.get('rows')} rows" if it["kind"] == "data" and chk.get("rows") is not None else ""
                status = "FAIL" if prob else it.get("status", "?")
                t.add_row(
                    Text(r.host.name),
                    Text(it["kind"]),
                    Text(it["path"]),
                    Text(status, style="bold red" if prob else "green"),
                    Text(_size(size) if size else "-"),
                    Text(_size(it.get("downloaded") or 0)),
                    Text(prob or extra),
                )
        fanout.console().print(t)
    if fanout.exit_code(results):
        bad = [r for r in results if not r.ok]
        msg = f"{bad[0].host.name}: {bad[0].row.message or bad[0].row.kind}"
        fail(msg + (f" (+{len(bad) - 1} more host(s))" if len(bad) > 1 else ""), EXIT_FAILED)
