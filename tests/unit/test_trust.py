"""Adapter trust: untagged rows trusted by default, tagged ones only when allow-listed."""

from __future__ import annotations

import pytest

from pymem import Settings
from pymem.admission.trust import AdapterTrustPolicy, active_trust_policy
from pymem.errors import InvalidArguments


def test_defaults_trust_untagged_rows_only():
    policy = AdapterTrustPolicy()
    assert policy.is_trusted(None)
    assert not policy.is_trusted("slack-bot")


def test_allow_listed_adapters_are_trusted():
    policy = AdapterTrustPolicy(trusted_adapters=frozenset({"slack-bot", "cli"}))
    assert policy.is_trusted("slack-bot") and policy.is_trusted("cli")
    assert not policy.is_trusted("web-scraper")
    assert not policy.is_trusted("Slack-Bot"), "names compare exactly"


def test_untagged_can_be_distrusted():
    policy = AdapterTrustPolicy(trust_untagged=False, trusted_adapters=frozenset({"cli"}))
    assert not policy.is_trusted(None)
    assert policy.is_trusted("cli")


def test_validation():
    with pytest.raises(InvalidArguments):
        AdapterTrustPolicy(trusted_adapters="slack-bot")  # type: ignore[arg-type]
    with pytest.raises(InvalidArguments):
        AdapterTrustPolicy(trusted_adapters=frozenset({""}))
    with pytest.raises(InvalidArguments):
        AdapterTrustPolicy(trust_untagged="yes")  # type: ignore[arg-type]
    with pytest.raises(InvalidArguments):
        AdapterTrustPolicy().is_trusted("")
    with pytest.raises(InvalidArguments):
        AdapterTrustPolicy().is_trusted(42)  # type: ignore[arg-type]


def test_from_env_mapping():
    policy = AdapterTrustPolicy.from_env({"PYMEM_TRUSTED_ADAPTERS": " slack-bot , cli,,", "PYMEM_TRUST_UNTAGGED": "0"})
    assert policy.trusted_adapters == {"slack-bot", "cli"}
    assert not policy.trust_untagged
    assert AdapterTrustPolicy.from_env({}) == AdapterTrustPolicy()


@pytest.mark.parametrize(
    "raw, expected",
    [("1", True), ("true", True), ("TRUE", True), ("yes", True), ("on", True),
     ("0", False), ("false", False), ("False", False), ("no", False), ("off", False), ("", True)],
)
def test_trust_untagged_values(raw, expected):
    assert AdapterTrustPolicy.from_env({"PYMEM_TRUST_UNTAGGED": raw}).trust_untagged is expected


def test_trust_untagged_typo_is_an_error():
    with pytest.raises(InvalidArguments, match="PYMEM_TRUST_UNTAGGED"):
        AdapterTrustPolicy.from_env({"PYMEM_TRUST_UNTAGGED": "nope"})


def test_the_trust_in_force_is_the_settings_not_the_environment_now(monkeypatch):
    monkeypatch.delenv("PYMEM_TRUSTED_ADAPTERS", raising=False)
    monkeypatch.delenv("PYMEM_TRUST_UNTAGGED", raising=False)
    settings = Settings.from_env()
    first = active_trust_policy(settings)
    assert first.is_trusted(None) and not first.is_trusted("agent-a")

    monkeypatch.setenv("PYMEM_TRUSTED_ADAPTERS", "agent-a")
    monkeypatch.setenv("PYMEM_TRUST_UNTAGGED", "false")
    assert active_trust_policy(settings) is first, "the environment is read when settings are built, not per call"
    second = active_trust_policy(Settings.from_env())
    assert second.is_trusted("agent-a") and not second.is_trusted(None)
    # The first policy object is a value: it did not change under our feet.
    assert first.is_trusted(None) and not first.is_trusted("agent-a")

    monkeypatch.setenv("PYMEM_TRUSTED_ADAPTERS", "agent-b")
    third = active_trust_policy(Settings.from_env())
    assert third.is_trusted("agent-b") and not third.is_trusted("agent-a")


def test_active_trust_policy_reads_the_settings_values():
    assert active_trust_policy(Settings.from_env({"PYMEM_TRUSTED_ADAPTERS": "x"})).is_trusted("x")
