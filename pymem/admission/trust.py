"""Which source adapters' memories recall may treat as trusted.

Why. Every row carries the adapter that wrote it (`source_adapter`; NULL for the operator).
Row-level security stops an adapter from writing as another, but it cannot say whether
another agent's memories deserve belief. This policy does: untagged (operator) rows are trusted
by default, tagged rows only when their adapter is allow-listed, so a compromised or merely
careless agent integration cannot plant beliefs that other agents then act on.

`active_trust_policy(settings)` is the policy a store's settings ask for (PYMEM_TRUSTED_ADAPTERS,
PYMEM_TRUST_UNTAGGED when they were built); a long-running process changes it by reloading its
settings (pymem.config), never by an environment read inside a call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..config import environment
from ..errors import InvalidArguments
from ..vocabulary import MAX_NAME

__all__ = ["AdapterTrustPolicy", "active_trust_policy", "parse_bool"]

_TRUE = frozenset({"1", "true", "yes", "on", "y", "t"})
_FALSE = frozenset({"0", "false", "no", "off", "n", "f"})


def parse_bool(name: str, raw: str) -> bool:
    """1/0, true/false, yes/no, on/off (any case). Anything else is an error, not False:
    a typo in a security switch must not silently pick a side."""
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise InvalidArguments(f"{name} must be 1/0, true/false, yes/no or on/off, got {raw[:32]!r}")


def _adapter_name(value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidArguments(f"an adapter name must be a string, not {type(value).__name__}")
    name = value.strip()
    if not name:
        raise InvalidArguments("an adapter name must not be empty")
    if "\x00" in name or len(name) > MAX_NAME:
        raise InvalidArguments(f"an adapter name must be at most {MAX_NAME} characters, without NUL")
    return name


@dataclass(frozen=True, slots=True)
class AdapterTrustPolicy:
    """Trust for recalled rows by source adapter. Adapter names compare exactly (after strip)."""

    trust_untagged: bool = True
    trusted_adapters: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if not isinstance(self.trust_untagged, bool):
            raise InvalidArguments("trust_untagged must be true or false")
        adapters = self.trusted_adapters
        # A bare string is iterable too: "agent-a" would become {"a", "g", ...}.
        if isinstance(adapters, (str, bytes)) or not isinstance(adapters, Iterable):
            raise InvalidArguments("trusted_adapters must be a collection of adapter names")
        object.__setattr__(self, "trusted_adapters", frozenset(_adapter_name(a) for a in adapters))

    def is_trusted(self, source_adapter: str | None) -> bool:
        """None (an untagged, operator-written row) -> `trust_untagged`; a tagged row -> only
        if its adapter is allow-listed."""
        if source_adapter is None:
            return self.trust_untagged
        return _adapter_name(source_adapter) in self.trusted_adapters

    def verdict(self, source_adapter: Any) -> str | None:
        """None when a row written by `source_adapter` is trusted, else why it is not. Never
        raises: a row whose adapter this policy cannot judge (a name no context would accept,
        written around the library) is withheld, not an error on the prompt path."""
        try:
            trusted = self.is_trusted(source_adapter)
        except InvalidArguments:
            return "untrusted: the row's adapter name cannot be judged"
        if trusted:
            return None
        return f"untrusted adapter {source_adapter}" if source_adapter is not None else "untrusted: untagged row"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> AdapterTrustPolicy:
        """From `environ` (PYMEM_* variables; None: the environment's, now):
        ``PYMEM_TRUSTED_ADAPTERS`` (comma-separated names) and ``PYMEM_TRUST_UNTAGGED``
        (boolean, default true). Empty variables count as unset."""
        env = environment() if environ is None else environ
        raw_untagged = (env.get("PYMEM_TRUST_UNTAGGED") or "").strip()
        trust_untagged = parse_bool("PYMEM_TRUST_UNTAGGED", raw_untagged) if raw_untagged else True
        raw_list = env.get("PYMEM_TRUSTED_ADAPTERS") or ""
        names = [n for n in (part.strip() for part in raw_list.split(",")) if n]
        try:
            return cls(trust_untagged=trust_untagged, trusted_adapters=frozenset(names))
        except InvalidArguments as exc:
            raise InvalidArguments(f"PYMEM_TRUSTED_ADAPTERS: {exc}") from None


def active_trust_policy(settings: Any) -> AdapterTrustPolicy:
    """The trust policy `settings` (a pymem Settings) ask for, built once per settings (and again
    after they are reloaded)."""
    policy: AdapterTrustPolicy = settings.in_force.get("trust_policy",
                                                       lambda: AdapterTrustPolicy.from_env(settings.environ))
    return policy
