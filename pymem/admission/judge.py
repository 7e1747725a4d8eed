"""The write gate and the recall re-judge, as pure functions (no database, no I/O).

Why pure. The database layer must write an audit event for every refusal *before* raising,
inside the same transaction, so it needs the decision as a value first (`judge`) and the
exception second. Keeping the logic here, free of connections, also makes every rule testable
in microseconds and identical wherever it runs.

Order of judgement, and why:

1. Instruction-shaped content is refused whatever the origin. A user can paste a poisoned
   e-mail just as easily as a tool can return one; the origin says who vouches for the text,
   not that the text is safe to replay to a model later. Two checks, in order: the named
   signatures (pymem.admission.scanning), then the learned classifier with its structural
   signals (pymem.admission.classifier) at the policy's threshold, which judges the note whole
   and piece by piece and refuses as `classifier.v1` or a `signal.*` name, with its score.
2. Then the origin's rule from the policy table: persist or not, required citation /
   injection source, confidence ceiling.
3. Then doubt: a note the detector is unsure of (a classifier score in the policy's quarantine
   band, just below the refusal threshold, or a doubt the detector names in `Judgement.doubts`)
   is held, not admitted: `Decision.held`, decision "quarantined". The gate stores it where no
   prompt sees it (pymem.admission.quarantine) until an operator releases or rejects it. A note
   the origin's rule refuses is refused, never held: holding is for what might be admitted.

Three decisions, one shape: `Decision.decision` is "admitted", "quarantined" or "refused", with
its reason, the deciding name and the classifier's score.

Nothing here ever puts memory content into a reason, an exception message or a digest other
than through a hash: refusals are logged and audited, and logs must not become a second copy
of the poison (or of the user's private data).
"""

from __future__ import annotations

import copy
import datetime as _dt
import decimal
import hashlib
import math
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from ..bridge import blocking
from ..errors import InvalidArguments, MemoryAdmissionError
from ..vocabulary import CONTENT_KEYS, VECTOR_KEYS
from ..vocabulary import canonical_json as _canonical_json
from .classifier import MODEL_NAME, Judgement, classify
from .policy import AdmissionPolicy, OriginRule
from .provenance import Origin, Provenance
from .scanning import instruction_shaped

__all__ = [
    "Decision",
    "Finding",
    "ADMITTED",
    "QUARANTINED",
    "REFUSED",
    "judge",
    "check_content",
    "admitted_record",
    "digest_of_arguments",
    "rejudge",
    "canonical_json",
    "GUARD_REASON_MAX",
]

#: Keys `admitted_record` owns in the returned record. `injection_source` is also a top-level
#: record key because the storage contract (pymem.storage.chunks) reads it there.
_BOOKKEEPING_KEYS = ("provenance", "origin", "confidence", "policy_fingerprint", "injection_source")
#: The gate's three decisions, as every surface names them.
ADMITTED, QUARANTINED, REFUSED = "admitted", "quarantined", "refused"
#: Longest guard reason kept in a Decision (guards are third-party code with chatty messages).
GUARD_REASON_MAX = 200


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of judging one record. `reason` never contains record content.

    A refusal for instruction-shaped content names what decided in `signature`: a signature's
    name, `classifier.v1` or a structural signal's name. When the classifier decided, `score` is
    its score (0..1) and `piece_digest` the sha256 of the normalised piece that decided (the
    whole note, a line, a field, a sentence), never the piece.

    `held` marks the third decision: not admitted (`admitted` is False, so a caller that knows
    only two decisions refuses it) but not refused either: the gate holds it in quarantine.
    `score` is the classifier's score whenever it ran, whatever was decided."""

    admitted: bool
    reason: str
    signature: str | None = None
    confidence: float | None = None
    origin: Origin | None = None
    policy_fingerprint: str | None = None
    score: float | None = None
    piece_digest: str | None = None
    held: bool = False

    def __bool__(self) -> bool:  # `if judge(...):` reads naturally
        return self.admitted

    @property
    def decision(self) -> str:
        """"admitted", "quarantined" or "refused"."""
        return ADMITTED if self.admitted else QUARANTINED if self.held else REFUSED


def _refuse(reason: str, origin: Origin | None, policy: AdmissionPolicy, signature: str | None = None) -> Decision:
    return Decision(False, reason, signature, None, origin, policy.fingerprint)


def _check_types(record: Any, provenance: Any, policy: Any) -> None:
    if not isinstance(record, Mapping):
        raise InvalidArguments(f"a memory record must be a mapping, not {type(record).__name__}")
    if not isinstance(provenance, Provenance):
        raise InvalidArguments(f"provenance must be a Provenance, not {type(provenance).__name__}")
    if not isinstance(policy, AdmissionPolicy):
        raise InvalidArguments(f"policy must be an AdmissionPolicy, not {type(policy).__name__}")


def _incoming_confidence(record: Mapping[str, Any]) -> float | None:
    value = record.get("confidence")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        raise InvalidArguments("record confidence must be a number in [0, 1]")
    value = float(value)
    if not 0.0 <= value <= 1.0:
        raise InvalidArguments("record confidence must be a number in [0, 1]")
    return value


def _check_consistency(record: Mapping[str, Any], provenance: Provenance) -> None:
    """A record that already names an origin or provenance must agree with the one given:
    a mismatch is a caller bug or an attempt to launder an origin, never something to guess at."""
    if "origin" in record and record["origin"] is not None and record["origin"] != provenance.origin.value:
        raise InvalidArguments("record origin does not match its provenance origin")
    if "provenance" in record and record["provenance"] is not None and record["provenance"] != provenance.to_json():
        raise InvalidArguments("record provenance does not match the provenance given")
    if record.get("injection_source") is not None and record["injection_source"] != provenance.injection_source:
        raise InvalidArguments("record injection_source does not match the provenance's injection_source")


@dataclass(frozen=True, slots=True)
class Finding:
    """What the content check found: the deciding name, and the classifier's score and the
    deciding piece's digest when the classifier ran. `hold` marks a doubt (the quarantine band,
    or a doubt the detector named), not an instruction: the note is held, not refused."""

    name: str
    score: float | None = None
    piece_digest: str | None = None
    hold: bool = False

    @property
    def reason(self) -> str:
        shown = self.name if self.score is None else f"{self.name}, score {self.score:.3f}"
        if self.hold:
            return f"held for review: the detector is unsure of this content ({shown})"
        return f"instruction-shaped content ({shown})"


def doubt(verdict: Judgement, policy: AdmissionPolicy) -> str | None:
    """The name a note the classifier did not refuse is held under, or None to admit it: the
    first doubt the detector named (`Judgement.doubts`: a decoded hidden payload, a record
    redirection, ...), else `classifier.v1` for a score in the policy's quarantine band. The hook
    between the detector and the gate's third decision; nothing is held with the quarantine off."""
    if not policy.quarantine or verdict.refused:
        return None
    if verdict.doubts:
        return verdict.doubts[0]
    band = policy.quarantine_threshold
    if band is not None and verdict.score >= band:
        return MODEL_NAME
    return None


def _instruction_shaped(value: Any, policy: AdmissionPolicy, classifier: bool) -> Finding | None:
    name = instruction_shaped(value)
    if name is not None:
        return Finding(name)
    if not classifier:
        return None
    # the detector's doubt band is the policy's quarantine band, so that setting one moves both
    verdict = classify(value, threshold=policy.classifier_threshold, band=policy.quarantine_threshold)
    if verdict.refused:
        assert verdict.name is not None  # a refusing verdict always names what decided it
        return Finding(verdict.name, verdict.score, verdict.piece_digest)
    held = doubt(verdict, policy)
    if held is not None:
        return Finding(held, verdict.score, verdict.piece_digest, hold=True)
    return None


def _worse(first: Finding | None, second: Finding | None) -> Finding | None:
    """Of two findings, the one that decides: a refusal before a doubt, a doubt before nothing."""
    if first is None or (first.hold and second is not None and not second.hold):
        return second
    return first


def check_content(record: Mapping[str, Any], provenance: Provenance, policy: AdmissionPolicy, *,
                  classifier: bool = True) -> Finding | None:
    """Instruction-shaped content, by the signatures or the classifier, in the record or in the
    provenance's free-text fields: the first step of `judge` and `rejudge`.

    The bookkeeping keys are skipped (they are ours and checked separately); the provenance's
    strings are judged because recall shows them to the model next to the content.
    `classifier=False` is the check as it was before the classifier (signatures only): the gate
    never uses it; the benchmark measures the two side by side.
    """
    content = {k: v for k, v in record.items() if k not in _BOOKKEEPING_KEYS}
    found = _instruction_shaped(content, policy, classifier)
    if found is None or found.hold:
        meta = [v for k, v in provenance.to_json().items() if k != "origin" and isinstance(v, str)]
        found = _worse(found, _instruction_shaped(meta, policy, classifier) if meta else None)
    return found


#: What the gate and recall call to check content: check_content itself, unless a long-running
#: service routed large notes to worker processes (pymem.admission.offload.install).
content_check: Callable[[Mapping[str, Any], Provenance, AdmissionPolicy], Finding | None] = check_content


def _believed(verb: str, origin: Origin, rule: OriginRule, given: float | None, policy: AdmissionPolicy) -> Decision:
    """A positive Decision at the confidence the rule believes, saying when it capped `given`."""
    confidence = rule.cap(given)
    capped = given is not None and confidence < given
    reason = f"{verb}: {origin.value}" + (f", confidence capped at {rule.ceiling:g}" if capped else "")
    return Decision(True, reason, None, confidence, origin, policy.fingerprint)


def _policy_refusal(record: Mapping[str, Any], provenance: Provenance, policy: AdmissionPolicy,
                    *, current: bool) -> Decision | None:
    """The refusal, if any, that both the write gate and recall apply: instruction shapes first,
    then the origin's rule (persists at all, citation, injection source). A doubt is no refusal:
    the write gate holds the note (`judge`) and recall keeps what an operator released."""
    decision, _ = _policy_judgement(record, provenance, policy, current=current)
    return decision


def _policy_judgement(record: Mapping[str, Any], provenance: Provenance, policy: AdmissionPolicy,
                      *, current: bool) -> tuple[Decision | None, Finding | None]:
    """`_policy_refusal`, and the doubt the content check found when nothing refused it."""
    origin = provenance.origin
    found = blocking(content_check, record, provenance, policy)  # off the event loop under pymem.aio
    if found is not None and not found.hold:
        return Decision(False, found.reason, found.name, None, origin, policy.fingerprint, found.score,
                        found.piece_digest), None
    return _origin_refusal(provenance, policy, current=current), found


def _origin_refusal(provenance: Provenance, policy: AdmissionPolicy, *, current: bool) -> Decision | None:
    origin = provenance.origin
    rule = policy.rule_for(origin)
    if not rule.persist:
        which = "the current admission policy" if current else "the admission policy"
        return _refuse(f"origin {origin.value} is not persisted by {which}", origin, policy)
    if rule.requires_citation and not provenance.citation:
        return _refuse(f"origin {origin.value} requires a citation", origin, policy)
    if rule.requires_injection_source and not provenance.injection_source:
        return _refuse(f"origin {origin.value} requires an injection_source", origin, policy)
    return None


def judge(record: Mapping[str, Any], provenance: Provenance, policy: AdmissionPolicy) -> Decision:
    """Decide whether `record` may be written, and at what confidence. Never raises for a
    refusal (only for malformed arguments): the caller audits the Decision, then raises."""
    _check_types(record, provenance, policy)
    _check_consistency(record, provenance)
    given = _incoming_confidence(record)
    origin = provenance.origin

    refusal, found = _policy_judgement(record, provenance, policy, current=False)
    if refusal is not None:
        return refusal
    rule = policy.rule_for(origin)
    if found is not None:
        return Decision(False, found.reason, found.name, rule.cap(given), origin, policy.fingerprint, found.score,
                        found.piece_digest, held=True)
    return _believed("admitted", origin, rule, given, policy)


def admitted_record(record: Mapping[str, Any], provenance: Provenance, policy: AdmissionPolicy) -> dict[str, Any]:
    """The record as it may be stored: a NEW dict (deep copy; the input is never mutated)
    carrying `provenance`, `origin`, the policy-capped `confidence` and `policy_fingerprint`,
    plus `injection_source` for injected context (the storage contract reads it top-level).

    Raises `MemoryAdmissionError(reason, signature=...)` on refusal. The database layer should
    call `judge` itself first when it needs to audit the refusal before raising.
    """
    decision = judge(record, provenance, policy)
    if not decision.admitted and not decision.held:
        raise MemoryAdmissionError(decision.reason, signature=decision.signature, score=decision.score)
    out = copy.deepcopy(dict(record))
    out["provenance"] = provenance.to_json()
    out["origin"] = provenance.origin.value
    out["confidence"] = decision.confidence
    out["policy_fingerprint"] = policy.fingerprint
    if provenance.injection_source is not None:
        out["injection_source"] = provenance.injection_source
    else:
        out.pop("injection_source", None)
    return out


# ----------------------------------------------------------------------------------------------
# digests
# ----------------------------------------------------------------------------------------------


def _json_default(value: Any) -> Any:
    """Deterministic JSON for the few non-JSON types records plausibly contain."""
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=lambda v: canonical_json(v))
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$bytes": bytes(value).hex()}
    if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
        return value.isoformat()
    if isinstance(value, (uuid.UUID, decimal.Decimal)):
        return str(value)
    if isinstance(value, Origin):
        return value.value
    if isinstance(value, Provenance):
        return value.to_json()
    # The type name only: never the value, which may be content.
    raise InvalidArguments(f"cannot digest a value of type {type(value).__name__}")


def canonical_json(value: Any) -> str:
    """The canonical JSON (pymem.vocabulary) of arguments to digest, with the few non-JSON types
    records plausibly contain converted deterministically."""
    try:
        return _canonical_json(value, default=_json_default)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, InvalidArguments):
            raise
        raise InvalidArguments(f"cannot digest the arguments: {type(exc).__name__}") from None


def digest_of_arguments(record: Mapping[str, Any], provenance: Provenance | Mapping[str, Any] | None) -> str:
    """"sha256:<hex>" over the canonical JSON of {"record": ..., "provenance": ...}.

    This is what an audit event stores about a refused write: enough to recognise the same
    arguments again, nothing that reveals them.
    """
    prov = provenance.to_json() if isinstance(provenance, Provenance) else provenance
    payload = canonical_json({"record": record, "provenance": prov})
    return "sha256:" + hashlib.sha256(payload.encode("utf-8", errors="surrogatepass")).hexdigest()


# ----------------------------------------------------------------------------------------------
# recall
# ----------------------------------------------------------------------------------------------


def _recall_text(record: Mapping[str, Any]) -> str:
    """The text a guard should see: the record's text (content, else distillate, else text)
    if it is a string, else the record without bookkeeping keys and vectors, as canonical JSON."""
    for key in CONTENT_KEYS:
        if isinstance(record.get(key), str):
            return cast("str", record[key])
    rest = {k: v for k, v in record.items() if k not in _BOOKKEEPING_KEYS and k not in VECTOR_KEYS}
    try:
        return canonical_json(rest)
    except InvalidArguments:
        return repr(rest)


def _short(reason: Any) -> str | None:
    if reason is None:
        return None
    text = str(reason).replace("\x00", "")
    text = " ".join(text.split())
    if not text:
        return None
    return text if len(text) <= GUARD_REASON_MAX else text[: GUARD_REASON_MAX - 1] + "…"


def _guard_verdict(guard: Any, text: str) -> tuple[bool, str | None]:
    """(allowed, reason) from any guard object with `check_input(text)`.

    Refusals: a raised exception, a falsy return, `.allowed` false, `.blocked` true, or a
    mapping with `allowed` false / `blocked` true. The guard's own `reason` (attribute or key)
    is used when present; an exception contributes its type name, and its `reason` attribute
    if it has one, never its message (which may quote the text).
    """
    try:
        result = guard.check_input(text)
    except Exception as exc:  # noqa: BLE001 - a guard that fails must fail closed
        return False, _short(getattr(exc, "reason", None)) or f"raised {type(exc).__name__}"
    if isinstance(result, Mapping):
        reason = _short(result.get("reason"))
        if "allowed" in result:
            return bool(result["allowed"]), reason
        if "blocked" in result:
            return not bool(result["blocked"]), reason
        return bool(result), reason
    reason = _short(getattr(result, "reason", None))
    if hasattr(result, "allowed"):
        return bool(result.allowed), reason
    if hasattr(result, "blocked"):
        return not bool(result.blocked), reason
    return bool(result), reason


def rejudge(
    stored_record: Mapping[str, Any],
    provenance_json: Mapping[str, Any] | None,
    policy: AdmissionPolicy,
    guard: Any = None,
) -> Decision:
    """Judge a stored row again at recall time, under the policy in force *now*.

    Withheld when: it has no (or malformed) provenance; it is instruction-shaped, by the
    signatures or the classifier at the policy's threshold (either may have changed since it was
    written); its origin is no longer persisted or its
    citation / injection-source requirement is unmet; or `guard` refuses it. Otherwise
    returned with its confidence capped by the current rule.
    """
    if not isinstance(stored_record, Mapping):
        raise InvalidArguments(f"a stored record must be a mapping, not {type(stored_record).__name__}")
    if not isinstance(policy, AdmissionPolicy):
        raise InvalidArguments(f"policy must be an AdmissionPolicy, not {type(policy).__name__}")
    if not provenance_json:
        return _refuse("unproven: no provenance", None, policy)
    try:
        provenance = Provenance.from_json(provenance_json)
    except InvalidArguments:
        return _refuse("unproven: malformed provenance", None, policy)
    origin = provenance.origin

    refusal = _policy_refusal(stored_record, provenance, policy, current=True)
    if refusal is not None:
        return refusal
    rule = policy.rule_for(origin)

    if guard is not None:
        allowed, reason = _guard_verdict(guard, _recall_text(stored_record))
        if not allowed:
            return _refuse(f"guard: {reason}" if reason else "guard refused", origin, policy)

    try:
        stored = _incoming_confidence(stored_record)
    except InvalidArguments:
        stored = None  # a damaged stored confidence falls back to the rule's default
    return _believed("recalled", origin, rule, stored, policy)
