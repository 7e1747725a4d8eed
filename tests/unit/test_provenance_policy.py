"""Provenance validation and the admission policy table, fingerprint and configuration."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pymem.admission.policy import AdmissionPolicy, OriginRule
from pymem.admission.provenance import Origin, Provenance
from pymem.errors import InvalidArguments

REPO = Path(__file__).resolve().parents[2]

# ----------------------------------------------------------------------------------------------
# Origin / Provenance
# ----------------------------------------------------------------------------------------------


def test_origin_values_match_the_schema_check():
    assert {o.value for o in Origin} == {
        "user_asserted", "operator", "model_inferred", "tool_output",
        "retrieved_content", "unproven", "injected_context",
    }
    assert isinstance(Origin.OPERATOR, str) and Origin.OPERATOR == "operator"


def test_origin_given_as_string_is_stored_as_enum():
    p = Provenance("tool_output", citation="https://example.org/doc")
    assert p.origin is Origin.TOOL_OUTPUT


def test_to_json_omits_absent_fields_and_round_trips():
    p = Provenance(Origin.USER_ASSERTED, run_id="r1", turn=0, session_id="s", adapter="slack")
    data = p.to_json()
    assert data == {"origin": "user_asserted", "run_id": "r1", "turn": 0, "session_id": "s", "adapter": "slack"}
    assert json.loads(json.dumps(data)) == data
    assert Provenance.from_json(data) == p


def test_injected_context_round_trip():
    p = Provenance("injected_context", injection_source="harness:system-preamble")
    assert Provenance.from_json(p.to_json()) == p


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"origin": "rumour"}, "unknown provenance origin"),
        ({"origin": 3}, "must be a string"),
        ({"origin": "injected_context"}, "needs an injection_source"),
        ({"origin": "user_asserted", "injection_source": "x"}, "only allowed with origin injected_context"),
        ({"origin": "tool_output", "citation": 12}, "citation must be a string"),
        ({"origin": "operator", "source": b"bytes"}, "source must be a string"),
        ({"origin": "operator", "turn": -1}, "non-negative integer"),
        ({"origin": "operator", "turn": 1.0}, "non-negative integer"),
        ({"origin": "operator", "turn": True}, "non-negative integer"),
        ({"origin": "operator", "turn": "3"}, "non-negative integer"),
        ({"origin": "operator", "session_id": "a\x00b"}, "NUL"),
        ({"origin": "injected_context", "injection_source": "x\x00"}, "NUL"),
        ({"origin": "tool_output", "citation": "   "}, "blank"),
        ({"origin": "operator", "run_id": "x" * 5000}, "longer than"),
    ],
)
def test_provenance_validation(kwargs, fragment):
    with pytest.raises(InvalidArguments, match=fragment):
        Provenance(**kwargs)


def test_from_json_refuses_unknown_fields_missing_origin_and_non_objects():
    with pytest.raises(InvalidArguments, match="unknown provenance field"):
        Provenance.from_json({"origin": "operator", "colour": "red"})
    with pytest.raises(InvalidArguments, match="no origin"):
        Provenance.from_json({"run_id": "r"})
    with pytest.raises(InvalidArguments, match="JSON object"):
        Provenance.from_json(["operator"])  # type: ignore[arg-type]


def test_provenance_is_frozen():
    p = Provenance("operator")
    with pytest.raises(AttributeError):
        p.origin = Origin.UNPROVEN  # type: ignore[misc]


_text = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), min_size=1, max_size=30)


@given(
    origin=st.sampled_from([o for o in Origin if o is not Origin.INJECTED_CONTEXT]),
    run_id=st.none() | _text,
    turn=st.none() | st.integers(min_value=0, max_value=10**9),
    source=st.none() | _text,
    citation=st.none() | _text.filter(str.strip),
)
def test_provenance_json_round_trip_property(origin, run_id, turn, source, citation):
    p = Provenance(origin, run_id=run_id, turn=turn, source=source, citation=citation)
    data = json.loads(json.dumps(p.to_json()))
    assert Provenance.from_json(data) == p
    assert None not in data.values()


# ----------------------------------------------------------------------------------------------
# the default table, row by row
# ----------------------------------------------------------------------------------------------

DEFAULT_ROWS = [
    # origin, persists, ceiling, default confidence, needs citation, needs injection source
    (Origin.USER_ASSERTED, True, 1.0, 1.0, False, False),
    (Origin.OPERATOR, True, 1.0, 1.0, False, False),
    (Origin.MODEL_INFERRED, True, 0.6, 0.6, False, False),
    (Origin.TOOL_OUTPUT, True, 0.6, 0.6, True, False),
    (Origin.RETRIEVED_CONTENT, False, None, None, None, None),
    (Origin.UNPROVEN, False, None, None, None, None),
    (Origin.INJECTED_CONTEXT, True, 0.5, 0.5, False, True),
]


@pytest.mark.parametrize("origin, persists, ceiling, default, citation, injection", DEFAULT_ROWS)
def test_default_policy_rows(origin, persists, ceiling, default, citation, injection):
    rule = AdmissionPolicy().rule_for(origin)
    assert rule.persist is persists
    if persists:
        assert rule.ceiling == ceiling
        assert rule.effective_default == default
        assert rule.requires_citation is citation
        assert rule.requires_injection_source is injection


def test_named_ceilings():
    p = AdmissionPolicy()
    assert (p.inferred_ceiling, p.tool_ceiling, p.injected_ceiling) == (0.6, 0.6, 0.5)
    assert p.denied_origins == {Origin.RETRIEVED_CONTENT, Origin.UNPROVEN}


def test_rule_cap():
    rule = OriginRule(persist=True, ceiling=0.6)
    assert rule.cap(0.9) == 0.6
    assert rule.cap(0.3) == 0.3
    assert rule.cap(None) == 0.6
    with pytest.raises(InvalidArguments):
        rule.cap(1.5)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"persist": "yes"},
        {"persist": True, "ceiling": 1.2},
        {"persist": True, "ceiling": float("nan")},
        {"persist": True, "ceiling": True},
        {"persist": True, "ceiling": 0.5, "default_confidence": 0.7},
    ],
)
def test_rule_validation(kwargs):
    with pytest.raises(InvalidArguments):
        OriginRule(**kwargs)


def test_rules_are_read_only_and_missing_origins_are_denied():
    p = AdmissionPolicy({Origin.USER_ASSERTED: OriginRule(persist=True)})
    with pytest.raises(TypeError):
        p.rules[Origin.UNPROVEN] = OriginRule(persist=True)  # type: ignore[index]
    assert p.persists(Origin.USER_ASSERTED)
    assert not any(p.persists(o) for o in Origin if o is not Origin.USER_ASSERTED)


# ----------------------------------------------------------------------------------------------
# tightening and fingerprints
# ----------------------------------------------------------------------------------------------


def test_tightened_lowers_a_ceiling_and_changes_the_fingerprint():
    base = AdmissionPolicy()
    tight = base.tightened(model_inferred=0.3)
    assert tight.inferred_ceiling == 0.3
    assert tight.fingerprint != base.fingerprint
    assert base.inferred_ceiling == 0.6  # the original is untouched


def test_tightened_accepts_rules_mappings_and_false():
    base = AdmissionPolicy()
    p = base.tightened(
        tool_output={"ceiling": 0.4},
        injected_context=False,
        model_inferred=OriginRule(persist=True, ceiling=0.2),
    )
    assert p.tool_ceiling == 0.4 and p.rule_for("tool_output").requires_citation
    assert not p.persists("injected_context")
    assert p.inferred_ceiling == 0.2


@pytest.mark.parametrize(
    "change",
    [
        {"model_inferred": 0.9},
        {"retrieved_content": OriginRule(persist=True, ceiling=0.1)},
        {"tool_output": {"requires_citation": False}},
        {"injected_context": {"requires_injection_source": False}},
    ],
)
def test_tightened_refuses_to_loosen(change):
    with pytest.raises(InvalidArguments, match="loosen"):
        AdmissionPolicy().tightened(**change)


def test_with_rules_may_loosen_and_unknown_origins_fail():
    p = AdmissionPolicy().with_rules(retrieved_content={"persist": True, "ceiling": 0.2})
    assert p.persists("retrieved_content") and p.rule_for("retrieved_content").ceiling == 0.2
    # Re-enabling without a ceiling is fail-safe: believed at 0 until one is given.
    assert AdmissionPolicy().with_rules(unproven={"persist": True}).rule_for("unproven").cap(0.9) == 0.0
    with pytest.raises(InvalidArguments, match="unknown origin"):
        AdmissionPolicy().with_rules(gossip=False)


def test_same_rules_same_fingerprint_and_equality():
    a, b = AdmissionPolicy(), AdmissionPolicy()
    assert a is not b and a == b and hash(a) == hash(b) and a.fingerprint == b.fingerprint
    assert a.fingerprint.startswith("ap1:") and len(a.fingerprint) == 4 + 16
    # A denial written two ways is the same behaviour, so the same fingerprint.
    x = AdmissionPolicy().deny("model_inferred")
    y = AdmissionPolicy().with_rules(model_inferred={"persist": False})
    assert x == y and x.fingerprint == y.fingerprint
    # Reaching the same rules by another path gives the same fingerprint.
    assert AdmissionPolicy().with_rules(model_inferred=0.3).with_rules(model_inferred=0.6) == a


@pytest.mark.slow
def test_fingerprint_is_stable_across_processes():
    code = "from pymem.admission.policy import AdmissionPolicy as P; print(P().fingerprint, P().tightened(tool_output=0.25).fingerprint)"
    outs = set()
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO)}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
        outs.add(out.strip())
    here = f"{AdmissionPolicy().fingerprint} {AdmissionPolicy().tightened(tool_output=0.25).fingerprint}"
    assert outs == {here}


# ----------------------------------------------------------------------------------------------
# configuration: JSON, file, environment
# ----------------------------------------------------------------------------------------------


def test_to_json_from_json_round_trip():
    p = AdmissionPolicy().tightened(model_inferred=0.4, injected_context=False)
    again = AdmissionPolicy.from_json(json.loads(json.dumps(p.to_json())))
    assert again == p and again.fingerprint == p.fingerprint


def test_from_file(tmp_path):
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"rules": {"model_inferred": {"ceiling": 0.45}}, "tool_ceiling": 0.3, "deny_origins": ["injected_context"]}))
    p = AdmissionPolicy.from_file(path)
    assert p.inferred_ceiling == 0.45 and p.tool_ceiling == 0.3 and not p.persists("injected_context")


@pytest.mark.parametrize(
    "content, fragment",
    [
        ("{not json", "not valid JSON"),
        ("[]", "JSON object"),
        ('{"ceilings": 1}', "unknown admission policy key"),
        ('{"version": 2}', "unsupported admission policy version"),
        ('{"rules": {"gossip": {"persist": false}}}', "unknown origin"),
        ('{"rules": {"model_inferred": {"ceiling": 7}}}', r"\[0, 1\]"),
        ('{"rules": {"model_inferred": {"colour": "red"}}}', "unknown policy rule field"),
        ('{"rules": {"model_inferred": 0.5}}', "must be an object"),
        ('{"tool_ceiling": "high"}', r"\[0, 1\]"),
        ('{"deny_origins": "unproven"}', "list of origins"),
    ],
)
def test_from_file_invalid(tmp_path, content, fragment):
    path = tmp_path / "policy.json"
    path.write_text(content)
    with pytest.raises(InvalidArguments, match=fragment) as info:
        AdmissionPolicy.from_file(path)
    assert "policy.json" in str(info.value)


def test_from_file_missing(tmp_path):
    with pytest.raises(InvalidArguments, match="cannot read admission policy file"):
        AdmissionPolicy.from_file(tmp_path / "nope.json")


def test_from_env_defaults_and_overrides(tmp_path):
    assert AdmissionPolicy.from_env({}) == AdmissionPolicy()
    env = {
        "PYMEM_INFERRED_CEILING": "0.5",
        "PYMEM_TOOL_CEILING": " 0.2 ",
        "PYMEM_INJECTED_CEILING": "0.1",
        "PYMEM_DENY_ORIGINS": "model_inferred, injected_context,",
    }
    p = AdmissionPolicy.from_env(env)
    assert p.tool_ceiling == 0.2
    assert not p.persists("model_inferred") and not p.persists("injected_context")
    assert p.injected_ceiling == 0.0  # a denied origin admits nothing
    assert AdmissionPolicy.from_env({"PYMEM_INJECTED_CEILING": "0.1"}).injected_ceiling == 0.1
    assert p.persists("user_asserted")


def test_from_env_file_then_overrides(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"inferred_ceiling": 0.3, "tool_ceiling": 0.3}))
    p = AdmissionPolicy.from_env({"PYMEM_POLICY_FILE": str(path), "PYMEM_TOOL_CEILING": "0.1"})
    assert p.inferred_ceiling == 0.3 and p.tool_ceiling == 0.1


def test_from_env_reads_os_environ(monkeypatch):
    monkeypatch.setenv("PYMEM_INFERRED_CEILING", "0.35")
    assert AdmissionPolicy.from_env().inferred_ceiling == 0.35


@pytest.mark.parametrize(
    "env, fragment",
    [
        ({"PYMEM_INFERRED_CEILING": "lots"}, "PYMEM_INFERRED_CEILING must be a number"),
        ({"PYMEM_TOOL_CEILING": "1.5"}, "PYMEM_TOOL_CEILING"),
        ({"PYMEM_TOOL_CEILING": "nan"}, "PYMEM_TOOL_CEILING"),
        ({"PYMEM_DENY_ORIGINS": "unproven,gossip"}, "PYMEM_DENY_ORIGINS"),
        ({"PYMEM_POLICY_FILE": "/nonexistent/pymem-policy.json"}, "cannot read"),
    ],
)
def test_from_env_invalid(env, fragment):
    with pytest.raises(InvalidArguments, match=fragment):
        AdmissionPolicy.from_env(env)
