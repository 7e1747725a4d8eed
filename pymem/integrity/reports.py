"""What a verification reports: per tenant, the counts, the head and the first fault."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class TenantVerification:
    """One tenant's chain verification: its entries, the rows re-hashed, its head, and the first problem found
    (None: none)."""

    tenant: str
    entries: int
    rows_checked: int
    head_seq: int | None
    head_hash: str | None
    bad_seq: int | None = None
    bad_memory_id: str | None = None
    problem: str | None = None

    @property
    def clean(self) -> bool:
        return self.problem is None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> TenantVerification:
        """From a row of pymem.verify_chain, by column name (tenant_id is `tenant` here)."""
        values = dict(row)
        values["tenant"] = values.pop("tenant_id")
        if values["head_hash"] is not None:
            values["head_hash"] = bytes(values["head_hash"]).hex()
        return cls(**values)


@dataclass(frozen=True)
class VerifyReport:
    """What `verify_store` returns: one `TenantVerification` per tenant, and how long it took; `ok` when no tenant
    has a problem."""

    tenants: list[TenantVerification] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def clean(self) -> bool:
        return all(t.clean for t in self.tenants)

    @property
    def entries(self) -> int:
        return sum(t.entries for t in self.tenants)

    @property
    def first_problem(self) -> TenantVerification | None:
        return next((t for t in self.tenants if not t.clean), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "clean": self.clean,
            "entries": self.entries,
            "seconds": round(self.seconds, 6),
            "tenants": [asdict(t) for t in self.tenants],
        }


__all__ = ["TenantVerification", "VerifyReport"]
