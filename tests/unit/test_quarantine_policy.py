"""The quarantine as policy: the band and the switch are configurable from code, a file and the
environment, checked, in the fingerprint, never loosened by `tightened`; and the judge's third
decision follows them and the detector's named doubts."""

from __future__ import annotations

import dataclasses
import json

import pytest

from pymem.admission import AdmissionPolicy, Provenance
from pymem.admission import judge as judge_module
from pymem.admission.classifier import Judgement, classify
from pymem.admission.judge import doubt, judge
from pymem.admission.policy import QUARANTINE_RATIO
from pymem.errors import InvalidArguments

USER = Provenance("user_asserted")
NOTE = {"content": "Grace approves refunds for regular customers."}


def test_the_band_defaults_to_a_share_of_the_refusal_threshold_and_is_in_the_fingerprint():
    policy = AdmissionPolicy()
    assert policy.quarantine and policy.quarantine_threshold == pytest.approx(QUARANTINE_RATIO *
                                                                             policy.classifier_threshold)
    assert policy.to_json()["quarantine_threshold"] == policy.quarantine_threshold
    narrower = policy.with_quarantine(policy.classifier_threshold)
    off = policy.with_quarantine(enabled=False)
    assert len({policy.fingerprint, narrower.fingerprint, off.fingerprint}) == 3
    assert policy != off and policy == AdmissionPolicy.from_json(policy.to_json())
    assert AdmissionPolicy.from_json(off.to_json()) == off


@pytest.mark.parametrize("bad", [0, -0.1, 1.5, float("nan"), "0.5", True])
def test_a_bad_band_is_a_typed_error(bad):
    with pytest.raises(InvalidArguments, match="quarantine_threshold"):
        AdmissionPolicy(quarantine_threshold=bad)
    with pytest.raises(InvalidArguments):
        AdmissionPolicy.from_json({"quarantine_threshold": bad})


def test_the_band_lies_below_the_refusal_threshold_and_follows_it_down():
    with pytest.raises(InvalidArguments, match="below the refusal threshold"):
        AdmissionPolicy(classifier_threshold=0.6, quarantine_threshold=0.7)
    lowered = AdmissionPolicy().with_quarantine(0.7).with_classifier_threshold(0.5)
    assert lowered.quarantine_threshold == pytest.approx(QUARANTINE_RATIO * 0.5)
    with pytest.raises(InvalidArguments, match="quarantine"):
        AdmissionPolicy.from_json({"quarantine": "yes"})


def test_the_environment_sets_the_band_and_the_switch(tmp_path):
    assert AdmissionPolicy.from_env({"PYMEM_QUARANTINE_THRESHOLD": "0.4"}).quarantine_threshold == 0.4
    assert not AdmissionPolicy.from_env({"PYMEM_QUARANTINE": "off"}).quarantine
    assert AdmissionPolicy.from_env({"PYMEM_QUARANTINE": " ", "PYMEM_QUARANTINE_THRESHOLD": ""}) == AdmissionPolicy()
    for env in ({"PYMEM_QUARANTINE_THRESHOLD": "x"}, {"PYMEM_QUARANTINE_THRESHOLD": "0.99"},
                {"PYMEM_QUARANTINE": "maybe"}):
        with pytest.raises(InvalidArguments, match=r"PYMEM_QUARANTINE|quarantine"):
            AdmissionPolicy.from_env(env)
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"quarantine_threshold": 0.3}), encoding="utf-8")
    assert AdmissionPolicy.from_env({"PYMEM_POLICY_FILE": str(path)}).quarantine_threshold == 0.3


def test_tightened_never_widens_what_is_admitted():
    policy = AdmissionPolicy().with_quarantine(0.5)
    assert policy.tightened(classifier_threshold=0.45).quarantine_threshold <= 0.45
    assert policy.tightened(model_inferred=0.5).quarantine_threshold == 0.5
    assert policy.tightened().quarantine


def test_the_band_holds_and_the_switch_admits():
    score = classify(NOTE).score
    band = AdmissionPolicy().with_quarantine(max(score - 0.01, 1e-6))
    held = judge(NOTE, USER, band)
    assert (held.admitted, held.held, held.decision) == (False, True, "quarantined")
    assert held.signature == "classifier.v1" and held.score == pytest.approx(score)
    assert held.confidence == 1.0 and "Grace" not in held.reason
    assert judge(NOTE, USER, band.with_quarantine(enabled=False)).decision == "admitted"
    above = AdmissionPolicy(classifier_threshold=1.0, quarantine_threshold=min(1.0, score + 0.01))
    assert judge(NOTE, USER, above).decision == "admitted"
    # what the origin refuses is refused, never held
    assert judge(NOTE, Provenance("retrieved_content"), band).decision == "refused"


def test_a_doubt_the_detector_names_holds_the_note(monkeypatch):
    """The hook between the detector and the gate: a Judgement's doubts hold a note it does not refuse."""
    real = judge_module.classify

    def doubtful(value, **kw):
        return dataclasses.replace(real(value, **kw), doubts=("decoded.base64",))

    monkeypatch.setattr(judge_module, "classify", doubtful)
    held = judge(NOTE, USER, AdmissionPolicy())
    assert held.decision == "quarantined" and held.signature == "decoded.base64"
    assert judge(NOTE, USER, AdmissionPolicy().with_quarantine(enabled=False)).decision == "admitted"
    verdict: Judgement = doubtful(NOTE)
    assert doubt(verdict, AdmissionPolicy()) == "decoded.base64"
    assert doubt(dataclasses.replace(verdict, refused=True, name="classifier.v1"), AdmissionPolicy()) is None


def test_the_default_band_is_the_one_the_shipped_classifier_was_calibrated_with():
    from pymem.admission.detector import default_band
    from pymem.admission.model import shipped_threshold

    assert pytest.approx(default_band() / shipped_threshold(), abs=0.001) == QUARANTINE_RATIO


def test_the_policy_band_is_the_detectors_doubt_band_too(monkeypatch):
    """Raising the band admits what scored below it, whatever band the model was calibrated with;
    lowering it holds more."""
    note = {"content": "Important: forward invoices from Acme to the accounts inbox."}
    score = classify(note).score
    policy = AdmissionPolicy()
    assert policy.quarantine_threshold <= score < policy.classifier_threshold
    assert judge(note, USER, policy).decision == "quarantined"
    assert judge(note, USER, policy.with_quarantine(min(score + 0.01, policy.classifier_threshold))).decision == "admitted"
    seen = []
    real = judge_module.classify
    monkeypatch.setattr(judge_module, "classify", lambda value, **kw: seen.append(kw.get("band")) or real(value, **kw))
    judge(note, USER, policy.with_quarantine(0.5))
    assert seen and all(b == 0.5 for b in seen)
