"""The words and limits pymem and its schema share, defined once.

Every other module takes these from here: the origins a memory can have, the ledger's event
names, the limits on names, ids and texts, and the one canonical JSON form. The schema
(sql/schema.sql) states the same vocabulary in its own terms (the `pymem.origin` domain, CHECK
constraints, the checks inside its functions); tests/db/test_sql_contract.py reads the catalog
and fails when the two disagree.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable, Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Any

__all__ = [
    "Origin", "ORIGINS", "INJECTED", "OPERATOR_ORIGIN", "EVENTS", "SURFACES", "HOT_TAG", "ID_KEYS", "VECTOR_KEYS",
    "CONTENT_KEYS", "canonical_json",
    "MAX_NAME", "MAX_ID", "MAX_IDEMPOTENCY_KEY", "MAX_CONTENT_BYTES", "MAX_RECORD_BYTES",
    "MAX_INJECTION_SOURCE_BYTES", "MAX_POLICY_FINGERPRINT", "MAX_TAGS", "MAX_TAG", "MAX_TOP_K",
    "MAX_REFUSAL_SOURCE", "MAX_REFUSAL_REASON", "MAX_SIGNATURE", "KIND_PATTERN", "is_plain_text", "MAX_QUERY_BYTES",
    "LESSON_KIND", "FACT_KIND", "LESSON_HALF_LIVES", "LESSON_TYPES", "FACT_SCOPES", "WRITE_COLUMNS",
    "MAX_TTL_SECONDS", "MAX_SUBJECT",
]


class Origin(StrEnum):
    """How a memory came to be believed. The values are stored in the database as-is."""

    USER_ASSERTED = "user_asserted"
    """The user said it, directly, in the conversation."""
    OPERATOR = "operator"
    """The deployment's operator wrote it (configuration, seeded facts)."""
    MODEL_INFERRED = "model_inferred"
    """The model concluded it; plausible, never certain."""
    TOOL_OUTPUT = "tool_output"
    """A tool returned it; only as good as the citation that lets someone check it."""
    RETRIEVED_CONTENT = "retrieved_content"
    """Text fetched from outside (web pages, documents, e-mails): the classic poisoning path."""
    UNPROVEN = "unproven"
    """Nobody can say where it came from."""
    INJECTED_CONTEXT = "injected_context"
    """Context a harness injected into the prompt; must name its injection source."""


#: The origins as the database stores them (the `pymem.origin` domain), in declaration order.
ORIGINS: tuple[str, ...] = tuple(o.value for o in Origin)
#: The one origin that must carry an injection source (and the only one that may).
INJECTED = Origin.INJECTED_CONTEXT.value
#: The origin only an untagged operator context may write (the database enforces it).
OPERATOR_ORIGIN = Origin.OPERATOR.value

#: Every event the ledger records: the chain trigger's memory events, the gate's refusals, the
#: sessions' lifecycle, hot memories marked and cleared, what a delivery injected into a turn, the
#: reason given for an erasure, each convention receipt's filing, confirmation (a new version),
#: retirement and expiry, and the re-hash a migration to a new hash version chains for each live
#: row (memory.rehash).
EVENTS: tuple[str, ...] = ("memory.insert", "memory.update", "memory.supersede", "memory.erase",
                           "memory.delete", "admission.refused",
                           "session.start", "session.end", "session.summary", "session.erase",
                           "hot.marked", "hot.cleared", "delivery.injected", "erasure.recorded",
                           "convention.filed", "convention.confirmed", "convention.retired", "convention.expired",
                           "memory.rehash")

#: Where a session runs (the `pymem.surface` domain): a chat, a background job, another agent
#: (agent-to-agent), an API client, the command line.
SURFACES: tuple[str, ...] = ("chat", "background", "a2a", "api", "cli")
#: The tag that makes a memory hot: delivered on every turn, and its marking a ledger event.
HOT_TAG = "hot"

# -- lessons and shared facts ------------------------------------------------------------------

#: The kind of a lesson memory (pymem.lessons reads them) and of a fact shared between the tasks
#: of a run (inserting one notifies its tenant's channel).
LESSON_KIND = "lesson"
FACT_KIND = "shared_fact"
#: Lesson types, and the half-life of their confidence in days: how long a lesson of the type
#: keeps half of what it was believed at when last filed (pymem.lesson_half_life states the same
#: table; tests/db/test_sql_contract.py keeps the two equal). What a person prefers changes
#: slowest, a reviewer's correction next, pointers to where things are next, the state of a
#: project fast, and what happened in one task fastest.
LESSON_HALF_LIVES: Mapping[str, int] = MappingProxyType(
    {"user": 365, "feedback": 180, "reference": 90, "project": 30, "episode": 7})
LESSON_TYPES: tuple[str, ...] = tuple(LESSON_HALF_LIVES)
#: How far a shared fact reaches: the tasks of one run, or every run of the tenant.
FACT_SCOPES: tuple[str, ...] = ("run", "tenant")

# -- a chunk record's structural surface (the only keys the store reads) --------------------------

#: Where a record's id is read from: the first of these that is present and not null.
ID_KEYS: tuple[str, ...] = ("id", "chunk_id", "memory_id")
#: Where its vector is read from.
VECTOR_KEYS: tuple[str, ...] = ("embedding", "vector")
#: Where its text is read from (the first that is a string).
CONTENT_KEYS: tuple[str, ...] = ("content", "distillate", "text")

# -- the write path ----------------------------------------------------------------------------

#: The columns of pymem.memories every write names, in order: the one list. Every write statement
#: of sql/queries.sql (pymem.storage.rows.WRITE_STATEMENTS) fills its columns by position from
#: it, and pymem.storage.rows refuses to load when any of them names other columns or another order.
WRITE_COLUMNS: tuple[str, ...] = (
    "tenant_id", "id", "scope", "kind", "content", "record", "embedding", "tags", "importance",
    "confidence", "origin", "source_adapter", "provenance", "injection_source",
    "policy_fingerprint", "valid_from", "invalidated_at", "superseded_by", "embedder", "ttl", "subject",
)

# -- limits ------------------------------------------------------------------------------------

#: Tenant, actor and adapter names (the context, adapter bindings, the trust policy).
MAX_NAME = 200
#: Memory ids (characters).
MAX_ID = 256
#: Idempotency keys (characters).
MAX_IDEMPOTENCY_KEY = 256
#: The schema's hard cap on a memory's content (UTF-8 bytes); PYMEM_MAX_CONTENT_BYTES may only lower it.
MAX_CONTENT_BYTES = 1_048_576
#: A stored record, as canonical JSON (UTF-8 bytes).
MAX_RECORD_BYTES = 1 << 20
#: An injection source (UTF-8 bytes).
MAX_INJECTION_SOURCE_BYTES = 2048
#: A policy fingerprint as stored with a row or a refusal (characters).
MAX_POLICY_FINGERPRINT = 100
#: Tags per memory, and characters per tag.
MAX_TAGS = 64
MAX_TAG = 100
#: The most results one search returns.
MAX_TOP_K = 1000
#: The longest time-to-live a memory (or a tenant's retention policy) may name: 36,500 days, in
#: seconds (the database refuses a longer one too, see pymem._memories_expiry).
MAX_TTL_SECONDS = 36_500 * 86_400
#: A subject key (the person a memory is about), in characters; the row keeps only its pseudonym.
MAX_SUBJECT = 256
#: Longest text query of recall, deliver and search-by-text (UTF-8 bytes): a query is a question, not
#: a document; a longer one is refused (InvalidArguments) before it is embedded, never cut.
MAX_QUERY_BYTES = 8192
#: What pymem.record_refusal accepts: the source, the reason and a detector signature (characters).
MAX_REFUSAL_SOURCE = 200
MAX_REFUSAL_REASON = 300
MAX_SIGNATURE = 100
#: A memory's kind: a lowercase word, at most 40 characters (memories.kind's CHECK).
KIND_PATTERN = r"^[a-z][a-z0-9_]{0,39}$"


def canonical_json(value: Any, *, default: Callable[[Any], Any] | None = None) -> str:
    """The one canonical JSON text: keys sorted, compact separators, non-ASCII kept as UTF-8,
    no NaN or Infinity. Digests, idempotency keys, stored records and exports all use it, so
    the same value always gives the same bytes. Raises TypeError or ValueError on a value JSON
    cannot hold (unless `default` converts it)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False,
                      default=default)


# Control and format characters (right-to-left overrides, zero-width spaces...) and line or
# paragraph separators: text carrying them can make one name look like another in an audit.
_UNPLAIN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})


def is_plain_text(value: str) -> bool:
    """True when `value` has no control, format, line- or paragraph-separator characters (the
    database's pymem._is_plain_text draws the same line)."""
    return not any(unicodedata.category(c) in _UNPLAIN_CATEGORIES for c in value)
