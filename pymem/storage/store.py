"""The store: opening the database (embedded or PYMEM_DSN) and the context-bound memory verbs."""

from __future__ import annotations

import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from .. import db, embedded, migrate
from ..config import Settings
from ..context import Context, check_scope
from ..errors import InvalidArguments, SchemaError
from .validate import check_id, check_json, check_tags, check_text, check_unit, check_vector

ORIGINS = frozenset({"user_asserted", "operator", "model_inferred", "tool_output", "retrieved_content",
                     "unproven", "injected_context"})


@dataclass(frozen=True)
class Endpoints:
    """Where the store connects: the app's DSN and the administrative one (DDL, audits, bench)."""

    app: str
    admin: str
    embedded: embedded.EmbeddedServer | None = None

    @property
    def location(self) -> str:
        if self.embedded is not None:
            return f"embedded Postgres in {self.embedded.home}"
        return "PYMEM_DSN"


def resolve(settings: Settings, *, migrate_embedded: bool = True) -> Endpoints:
    """Start the embedded server when no DSN is set (migrating it on first use)."""
    if not settings.embedded:
        return Endpoints(app=settings.dsn, admin=settings.admin_dsn or settings.dsn)
    server = embedded.start(settings.home)
    ends = Endpoints(app=server.dsn("pymem_app"), admin=server.dsn("postgres"), embedded=server)
    if migrate_embedded:
        with db.connect(ends.admin, role=None, autocommit=True) as conn:
            current = migrate.current_revision(conn)
        if current != migrate.head_revision():
            migrate.upgrade(ends.admin, embedding_dim=settings.embedding_dim)
            embedded.enable_local_logins(server)
    return ends


class Store:
    """An open pymem store: a connection pool plus the store-wide facts it checked on opening."""

    def __init__(self, endpoints: Endpoints, settings: Settings, *, pool_size: int = 8):
        self.endpoints = endpoints
        self.settings = settings
        with db.connect(endpoints.app) as conn:
            with db.translate_errors():
                migrate.check_current(conn)
                row = conn.execute("select embedding_dim from pymem.store_info").fetchone()
            conn.rollback()
        if row is None:
            raise SchemaError("pymem.store_info is empty: the schema was not created by pymem")
        self.embedding_dim: int = row[0]
        self.pool = db.make_pool(endpoints.app, max_size=pool_size)

    @classmethod
    def open(cls, settings: Settings | None = None, **kwargs: Any) -> "Store":
        settings = settings or Settings.from_env()
        return cls(resolve(settings), settings, **kwargs)

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self, ctx: Context, conn: psycopg.Connection | None = None) -> Iterator[psycopg.Connection]:
        """A transaction with `ctx` set. Given `conn`, a savepoint inside the caller's transaction."""
        if conn is not None:
            with db.transaction(conn, ctx):
                yield conn
            return
        with self.pool.connection() as c, db.transaction(c, ctx):
            yield c

    def admin_connection(self) -> psycopg.Connection:
        """A connection with the administrative login (DDL, cross-tenant audits, benchmarks)."""
        return db.connect(self.endpoints.admin, role=None)

    def bind(self, ctx: Context | None = None, **fields: Any) -> "Memories":
        """The memory verbs for one context: store.bind(tenant="acme", actor="u1", adapter=None)."""
        return Memories(self, ctx if ctx is not None else Context(**fields))


MEMORY_COLUMNS = (
    "id", "scope", "kind", "content", "record", "embedding", "tags", "importance", "confidence", "origin",
    "source_adapter", "provenance", "injection_source", "policy_fingerprint", "revision", "created_at",
    "updated_at", "valid_from", "invalidated_at", "superseded_by", "erased_at", "content_hash",
)


class Memories:
    """Memory verbs bound to one Context. Every verb takes an optional connection to join a
    caller's transaction (as a savepoint) instead of opening its own."""

    def __init__(self, store: Store, ctx: Context):
        self.store = store
        self.ctx = ctx

    def _tx(self, conn: psycopg.Connection | None):
        return self.store.transaction(self.ctx, conn)

    # -- rows --------------------------------------------------------------------------------

    def prepare_row(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """Validate one memory row and fill in defaults; raises InvalidArguments."""
        if not isinstance(row, Mapping):
            raise InvalidArguments(f"a memory must be an object, got {type(row).__name__}")
        known = set(MEMORY_COLUMNS) - {"source_adapter", "revision", "created_at", "updated_at", "content_hash",
                                        "erased_at"}
        unknown = set(row) - known
        if unknown:
            raise InvalidArguments(f"unknown memory fields: {', '.join(sorted(map(str, unknown)))}")
        max_bytes = self.store.settings.max_content_bytes
        origin = row.get("origin")
        if origin is not None and origin not in ORIGINS:
            raise InvalidArguments(f"unknown origin {origin!r}; one of {', '.join(sorted(ORIGINS))}")
        injection_source = check_text(row.get("injection_source"), "injection_source", max_bytes=2048)
        if (origin == "injected_context") != (injection_source is not None):
            raise InvalidArguments("origin injected_context requires injection_source, and only it may carry one")
        scope = check_scope(row.get("scope", dict(self.ctx.scope)), "scope")
        embedding = row.get("embedding")
        kind = row.get("kind") or "fact"
        if not isinstance(kind, str):
            raise InvalidArguments("kind must be a string")
        return {
            "id": check_id(row["id"]) if row.get("id") is not None else str(uuid.uuid4()),
            "scope": Jsonb(scope),
            "kind": kind,
            "content": check_text(row.get("content"), "content", max_bytes=max_bytes),
            "record": Jsonb(check_json(row["record"], "record")) if row.get("record") is not None else None,
            "embedding": check_vector(embedding, self.store.embedding_dim) if embedding is not None else None,
            "tags": check_tags(row.get("tags")),
            "importance": check_unit(row.get("importance"), "importance"),
            "confidence": check_unit(row.get("confidence"), "confidence"),
            "origin": origin,
            "provenance": Jsonb(check_json(row["provenance"], "provenance")) if row.get("provenance") is not None else None,
            "injection_source": injection_source,
            "policy_fingerprint": check_text(row.get("policy_fingerprint"), "policy_fingerprint", max_bytes=200),
            "valid_from": row.get("valid_from"),
            "invalidated_at": row.get("invalidated_at"),
            "superseded_by": check_id(row["superseded_by"], "superseded_by") if row.get("superseded_by") else None,
        }

    def add(self, rows: Sequence[Mapping[str, Any]], *, conn: psycopg.Connection | None = None) -> list[str]:
        """Insert memory rows in one transaction; returns their ids. All or nothing."""
        if isinstance(rows, Mapping) or not isinstance(rows, (list, tuple)):
            raise InvalidArguments("rows must be a list of memory objects")
        prepared = [self.prepare_row(r) for r in rows]
        if not prepared:
            return []
        with self._tx(conn) as c:
            for start in range(0, len(prepared), INSERT_BATCH):
                batch = prepared[start:start + INSERT_BATCH]
                params = [v for p in batch for v in _insert_params(p, self.ctx)]
                # One multi-row INSERT per batch: the chain trigger then locks the tenant's head
                # once per statement instead of once per row (COPY is refused under RLS).
                c.execute(_insert_sql(len(batch)), params)
        return [p["id"] for p in prepared]

    def get_row(self, memory_id: str, *, conn: psycopg.Connection | None = None) -> dict[str, Any] | None:
        """One memory row as a dict (embedding as a list of floats), or None if not visible."""
        check_id(memory_id)
        with self._tx(conn) as c:
            with c.cursor(row_factory=dict_row) as cur:
                cur.execute(
                    f"select {', '.join(MEMORY_COLUMNS)} from pymem.memories "
                    "where tenant_id = %s and id = %s",
                    (self.ctx.tenant, memory_id),
                )
                row = cur.fetchone()
        if row and row["embedding"] is not None:
            row["embedding"] = row["embedding"].to_list()
        return row

    # -- storage verbs (the memory plane contract; see pymem/storage/memories.py) -------------------------

    def upsert_many(self, records: Sequence[Mapping[str, Any]], *, idempotency_key: str,
                    expected_revisions: Mapping[str, int] | None = None, idempotency_class: str | None = None,
                    conn: psycopg.Connection | None = None) -> dict[str, Any]:
        """Store chunks verbatim, atomically: {"upserted": N, "replayed": bool}.

        Replay-or-conflict on (verb, actor, idempotency_key); expected_revisions {id: rev} (0 = must
        not exist) => RevisionMismatch and nothing written; idempotency_class "default" (24 h),
        "short" (1 h) or "long" (30 days) sets how long the key is remembered.
        """
        from . import memories

        return memories.upsert_many(self.store, self.ctx, records, idempotency_key=idempotency_key,
                                 expected_revisions=expected_revisions, idempotency_class=idempotency_class,
                                 conn=conn)

    def search(self, vector: Sequence[float], *, top_k: int, scope_filter: Mapping[str, str] | None = None,
               metadata_filter: Mapping[str, Any] | None = None, include: Mapping[str, bool] | None = None,
               fidelity_target: Any = None, conn: psycopg.Connection | None = None) -> list[dict[str, Any]]:
        """The top_k visible chunks closest by cosine whose scope contains scope_filter, best first:
        [{chunk, chunk_id, score, recalled_view, revision}]. include: {"embedding": False} leaves
        vectors out of the returned chunks, {"superseded": True} also returns superseded rows."""
        from . import memories

        return memories.search(self.store, self.ctx, vector, top_k=top_k, scope_filter=scope_filter,
                            metadata_filter=metadata_filter, include=include, fidelity_target=fidelity_target,
                            conn=conn)

    def get(self, memory_id: str, *, conn: psycopg.Connection | None = None) -> dict[str, Any] | None:
        """The stored chunk, verbatim, plus a "revision" key; None if absent, erased or not visible."""
        from . import memories

        return memories.get(self.store, self.ctx, memory_id, conn=conn)

    def get_many(self, ids: Sequence[str], *, conn: psycopg.Connection | None = None) -> list[dict[str, Any]]:
        """get() for many ids: the records found, in the order of `ids` (absent ids are skipped, a
        repeated id is returned each time it is asked for)."""
        from . import memories

        return memories.get_many(self.store, self.ctx, ids, conn=conn)

    def delete_many(self, ids: Sequence[str], *, conn: psycopg.Connection | None = None) -> dict[str, int]:
        """Delete chunks in one transaction (one ledger event each): {"deleted": ids that existed}."""
        from . import memories

        return memories.delete_many(self.store, self.ctx, ids, conn=conn)

    def describe_store(self) -> dict[str, Any]:
        """Capabilities, advertising only what is implemented."""
        from . import memories

        return memories.describe_store(self.store)

    def health(self) -> dict[str, Any]:
        """Database reachable and its version, pgvector version check, schema revision current."""
        from . import memories

        return memories.health(self.store)


_INSERT_COLUMNS = ("tenant_id", "id", "scope", "kind", "content", "record", "embedding", "tags", "importance",
                   "confidence", "origin", "source_adapter", "provenance", "injection_source",
                   "policy_fingerprint", "valid_from", "invalidated_at", "superseded_by")


INSERT_BATCH = 1000  # rows per INSERT statement; keeps the parameter count under 65,535


def _insert_sql(rows: int = 1) -> str:
    cols = ", ".join(_INSERT_COLUMNS)
    one = "(" + ", ".join("coalesce(%s, now())" if c == "valid_from" else "%s" for c in _INSERT_COLUMNS) + ")"
    return f"insert into pymem.memories ({cols}) values " + ", ".join([one] * rows)


def _insert_params(p: Mapping[str, Any], ctx: Context) -> tuple:
    from pgvector import Vector

    values = dict(p, tenant_id=ctx.tenant, source_adapter=ctx.adapter)
    if values["embedding"] is not None:
        values["embedding"] = Vector(values["embedding"])
    return tuple(values[c] for c in _INSERT_COLUMNS)
