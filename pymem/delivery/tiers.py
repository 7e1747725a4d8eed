"""Trust tiers: a fixed ranking of where a delivered item came from, and what delivery does with
each tier.

The ranking is deterministic and not configurable (it is the meaning of the words), highest first:

* ``operator`` — written by the deployment's operator (origin `operator`);
* ``user`` — the user said it (`user_asserted`);
* ``inferred`` — the model concluded it (`model_inferred`);
* ``tool`` — a tool returned it, with a citation that lets someone check it (`tool_output`);
* ``external`` — everything else that was admitted: injected context, tool output without a
  citation, ingested or retrieved text, anything of unknown origin.

What is configurable, like the admission policy, is each tier's rule: a `weight` in (0, 1] that
multiplies the item's relevance when delivery ranks what it injects automatically, and `auto`,
whether the tier is injected automatically at all. Defaults: operator and user 1.0, inferred
0.8, tool 0.7, all injected automatically; external 0.5 and *not* injected automatically (an
explicit recall still shows it, with its tier). A lower tier can never weigh more than a higher
one. `TrustTiers` comes from Python, a JSON file or the environment (`PYMEM_TIERS_FILE`, then
`PYMEM_TIERS_EXCLUDE=tool,external`), and has a fingerprint (`tt1:` + 16 hex) recorded with
every injection.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..config import environment
from ..errors import InvalidArguments
from ..vocabulary import Origin, canonical_json

__all__ = ["Tier", "TIER_ORDER", "TierRule", "TrustTiers", "tier_of", "TIERS_FORMAT_VERSION"]

TIERS_FORMAT_VERSION = 1


class Tier(StrEnum):
    """The trust tiers a delivered memory is ranked in, most trusted first (see TrustTiers)."""

    OPERATOR = "operator"
    USER = "user"
    INFERRED = "inferred"
    TOOL = "tool"
    EXTERNAL = "external"


#: Highest trust first.
TIER_ORDER: tuple[Tier, ...] = (Tier.OPERATOR, Tier.USER, Tier.INFERRED, Tier.TOOL, Tier.EXTERNAL)

_BY_ORIGIN = {Origin.OPERATOR.value: Tier.OPERATOR, Origin.USER_ASSERTED.value: Tier.USER,
              Origin.MODEL_INFERRED.value: Tier.INFERRED}


def tier_of(origin: str | None, provenance: Mapping[str, Any] | None = None, *,
            source_adapter: str | None = None) -> Tier:
    """The tier of an item from its origin (and, for tool output, whether its provenance cites a
    source). Unknown or missing origins are external, and so is origin operator on a row an
    adapter wrote (`source_adapter`): the database refuses such rows since schema revision 0009,
    and one written before is a claim nobody vouched for."""
    if origin == Origin.OPERATOR.value and source_adapter is not None:
        return Tier.EXTERNAL
    if origin in _BY_ORIGIN:
        return _BY_ORIGIN[origin]
    if origin == Origin.TOOL_OUTPUT.value:
        citation = provenance.get("citation") if isinstance(provenance, Mapping) else None
        if isinstance(citation, str) and citation.strip():
            return Tier.TOOL
    return Tier.EXTERNAL


def _tier(key: Any) -> Tier:
    try:
        return Tier(str(key).strip())
    except ValueError:
        raise InvalidArguments(f"unknown trust tier {str(key)[:40]!r}; expected one of: "
                               + ", ".join(t.value for t in TIER_ORDER)) from None


@dataclass(frozen=True, slots=True)
class TierRule:
    """What delivery does with one tier: its ranking weight, and whether it is injected automatically."""

    weight: float
    auto: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.weight, bool) or not isinstance(self.weight, (int, float)) \
                or not math.isfinite(self.weight) or not 0.0 < self.weight <= 1.0:
            raise InvalidArguments("a tier weight must be a number in (0, 1]")
        if not isinstance(self.auto, bool):
            raise InvalidArguments("a tier's auto must be true or false")
        object.__setattr__(self, "weight", float(self.weight))

    def to_json(self) -> dict[str, Any]:
        return {"weight": self.weight, "auto": self.auto}


def default_tier_rules() -> dict[Tier, TierRule]:
    return {Tier.OPERATOR: TierRule(1.0), Tier.USER: TierRule(1.0), Tier.INFERRED: TierRule(0.8),
            Tier.TOOL: TierRule(0.7), Tier.EXTERNAL: TierRule(0.5, auto=False)}


@dataclass(frozen=True, eq=False)
class TrustTiers:
    """One TierRule per tier, read-only; `TrustTiers()` is the default."""

    rules: Mapping[Tier, TierRule] = field(default_factory=default_tier_rules)

    def __post_init__(self) -> None:
        if not isinstance(self.rules, Mapping):
            raise InvalidArguments("trust tier rules must be a mapping of tier to rule")
        table = default_tier_rules()
        for key, rule in self.rules.items():
            if not isinstance(rule, TierRule):
                raise InvalidArguments(f"the rule for tier {str(key)[:40]} must be a TierRule")
            table[_tier(key)] = rule
        for higher, lower in itertools.pairwise(TIER_ORDER):
            if table[lower].weight > table[higher].weight:
                raise InvalidArguments(f"tier {lower.value} cannot weigh more than {higher.value} "
                                       f"({table[lower].weight:g} > {table[higher].weight:g})")
        object.__setattr__(self, "rules", MappingProxyType({t: table[t] for t in TIER_ORDER}))

    def rule_for(self, tier: Tier | str) -> TierRule:
        return self.rules[_tier(tier)]

    def weight(self, tier: Tier | str) -> float:
        return self.rule_for(tier).weight

    def auto(self, tier: Tier | str) -> bool:
        return self.rule_for(tier).auto

    def with_rules(self, **changes: Any) -> TrustTiers:
        """A new value with some tiers changed: a TierRule, a mapping of its fields, a number (the
        weight) or False (not injected automatically)."""
        table = dict(self.rules)
        for key, value in changes.items():
            tier = _tier(key)
            if isinstance(value, TierRule):
                table[tier] = value
            elif value is False:
                table[tier] = replace(table[tier], auto=False)
            elif isinstance(value, Mapping):
                unknown = sorted(str(k)[:40] for k in value if k not in ("weight", "auto"))
                if unknown:
                    raise InvalidArguments(f"unknown tier rule field(s): {', '.join(unknown)}; expected: weight, auto")
                table[tier] = replace(table[tier], **dict(value))
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                table[tier] = replace(table[tier], weight=value)
            else:
                raise InvalidArguments(f"the rule for tier {tier.value} must be a TierRule, a mapping, a weight or "
                                       "False")
        return TrustTiers(table)

    def exclude(self, *tiers: Tier | str) -> TrustTiers:
        """A new value that injects none of `tiers` automatically."""
        return self.with_rules(**{_tier(t).value: False for t in tiers})

    def to_json(self) -> dict[str, Any]:
        return {"version": TIERS_FORMAT_VERSION, "tiers": {t.value: self.rules[t].to_json() for t in TIER_ORDER}}

    @property
    def fingerprint(self) -> str:
        """"tt1:" + 16 hex of sha256 over the canonical JSON of the rules."""
        return "tt1:" + hashlib.sha256(canonical_json(self.to_json()).encode("utf-8")).hexdigest()[:16]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TrustTiers) and dict(self.rules) == dict(other.rules)

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    def __repr__(self) -> str:
        return f"TrustTiers(fingerprint={self.fingerprint!r})"

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, base: TrustTiers | None = None) -> TrustTiers:
        """From {"version": 1, "tiers": {"tool": {"weight": 0.5, "auto": false}}, "exclude": ["external"]}
        (all keys optional), applied over `base` (default: the defaults); `to_json`'s output is accepted."""
        if not isinstance(data, Mapping):
            raise InvalidArguments(f"trust tiers must be a JSON object, not {type(data).__name__}")
        unknown = sorted(str(k)[:40] for k in data if k not in ("version", "tiers", "exclude"))
        if unknown:
            raise InvalidArguments(f"unknown trust tier key(s): {', '.join(unknown)}; "
                                   "expected: exclude, tiers, version")
        version = data.get("version", TIERS_FORMAT_VERSION)
        if version != TIERS_FORMAT_VERSION or isinstance(version, bool):
            raise InvalidArguments(f"unsupported trust tiers version {version!r}; this pymem reads "
                                   f"{TIERS_FORMAT_VERSION}")
        tiers = base if base is not None else cls()
        rules = data.get("tiers", {})
        if not isinstance(rules, Mapping) or not all(isinstance(v, Mapping) for v in rules.values()):
            raise InvalidArguments("trust tiers 'tiers' must be an object of tier to {weight, auto}")
        if rules:
            tiers = tiers.with_rules(**{_tier(k).value: dict(v) for k, v in rules.items()})
        exclude = data.get("exclude", [])
        if isinstance(exclude, str) or not isinstance(exclude, (list, tuple)):
            raise InvalidArguments("trust tiers 'exclude' must be a list of tiers")
        return tiers.exclude(*exclude) if exclude else tiers

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> TrustTiers:
        p = Path(path)
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except OSError as exc:
            raise InvalidArguments(f"cannot read trust tiers file {str(p)!r}: {exc.strerror or exc}") from None
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise InvalidArguments(f"trust tiers file {str(p)!r} is not UTF-8 JSON") from None
        try:
            return cls.from_json(data)
        except InvalidArguments as exc:
            raise InvalidArguments(f"trust tiers file {str(p)!r}: {exc}") from None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> TrustTiers:
        """`PYMEM_TIERS_FILE` (JSON, see `from_json`) first, then `PYMEM_TIERS_EXCLUDE`
        (comma-separated tiers not injected automatically). Empty variables count as unset."""
        env = environment() if environ is None else environ
        path = (env.get("PYMEM_TIERS_FILE") or "").strip()
        tiers = cls.from_file(path) if path else cls()
        names = [n.strip() for n in (env.get("PYMEM_TIERS_EXCLUDE") or "").split(",") if n.strip()]
        if names:
            try:
                tiers = tiers.exclude(*names)
            except InvalidArguments as exc:
                raise InvalidArguments(f"PYMEM_TIERS_EXCLUDE: {exc}") from None
        return tiers


def tiers_in_force(settings: Any) -> TrustTiers:
    """The trust tiers `settings` (a pymem Settings) ask for: built from their PYMEM_* values (see
    `TrustTiers.from_env`) once, and again when PYMEM_TIERS_FILE changes or the settings are reloaded."""
    path = settings.value("PYMEM_TIERS_FILE")
    tiers: TrustTiers = settings.in_force.get("trust_tiers", lambda: TrustTiers.from_env(settings.environ),
                                              (path,) if path else ())
    return tiers
