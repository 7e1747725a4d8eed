"""JSON Schemas of the verbs' arguments and results, as the OpenAPI document publishes them.

They describe what the library accepts; the library still checks every argument itself (a schema
is documentation and a fuzzing target, never the only guard).
"""

from __future__ import annotations

from typing import Any

from ..conventions.rules import MAX_ASSERTION_CHARS, MAX_RULE_CHARS, MAX_SUBJECT_CHARS
from ..delivery.supersession import MAX_REASON
from ..lessons.filing import MAX_LESSON_CHARS
from ..lessons.selection import DEFAULT_BUDGET as LESSON_BUDGET
from ..lessons.selection import DEFAULT_LIMIT as LESSON_LIMIT
from ..storage.idempotency import CLASSES
from ..storage.memories import MAX_BATCH, MAX_IDS, MAX_LIST
from ..vocabulary import (
    FACT_SCOPES,
    LESSON_TYPES,
    MAX_ID,
    MAX_IDEMPOTENCY_KEY,
    MAX_NAME,
    MAX_REFUSAL_REASON,
    MAX_SUBJECT,
    MAX_TAG,
    MAX_TAGS,
    MAX_TOP_K,
    MAX_TTL_SECONDS,
    ORIGINS,
    SURFACES,
)

Schema = dict[str, Any]


def nullable(schema: Schema) -> Schema:
    return {"anyOf": [schema, {"type": "null"}]}


ID: Schema = {"type": "string", "minLength": 1, "maxLength": MAX_ID}
IDS: Schema = {"type": "array", "items": ID, "maxItems": MAX_IDS}
IDEMPOTENCY_KEY: Schema = {"type": "string", "minLength": 1, "maxLength": MAX_IDEMPOTENCY_KEY,
                           "description": "replay-or-conflict key of a write (required by upsert_many)"}
VECTOR: Schema = {"type": "array", "items": {"type": "number"},
                  "description": "as many finite numbers as the store's embedding_dim, not all zero"}
SCOPE_FILTER: Schema = nullable({"type": "object", "additionalProperties": {"type": "string", "minLength": 1},
                                 "description": "only rows whose scope contains every axis: value given"})
TOP_K: Schema = {"type": "integer", "minimum": 1, "maximum": MAX_TOP_K}
CHUNK: Schema = {"type": "object", "description": (
    "a chunk record, stored verbatim: the store reads its id (id, chunk_id or memory_id), its vector "
    "(embedding or vector), scope, origin and injection_source, content (content, distillate or text) "
    "and provenance; everything else is kept untouched")}
STORED: Schema = {"type": "object", "required": ["revision"], "properties": {"revision": {"type": "integer"}},
                  "description": "a stored chunk record, verbatim, plus its revision"}
PROVENANCE: Schema = {
    "type": "object", "required": ["origin"], "additionalProperties": False,
    "properties": {
        "origin": {"enum": list(ORIGINS)},
        "run_id": {"type": "string"}, "turn": {"type": "integer", "minimum": 0}, "source": {"type": "string"},
        "session_id": {"type": "string"}, "citation": {"type": "string"},
        "adapter": {"type": "string", "description": "if given, must be the token's adapter"},
        "injection_source": {"type": "string"},
    },
}
OBJECT: Schema = {"type": "object"}
STRINGS: Schema = {"type": "array", "items": {"type": "string"}}
STRING: Schema = {"type": "string"}
NUMBER: Schema = {"type": "number"}
INTEGER: Schema = {"type": "integer"}
BOOLEAN: Schema = {"type": "boolean"}
TIME: Schema = {"type": "string", "description": "ISO 8601"}


def short_text(limit: int = MAX_NAME, description: str | None = None) -> Schema:
    out: Schema = {"type": "string", "minLength": 1, "maxLength": limit}
    if description:
        out["description"] = description
    return out


TAG: Schema = short_text(MAX_TAG)
# No maxItems: the library counts the tags after normalising them (case, duplicates), at most MAX_TAGS.
TAGS: Schema = {"type": "array", "items": TAG, "minItems": 1,
                "description": f"1 to {MAX_TAGS} tags (stripped, lowercased, each once)"}
LESSON_TYPE: Schema = {"enum": list(LESSON_TYPES), "description": "sets the lesson's half-life"}
CONFIDENCE: Schema = nullable({"type": "number", "minimum": 0, "maximum": 1,
                               "description": "requested; the admission policy caps it by origin"})
ORIGIN: Schema = {"enum": list(ORIGINS)}
REACH: Schema = {"enum": list(FACT_SCOPES), "default": "run",
                 "description": "run: the tasks of run_id; tenant: every run of the tenant"}

# -- results ------------------------------------------------------------------------------------

UPSERTED: Schema = {"type": "object", "required": ["upserted", "replayed"],
                    "properties": {"upserted": {"type": "integer"}, "replayed": {"type": "boolean"}}}
HITS: Schema = {"type": "array", "items": {
    "type": "object", "required": ["chunk", "chunk_id", "score", "recalled_view", "revision"],
    "properties": {"chunk": OBJECT, "chunk_id": {"type": "string"}, "score": {"type": "number"},
                   "recalled_view": {}, "revision": {"type": "integer"}}}}
DELETED: Schema = {"type": "object", "required": ["deleted"], "properties": {"deleted": {"type": "integer"}}}
PAGE: Schema = {"type": "object", "required": ["chunks", "next_after"],
                "properties": {"chunks": {"type": "array", "items": STORED},
                               "next_after": nullable({"type": "string"})}}
CAPABILITIES: Schema = {"type": "object", "required": ["store", "verbs", "embedding_dim"],
                        "properties": {"store": {"type": "string"}, "verbs": STRINGS,
                                       "embedding_dim": {"type": "integer"}}}
HEALTH: Schema = {"type": "object", "required": ["ok", "database", "schema"],
                  "properties": {"ok": {"type": "boolean"}, "database": OBJECT, "schema": OBJECT}}
ADMITTED: Schema = {"type": "object", "required": ["id", "origin", "confidence", "policy_fingerprint", "provenance"],
                    "properties": {"id": {"type": "string"}, "origin": {"enum": list(ORIGINS)},
                                   "confidence": {"type": "number"}, "policy_fingerprint": {"type": "string"},
                                   "provenance": OBJECT},
                    "description": "the record as the write gate wrote it (without vectors)"}
DECISION: Schema = {
    "type": "object",
    "required": ["decision", "reason", "signature", "score", "audit_seq", "id", "origin", "confidence",
                 "policy_fingerprint", "provenance"],
    "properties": {"decision": {"enum": ["admitted", "quarantined", "refused"]}, "reason": {"type": "string"},
                   "signature": nullable({"type": "string"}), "score": nullable({"type": "number"}),
                   "audit_seq": nullable({"type": "integer"}), "id": nullable({"type": "string"}),
                   "origin": nullable({"enum": list(ORIGINS)}), "confidence": nullable({"type": "number"}),
                   "policy_fingerprint": nullable({"type": "string"}), "provenance": nullable(OBJECT)},
    "description": "the write gate's decision: admitted (a memory now), quarantined (held where no prompt sees it "
                   "until an operator releases it) or refused (audited; an error, whose details carry this shape)"}
QUARANTINED_NOTE: Schema = {
    "type": "object", "required": ["id", "status", "reason", "signature", "score", "origin", "held_at"],
    "properties": {"id": {"type": "string"}, "status": {"enum": ["held", "released", "rejected"]},
                   "reason": {"type": "string"}, "signature": nullable({"type": "string"}),
                   "score": nullable({"type": "number"}), "origin": {"enum": list(ORIGINS)},
                   "source_adapter": nullable({"type": "string"}), "content": nullable({"type": "string"}),
                   "provenance": OBJECT, "held_at": {"type": "string"}, "decided_at": nullable({"type": "string"}),
                   "decision_reason": nullable({"type": "string"}),
                   "ttl": nullable({"type": "number", "description": "the writer's ttl in seconds (null: the "
                                    "tenant's default); the released memory expires this long after the release"}),
                   "erased_at": nullable({"type": "string", "description": "when erasing the person who wrote "
                                          "it or whom it is about emptied it"})},
    "description": "a note the write gate held, with its reason and score (its content while held)"}
QUARANTINE_DECIDED: Schema = {"type": "object", "required": ["id", "status", "seq"],
                              "properties": {"id": {"type": "string"},
                                             "status": {"enum": ["released", "rejected"]},
                                             "seq": {"type": "integer"}}}
KEPT: Schema = {"type": "object", "required": ["id", "content", "score", "origin", "confidence"], "properties": {
    "id": {"type": "string"}, "content": nullable({"type": "string"}), "score": {"type": "number"},
    "origin": {"type": "string"}, "confidence": {"type": "number"}, "source_adapter": nullable({"type": "string"}),
    "created_at": nullable({"type": "string"}), "provenance": OBJECT}}
WITHHELD: Schema = {"type": "object", "required": ["id", "reason"], "properties": {
    "id": {"type": "string"}, "reason": {"type": "string"}, "signature": nullable({"type": "string"})},
    "description": "a hit that was not returned, and why; never its content"}
RECALLED: Schema = {"type": "object", "required": ["kept", "withheld", "policy_fingerprint", "candidates"],
                    "properties": {
    "kept": {"type": "array", "items": KEPT}, "withheld": {"type": "array", "items": WITHHELD},
    "policy_fingerprint": {"type": "string"}, "candidates": {"type": "integer"}}}

NULLABLE_STRING = nullable(STRING)
FILED_LESSON: Schema = {
    "type": "object", "required": ["id", "memory_type", "tags", "confidence", "version", "merged"],
    "properties": {"id": STRING, "memory_type": STRING, "tags": STRINGS, "confidence": NUMBER, "version": INTEGER,
                   "merged": BOOLEAN, "source_task": NULLABLE_STRING, "tag_similarity": nullable(NUMBER),
                   "word_similarity": nullable(NUMBER)},
    "description": "a new lesson (version 1), or the near-duplicate it confirmed (merged, version raised)"}
LESSON: Schema = {
    "type": "object", "required": ["id", "memory_type", "tags", "version", "filed_at", "age_days", "stale"],
    "properties": {"id": STRING, "memory_type": STRING, "tags": STRINGS, "content": NULLABLE_STRING,
                   "confidence": nullable(NUMBER), "decayed_confidence": nullable(NUMBER), "version": INTEGER,
                   "source_task": NULLABLE_STRING, "origin": NULLABLE_STRING, "source_adapter": NULLABLE_STRING,
                   "created_at": TIME, "filed_at": TIME, "age_days": NUMBER, "stale": BOOLEAN},
    "description": "a stored lesson: its stored confidence and that confidence decayed for age now"}
DELIVERED_LESSON: Schema = {
    "type": "object", "required": ["id", "memory_type", "tags", "confidence", "filed_at", "text", "version", "stale"],
    "properties": {"id": STRING, "memory_type": STRING, "tags": STRINGS, "confidence": NUMBER,
                   "source_task": NULLABLE_STRING, "filed_at": TIME, "age_days": NUMBER, "text": STRING,
                   "version": INTEGER, "score": nullable(NUMBER), "stale": BOOLEAN},
    "description": "a lesson as a block shows it: confidence after decay, capped by the policy in force"}
LESSONS_FOR_TASK: Schema = {
    "type": "object", "required": ["tags", "lessons", "block", "tokens", "budget", "truncated", "excluded_role"],
    "properties": {"tags": STRINGS, "role": NULLABLE_STRING, "lessons": {"type": "array", "items": DELIVERED_LESSON},
                   "block": {"type": "string", "description": "the lessons block, inside the reference-data envelope"},
                   "tokens": INTEGER, "budget": INTEGER, "truncated": INTEGER, "counter": STRING,
                   "candidates": INTEGER, "withheld": {"type": "array", "items": WITHHELD},
                   "excluded_role": BOOLEAN}}
CONVENTION: Schema = {
    "type": "object", "required": ["id", "version", "subject", "rule_text", "rule_sha256", "base_commit", "assertion",
                                   "lesson_id", "signature", "status"],
    "properties": {"id": STRING, "version": INTEGER, "scope": OBJECT, "source_adapter": NULLABLE_STRING,
                   "subject": STRING, "subject_symbol": NULLABLE_STRING, "rule_text": STRING, "rule_sha256": STRING,
                   "base_commit": STRING, "assertion": STRING, "lesson_id": STRING, "public_key": STRING,
                   "signature": STRING, "receipt_sha256": STRING, "filed_at": TIME, "status": STRING,
                   "ended_reason": NULLABLE_STRING, "ended_at_commit": NULLABLE_STRING,
                   "ended_at": NULLABLE_STRING},
    "description": "a convention receipt at its latest version (hashes, key and signature in hex)"}
FILED_CORRECTION: Schema = {"type": "object", "required": ["receipt", "lesson", "confirmed"],
                            "properties": {"receipt": CONVENTION, "lesson": FILED_LESSON, "confirmed": BOOLEAN}}
ACTIVE_CONVENTIONS: Schema = {
    "type": "object", "required": ["ruleset_hash", "rules"],
    "properties": {"ruleset_hash": {"type": "string", "description": "sha256:<hex> over what the rules demand"},
                   "rules": {"type": "array", "items": CONVENTION}}}
FACT: Schema = {
    "type": "object", "required": ["id", "tag", "key", "value", "scope", "content_hash", "published_at"],
    "properties": {"id": STRING, "tag": STRING, "key": STRING, "value": STRING,
                   "scope": {"type": "string", "description": "the fact's reach: run or tenant"},
                   "run_id": NULLABLE_STRING, "producer_task": NULLABLE_STRING, "source_adapter": NULLABLE_STRING,
                   "content_hash": STRING, "published_at": TIME}}
FACTS: Schema = {"type": "array", "items": FACT}

SESSION: Schema = {"type": "object", "required": ["id", "surface", "started_at"],
                   "properties": {"id": {"type": "string"}, "surface": {"enum": list(SURFACES)},
                                  "started_at": {"type": "string"}, "ended_at": nullable({"type": "string"}),
                                  "incognito": {"type": "boolean"}}}
DELIVERED: Schema = {"type": "object", "required": ["session_id", "turn", "block", "items", "tokens", "budget"],
                     "properties": {"session_id": {"type": "string"}, "turn": {"type": "integer"},
                                    "block": {"type": "string", "description": "exactly what the agent receives"},
                                    "items": {"type": "array", "items": OBJECT},
                                    "digest": {"type": "array", "items": OBJECT},
                                    "lessons": {"type": "array", "items": DELIVERED_LESSON},
                                    "tokens": {"type": "integer"}, "budget": {"type": "integer"},
                                    "injection_seq": nullable({"type": "integer"})}}
ERASED: Schema = {"type": "object", "required": ["id", "seq"],
                  "properties": {"id": {"type": "string"}, "seq": {"type": "integer"}}}

# -- argument sets --------------------------------------------------------------------------------

UPSERT_ARGS: Schema = {
    "records": {"type": "array", "items": CHUNK, "maxItems": MAX_BATCH},
    "expected_revisions": nullable({"type": "object", "additionalProperties": {"type": "integer", "minimum": 0},
                                    "description": "id -> the revision it must have now (0: must not exist)"}),
    "idempotency_class": nullable({"enum": sorted(CLASSES)}),
}
SEARCH_ARGS: Schema = {
    "vector": VECTOR, "top_k": TOP_K, "scope_filter": SCOPE_FILTER,
    "metadata_filter": nullable({"type": "object", "maxProperties": 0,
                                 "description": "no metadata field is filterable: only {} or null"}),
    "include": nullable({"type": "object", "additionalProperties": False,
                         "properties": {"embedding": {"type": "boolean"}, "superseded": {"type": "boolean"}}}),
}
LIST_ARGS: Schema = {"limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIST, "default": 50},
                     "after": nullable(ID)}
REMEMBER_ARGS: Schema = {
    "record": {"anyOf": [{"type": "string", "minLength": 1}, {"type": "object"}],
               "description": "the memory: its text, or an object with content (else distillate/text) and "
                              "optional id, tags, kind, scope, importance, confidence and other fields"},
    "provenance": PROVENANCE,
    "ttl": nullable({"type": "number", "exclusiveMinimum": 0, "maximum": MAX_TTL_SECONDS,
                     "description": "seconds until it expires (the database's clock); null: the tenant's retention"}),
    "subject": nullable({"type": "string", "minLength": 1, "maxLength": MAX_SUBJECT,
                         "description": "the id of the person it is about: erasing that person erases it"}),
}
RECALL_ARGS: Schema = {
    "query": {"anyOf": [{"type": "string", "minLength": 1}, VECTOR],
              "description": "text (embedded by the service's embedder) or a vector"},
    "top_k": {**TOP_K, "default": 5}, "scope_filter": SCOPE_FILTER,
}
SESSION_ID: Schema = {**ID, "description": "a session this tenant started (no control characters)"}
START_SESSION_ARGS: Schema = {"session_id": SESSION_ID, "surface": {"enum": list(SURFACES)},
                              "incognito": {"type": "boolean"}, "first_message": nullable({"type": "string"})}
END_SESSION_ARGS: Schema = {"session_id": SESSION_ID, "summary": nullable({"type": "string"})}
LESSON_TAGS: Schema = nullable({**TAGS, "description": "the task's tags: add the lessons for it (lessons_for_task)"})
ROLE: Schema = nullable(short_text(description="the agent's role; some roles receive no lessons"))
DELIVER_ARGS: Schema = {"session_id": SESSION_ID, "query": nullable({"type": "string"}),
                        "turn": nullable({"type": "integer", "minimum": 0}),
                        "budget": {"type": "integer", "minimum": 1, "maximum": 1_000_000}, "top_k": TOP_K,
                        "lesson_tags": LESSON_TAGS, "role": ROLE}
SUPERSEDE_ARGS: Schema = {"old_id": ID, "record": REMEMBER_ARGS["record"], "provenance": PROVENANCE}
ERASE_ARGS: Schema = {"id": ID, "reason": {"type": "string", "minLength": 1, "maxLength": MAX_REASON}}
LIST_QUARANTINED_ARGS: Schema = {
    "status": {"enum": ["held", "released", "rejected", "all"], "default": "held", "description": "which notes"},
    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIST, "default": 100}}
DECIDE_ARGS: Schema = {"id": ID, "reason": {"type": "string", "minLength": 1, "maxLength": MAX_REASON,
                                            "description": "why (chained; an operator's token only)"}}

FILE_LESSON_ARGS: Schema = {
    "content": {"type": "string", "minLength": 1, "maxLength": MAX_LESSON_CHARS, "description": "the lesson's text"},
    "tags": TAGS, "memory_type": LESSON_TYPE, "confidence": CONFIDENCE,
    "source_task": nullable(short_text(description="the task that learned it")),
    "origin": {**ORIGIN, "default": "model_inferred"},
}
LIST_LESSONS_ARGS: Schema = {"memory_type": nullable(LESSON_TYPE), "tag": nullable(TAG),
                             "limit": {"type": "integer", "minimum": 1, "maximum": 10_000, "default": 100}}
LESSONS_FOR_TASK_ARGS: Schema = {
    "tags": TAGS, "role": ROLE,
    "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": LESSON_LIMIT},
    "budget": {"type": "integer", "minimum": 1, "maximum": 1_000_000, "default": LESSON_BUDGET},
}
FILE_CORRECTION_ARGS: Schema = {
    "rule_text": {"type": "string", "minLength": 1,
                  "description": f"the rule, one line (at most {MAX_RULE_CHARS} characters once whitespace is folded)"},
    "subject": short_text(MAX_SUBJECT_CHARS, "the path or glob it applies to, relative to the repository"),
    "base_commit": {"type": "string", "pattern": "^([0-9a-fA-F]{40}|[0-9a-fA-F]{64})$",
                    "description": "the full commit SHA the rule was stated against"},
    "assertion": short_text(MAX_ASSERTION_CHARS, "the command that checks the rule (stored and signed, never run)"),
    "subject_symbol": nullable({"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_.:]{0,199}$",
                                "description": "the symbol it is about; the rule expires when it is gone"}),
    "tags": nullable({"type": "array", "items": TAG, "description": "more tags for the feedback lesson"}),
    "confidence": CONFIDENCE, "source_task": nullable(short_text()),
    "origin": {**ORIGIN, "default": "user_asserted"},
}
RETIRE_ARGS: Schema = {"receipt_id": ID, "reason": nullable(short_text(MAX_REFUSAL_REASON, "why it no longer holds"))}
PUBLISH_ARGS: Schema = {"tag": TAG, "key": short_text(), "value": {"type": "string"}, "reach": REACH,
                        "run_id": nullable(short_text(description="the run (required when reach is run)")),
                        "producer_task": nullable(short_text())}
SUBSCRIBE_ARGS: Schema = {
    "tag": TAG, "reach": REACH, "run_id": nullable(short_text()),
    "read_only_from_adapters": nullable({"type": "array", "items": short_text(), "description": (
        "a strict allow-list narrowing the token's own (never widening it): only facts these adapters published, "
        "no untagged ones; an empty list returns nothing")}),
}
