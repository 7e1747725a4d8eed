"""Where a memory came from: its origin and the facts that let a later reader judge it.

A memory is only as trustworthy as the path it took into the store. A sentence the user typed,
one the model inferred and one a web page contained may read the same, but they deserve
different confidence and, for some origins, no place in long-term memory at all. `Provenance`
records that path so the admission policy can decide at write time and re-decide at recall
time, under whatever policy is current then.

Validation is strict on purpose: provenance is evidence, and evidence that is half-formed
(a NUL byte that Postgres would reject, a negative turn, an injection source on an origin that
cannot have one) is worse than none, because it looks like a claim that was checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from ..errors import InvalidArguments
from ..vocabulary import Origin

__all__ = ["Origin", "Provenance", "MAX_FIELD_LENGTH", "parse_origin"]

#: Longest accepted provenance string. Provenance is metadata, not content; anything longer is
#: almost certainly content smuggled into a metadata field.
MAX_FIELD_LENGTH = 4096


_STRING_FIELDS = ("run_id", "source", "session_id", "citation", "adapter", "injection_source")
#: Fields that, when present, must carry something: an empty citation cites nothing.
_NON_BLANK_FIELDS = ("citation", "injection_source")


def parse_origin(value: Any) -> Origin:
    """`value` as an `Origin` (an `Origin` or its string value); InvalidArguments for anything else."""
    if isinstance(value, Origin):
        return value
    if isinstance(value, str):
        try:
            return Origin(value)
        except ValueError:
            pass
        allowed = ", ".join(o.value for o in Origin)
        raise InvalidArguments(f"unknown provenance origin {value[:64]!r}; expected one of: {allowed}")
    raise InvalidArguments(f"provenance origin must be a string, not {type(value).__name__}")


@dataclass(frozen=True, slots=True)
class Provenance:
    """The facts about one memory's path into the store. Only `origin` is required.

    `origin` may be given as an `Origin` or its string value; it is always stored as `Origin`.
    """

    origin: Origin
    run_id: str | None = None
    turn: int | None = None
    source: str | None = None
    session_id: str | None = None
    citation: str | None = None
    adapter: str | None = None
    injection_source: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "origin", parse_origin(self.origin))
        for name in _STRING_FIELDS:
            value = getattr(self, name)
            if value is None:
                continue
            if not isinstance(value, str):
                raise InvalidArguments(f"provenance {name} must be a string, not {type(value).__name__}")
            if "\x00" in value:
                raise InvalidArguments(f"provenance {name} contains a NUL byte")
            if len(value) > MAX_FIELD_LENGTH:
                raise InvalidArguments(f"provenance {name} is longer than {MAX_FIELD_LENGTH} characters")
            if name in _NON_BLANK_FIELDS and not value.strip():
                raise InvalidArguments(f"provenance {name} must not be blank (use None for absent)")
        turn = self.turn
        # bool is an int subclass; True is not a turn number.
        if turn is not None and (isinstance(turn, bool) or not isinstance(turn, int) or turn < 0):
            raise InvalidArguments("provenance turn must be a non-negative integer")
        if self.origin is Origin.INJECTED_CONTEXT:
            if self.injection_source is None:
                raise InvalidArguments("provenance with origin injected_context needs an injection_source")
        elif self.injection_source is not None:
            raise InvalidArguments(
                f"provenance injection_source is only allowed with origin injected_context, not {self.origin.value}"
            )

    def to_json(self) -> dict[str, Any]:
        """A plain dict for JSON/JSONB: origin as its string value, absent fields omitted."""
        out: dict[str, Any] = {"origin": self.origin.value}
        for f in fields(self):
            if f.name == "origin":
                continue
            value = getattr(self, f.name)
            if value is not None:
                out[f.name] = value
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Provenance:
        """Inverse of `to_json`. Unknown keys are refused rather than dropped: a stored
        provenance with fields this version does not understand must not silently lose them."""
        if not isinstance(data, Mapping):
            raise InvalidArguments(f"provenance must be a JSON object, not {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(str(k)[:64] for k in data if k not in known)
        if unknown:
            raise InvalidArguments(f"unknown provenance field(s): {', '.join(unknown)}")
        if "origin" not in data:
            raise InvalidArguments("provenance has no origin")
        return cls(**{k: data[k] for k in data})
