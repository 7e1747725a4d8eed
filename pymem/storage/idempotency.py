"""Replay-or-conflict idempotency for write verbs.

A key is scoped to (tenant, verb, adapter, actor): the tenant and the adapter through RLS (the
adapter is the connection's, so an agent cannot plant a key an operator's call would replay), the
actor from the context (never from the call). The first call with a key claims it in the same transaction as its writes,
so the claim commits with them or not at all. A later call with the same key and the same
arguments (digest) replays the stored result without writing; with different arguments it is an
IdempotencyConflict. After the key expires (per idempotency class) it may be used afresh.

Concurrent calls with one key cannot both write: the claim is an INSERT ... ON CONFLICT on the
key's primary key, so the second waits for the first to commit and then sees its claim.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any, cast

import psycopg
from psycopg.types.json import Jsonb

from .. import db, queries
from ..context import Context
from ..errors import IdempotencyConflict, InvalidArguments
from ..vocabulary import MAX_IDEMPOTENCY_KEY as MAX_KEY
from ..vocabulary import canonical_json

CLASSES: dict[str, timedelta] = {
    "default": timedelta(hours=24),
    "short": timedelta(hours=1),
    "long": timedelta(days=30),
}


def check_key(key: Any) -> str:
    if key is None:
        raise InvalidArguments("idempotency_key is required")
    if not isinstance(key, str):
        raise InvalidArguments(f"idempotency_key must be a string, got {type(key).__name__}")
    if not key.strip() or len(key) > MAX_KEY or "\x00" in key:
        raise InvalidArguments(f"idempotency_key must be 1 to {MAX_KEY} characters, not blank, without NUL bytes")
    return key


def ttl(idempotency_class: Any) -> timedelta:
    """How long a key is remembered; None means the "default" class."""
    if idempotency_class is None:
        return CLASSES["default"]
    if not isinstance(idempotency_class, str) or idempotency_class not in CLASSES:
        raise InvalidArguments(f"idempotency_class must be one of {', '.join(CLASSES)}")
    return CLASSES[idempotency_class]


def digest(payload: Any) -> str:
    """sha256 of the canonical JSON of a call's arguments."""
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


def claim(conn: psycopg.Connection, ctx: Context, verb: str, key: str, call_digest: str,
          result: dict[str, Any], lifetime: timedelta) -> dict[str, Any] | None:
    """Claim `key` for this call inside the caller's transaction (context already set).

    Returns None when the call is new (the caller goes on to write; `result` is what a replay
    will return), or the stored result when it is a replay. Raises IdempotencyConflict when the
    key was used with different arguments and has not expired.
    """
    actor = ctx.actor or ""
    with conn.cursor() as cur:
        cur.execute(queries.query("claim_idempotency_key"),
                    (ctx.tenant, verb, actor, key, call_digest, Jsonb(result), lifetime), prepare=False)
        if cur.fetchone() is not None:
            return None
        # The row exists, is live, and ON CONFLICT locked it: nobody can change it under us.
        cur.execute(queries.query("idempotency_key"), (ctx.tenant, verb, actor, key))
        stored = cur.fetchone()
    if stored is None:  # pragma: no cover - the conflicting row is locked by us
        raise IdempotencyConflict("the idempotency key vanished while it was being claimed")
    stored_digest, stored_result = stored
    if stored_digest != call_digest:
        raise IdempotencyConflict(
            f"idempotency key already used for a different {verb} call; use a new key"
        )
    return cast("dict[str, Any] | None", stored_result)


def purge_expired(conn: psycopg.Connection, ctx: Context) -> int:
    """Delete the context tenant's expired keys; returns how many. Optional housekeeping: an
    expired key is reused in place anyway."""
    with conn.cursor() as cur:
        cur.execute(queries.query("purge_idempotency_keys"))
        return cast("int", db.one(cur.fetchone())[0])


__all__ = ["CLASSES", "check_key", "ttl", "digest", "claim", "purge_expired"]
