"""Feature catalog, USER_FEATURES parsing and the runbook's precedence rules."""

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from dapo_ops.core import features
from dapo_ops.core.features import FeatureError, FeatureSet, parse_user_features, resolve


def test_defaults_are_the_performance_features():
    fs = resolve(None)
    assert fs.names() == frozenset(features.PERFORMANCE)
    assert {f.source for f in fs.enabled} == {"default"}
    assert fs.disabled == frozenset()
    assert resolve("").names() == resolve("default").names() == fs.names()


def test_catalog_kinds_and_help():
    assert set(features.CATALOG) == set(features.ALL)
    for name, (kind, help_) in features.CATALOG.items():
        assert kind in ("performance", "memory", "verl-default")
        assert help_ and "\n" not in help_
    assert [features.CATALOG[n][0] for n in features.MEMORY] == ["memory", "memory"]


def test_explicit_beats_default_and_keeps_explicit_source():
    fs = resolve("flash_attn,prefix_cache")
    assert fs.source_of("flash_attn") == "explicit"
    assert fs.source_of("prefix_cache") == "explicit"
    assert fs.source_of("dynamic_batch") == "default"


def test_minus_turns_a_default_off_and_is_recorded():
    fs = resolve("-dynamic_batch, -remove_padding")
    assert not fs.has("dynamic_batch") and not fs.has("remove_padding")
    assert fs.disabled == {"dynamic_batch", "remove_padding"}
    assert fs.has("flash_attn")


def test_unknown_feature_lists_valid_names_in_one_line():
    with pytest.raises(FeatureError) as ei:
        resolve("flash_attn,turbo")
    msg = str(ei.value)
    assert "'turbo'" in msg and "\n" not in msg
    for name in features.ALL:
        assert name in msg


def test_on_and_off_at_once_is_an_error():
    with pytest.raises(FeatureError, match="both on and off"):
        resolve("offload,-offload")


def test_enable_offload_is_explicit_offload():
    fs = resolve("", enable_offload=True)
    assert fs.source_of("offload") == "explicit"
    assert resolve("offload", enable_offload=True).to_json().count({"name": "offload", "source": "explicit"}) == 1
    with pytest.raises(FeatureError, match="ENABLE_OFFLOAD"):
        resolve("-offload", enable_offload=True)


def test_add_never_duplicates_and_keeps_higher_precedence_source():
    fs = resolve("offload")
    again = fs.add("offload", "oom-retry-1")
    assert again is fs
    assert again.source_of("offload") == "explicit"


def test_add_never_reenables_a_user_disabled_feature():
    fs = resolve("-offload")
    assert fs.add("offload", "oom-retry-1").has("offload") is False
    assert "offload" in fs.disabled


def test_oom_rungs_are_appended_even_when_the_user_chose_features():
    fs = resolve("prefix_cache,-flash_attn")
    fs2 = fs.add("offload", "oom-retry-1")
    assert fs2.source_of("offload") == "oom-retry-1"
    # the user's choices stay
    assert fs2.source_of("prefix_cache") == "explicit" and "flash_attn" in fs2.disabled
    assert [f.name for f in fs2.enabled][-1] == "offload"


def test_remove_ladder_never_removes_explicit_or_default():
    fs = resolve("offload")
    assert fs.remove_ladder("offload").has("offload")
    assert fs.remove_ladder("flash_attn").has("flash_attn")
    fs2 = resolve("").add("offload", "oom-retry-1")
    assert not fs2.remove_ladder("offload").has("offload")


def test_json_round_trip_with_disabled():
    fs = resolve("prefix_cache,-offload").add("recompute", "oom-retry-1")
    spec = {"features": fs.to_json(), "disabled_features": sorted(fs.disabled)}
    back = FeatureSet.from_json(spec)
    assert back == fs
    assert FeatureSet.from_json(fs.to_json(), sorted(fs.disabled)) == fs


def test_from_json_rejects_unknown_names_and_sources():
    with pytest.raises(FeatureError):
        FeatureSet.from_json([{"name": "warp", "source": "explicit"}])
    with pytest.raises(FeatureError):
        FeatureSet.from_json([{"name": "offload", "source": "oom-retry-0"}])


tokens = st.lists(st.sampled_from(list(features.ALL) + ["-" + n for n in features.ALL] + ["", " "]), max_size=12)


@hsettings(max_examples=300, deadline=None)
@given(tokens, st.booleans(), st.lists(st.tuples(st.sampled_from(features.ALL), st.integers(1, 5)), max_size=6))
def test_property_no_duplicates_and_explicit_never_removed(items, offload, adds):
    try:
        fs = resolve(",".join(items), enable_offload=offload)
    except FeatureError:
        return  # contradictory input is rejected, nothing to check
    explicit = {f.name for f in fs.enabled if f.source == "explicit"}
    for name, n in adds:
        fs = fs.add(name, f"oom-retry-{n}")
        fs = fs.remove_ladder("offload")
        names = [f.name for f in fs.enabled]
        assert len(names) == len(set(names))
        assert explicit <= fs.names()
        assert not (fs.names() & fs.disabled)


def test_pure_modules_import_with_the_stdlib_only():
    """features, ladder, profiles, overrides are shipped into training images: no site-packages allowed."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    code = (
        "import sys; sys.path.insert(0, %r); import dapo_ops.core.features, dapo_ops.core.ladder, dapo_ops.core.profiles, "
        "dapo_ops.core.overrides; fs = dapo_ops.core.features.resolve('-offload'); "
        "print(dapo_ops.core.ladder.decide(fs, 'oom-device', {}, 0, 2, {}, {}).action)"
    ) % str(root)
    proc = subprocess.run([sys.executable, "-S", "-I", "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "retry"


@pytest.mark.parametrize("item", ["--offload", "---offload", "+-offload", "-+offload", "++prefix_cache"])
def test_a_feature_with_more_than_one_sign_is_refused(item):
    """``USER_FEATURES=--offload`` meant offload off and ``+-offload`` on (``lstrip("+-")`` kept the first sign
    only): one sign at most, the line says how to write it."""
    with pytest.raises(FeatureError, match=r"has more than one sign; write -\w+ \(off\) or \w+ \(on\)"):
        parse_user_features(f"flash_attn,{item}")
    assert parse_user_features("-offload,+prefix_cache, recompute") == (["prefix_cache", "recompute"], ["offload"])
