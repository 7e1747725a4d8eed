"""What the delivery tests share: a fixed policy, trust and embedder, and a writer through the gate."""

from __future__ import annotations

import re

from pymem import AdmissionPolicy, Provenance
from pymem.admission import AdapterTrustPolicy
from pymem.embedder import LexicalEmbedder

from .database import DIM
from .flavours import admit

POLICY = AdmissionPolicy()
TRUST = AdapterTrustPolicy()
EMBEDDER = LexicalEmbedder(DIM)
DEFAULTS = dict(policy=POLICY, trust=TRUST, embedder=EMBEDDER)


def remember(memories, text: str, origin: str = "user_asserted", *, session: str | None = None,
             tags: list[str] | None = None, **provenance) -> str:
    """Admit `text` through the write gate; returns its id."""
    if origin == "tool_output":
        provenance.setdefault("citation", "tool:calendar#evt-42")
    if origin == "injected_context":
        provenance.setdefault("injection_source", "harness:preamble")
    record = {"content": text, **({"tags": tags} if tags else {})}
    return admit(memories, record, Provenance(origin, session_id=session, **provenance), policy=POLICY,
                 embedder=EMBEDDER)["id"]


_ITEM = re.compile(r'^- memory ("(?:[^"\\]|\\.)*") \|', re.M)
_SESSION = re.compile(r'^- session ("(?:[^"\\]|\\.)*") \| started', re.M)


def block_memory_ids(text: str) -> list[str]:
    """The memory ids a delivered block shows, read back from its text, in order."""
    import json
    return [json.loads(m) for m in _ITEM.findall(text)]


def block_sessions(text: str) -> list[str]:
    """The session ids the block's digest lists, read back from its text."""
    import json
    return [json.loads(m) for m in _SESSION.findall(text)]
