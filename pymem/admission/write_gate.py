"""`WriteGate`: the write gate (`admit`) bound to one store context, policy and embedder."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import psycopg

from ..embedder import Embedder
from .gate import admit
from .policy import AdmissionPolicy
from .provenance import Provenance

if TYPE_CHECKING:  # pragma: no cover
    from ..storage.memories import Memories

__all__ = ["WriteGate"]


class WriteGate:
    """`admit` bound to one context, policy and embedder: gate = WriteGate(memories); gate.admit(record, prov).

    `policy=None`: the policy in force at each call, as for `admit`.
    """

    def __init__(self, memories: Memories, policy: AdmissionPolicy | None = None, *,
                 embedder: Embedder | None = None):
        self.memories = memories
        self.policy = policy
        self.embedder = embedder

    def admit(self, record: Mapping[str, Any] | str, provenance: Provenance | Mapping[str, Any], *,
              conn: psycopg.Connection | None = None) -> dict[str, Any]:
        return admit(self.memories, record, provenance, policy=self.policy, embedder=self.embedder, conn=conn)
