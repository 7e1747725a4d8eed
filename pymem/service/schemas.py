"""JSON Schemas of the verbs' arguments and results, as the OpenAPI document publishes them.

They describe what the library accepts; the library still checks every argument itself (a schema
is documentation and a fuzzing target, never the only guard).
"""

from __future__ import annotations

from typing import Any

from ..delivery.memories import MAX_REASON
from ..storage.idempotency import CLASSES
from ..storage.memories import MAX_BATCH, MAX_IDS, MAX_LIST
from ..vocabulary import MAX_ID, MAX_IDEMPOTENCY_KEY, MAX_TOP_K, ORIGINS, SURFACES

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
KEPT: Schema = {"type": "object", "required": ["id", "content", "score", "origin", "confidence"], "properties": {
    "id": {"type": "string"}, "content": nullable({"type": "string"}), "score": {"type": "number"},
    "origin": {"type": "string"}, "confidence": {"type": "number"}, "source_adapter": nullable({"type": "string"}),
    "created_at": nullable({"type": "string"}), "provenance": OBJECT}}
WITHHELD: Schema = {"type": "object", "required": ["id", "reason"], "properties": {
    "id": {"type": "string"}, "reason": {"type": "string"}, "signature": nullable({"type": "string"})},
    "description": "a hit that was not returned, and why; never its content"}
RECALLED: Schema = {"type": "object", "required": ["kept", "withheld", "policy_fingerprint", "candidates"], "properties": {
    "kept": {"type": "array", "items": KEPT}, "withheld": {"type": "array", "items": WITHHELD},
    "policy_fingerprint": {"type": "string"}, "candidates": {"type": "integer"}}}

SESSION: Schema = {"type": "object", "required": ["id", "surface", "started_at"],
                   "properties": {"id": {"type": "string"}, "surface": {"enum": list(SURFACES)},
                                  "started_at": {"type": "string"}, "ended_at": nullable({"type": "string"}),
                                  "incognito": {"type": "boolean"}}}
DELIVERED: Schema = {"type": "object", "required": ["session_id", "turn", "block", "items", "tokens", "budget"],
                     "properties": {"session_id": {"type": "string"}, "turn": {"type": "integer"},
                                    "block": {"type": "string", "description": "exactly what the agent receives"},
                                    "items": {"type": "array", "items": OBJECT}, "digest": {"type": "array"},
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
DELIVER_ARGS: Schema = {"session_id": SESSION_ID, "query": nullable({"type": "string"}),
                        "turn": nullable({"type": "integer", "minimum": 0}),
                        "budget": {"type": "integer", "minimum": 1, "maximum": 1_000_000}, "top_k": TOP_K}
SUPERSEDE_ARGS: Schema = {"old_id": ID, "record": REMEMBER_ARGS["record"], "provenance": PROVENANCE}
ERASE_ARGS: Schema = {"id": ID, "reason": {"type": "string", "minLength": 1, "maxLength": MAX_REASON}}
