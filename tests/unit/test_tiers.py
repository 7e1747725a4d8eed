"""Trust tiers: a fixed ranking of origins, rules configurable like the admission policy."""

from __future__ import annotations

import json

import pytest

from pymem import InvalidArguments
from pymem.delivery import Tier, TierRule, TrustTiers, tier_of


@pytest.mark.parametrize("origin,provenance,tier", [
    ("operator", None, Tier.OPERATOR),
    ("user_asserted", {"origin": "user_asserted"}, Tier.USER),
    ("model_inferred", {}, Tier.INFERRED),
    ("tool_output", {"citation": "ci#42"}, Tier.TOOL),
    ("tool_output", {"citation": "  "}, Tier.EXTERNAL),
    ("tool_output", None, Tier.EXTERNAL),
    ("injected_context", {"injection_source": "harness"}, Tier.EXTERNAL),
    ("retrieved_content", None, Tier.EXTERNAL),
    ("unproven", None, Tier.EXTERNAL),
    (None, None, Tier.EXTERNAL),
    ("something-new", None, Tier.EXTERNAL),
])
def test_tier_of_an_origin(origin, provenance, tier):
    assert tier_of(origin, provenance) is tier


def test_defaults_down_weight_and_exclude_the_low_tiers():
    tiers = TrustTiers()
    assert [tiers.weight(t) for t in Tier] == [1.0, 1.0, 0.8, 0.7, 0.5]
    assert [tiers.auto(t) for t in Tier] == [True, True, True, True, False]
    assert tiers.fingerprint.startswith("tt1:") and len(tiers.fingerprint) == 20


def test_configuring_from_python_json_file_and_environment(tmp_path):
    tiers = TrustTiers().with_rules(tool={"weight": 0.5, "auto": False})
    assert tiers.weight("tool") == 0.5 and not tiers.auto("tool")
    assert TrustTiers.from_json(tiers.to_json()) == tiers
    assert TrustTiers.from_json({"exclude": ["inferred"]}).auto("inferred") is False
    path = tmp_path / "tiers.json"
    path.write_text(json.dumps({"tiers": {"external": {"weight": 0.2, "auto": True}}}))
    from_env = TrustTiers.from_env({"PYMEM_TIERS_FILE": str(path), "PYMEM_TIERS_EXCLUDE": "tool, inferred"})
    assert from_env.auto("external") and from_env.weight("external") == 0.2
    assert not from_env.auto("tool") and not from_env.auto("inferred") and from_env.auto("user")
    assert from_env.fingerprint != TrustTiers().fingerprint
    assert TrustTiers.from_env({}) == TrustTiers() and TrustTiers.from_env({"PYMEM_TIERS_EXCLUDE": ""}) == TrustTiers()


@pytest.mark.parametrize("make", [
    lambda: TrustTiers().with_rules(tool=0.9),                         # a lower tier above a higher one
    lambda: TrustTiers().with_rules(user=0),                            # weights are in (0, 1]
    lambda: TrustTiers().with_rules(user=1.5),
    lambda: TrustTiers().with_rules(operator={"weight": 1, "colour": "red"}),
    lambda: TrustTiers().with_rules(admin=1.0),                         # no such tier
    lambda: TrustTiers.from_json({"version": 2}),
    lambda: TrustTiers.from_json({"tiers": {"user": 0.5}}),
    lambda: TrustTiers.from_json({"exclude": "tool"}),
    lambda: TrustTiers.from_json({"weights": {}}),
    lambda: TrustTiers.from_env({"PYMEM_TIERS_EXCLUDE": "tool,root"}),
    lambda: TrustTiers.from_env({"PYMEM_TIERS_FILE": "/nonexistent/tiers.json"}),
    lambda: TierRule(weight=True),
    lambda: TierRule(weight=0.5, auto="yes"),
])
def test_bad_configuration_is_refused(make):
    with pytest.raises(InvalidArguments):
        make()
