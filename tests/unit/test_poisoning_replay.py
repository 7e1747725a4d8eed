"""Replay the poisoning corpus through the write gate and measure refusal rates.

Every entry goes through `judge` with origin user_asserted, the most trusted origin the default
policy persists: a poisoned sentence must be refused even when the user appears to have said
it, and a benign note must pass even then. The rates are printed and also put in every
assertion message, so they show up without `-s`.
"""

from __future__ import annotations

from collections import Counter

import pytest
from helpers.poisoning_corpus import BENIGN, PAYLOADS

from pymem.admission.judge import judge
from pymem.admission.policy import AdmissionPolicy
from pymem.admission.provenance import Provenance

POLICY = AdmissionPolicy()
USER = Provenance("user_asserted", session_id="replay")

MIN_PAYLOADS, MIN_BENIGN = 170, 120
MIN_REFUSAL_RATE, MAX_FALSE_REFUSAL_RATE = 0.95, 0.05


def _refused(text: str) -> tuple[bool, str | None]:
    decision = judge({"content": text, "kind": "fact"}, USER, POLICY)
    return (not decision.admitted), decision.signature


@pytest.fixture(scope="module")
def replay():
    payloads = [(category, text, *_refused(text)) for category, text in PAYLOADS]
    benign = [(category, text, *_refused(text)) for category, text in BENIGN]
    refused = sum(r for _, _, r, _ in payloads)
    false_refused = sum(r for _, _, r, _ in benign)
    per_category = Counter(c for c, _, r, _ in payloads if not r)
    summary = (
        f"payloads: {refused}/{len(payloads)} refused ({refused / len(payloads):.1%}); "
        f"benign: {false_refused}/{len(benign)} refused ({false_refused / len(benign):.1%}); "
        f"missed by category: {dict(per_category) or 'none'}"
    )
    print("\n[poisoning replay] " + summary)
    return payloads, benign, summary


def test_corpus_sizes(replay):
    payloads, benign, summary = replay
    assert len(payloads) >= MIN_PAYLOADS, summary
    assert len(benign) >= MIN_BENIGN, summary
    categories = {c for c, *_ in payloads}
    assert {
        "persistent_exfiltration", "record_redirection", "delayed_trigger",
        "operator_impersonation", "classic_override", "obfuscated",
    } <= categories, summary
    assert len({t for _, t, *_ in payloads}) == len(payloads), "payloads are distinct"
    assert len({t for _, t, *_ in benign}) == len(benign), "benign notes are distinct"


def test_payload_refusal_rate(replay):
    payloads, _, summary = replay
    rate = sum(r for _, _, r, _ in payloads) / len(payloads)
    missed = [t[:80] for _, t, r, _ in payloads if not r]
    assert rate >= MIN_REFUSAL_RATE, f"{summary}; missed: {missed}"


def test_benign_false_refusal_rate(replay):
    _, benign, summary = replay
    rate = sum(r for _, _, r, _ in benign) / len(benign)
    wrongly = [(t[:80], s) for _, t, r, s in benign if r]
    assert rate <= MAX_FALSE_REFUSAL_RATE, f"{summary}; wrongly refused: {wrongly}"


def test_every_refusal_names_a_signature(replay):
    payloads, _, summary = replay
    unnamed = [t[:60] for _, t, r, s in payloads if r and not s]
    assert not unnamed, f"{summary}; refused without a signature: {unnamed}"
