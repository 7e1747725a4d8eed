"""The one write path: every memory row pymem writes is checked by `check_row` and written by
`write_rows`, whoever asks (the write gate through `Memories.add`, import and `upsert_many`).

One validator, so the paths cannot disagree about what a row may hold (zero or non-finite
vectors, the dimension, record and content sizes, origins, scopes); one column list, the vocabulary's
WRITE_COLUMNS, which every write statement of sql/queries.sql
must name in that order (checked when this module loads), so Python and the statements cannot
drift apart. A few rows
go as one multi-row INSERT per `ROWS_PER_STATEMENT` rows. A bulk upsert (import, upsert_many of
`STAGE_FROM` rows or more) moves its rows with binary COPY into a session-local staging table
and writes them with ONE `INSERT ... SELECT`: COPY into pymem.memories itself is refused under
row-level security, but the final INSERT is the caller's own statement, so RLS, the triggers
and the chain apply to it exactly as to a VALUES insert, and the tenant's head is locked once.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg
from pgvector import Vector
from psycopg import errors as pgerr
from psycopg.types.json import Jsonb

from .. import queries
from ..context import Context, check_scope
from ..errors import AccessDenied, ContextError, InvalidArguments
from ..vocabulary import (
    INJECTED,
    KIND_PATTERN,
    MAX_INJECTION_SOURCE_BYTES,
    MAX_POLICY_FINGERPRINT,
    MAX_RECORD_BYTES,
    OPERATOR_ORIGIN,
    ORIGINS,
    WRITE_COLUMNS,
    canonical_json,
)
from .validate import (
    check_embedding,
    check_id,
    check_json,
    check_subject,
    check_tags,
    check_text,
    check_ttl,
    check_unit,
)

__all__ = ["MemoryRow", "WRITE_COLUMNS", "WRITE_STATEMENTS", "check_write_statements", "ROWS_PER_STATEMENT",
           "STAGE_FROM", "check_row", "write_rows", "operator_origin_refusal"]

#: The named statements that list the write columns and are filled by position (sql/queries.sql).
WRITE_STATEMENTS = ("insert_memories", "upsert_memories", "replace_memories", "create_stage", "copy_stage",
                    "upsert_from_stage")


_VALUES_ROW = re.compile(r"^values (\(.*\))$", re.M)


def check_write_statements(texts: Mapping[str, str]) -> None:
    """Refuse (RuntimeError) statements whose column lists are not WRITE_COLUMNS in order, or
    whose VALUES row does not default valid_from where WRITE_COLUMNS has it."""
    for name in WRITE_STATEMENTS:
        lists = queries.column_lists(texts[name])
        wrong = [cols for cols in lists if cols != WRITE_COLUMNS]
        if not lists or wrong:
            raise RuntimeError(f"sql/queries.sql: {name} does not name the write columns in order "
                               f"(pymem.vocabulary.WRITE_COLUMNS): {wrong[0] if wrong else 'no column list'}")
        row = _VALUES_ROW.search(texts[name])
        if row is not None:
            params = [p.strip() for p in row.group(1)[1:-1].replace("coalesce(%s, now())", "%s?").split(",")]
            if len(params) != len(WRITE_COLUMNS) or [i for i, p in enumerate(params) if p != "%s"] != [
                    WRITE_COLUMNS.index("valid_from")]:
                raise RuntimeError(f"sql/queries.sql: the VALUES row of {name} does not match the write columns")


check_write_statements({name: queries.query(name) for name in WRITE_STATEMENTS})
#: Rows per INSERT statement (18 parameters each: far below the 65,535 a statement may carry).
ROWS_PER_STATEMENT = 500
#: From this many rows on, an upsert is staged with binary COPY (a few rows: one INSERT is cheaper).
STAGE_FROM = 50
#: Columns a write takes from the context, never from the row.
CONTEXT_COLUMNS = ("tenant_id", "source_adapter")
#: The staging table's column types, for binary COPY (origin is a domain over text).
_STAGE_TYPES = {"scope": "jsonb", "record": "jsonb", "provenance": "jsonb", "embedding": "vector", "tags": "text[]",
                "importance": "float4", "confidence": "float4", "valid_from": "timestamptz",
                "invalidated_at": "timestamptz", "ttl": "interval"}

_KIND = re.compile(KIND_PATTERN)


@dataclass(frozen=True)
class MemoryRow:
    """One validated memory row, ready to write: every column of WRITE_COLUMNS but the context's."""

    id: str
    scope: dict[str, str]
    kind: str = "fact"
    content: str | None = None
    record: Any = None
    record_text: str | None = None  # the record as canonical JSON: the jsonb parameter and digest input
    embedding: list[float] | None = None
    tags: list[str] = field(default_factory=list)
    importance: float | None = None
    confidence: float | None = None
    origin: str | None = None
    provenance: Any = None
    injection_source: str | None = None
    policy_fingerprint: str | None = None
    valid_from: Any = None
    invalidated_at: Any = None
    superseded_by: str | None = None
    embedder: str | None = None  # the embedder that computed `embedding` from the content (None: the caller's vector)
    ttl: timedelta | None = None  # the writer's time-to-live (None: the tenant's default); the database dates it
    subject: str | None = None  # the person the memory is about (the database keeps their pseudonym)

    def params(self, ctx: Context) -> list[Any]:
        """The row's values in WRITE_COLUMNS order, each by its column's name."""
        values = {
            "tenant_id": ctx.tenant,
            "source_adapter": ctx.adapter,
            "scope": Jsonb(self.scope),
            "record": Jsonb(self.record_text, dumps=_as_is) if self.record_text is not None else None,
            "embedding": Vector(self.embedding) if self.embedding is not None else None,
            "provenance": Jsonb(self.provenance) if self.provenance is not None else None,
        }
        return [values[c] if c in values else getattr(self, c) for c in WRITE_COLUMNS]


def _as_is(text: str) -> str:
    return text


def _at(where: str, what: str) -> str:
    return f"{where} {what}" if where else what


def check_row(*, dim: int, max_content_bytes: int, default_scope: Mapping[str, str], where: str = "",
              id: Any = None, scope: Any = None, kind: Any = None, content: Any = None, record: Any = None,
              record_vector_key: str | None = None, embedding: Any = None, tags: Any = None,
              importance: Any = None, confidence: Any = None, origin: Any = None, provenance: Any = None,
              injection_source: Any = None, policy_fingerprint: Any = None, valid_from: Any = None,
              invalidated_at: Any = None, superseded_by: Any = None, embedder: Any = None, ttl: Any = None,
              subject: Any = None) -> MemoryRow:
    """The one validator: a MemoryRow, or InvalidArguments naming `where` and the field (never
    echoing content or vector values). `record_vector_key` names a key of `record` already
    checked as `embedding` (a chunk keeps its vector inside its record)."""
    try:
        scope = check_scope(scope, _at(where, "scope")) if scope is not None else dict(default_scope)
    except ContextError as exc:
        raise InvalidArguments(str(exc)) from None
    if origin is not None and (not isinstance(origin, str) or origin not in ORIGINS):
        raise InvalidArguments(f"{_at(where, 'origin')} must be one of {', '.join(ORIGINS)}")
    if injection_source is not None:
        injection_source = check_text(injection_source, _at(where, "injection_source"),
                                      max_bytes=MAX_INJECTION_SOURCE_BYTES)
        if not injection_source:
            raise InvalidArguments(f"{_at(where, 'injection_source')} must not be empty")
    if origin == INJECTED and injection_source is None:
        raise InvalidArguments(f"{_at(where, 'origin')} injected_context requires an injection_source")
    if origin != INJECTED and injection_source is not None:
        raise InvalidArguments(f"{_at(where, 'injection_source')} is only allowed with origin injected_context")
    if kind is None or kind == "":
        kind = "fact"
    if not isinstance(kind, str) or not _KIND.match(kind):
        raise InvalidArguments(f"{_at(where, 'kind')} must be a lowercase word (a-z, 0-9, _), at most 40 characters")

    record_text = None
    if record is not None:
        check_json({k: v for k, v in record.items() if k != record_vector_key}
                   if record_vector_key is not None else record, _at(where, "record"))
        try:
            record_text = canonical_json(record)
        except (TypeError, ValueError) as exc:
            raise InvalidArguments(f"{_at(where, 'record')} is not JSON: {type(exc).__name__}") from None
        size = len(record_text.encode("utf-8"))
        if size > MAX_RECORD_BYTES:
            raise InvalidArguments(f"{_at(where, 'record')} is {size} bytes as JSON, the limit is {MAX_RECORD_BYTES}")

    return MemoryRow(
        id=check_id(id, _at(where, "id")) if id is not None else str(uuid.uuid4()),
        scope=scope,
        kind=kind,
        content=check_text(content, _at(where, "content"), max_bytes=max_content_bytes),
        record=record,
        record_text=record_text,
        embedding=check_embedding(embedding, dim, _at(where, "embedding")) if embedding is not None else None,
        tags=check_tags(tags),
        importance=check_unit(importance, _at(where, "importance")),
        confidence=check_unit(confidence, _at(where, "confidence")),
        origin=origin,
        provenance=check_json(provenance, _at(where, "provenance")) if provenance is not None else None,
        injection_source=injection_source,
        policy_fingerprint=check_text(policy_fingerprint, _at(where, "policy_fingerprint"),
                                      max_bytes=MAX_POLICY_FINGERPRINT),
        valid_from=valid_from,
        invalidated_at=invalidated_at,
        superseded_by=check_id(superseded_by, _at(where, "superseded_by")) if superseded_by else None,
        embedder=check_text(embedder, _at(where, "embedder"), max_bytes=100) if embedder is not None else None,
        ttl=check_ttl(ttl, _at(where, "ttl")),
        subject=check_subject(subject, _at(where, "subject")),
    )


def operator_origin_refusal(adapter: str) -> str:
    """Why a context acting as `adapter` may not write origin operator."""
    return (f"origin operator is only for the operator's own (untagged) writes; a context acting as adapter "
            f"{adapter[:100]!r} cannot claim it (use the origin the memory really has)")


def _claims_operator(row: MemoryRow) -> bool:
    provenance = row.provenance if isinstance(row.provenance, Mapping) else {}
    return row.origin == OPERATOR_ORIGIN or provenance.get("origin") == OPERATOR_ORIGIN


def reap_expired(conn: psycopg.Connection, rows: Sequence[MemoryRow]) -> None:
    """Delete the expired rows among these ids, as chained events, before a write reuses them: an
    expired row is invisible to every read, and to the upsert's conflict check. write_rows does
    it first; a caller that writes something else before (an idempotency claim) on a Citus store
    calls it before that and passes reaped=True, because Citus refuses a definer function's
    statements (pymem.reap_expired) on shards the app has already written to in the transaction."""
    if rows:
        with conn.cursor() as cur:
            cur.execute(queries.query("reap_expired"), ([r.id for r in rows],))


def write_rows(conn: psycopg.Connection, ctx: Context, rows: Sequence[MemoryRow], *,
               replace: bool, whole: bool = False, reaped: bool = False) -> dict[str, int]:
    """Write checked rows on `conn` (whose transaction carries `ctx`): insert them, or with
    `replace` upsert them (a chunk replaces what it determines; see sql/queries.sql), or with
    `whole` as well replace every column the row determines (confidence, policy fingerprint,
    kind, tags... : a writer that owns whole rows). Returns {id: revision} as written.

    A context acting as an adapter cannot write origin operator (AccessDenied, nothing written):
    the database refuses it too (pymem._memories_operator_origin).

    Rows are written in id order (code points), whatever order the caller gave: two batches that
    share ids then lock the shared rows in the same order, so one waits for the other instead of
    both deadlocking (the staged path orders the same way in SQL)."""
    if ctx.adapter is not None and any(_claims_operator(r) for r in rows):
        raise AccessDenied(operator_origin_refusal(ctx.adapter))
    rows = sorted(rows, key=lambda r: r.id)
    if not reaped:
        # An id whose row has expired is written afresh: the expired row (invisible to every read,
        # and to the upsert's conflict check) is deleted first, as a chained event.
        reap_expired(conn, rows)
    if replace and not whole and len(rows) >= STAGE_FROM and all(_stageable(r) for r in rows):
        return _write_staged(conn, ctx, rows)
    name = ("replace_memories" if whole else "upsert_memories") if replace else "insert_memories"
    revisions: dict[str, int] = {}
    with conn.cursor() as cur:
        for start in range(0, len(rows), ROWS_PER_STATEMENT):
            batch = rows[start:start + ROWS_PER_STATEMENT]
            try:
                cur.execute(queries.repeated(name, len(batch)), [v for row in batch for v in row.params(ctx)])
            except pgerr.UniqueViolation as exc:
                # Only a plain insert can collide (the upserts replace): the caller named an id that
                # exists. The statement failed whole, so nothing of the batch was written.
                raise InvalidArguments(_existing_id_message(exc, ctx, batch)) from None
            revisions.update(cur.fetchall())
    return revisions


def _existing_id_message(exc: psycopg.Error, ctx: Context, batch: Sequence[MemoryRow]) -> str:
    """Which id already exists: the batch's only one, or the one the database names (it names
    none under row-level security), else the batch's ids."""
    if len(batch) == 1:
        return f"a memory with id {batch[0].id[:100]!r} already exists"
    detail = getattr(exc.diag, "message_detail", None) or ""
    prefix = f"Key (tenant_id, id)=({ctx.tenant}, "
    if detail.startswith(prefix) and detail.endswith(") already exists."):
        return f"a memory with id {detail[len(prefix):-len(') already exists.')][:100]!r} already exists"
    named = ", ".join(repr(r.id[:100]) for r in batch[:10]) + (", ..." if len(batch) > 10 else "")
    return f"a memory with one of these {len(batch)} ids already exists: {named}"


def _stageable(row: MemoryRow) -> bool:
    """Binary COPY needs real timestamps (a VALUES insert lets the server parse a string)."""
    return all(v is None or isinstance(v, datetime) for v in (row.valid_from, row.invalidated_at))


def _write_staged(conn: psycopg.Connection, ctx: Context, rows: Sequence[MemoryRow]) -> dict[str, int]:
    """Upsert `rows` through the staging table: binary COPY in, one INSERT ... SELECT out."""
    with conn.cursor() as cur:
        cur.execute(queries.query("create_stage"))
        with cur.copy(queries.query("copy_stage")) as copy:
            copy.set_types([_STAGE_TYPES.get(c, "text") for c in WRITE_COLUMNS])
            for row in rows:
                copy.write_row(row.params(ctx))
        cur.execute(queries.query("upsert_from_stage"))
        revisions: dict[str, int] = dict(cur.fetchall())
        cur.execute(queries.query("drop_stage"))
    return revisions
