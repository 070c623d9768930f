"""``inv quickstart``: the runbook's quick start and interactive flow (``inv demo``, the sandbox main job, is a
dev task of the repository: tasks.py).

quickstart asks the runbook's four questions in order — 1. container, 2. proxy ("none" to skip),
3. features ("default" keeps the defaults), 4. SwanLab mode (cloud | local | offline | disabled) and, for cloud,
host and key if not configured (a blank key asks the mode again, nothing answered is lost) — but only for
what flags, env vars (the runbook's CONTAINER, USER_FEATURES, http(s)_proxy, SWANLAB_HOST,
SWANLAB_API_KEY, ...) and the config file leave open, and only on a TTY. Then it runs preflight,
launches, and prints the run id, the SwanLab link, the three monitoring commands and the equivalent
non-interactive command line for a runbook. The answers make ONE launch request
(:func:`dapo_ops.control.launch.request.build`, over a copy of the environment: nothing is written into
``os.environ``); the preflight checks its runs' drafts (:func:`dapo_ops.cli.preflight.check_request`) and the start
finishes and runs those same drafts (:func:`dapo_ops.cli.launch.start`): no task calls another task.
"""

from __future__ import annotations

import os
import shlex
import sys

from invoke.exceptions import Exit

import dapo_ops.core.features
from dapo_ops.control.inventory import proxy
from dapo_ops.control import settings
from dapo_ops.control import swanlab_settings
from dapo_ops.control import swanlab_values
from dapo_ops.core import redact
from dapo_ops.control import userconfig
from dapo_ops.control.launch import request
from dapo_ops.control.launch.refusals import LaunchUsageError
from dapo_ops.control.launch.service import LaunchProgress
from dapo_ops.control.remote.errors import RemoteError
from dapo_ops.control.remote.target import Target
from dapo_ops.cli._common import (
    EXIT_USAGE,
    JOBS,
    UNSET,
    fail,
    fanout_task,
    given_flags,
    on_interrupt,
    refuse_empty_env,
    refuse_job_as_mode,
    run_config,
    run_settings,
    select_hosts,
    user_config,
)

QS_HELP = {
    "container": "training container on the host (env CONTAINER; asked on a TTY, listing what is there)",
    "http_proxy": "proxy for the container, or 'none' (env http_proxy; asked on a TTY)",
    "https_proxy": "HTTPS proxy for the container, or 'none' (env https_proxy; default: the http one)",
    "features": "comma list, -name turns a default off, 'default' keeps the defaults (env USER_FEATURES)",
    "steps": settings.flag_help(settings.BY_NAME["steps"]),
    **settings.task_help("framework"),  # what `inv launch --framework` takes, from the settings table
    "job": "dapo | one-step-off: which launch, `inv launch` or `inv one-step-off` (default dapo)",
    "mode": settings.flag_help(settings.BY_NAME["trainer_mode"]),
    "swanlab_host": "SwanLab server, e.g. http://192.0.2.10:8000 (env SWANLAB_HOST); the key only via "
    "SWANLAB_API_KEY, the config file or the TTY prompt, never a flag",
    "swanlab_mode": "cloud | local | offline | disabled (env SWANLAB_MODE)",
    "skip_preflight": "launch without the full preflight",
}


def _ask(question: str) -> str:
    print(question, end="", flush=True)
    line = sys.stdin.readline()
    if not line:
        raise Exit("quickstart: input ended before all questions were answered", code=EXIT_USAGE)
    return line.strip()


def _choose_container(c, host, inventory: str) -> str:
    """Question 1: list the containers present on the host and let the user pick one (number or name)."""
    from dapo_ops.cli.containers import list_one

    t = Target(host, host.container)
    try:
        containers = list_one(t).data.get("containers") or []
    except RemoteError as e:
        fail(f"quickstart: cannot list containers on {host.name}: {e}", EXIT_USAGE)
    finally:
        t.close()
    print(f"1. container on {host.name}:")
    for i, ct in enumerate(containers, 1):
        verl = f"verl {ct['verl']}" if ct.get("verl") else "no verl found"
        print(f"   {i}) {ct['name']:<20} {ct['state']:<10} {ct['image']}  ({verl})")
    default = host.container
    ans = _ask(f"   choose a number or name [{default}] (a new one: inv container.create): ")
    if not ans:
        return default
    if ans.isdigit() and 1 <= int(ans) <= len(containers):
        return containers[int(ans) - 1]["name"]
    return ans


def _equivalent(
    job: str,
    mode: str,
    hosts: str,
    inventory: str,
    container: str,
    proxies: dict,
    features: str,
    steps: int,
    swanlab_host: str,
    swanlab_mode: str,
    framework: str = "",
) -> str:
    """The command line that repeats this quickstart without a single prompt, every answer in it: container,
    steps, framework (the training backend the launch ran: flag > env FRAMEWORK > config file > default), proxy
    (``none`` when there is none), features (``default``), SwanLab mode (and host; the key stays a placeholder: it is
    never printed)."""
    env = []
    if container:
        env.append(f"CONTAINER={shlex.quote(container)}")
    env.append(f"TRAIN_STEPS={steps}")
    if swanlab_host:
        env.append(f"SWANLAB_HOST={shlex.quote(swanlab_host)}")
    if swanlab_mode == "cloud":
        env.append("SWANLAB_API_KEY=<your-key>")
    cmd = ["inv", "quickstart"]
    if job != "dapo":
        cmd += ["--job", job]
    if mode:
        cmd += ["--mode", mode]
    if framework:
        cmd += ["--framework", framework]
    if hosts:
        cmd += ["-H", hosts]
    if inventory:
        cmd += ["--inventory", inventory]
    for k in ("http_proxy", "https_proxy"):  # credentials never on a command line: env var, shown redacted
        if proxies.get(k) and redact.has_credentials(proxies[k]):
            env.insert(0, f"{k}={shlex.quote(redact.display_url(proxies[k]))}")
            continue
        cmd += [f"--{k.replace('_', '-')}", proxies[k] if proxies.get(k) else "none"]
    cmd += ["--features", features or "default"]
    if swanlab_mode:
        cmd += ["--swanlab-mode", swanlab_mode]
    return " ".join(env + [shlex.quote(x) for x in cmd])


SWANLAB_MODES = ("cloud", "local", "offline", "disabled")


def _ask_swanlab_mode(default: str = "cloud") -> str:
    """Question 4: the SwanLab mode (cloud needs a key; local/offline/disabled need none)."""
    while True:
        ans = (
            _ask(
                f"   mode: cloud (needs an API key) | local (needs swanboard) | offline | disabled [{default}]: "
            ).lower()
            or default
        )
        if ans in SWANLAB_MODES:
            return ans
        print(f"   {ans!r} is not a mode: answer one of {', '.join(SWANLAB_MODES)}")


def _framework_flag(c, framework: str | None) -> dict:
    """``--framework`` as `inv launch --framework` takes it: ``{}`` when not given (None); a value given (``""`` given
    empty is refused as launch refuses it, control/settings.py EMPTY_RULES) is judged by the settings table before
    any question is asked (:func:`run_settings`: one line, exit 2)."""
    if framework is None:
        return {}
    run_settings(c, {"framework": framework})
    return {"framework": framework}


@fanout_task(help=QS_HELP)
def quickstart(
    c,
    container="",
    http_proxy="",
    https_proxy="",
    features="",
    steps=UNSET,
    framework=None,
    job="dapo",
    mode="",
    swanlab_host="",
    swanlab_mode="",
    skip_preflight=False,
    hosts="",
    inventory="",
):
    """Quick start: ask what is missing (container, proxy, features, SwanLab), preflight, launch, print how to follow."""
    from dapo_ops.cli import launch
    from dapo_ops.cli import preflight

    refuse_job_as_mode(mode, "quickstart")
    if job not in JOBS:
        fail(f"unknown job {job!r}: --job takes dapo (`inv launch`) or one-step-off (`inv one-step-off`)", EXIT_USAGE)
    framework_flag = _framework_flag(c, framework)
    tty = sys.stdin is not None and sys.stdin.isatty()
    inv, chosen = select_hosts(c, hosts, inventory)
    env = dict(os.environ)  # the answers go into this copy (the launch request's environment), never os.environ
    file_cfg = user_config(c)
    # a variable set but empty is refused as launch refuses it (settings.EMPTY_RULES), not taken as a question
    refuse_empty_env(env, *(v for v, given in (("CONTAINER", container), ("SWANLAB_MODE", swanlab_mode)) if not given))

    # 1. container
    container = container or env.get("CONTAINER", "")
    if not container and tty:
        container = _choose_container(c, chosen[0], inventory)
    # (without a TTY the inventory's container is the answer: nothing is missing)

    # 2. proxy ("none" to skip)
    proxies = {
        "http_proxy": http_proxy or env.get("http_proxy", ""),
        "https_proxy": https_proxy or env.get("https_proxy", ""),
    }
    configured = (
        any(proxies.values())
        or any((inv.proxy or {}).get(k) for k in ("http_proxy", "https_proxy"))
        or any((file_cfg.get("proxy") or {}).get(k) for k in ("http_proxy", "https_proxy"))
    )
    if http_proxy or https_proxy:
        try:
            proxies = {
                k: (
                    proxy.check_flag(v, f"--{k.replace('_', '-')}") if v == flag else proxy.check_url(v, f"env var {k}")
                )
                for (k, v), flag in zip(proxies.items(), (http_proxy, https_proxy))
            }
        except proxy.ProxyError as e:
            fail(str(e), EXIT_USAGE)
        if not proxies["https_proxy"]:
            proxies["https_proxy"] = proxies["http_proxy"]
    elif not configured and tty:
        print("2. proxy for the container (answer none if not needed):")
        try:
            proxies = proxy.ask(lambda q: _ask("   " + q))
        except proxy.ProxyError as e:
            fail(str(e), EXIT_USAGE)

    # 3. features ("default" keeps the defaults)
    features = features or env.get("USER_FEATURES", "")
    if not features and tty:
        print(
            "3. features — performance (default on): flash_attn, dynamic_batch, remove_padding, "
            "gradient_checkpointing;\n   memory (off, added on OOM): offload, recompute; optional: prefix_cache, "
            "chunked_prefill"
        )
        while True:
            ans = _ask("   custom features? comma list, -name turns a default off, or 'default': ")
            features = "" if ans.lower() in ("", "default", "默认") else ans
            try:
                dapo_ops.core.features.resolve(features or None)
                break
            except dapo_ops.core.features.FeatureError as e:
                print(f"   {e}")
    elif features.lower() in ("default", "默认"):
        features = ""
    try:
        dapo_ops.core.features.resolve(features or None)
    except dapo_ops.core.features.FeatureError as e:
        fail(str(e), EXIT_USAGE)

    # 4. SwanLab (flag > env > config file > the question on a TTY; without a TTY a missing key is one line)
    if swanlab_host:
        env["SWANLAB_HOST"] = swanlab_host
    notes: list[str] = []
    sw_file = file_cfg.get("swanlab") or {}
    mode_choice = swanlab_mode or env.get("SWANLAB_MODE", "") or sw_file.get("mode", "")
    if not mode_choice and tty and not (env.get("SWANLAB_API_KEY") or sw_file.get("api_key")):
        print("4. SwanLab monitoring:")
        mode_choice = _ask_swanlab_mode()
    while True:
        try:
            sw = swanlab_settings.resolve_for_launch(
                mode_flag=mode_choice or None, env=env, notes=notes, stdin_isatty=tty, tables=file_cfg
            )
            break
        except swanlab_values.SwanlabConfigError as e:
            if not tty:
                fail(str(e), EXIT_USAGE)
            print(f"   {e}")  # e.g. a blank key: choose again, the other answers are kept
            mode_choice = _ask_swanlab_mode("offline")
        except (userconfig.UserConfigError, EOFError) as e:
            fail(str(e) or "quickstart: input ended before all questions were answered", EXIT_USAGE)
    for n in notes:
        print(redact.scrub(n, list(sw.secrets())), file=sys.stderr)
    # ONE launch request for the preflight and the start: the answers in the environment copy (never a command line)
    if sw.api_key:
        env["SWANLAB_API_KEY"] = sw.api_key
    if sw.host:
        env["SWANLAB_HOST"] = sw.host
    env["SWANLAB_MODE"] = sw.mode
    for k, v in proxies.items():
        if v:
            env[k] = v
    names = ",".join(h.name for h in chosen) if hosts else ""
    # unanswered = not given: launch refuses a setting given empty (control/settings.py EMPTY_RULES)
    args = request.TaskArgs(
        mode=job,
        flags={
            **given_flags(
                steps=steps, features=features or None, container=container or None, trainer_mode=mode or None
            ),
            **framework_flag,
        },
        swanlab_mode=sw.mode,
        hosts=hosts,
        inventory=inventory,
        skip_preflight=True,  # the full preflight below (or --skip-preflight); the launch's probe still reads its facts
    )
    progress = LaunchProgress()
    with on_interrupt(lambda: launch.interrupted_line(progress)):
        try:
            got = request.build(
                args,
                env,
                select_hosts=lambda: (inv, chosen),
                progress=progress,
                stdin_isatty=tty,
                config=run_config(c),
            )
        except LaunchUsageError as e:
            fail(str(e), EXIT_USAGE)
        assert isinstance(got, request.Launch)  # not a dry run
        if not skip_preflight:  # the runs' own drafts: what the start then finishes and runs
            print("preflight:")
            preflight.report(preflight.check_request(c, got.request, got.hosts, env=env, file_cfg=file_cfg or {}))
        launch.start(c, got, accept_new_host_keys=False, json_=False)
    print("monitor:")
    sel = f" -H {names}" if names else ""
    inv_opt = f" --inventory {shlex.quote(inventory)}" if inventory else ""
    for cmd in ("status", "logs -f", "logs --errors"):
        print(f"  inv {cmd}{sel}{inv_opt}")
    print("repeat non-interactively:")
    print(
        "  "
        + _equivalent(
            job,
            mode,
            names,
            inventory,
            container or chosen[0].container,
            proxies,
            features,
            got.request.settings["steps"],  # what the launch ran: flag > env > file > default
            sw.host or "",
            sw.mode,
            framework=got.request.settings["framework"],  # what the launch ran: flag > env > file > default
        )
    )
