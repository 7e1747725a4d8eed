"""The admission policy: which origins may enter long-term memory, and how far they are believed.

Why a table. The policy is one rule per `Origin`, looked up, never a chain of `if`s, so that
what the store believes about each origin can be read, printed, diffed, fingerprinted and
tightened as data. Every admitted row records the policy's `fingerprint`; re-judging at recall
time compares against the policy in force *then*, so tightening a policy takes effect on rows
already stored, without rewriting them.

Defaults (the reasons are the design):

* ``user_asserted`` / ``operator``: persisted as assertions; confidence as given (default 1.0).
  These are the principals the memory works for.
* ``model_inferred``: persisted, confidence capped at 0.6 (`inferred_ceiling`). Inferences are
  useful and often wrong; they must never outrank what the user said.
* ``tool_output``: persisted only with a citation, capped at 0.6 (`tool_ceiling`). A tool result
  nobody can trace back is indistinguishable from a poisoned one.
* ``retrieved_content`` / ``unproven``: never persisted. Retrieved text is the main memory
  poisoning path; unproven text has no path at all.
* ``injected_context``: persisted, capped at 0.5 (`injected_ceiling`), only with an
  injection source naming who injected it.

Beside the table, the policy holds the admission classifier's threshold
(`classifier_threshold`): a note whose classifier score (pymem.admission.classifier) reaches it
is refused as `classifier.v1`, whatever its origin. It defaults to the threshold calibrated with
the shipped weights; lower is stricter. The fingerprint covers the threshold and the SHA-256 of
the weights it applies to, since the same number means something else for another model.

Below the refusal threshold lies the quarantine band (`quarantine_threshold`): a note scoring
in [quarantine_threshold, classifier_threshold) is neither admitted nor refused but held
(pymem.admission.quarantine): stored where no prompt sees it until an operator releases or
rejects it. Notes the detector names a doubt about (a decoded hidden payload, a record
redirection: `Judgement.doubts`) are held too. The band's default edge is
`QUARANTINE_RATIO` x the refusal threshold, chosen on held-out benign notes (training/REPORT.md);
`quarantine=False` turns the third decision off (the band and the doubts are admitted, as before
it existed). Both are in the fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..config import environment
from ..errors import InvalidArguments
from ..vocabulary import Origin, canonical_json
from .model import shipped_threshold, weights_sha256

__all__ = [
    "OriginRule",
    "AdmissionPolicy",
    "default_rules",
    "DEFAULT_INFERRED_CEILING",
    "DEFAULT_TOOL_CEILING",
    "DEFAULT_INJECTED_CEILING",
    "POLICY_FORMAT_VERSION",
    "check_threshold",
    "QUARANTINE_RATIO",
]

DEFAULT_INFERRED_CEILING = 0.6
DEFAULT_TOOL_CEILING = 0.6
DEFAULT_INJECTED_CEILING = 0.5
#: The quarantine band's default lower edge, as a share of the refusal threshold: the doubt band
#: the shipped classifier was calibrated with (its weight file's `calibration.band` over its
#: threshold, 0.66745 / 0.789982), chosen on the leave-one-source-out scores of held-out benign
#: notes for at most 2.7 % of them held (training/REPORT.md: 2.6 % held, 0.8 % refused overall).
#: A test checks it against the shipped file, so a retrained model brings its own.
QUARANTINE_RATIO = 0.845
#: Bumped if the canonical form of a rule changes, so old and new fingerprints never collide.
POLICY_FORMAT_VERSION = 1

_RULE_KEYS = ("persist", "ceiling", "default_confidence", "requires_citation", "requires_injection_source")


def check_threshold(name: str, value: Any) -> float:
    """A classifier threshold: a number in (0, 1]. 0 would refuse every note; 1 leaves the
    refusing to the structural signals (the model's score never reaches it)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArguments(f"{name} must be a number in (0, 1], not {type(value).__name__}")
    number = float(value)
    if not math.isfinite(number) or not 0.0 < number <= 1.0:
        raise InvalidArguments(f"{name} must be a number in (0, 1], got {number!r}")
    return number


def _weights_id() -> str:
    return "sha256:" + weights_sha256()


def _unit_interval(name: str, value: Any) -> float:
    """A confidence-like number in [0, 1]. bool is refused: `True` is not a confidence."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArguments(f"{name} must be a number in [0, 1], not {type(value).__name__}")
    number = float(value)
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        raise InvalidArguments(f"{name} must be a number in [0, 1], got {number!r}")
    return number


@dataclass(frozen=True, slots=True)
class OriginRule:
    """What the policy does with one origin.

    `ceiling` is the highest confidence a memory of this origin may carry; `default_confidence`
    is used when the caller gives none (None means "the ceiling").
    """

    persist: bool
    ceiling: float = 1.0
    default_confidence: float | None = None
    requires_citation: bool = False
    requires_injection_source: bool = False

    def __post_init__(self) -> None:
        for name in ("persist", "requires_citation", "requires_injection_source"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidArguments(f"rule field {name} must be true or false")
        object.__setattr__(self, "ceiling", _unit_interval("rule ceiling", self.ceiling))
        if self.default_confidence is not None:
            default = _unit_interval("rule default_confidence", self.default_confidence)
            if default > self.ceiling:
                raise InvalidArguments(
                    f"rule default_confidence {default} is above its ceiling {self.ceiling}"
                )
            object.__setattr__(self, "default_confidence", default)

    @property
    def effective_default(self) -> float:
        """The confidence given to a memory that arrives without one."""
        return self.ceiling if self.default_confidence is None else self.default_confidence

    def cap(self, confidence: float | None) -> float:
        """The confidence this rule lets a memory carry: the given one, lowered to the ceiling."""
        if confidence is None:
            return self.effective_default
        return min(_unit_interval("confidence", confidence), self.ceiling)

    def is_no_looser_than(self, other: OriginRule) -> bool:
        """True if everything this rule admits, `other` admits too, at no lower a cap."""
        if not self.persist:
            return True
        if not other.persist:
            return False
        return (
            self.ceiling <= other.ceiling
            and self.effective_default <= other.effective_default
            and (self.requires_citation or not other.requires_citation)
            and (self.requires_injection_source or not other.requires_injection_source)
        )

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in _RULE_KEYS}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, base: OriginRule | None = None) -> OriginRule:
        """A rule from a JSON object; with `base`, missing keys keep the base rule's values."""
        if not isinstance(data, Mapping):
            raise InvalidArguments(f"a policy rule must be a JSON object, not {type(data).__name__}")
        unknown = sorted(str(k)[:64] for k in data if k not in _RULE_KEYS)
        if unknown:
            raise InvalidArguments(
                f"unknown policy rule field(s): {', '.join(unknown)}; expected: {', '.join(_RULE_KEYS)}"
            )
        if base is None:
            if "persist" not in data:
                raise InvalidArguments("a policy rule needs 'persist'")
            return cls(**dict(data))
        return replace(base, **dict(data))


def default_rules(
    inferred_ceiling: float = DEFAULT_INFERRED_CEILING,
    tool_ceiling: float = DEFAULT_TOOL_CEILING,
    injected_ceiling: float = DEFAULT_INJECTED_CEILING,
) -> dict[Origin, OriginRule]:
    """The default table (see the module docstring for why each row is what it is)."""
    return {
        Origin.USER_ASSERTED: OriginRule(persist=True, ceiling=1.0, default_confidence=1.0),
        Origin.OPERATOR: OriginRule(persist=True, ceiling=1.0, default_confidence=1.0),
        Origin.MODEL_INFERRED: OriginRule(persist=True, ceiling=inferred_ceiling),
        Origin.TOOL_OUTPUT: OriginRule(persist=True, ceiling=tool_ceiling, requires_citation=True),
        Origin.RETRIEVED_CONTENT: OriginRule(persist=False, ceiling=0.0),
        Origin.UNPROVEN: OriginRule(persist=False, ceiling=0.0),
        Origin.INJECTED_CONTEXT: OriginRule(
            persist=True, ceiling=injected_ceiling, requires_injection_source=True
        ),
    }


#: The one canonical "never persist" rule. Its ceiling is 0: a denied origin admits nothing, and
#: a denied row re-enabled with only {"persist": true} is believed at 0 until a ceiling is given.
_DENY = OriginRule(persist=False, ceiling=0.0)


def _origin_key(key: Any) -> Origin:
    if isinstance(key, Origin):
        return key
    if isinstance(key, str):
        try:
            return Origin(key.strip())
        except ValueError:
            pass
    allowed = ", ".join(o.value for o in Origin)
    raise InvalidArguments(f"unknown origin {str(key)[:64]!r} in admission policy; expected one of: {allowed}")


def _as_rule(origin: Origin, value: Any, base: OriginRule) -> OriginRule:
    """Accepts an OriginRule, a mapping of fields to change, a number (new ceiling) or False (deny)."""
    if isinstance(value, OriginRule):
        return value
    if value is False:
        return _DENY
    if isinstance(value, Mapping):
        return OriginRule.from_json(value, base=base)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        ceiling = _unit_interval(f"{origin.value} ceiling", value)
        default = base.default_confidence
        if default is not None and default > ceiling:
            default = ceiling
        return replace(base, ceiling=ceiling, default_confidence=default)
    raise InvalidArguments(
        f"rule for {origin.value} must be an OriginRule, a mapping, a ceiling number or False"
    )


@dataclass(frozen=True, eq=False)
class AdmissionPolicy:
    """One `OriginRule` per `Origin`, read-only, and the classifier's threshold.
    `AdmissionPolicy()` is the default policy.

    Origins missing from `rules` are denied: a table that forgets an origin must fail closed.
    `classifier_threshold` None means the threshold calibrated with the shipped weights.
    Two policies are equal iff their rules and thresholds are; equal policies have equal
    fingerprints.
    """

    rules: Mapping[Origin, OriginRule] = field(default_factory=default_rules)
    classifier_threshold: float | None = None
    quarantine_threshold: float | None = None
    quarantine: bool = True

    def __post_init__(self) -> None:
        threshold = shipped_threshold() if self.classifier_threshold is None else self.classifier_threshold
        threshold = check_threshold("classifier_threshold", threshold)
        object.__setattr__(self, "classifier_threshold", threshold)
        band = QUARANTINE_RATIO * threshold if self.quarantine_threshold is None else self.quarantine_threshold
        band = check_threshold("quarantine_threshold", band)
        if band > threshold:
            raise InvalidArguments(f"quarantine_threshold {band!r} is above the classifier threshold {threshold!r}; "
                                   "the quarantine band lies below the refusal threshold")
        object.__setattr__(self, "quarantine_threshold", band)
        if not isinstance(self.quarantine, bool):
            raise InvalidArguments("quarantine must be true or false")
        if not isinstance(self.rules, Mapping):
            raise InvalidArguments("admission policy rules must be a mapping of origin to rule")
        table: dict[Origin, OriginRule] = {origin: _DENY for origin in Origin}
        for key, rule in self.rules.items():
            origin = _origin_key(key)
            if not isinstance(rule, OriginRule):
                raise InvalidArguments(f"rule for {origin.value} must be an OriginRule")
            # A rule that never persists has nothing else to say; normalising it keeps
            # "same behaviour => same fingerprint" whichever way the denial was written.
            table[origin] = rule if rule.persist else _DENY
        # Requirements that the Provenance type enforces anyway are kept explicit in the table,
        # so a loosened file cannot persist injected context without saying where it came from.
        ordered = {origin: table[origin] for origin in Origin}
        object.__setattr__(self, "rules", MappingProxyType(ordered))

    # -- lookups -------------------------------------------------------------------------------

    def rule_for(self, origin: Origin | str) -> OriginRule:
        return self.rules[_origin_key(origin)]

    def persists(self, origin: Origin | str) -> bool:
        return self.rule_for(origin).persist

    @property
    def inferred_ceiling(self) -> float:
        return self.rules[Origin.MODEL_INFERRED].ceiling

    @property
    def tool_ceiling(self) -> float:
        return self.rules[Origin.TOOL_OUTPUT].ceiling

    @property
    def injected_ceiling(self) -> float:
        return self.rules[Origin.INJECTED_CONTEXT].ceiling

    @property
    def denied_origins(self) -> frozenset[Origin]:
        return frozenset(o for o, r in self.rules.items() if not r.persist)

    # -- derivation ----------------------------------------------------------------------------

    def with_rules(self, **changes: Any) -> AdmissionPolicy:
        """A new policy with some rows changed, in any direction (keyword = origin value).

        Values: an `OriginRule`, a mapping of rule fields to change, a number (the new
        ceiling), or False (never persist).
        """
        table = dict(self.rules)
        for key, value in changes.items():
            origin = _origin_key(key)
            table[origin] = _as_rule(origin, value, table[origin])
        return AdmissionPolicy(table, self.classifier_threshold, self.quarantine_threshold, self.quarantine)

    def with_classifier_threshold(self, threshold: float | None) -> AdmissionPolicy:
        """A new policy with another classifier threshold (None: the shipped, calibrated one).
        Lower refuses more notes; `tightened` never raises it. The quarantine band keeps its edge
        when it still lies below the new threshold, else it starts at the default share of it."""
        if threshold is not None:
            threshold = check_threshold("classifier_threshold", threshold)
        band = self.quarantine_threshold
        resolved = shipped_threshold() if threshold is None else threshold
        assert self.classifier_threshold is not None  # resolved in __post_init__
        if band is not None and (band > resolved or band == QUARANTINE_RATIO * self.classifier_threshold):
            band = None  # the default share follows the threshold; a band it would cross starts over
        return AdmissionPolicy(self.rules, threshold, band, self.quarantine)

    def with_quarantine(self, threshold: float | None = None, *, enabled: bool = True) -> AdmissionPolicy:
        """A new policy with another quarantine band edge (None: the default share of the refusal
        threshold), or with the quarantine off (`enabled=False`: the band and the detector's doubts
        are admitted). Lower holds more notes."""
        return AdmissionPolicy(self.rules, self.classifier_threshold, threshold, enabled)

    def tightened(self, **changes: Any) -> AdmissionPolicy:
        """Like `with_rules`, but refuses any change that would admit more than before.

        This is the safe operation to expose to anyone who is allowed to make the store more
        careful but not less: a tightened policy never admits a record the original refused,
        nor at a higher confidence.
        """
        threshold = changes.pop("classifier_threshold", None)
        new = self.with_rules(**changes)
        for origin in Origin:
            if not new.rules[origin].is_no_looser_than(self.rules[origin]):
                raise InvalidArguments(f"tightened() would loosen the rule for {origin.value}")
        if threshold is not None:
            threshold = check_threshold("classifier_threshold", threshold)
            current = self.classifier_threshold
            assert current is not None  # __post_init__ resolves None to the shipped threshold
            if threshold > current:
                raise InvalidArguments("tightened() would raise the classifier threshold")
            new = new.with_classifier_threshold(threshold)
        if not self.quarantine:
            return new
        # A tightened policy keeps holding what is doubtful, with a band that starts no higher.
        assert self.quarantine_threshold is not None and new.quarantine_threshold is not None  # resolved
        return new.with_quarantine(min(self.quarantine_threshold, new.quarantine_threshold))

    def deny(self, *origins: Origin | str) -> AdmissionPolicy:
        """A new policy that never persists the given origins."""
        return self.with_rules(**{_origin_key(o).value: False for o in origins})

    # -- identity ------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The canonical, complete form: every origin, every rule field, the classifier's
        threshold and the weights it applies to."""
        return {
            "version": POLICY_FORMAT_VERSION,
            "rules": {origin.value: self.rules[origin].to_json() for origin in Origin},
            "classifier_threshold": self.classifier_threshold,
            "classifier_weights": _weights_id(),
            "quarantine": self.quarantine,
            "quarantine_threshold": self.quarantine_threshold,
        }

    @property
    def fingerprint(self) -> str:
        """"ap1:" + 16 hex chars of sha256 over the canonical JSON of the rules, the classifier
        threshold and the SHA-256 of the classifier's weights.

        Stable across processes and Python versions: the canonical JSON (pymem.vocabulary) is
        key-sorted with fixed separators, and floats render with `repr`, which round-trips exactly.
        """
        return "ap1:" + hashlib.sha256(canonical_json(self.to_json()).encode("utf-8")).hexdigest()[:16]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AdmissionPolicy):
            return NotImplemented
        return (dict(self.rules) == dict(other.rules) and self.classifier_threshold == other.classifier_threshold
                and self.quarantine_threshold == other.quarantine_threshold and self.quarantine == other.quarantine)

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    def __repr__(self) -> str:
        return f"AdmissionPolicy(fingerprint={self.fingerprint!r})"

    # -- configuration -------------------------------------------------------------------------

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, base: AdmissionPolicy | None = None) -> AdmissionPolicy:
        """A policy from a JSON object, applied over `base` (default: the default policy).

        Accepted keys (all optional)::

            {"version": 1,
             "rules": {"model_inferred": {"ceiling": 0.4}, "tool_output": {"persist": false}},
             "inferred_ceiling": 0.5, "tool_ceiling": 0.5, "injected_ceiling": 0.3,
             "deny_origins": ["injected_context"],
             "classifier_threshold": 0.7, "classifier_weights": "sha256:...",
             "quarantine": true, "quarantine_threshold": 0.5}

        Partial rules are merged over the base rule of the same origin. The shorthand ceilings
        apply after `rules`, `deny_origins` last. `classifier_threshold` is a number in (0, 1]
        (null: the shipped, calibrated one); `classifier_weights`, when given, must name the
        shipped weights: a threshold chosen for other weights is refused, not carried over.
        `quarantine_threshold` is the quarantine band's lower edge, in (0, classifier_threshold]
        (null: the default share of the refusal threshold); `quarantine` false turns holding off.
        The output of `to_json` is accepted verbatim.
        """
        if not isinstance(data, Mapping):
            raise InvalidArguments(f"an admission policy must be a JSON object, not {type(data).__name__}")
        allowed = {"version", "rules", "inferred_ceiling", "tool_ceiling", "injected_ceiling", "deny_origins",
                   "classifier_threshold", "classifier_weights", "quarantine", "quarantine_threshold"}
        unknown = sorted(str(k)[:64] for k in data if k not in allowed)
        if unknown:
            raise InvalidArguments(
                f"unknown admission policy key(s): {', '.join(unknown)}; expected: {', '.join(sorted(allowed))}"
            )
        version = data.get("version", POLICY_FORMAT_VERSION)
        if version != POLICY_FORMAT_VERSION or isinstance(version, bool):
            raise InvalidArguments(
                f"unsupported admission policy version {version!r}; this pymem reads version {POLICY_FORMAT_VERSION}"
            )
        policy = base if base is not None else cls()
        rules = data.get("rules", {})
        if not isinstance(rules, Mapping):
            raise InvalidArguments("admission policy 'rules' must be an object of origin to rule")
        if rules:
            policy = policy.with_rules(**{_origin_key(k).value: dict(_require_mapping(k, v)) for k, v in rules.items()})
        shorthand = {
            "inferred_ceiling": Origin.MODEL_INFERRED,
            "tool_ceiling": Origin.TOOL_OUTPUT,
            "injected_ceiling": Origin.INJECTED_CONTEXT,
        }
        for key, origin in shorthand.items():
            if key in data:
                policy = policy.with_rules(**{origin.value: _unit_interval(key, data[key])})
        if "deny_origins" in data:
            deny = data["deny_origins"]
            if isinstance(deny, str) or not isinstance(deny, (list, tuple)):
                raise InvalidArguments("admission policy 'deny_origins' must be a list of origins")
            policy = policy.deny(*deny)
        if "classifier_weights" in data and data["classifier_weights"] != _weights_id():
            raise InvalidArguments(
                "admission policy 'classifier_weights' names other classifier weights than this pymem ships "
                f"({_weights_id()[:19]}...); choose the threshold again for these weights and drop the key")
        if "classifier_threshold" in data:
            value = data["classifier_threshold"]
            policy = policy.with_classifier_threshold(
                None if value is None else check_threshold("admission policy 'classifier_threshold'", value))
        if "quarantine" in data or "quarantine_threshold" in data:
            enabled = data.get("quarantine", policy.quarantine)
            if not isinstance(enabled, bool):
                raise InvalidArguments("admission policy 'quarantine' must be true or false")
            value = data.get("quarantine_threshold", policy.quarantine_threshold)
            band = None if value is None else check_threshold("admission policy 'quarantine_threshold'", value)
            policy = policy.with_quarantine(band, enabled=enabled)
        return policy

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], *, base: AdmissionPolicy | None = None) -> AdmissionPolicy:
        """A policy from a JSON file (format: see `from_json`)."""
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise InvalidArguments(f"cannot read admission policy file {str(p)!r}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise InvalidArguments(f"admission policy file {str(p)!r} is not UTF-8") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidArguments(
                f"admission policy file {str(p)!r} is not valid JSON (line {exc.lineno}, column {exc.colno})"
            ) from None
        try:
            return cls.from_json(data, base=base)
        except InvalidArguments as exc:
            raise InvalidArguments(f"admission policy file {str(p)!r}: {exc}") from None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> AdmissionPolicy:
        """The policy `environ` (a mapping of PYMEM_* variables; None: the environment's, now) asks for.

        ``PYMEM_POLICY_FILE`` (a JSON file, see `from_json`) is applied first, then the simple
        overrides ``PYMEM_INFERRED_CEILING``, ``PYMEM_TOOL_CEILING``, ``PYMEM_INJECTED_CEILING``
        (numbers in [0, 1]), ``PYMEM_DENY_ORIGINS`` (comma-separated origins) and
        ``PYMEM_CLASSIFIER_THRESHOLD`` (a number in (0, 1]), ``PYMEM_QUARANTINE_THRESHOLD`` (the
        quarantine band's edge, a number in (0, 1] no higher than the classifier threshold) and
        ``PYMEM_QUARANTINE`` (``off`` turns holding off). Empty variables count as unset.
        """
        env = environment() if environ is None else environ
        policy = cls()
        path = (env.get("PYMEM_POLICY_FILE") or "").strip()
        if path:
            policy = cls.from_file(path)
        for var, origin in (
            ("PYMEM_INFERRED_CEILING", Origin.MODEL_INFERRED),
            ("PYMEM_TOOL_CEILING", Origin.TOOL_OUTPUT),
            ("PYMEM_INJECTED_CEILING", Origin.INJECTED_CONTEXT),
        ):
            raw = (env.get(var) or "").strip()
            if not raw:
                continue
            try:
                value = float(raw)
            except ValueError:
                raise InvalidArguments(f"{var} must be a number in [0, 1], got {raw[:32]!r}") from None
            policy = policy.with_rules(**{origin.value: _unit_interval(var, value)})
        deny_raw = (env.get("PYMEM_DENY_ORIGINS") or "").strip()
        if deny_raw:
            names = [n.strip() for n in deny_raw.split(",") if n.strip()]
            try:
                policy = policy.deny(*names)
            except InvalidArguments as exc:
                raise InvalidArguments(f"PYMEM_DENY_ORIGINS: {exc}") from None
        raw = (env.get("PYMEM_CLASSIFIER_THRESHOLD") or "").strip()
        if raw:
            try:
                value = float(raw)
            except ValueError:
                raise InvalidArguments(
                    f"PYMEM_CLASSIFIER_THRESHOLD must be a number in (0, 1], got {raw[:32]!r}") from None
            policy = policy.with_classifier_threshold(check_threshold("PYMEM_CLASSIFIER_THRESHOLD", value))
        raw_band = (env.get("PYMEM_QUARANTINE_THRESHOLD") or "").strip()
        raw_on = (env.get("PYMEM_QUARANTINE") or "").strip().lower()
        if raw_on and raw_on not in _SWITCH:
            raise InvalidArguments(f"PYMEM_QUARANTINE must be on or off, got {raw_on[:32]!r}")
        if raw_band or raw_on:
            band = policy.quarantine_threshold
            if raw_band:
                try:
                    band = check_threshold("PYMEM_QUARANTINE_THRESHOLD", float(raw_band))
                except ValueError:
                    raise InvalidArguments(
                        f"PYMEM_QUARANTINE_THRESHOLD must be a number in (0, 1], got {raw_band[:32]!r}") from None
            policy = policy.with_quarantine(band, enabled=_SWITCH[raw_on] if raw_on else policy.quarantine)
        return policy


#: PYMEM_QUARANTINE's spellings.
_SWITCH = {"on": True, "true": True, "1": True, "yes": True, "off": False, "false": False, "0": False, "no": False}


def admission_policy_in_force(settings: Any) -> AdmissionPolicy:
    """The admission policy `settings` (a pymem Settings) ask for: built from their PYMEM_* values
    (see `AdmissionPolicy.from_env`) once, and again when PYMEM_POLICY_FILE changes or the
    settings are reloaded."""
    path = settings.value("PYMEM_POLICY_FILE")
    policy: AdmissionPolicy = settings.in_force.get("admission_policy",
                                                    lambda: AdmissionPolicy.from_env(settings.environ),
                                                    (path,) if path else ())
    return policy


def _require_mapping(key: Any, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidArguments(f"admission policy rule for {str(key)[:64]!r} must be an object")
    return value
