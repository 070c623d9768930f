"""verl checks from the probe's facts: ``python``, ``verl`` (version -> profile, :mod:`dapo_ops.core.profiles`),
``entry``, the Hydra ``overrides`` compose result, the modules verl 0.9 imports besides itself
(``transfer_queue``, ``megatron.bridge``) and the ``cann`` environment; and the compose request sent to the
container (:mod:`dapo_ops.control.preflight.compose_check`). Pure.
"""

from __future__ import annotations

from dapo_ops.control.preflight.plan_view import PlanView, needed_modules
from dapo_ops.control.preflight.result import FAIL, OK, WARN, Check
from dapo_ops.core.classify.hints import MODULE_FIXES
from dapo_ops.core import defaults


MIN_PYTHON = (3, 10)


def _verl_checks(host, pv: PlanView | None, p: dict) -> list[Check]:
    from dapo_ops.core import profiles

    out: list[Check] = []
    pyv = p.get("python", "?")
    try:
        t = tuple(int(x) for x in pyv.split(".")[:2])
    except ValueError:
        t = (0, 0)
    if t < MIN_PYTHON:
        out.append(
            Check(
                "python",
                WARN,
                f"Python {pyv} in the container; verl 0.9 expects >= 3.10",
                "use a verl image with Python 3.10-3.11",
            )
        )
    else:
        out.append(Check("python", OK, f"Python {pyv} ({p.get('executable')})"))
    v = p.get("verl") or {}
    wd = getattr(host, "workdir", defaults.HOST["workdir"])
    if not v.get("found"):
        out.append(
            Check(
                "verl",
                FAIL,
                f"verl not found by {getattr(host, 'python', defaults.HOST['python'])} in {wd}",
                "install verl in the image, or set workdir in hosts.toml to the verl checkout",
            )
        )
    else:
        ver = v.get("version") or "?"
        try:
            prof = profiles.profile_for_version(ver)
        except profiles.OverrideError as e:
            out.append(Check("verl", FAIL, f"verl {ver} at {v.get('path')}: {e}", "use a verl 0.9.x image"))
            prof = None
        if prof is not None:
            want = pv.spec.profile if pv is not None else None
            if want and want != prof:
                out.append(
                    Check(
                        "verl",
                        FAIL,
                        f"container has verl {ver} (profile {prof}); the plan uses profile {want}",
                        f"set VERL_PROFILE={prof} (or use a verl {want} image)",
                    )
                )
            else:
                out.append(Check("verl", OK, f"verl {ver} at {v.get('path')}, profile {prof}"))
    if v.get("entry"):
        if v.get("entry_found"):
            out.append(Check("entry", OK, f"{v['entry']} present"))
        else:
            fix = (
                "the DAPO recipe is not in the verl wheel: use a verl source checkout and run "
                f"`git submodule update --init recipe` in {wd}"
                if v["entry"].startswith("recipe.")
                else f"use a verl version that ships {v['entry']}, or another mode"
            )
            out.append(Check("entry", FAIL, f"entry module {v['entry']} not found from {wd}", fix))
    comp = p.get("compose")
    if comp is not None:
        out.append(_overrides_check(comp))
        st = _startup_check(comp)
        if st is not None:
            out.append(st)
    return out


def _startup_check(comp: dict) -> Check | None:
    """The ``verl-startup`` check: verl's own start-up checks on the composed config
    (:mod:`dapo_ops.agent.verlcheck`, run by the compose op under the training's launcher: CANN's ``set_env.sh`` on
    NPU). FAIL with the first problem (and how many more); WARN when verl does not import in the container (then its
    own dataclass checks did not run, and the training imports verl the same way: never an ``ok``
    beside ``skipped``); else OK, naming any other check that was skipped. None when the compose gave no start-up
    answer (it did not compose, or an older bundle)."""
    import json

    ans = None
    for line in reversed((comp.get("stdout") or "").strip().splitlines()):
        if line.strip().startswith("{"):
            try:
                ans = json.loads(line).get("startup")
            except ValueError:
                ans = None
            break
    if not ans:
        return None
    errs, skipped = list(ans.get("errors") or []), list(ans.get("skipped") or [])
    if errs:
        more = f" (+{len(errs) - 1} more: {' | '.join(errs[1:3])})" if len(errs) > 1 else ""
        return Check(
            "verl-startup",
            FAIL,
            errs[0] + more,
            "do what the line says: change the key it names (inv launch --dry-run shows the plan's value) or "
            "install the module it names; verl refuses or dies on this config at start-up",
        )
    not_importable = [s for s in skipped if "verl not importable" in s]
    if not_importable:
        why = not_importable[0].split("verl not importable", 1)[1].strip(" ()") or "no reason given"
        return Check(
            "verl-startup",
            WARN,
            f"verl does not import in the container ({why}): its own start-up checks (validate_config, the rollout "
            "and checkpoint-engine dataclasses) did not run; the checks that need no import pass (pools, attention, "
            "megatron"
            + ("" if any(s.startswith("checkpoint-engine") for s in not_importable) else ", checkpoint engine")
            + ")",
            "the training imports verl the same way: make `python3 -c 'import verl.utils.config'` work in the "
            "container (on NPU under CANN's set_env.sh, which inv launch and this check source)",
        )
    if skipped:
        return Check("verl-startup", OK, "verl's start-up checks pass, but not all ran: " + "; ".join(skipped))
    return Check(
        "verl-startup", OK, "verl's start-up checks pass (dataclasses, checkpoint engine, pools, attention, megatron)"
    )


def _overrides_check(comp: dict) -> Check:
    """The ``overrides`` check from a compose answer (:mod:`dapo_ops.agent.compose` run by the probe). An answer
    shared from another host of the fleet (:mod:`dapo_ops.control.preflight.group`) carries ``from`` and says so;
    ``error``: round 2 of the fleet could not run this host's compose."""
    from dapo_ops.control.preflight import compose_check

    if comp.get("error"):
        return Check(
            "overrides",
            FAIL,
            f"the compose check did not run: {comp['error']}",
            "rerun inv preflight (or raise --timeout); check that the host answers",
        )
    src = comp.get("from")
    via = f", composed on {src} (same verl config and hydra)" if src else ""
    try:
        errs = compose_check.parse_remote_result(comp.get("stdout", ""))
    except ValueError as e:
        err = (comp.get("stderr") or "").strip().splitlines()
        return Check(
            "overrides", FAIL, f"{e}" + (f" ({err[-1]})" if err else ""), "install hydra-core in the container's Python"
        )
    if errs:
        from dapo_ops.agent.compose import NEAREST_PREFIX

        near = [e[len(NEAREST_PREFIX) :] for e in errs if e.startswith(NEAREST_PREFIX)]
        first = " / ".join([e for e in errs if not e.startswith(NEAREST_PREFIX)][:3])
        return Check(
            "overrides",
            FAIL,
            f"overrides do not compose against the container's verl: {first}{via}",
            (f"unknown key: did you mean {' / '.join(near)}? " if near else "")
            + "fix or remove that override (--profile must match the container's verl)",
        )
    return Check("overrides", OK, f"generated overrides compose against the container's verl config{via}")


def _module_checks(pv: PlanView | None, p: dict) -> list[Check]:
    found = p.get("modules")
    if pv is None or found is None:
        return []
    out = []
    for mod, why in needed_modules(pv):
        if found.get(mod):
            out.append(Check(mod, OK, f"{mod} at {found[mod]}"))
        elif mod == "megatron.bridge" and found.get("mbridge"):  # verl's Ascend images: mbridge, no Megatron-Bridge
            out.append(
                Check(
                    mod,
                    FAIL,
                    f"{mod} is not importable in the container, but mbridge is ({found['mbridge']}); {why}",
                    "set VANILLA_MBRIDGE=True (--vanilla-mbridge): verl then builds the model with mbridge "
                    "(actor_rollout_ref.actor.megatron.vanilla_mbridge=True, as verl's Ascend CI runs), or "
                    + MODULE_FIXES[mod],
                )
            )
        else:
            out.append(Check(mod, FAIL, f"{mod} is not importable in the container; {why}", MODULE_FIXES[mod]))
    return out


def _cann_checks(p: dict) -> list[Check]:
    """Which CANN environment verl gets (the NPU launcher, ``core.topology.CANN_LAUNCHER``)."""
    c = p.get("cann")
    if c is None:
        return []
    if c.get("toolkit_home"):
        return [
            Check("cann", OK, f"ASCEND_TOOLKIT_HOME={c['toolkit_home']} in docker exec (the image sets CANN's env)")
        ]
    if c.get("found"):
        return [
            Check(
                "cann", OK, "ASCEND_TOOLKIT_HOME unset in docker exec; verl's launcher sources " + ", ".join(c["found"])
            )
        ]
    return [
        Check(
            "cann",
            WARN,
            "ASCEND_TOOLKIT_HOME unset in docker exec and no CANN set_env.sh found "
            "(/usr/local/Ascend/ascend-toolkit/set_env.sh)",
            "install CANN in the image or set ASCEND_TOOLKIT_HOME and its library paths in the image's ENV",
        )
    ]


def _compose_request(host, pv: PlanView | None) -> dict | None:
    if pv is None or not pv.argv:
        return None
    from dapo_ops.control.preflight import compose_check

    try:
        req = compose_check.request_for(
            pv.argv, str(pv.spec.workdir or getattr(host, "workdir", defaults.HOST["workdir"]))
        )
    except ValueError:
        return None
    return dict(req, startup=True)  # + verl's own start-up checks on the composed config (agent/verlcheck.py)
