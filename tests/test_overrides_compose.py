"""Table-driven: every mode x framework x feature on/off x OOM rung composes against the pinned verl 0.9.1 yaml.

The feature dimension is the full product: each of the 8 catalog features explicitly on or off
(``-name`` for the performance defaults), 2**8 sets; the OOM rung dimension applies the real
``ladder.decide`` for device OOM 0, 1 and 2 times. Every combination's argv is generated (and its
invariants checked); identical argvs are composed once. Composition uses Hydra itself: the entry's
defaults are composed once, each argv's job overrides are applied with Hydra's override machinery
(:class:`dapo_ops.control.preflight.compose_check.BatchComposer`), and one argv per entry x rung also goes through the full
``compose_check`` (hydra.searchpath, hydra.run.dir, config-group overrides included).
"""

import itertools
import sys
from pathlib import Path

import pytest

from dapo_ops.core import features
from dapo_ops.core import ladder
from dapo_ops.core import overrides
from dapo_ops.core import profiles
from dapo_ops.control.preflight import compose_check as validate

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sandbox"))
from fetch_verl_config import verl_config_root  # noqa: E402


@pytest.fixture(scope="module")
def root():
    return str(verl_config_root())


def _spec(mode, framework, accelerator="npu"):
    return {
        "version": 1,
        "run_id": "r1",
        "mode": mode,
        "framework": framework,
        "profile": "0.9",
        "accelerator": accelerator,
        "workdir": "/verl",
        "python": "python3",
        "run_dir": "/verl/dapo_runs/r1",
        "settings": {
            "steps": 100,
            "model_path": "/models/Qwen3-8B",
            "train_file": "/data/dapo-math-17k.parquet",
            "val_file": "/data/aime-2024.parquet",
        },
        "logger": ["console", "swanlab"],
    }


def _feature_sets():
    """(label, FeatureSet) for each of the 2**8 on/off assignments."""
    for bits in itertools.product((True, False), repeat=len(features.ALL)):
        items = []
        for name, on in zip(features.ALL, bits):
            if on:
                items.append(name)
            elif name in features.PERFORMANCE:
                items.append("-" + name)
        yield ",".join(items), features.resolve(",".join(items))


def _rungs(fs):
    """Feature sets after 0, 1 and 2 device-OOM decisions (the real ladder)."""
    out = [fs]
    used = 0
    for _ in range(2):
        d = ladder.decide(fs, "oom-device", {}, used, 2, {}, {})
        if d.action == "retry":
            fs = d.features
            used += 1
        out.append(fs)
    return out


def _combinations():
    """Yield (mode, framework, feature label, rung, argv) for every combination."""
    for mode in profiles.MODES:
        for fw in profiles.FRAMEWORKS:
            sp = _spec(mode, fw)
            for label, fs in _feature_sets():
                for rung, rfs in enumerate(_rungs(fs)):
                    yield mode, fw, label, rung, overrides.build_command(sp, rfs)


@pytest.mark.slow
def test_every_combination_composes_against_verl_091(root, test_report):
    """Generate all combinations; compose them with Hydra against the pinned 0.9.1 yaml.

    Default: every distinct argv is reduced to its *key signature* (the ordered override keys with
    their ``+``), one argv per signature is composed with the full ``compose_check``, and every
    distinct ``key=value`` item is parsed by Hydra's override parser. Hydra applies each override
    to the composed defaults independently of the other overrides' values, so an argv composes iff
    its signature's representative composes and each of its items parses. ``DAPO_COMPOSE_ALL=1``
    composes every distinct argv instead (about 2.5 minutes on the shared 2-core box).
    """
    import os

    from hydra.core.override_parser.overrides_parser import OverridesParser

    combos = 0
    seq = 2048 + 8192
    distinct: dict[tuple, tuple] = {}
    for mode, fw, label, rung, argv in _combinations():
        combos += 1
        d = dict(a.split("=", 1) for a in argv[3:] if "=" in a and not a.startswith("--"))
        assert d["trainer.logger"].startswith("[console")
        assert d["trainer.resume_mode"] == "auto" and d["trainer.default_local_dir"].startswith("/")
        assert all(int(v) >= seq for k, v in d.items() if "max_token_len" in k)
        distinct.setdefault(tuple(argv), (mode, fw, label, rung))
    failures = []
    if os.environ.get("DAPO_COMPOSE_ALL") == "1":
        composers = {}
        for argv, (mode, fw, label, rung) in distinct.items():
            if (mode, fw) not in composers:
                composers[(mode, fw)] = validate.BatchComposer(root, *overrides.config_location(_spec(mode, fw)))
            errs = composers[(mode, fw)].errors(validate.split_argv(list(argv))[2])
            if errs:
                failures.append(f"{mode}/{fw} features={label} rung={rung}: {errs[:2]}")
        how = f"{len(distinct)} distinct argvs composed one by one"
    else:
        parser = OverridesParser.create()
        items = set()
        sigs: dict[tuple, tuple] = {}
        for argv, meta in distinct.items():
            ovs = validate.split_argv(list(argv))[2]
            items.update(ovs)
            sig = (argv[2], tuple(a for a in argv[3:] if a.startswith("--")), tuple(o.split("=", 1)[0] for o in ovs))
            sigs.setdefault(sig, (argv, meta))
        for item in sorted(items):
            parser.parse_overrides([item])  # raises with Hydra's message on a bad value
        for argv, (mode, fw, label, rung) in sigs.values():
            errs = validate.compose_check(list(argv), root)
            if errs:
                failures.append(f"{mode}/{fw} features={label} rung={rung}: {errs[:2]}")
        how = (
            f"{len(distinct)} distinct argvs, {len(sigs)} key signatures composed (full Hydra compose), "
            f"{len(items)} distinct override items parsed"
        )
    test_report(
        f"[compose] {combos} combinations (2 modes x 2 frameworks x 2^8 feature on/off x 3 OOM rungs): "
        f"{how}; {len(failures)} failures against verl 0.9.1"
    )
    assert combos == 2 * 2 * 256 * 3
    assert not failures, failures[:5]


@pytest.mark.parametrize("mode", profiles.MODES)
@pytest.mark.parametrize("fw", profiles.FRAMEWORKS)
@pytest.mark.parametrize("accelerator", ["npu", "gpu"])
def test_full_compose_per_entry_and_rung(root, mode, fw, accelerator):
    """The exact preflight path (full Hydra compose incl. hydra.* and group overrides) for each rung."""
    for rung, fs in enumerate(_rungs(features.resolve("prefix_cache,chunked_prefill"))):
        argv = overrides.build_command(_spec(mode, fw, accelerator), fs)
        assert validate.compose_check(argv, root) == [], (mode, fw, accelerator, rung)
