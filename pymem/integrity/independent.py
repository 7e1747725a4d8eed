"""An independent verifier: every hash recomputed in Python from the raw rows.

It reads pymem.ledger, pymem.chain_heads and pymem.memories with plain SELECTs and never calls a
pymem function, so a verification function replaced or altered inside the database cannot vouch
for itself. It checks what pymem.verify_chain checks, in the same order, and names the first fault
of each tenant the same way, so the two can be compared case by case.
"""

from __future__ import annotations

import time
from typing import Any, Iterator

import psycopg
from psycopg.rows import dict_row

from .. import db, queries
from ..context import Context
from .verify import TenantVerification, VerifyReport
from . import hashing

def _stream(conn: psycopg.Connection, sql: str, params: tuple) -> Iterator[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(sql, params, prepare=False)
        while rows := cur.fetchmany(2000):
            yield from rows


def _vector(text: str | None) -> list[float] | None:
    return None if text is None else [float(x) for x in text.strip("[]").split(",")]


def _verify_tenant(conn: psycopg.Connection, tenant: str) -> TenantVerification:
    entries = 0
    head_seq: int | None = None
    by_seq: dict[int, bytes] = {}
    last_memory_event: dict[str, tuple[int, str, bytes | None, int | None, int]] = {}
    fault: tuple[int | None, str | None, str] | None = None
    prev = hashing.genesis_hash(tenant)

    # 1. the chain: contiguous seq, prev_hash linkage, recomputed chain_hash (first fault by seq)
    for e in _stream(conn, queries.query("raw_ledger"), (tenant,)):
        entries += 1
        head_seq = e["seq"]
        by_seq[e["seq"]] = bytes(e["chain_hash"])
        if e["memory_id"] is not None and e["event"].startswith("memory."):
            last_memory_event[e["memory_id"]] = (e["seq"], e["event"], e["content_hash"], e["revision"],
                                                 e["hash_version"])
        if fault is None:
            if e["seq"] != entries:
                fault = (entries, None, f"seq gap: expected {entries}, found {e['seq']}")
            elif bytes(e["prev_hash"]) != prev:
                fault = (e["seq"], e["memory_id"], "prev_hash does not match the previous entry's chain_hash")
            elif e["hash_version"] not in hashing.VERSIONS:
                fault = (e["seq"], e["memory_id"], f"unknown hash_version {e['hash_version']}")
            elif bytes(e["chain_hash"]) != hashing.chain_hash_of(bytes(e["prev_hash"]), e):
                fault = (e["seq"], e["memory_id"], "chain_hash does not match the entry's fields")
        prev = bytes(e["chain_hash"])

    head = conn.execute(queries.query("raw_chain_head"), (tenant,)).fetchone()
    head_hash = bytes(head[1]) if head else None
    rows_checked = 0
    live_problem: tuple[int | None, str, str] | None = None  # (last seq, id, problem), first by seq
    for m in _stream(conn, queries.query("raw_memories"), (tenant,)):
        rows_checked += 1
        last = last_memory_event.pop(m["id"], None)
        problem = None
        if last is None:
            problem = "memory has no ledger event (written with triggers disabled)"
        elif last[1] == "memory.delete":
            problem = "memory exists but its latest ledger event is a delete"
        else:
            if m["erased_at"] is None:
                # the row's hash was computed with the version of its latest event
                row = dict(m, embedding=_vector(m["embedding"]))
                if bytes(m["content_hash"]) != hashing.content_hash_of(last[4], row):
                    problem = "content does not match content_hash (row edited outside the chain)"
            if problem is None and last[2] is not None and bytes(m["content_hash"]) != bytes(last[2]):
                problem = "content_hash differs from the latest ledger event"
            if problem is None and m["revision"] != last[3]:
                problem = "revision differs from the latest ledger event"
        if problem is not None:
            key = (last[0] if last else None, m["id"])
            if live_problem is None or _before(key, live_problem[:2]):
                live_problem = (key[0], key[1], problem)

    def report(bad_seq=None, bad_id=None, problem=None) -> TenantVerification:
        return TenantVerification(
            tenant=tenant, entries=entries, rows_checked=rows_checked, head_seq=head_seq,
            head_hash=head_hash.hex() if head_hash is not None else None,
            bad_seq=bad_seq, bad_memory_id=bad_id, problem=problem)

    if fault is not None:
        return report(*fault)
    # 2. the head row must point at the last entry
    if (head_seq or 0) != (head[0] if head else 0) or (
            head_seq is not None and head_hash != by_seq.get(head_seq)):
        return report((head_seq or 0) + 1, None,
                      "chain head does not match the last ledger entry (entries removed or appended outside the chain)")
    # 3. every live row against its own hash and its latest ledger event
    if live_problem is not None:
        return report(*live_problem)
    # 4. every memory the ledger says is live must exist
    missing = sorted((seq, mid) for mid, (seq, event, *_) in last_memory_event.items() if event != "memory.delete")
    if missing:
        seq, mid = missing[0]
        return report(seq, mid, "memory is missing but its latest ledger event is not a delete (row deleted outside the chain)")
    return report()


def _before(a: tuple[int | None, str], b: tuple[int | None, str]) -> bool:
    """SQL's `order by last.seq nulls first, m.id`."""
    return (a[0] is not None, a[0] or 0, a[1]) < (b[0] is not None, b[0] or 0, b[1])


def verify_independently(conn: psycopg.Connection, tenant: str | None = None) -> VerifyReport:
    """Recompute every tenant's chain and live-row hashes in Python (one tenant with a tenant
    context on an app connection, or every tenant on an administrative connection)."""
    started = time.perf_counter()
    with db.translate_errors(), conn.transaction():
        conn.execute(queries.query("repeatable_read"))  # one snapshot for every read
        if tenant:
            db.set_context(conn, Context(tenant=tenant))
        tenants = [tenant] if tenant else [r[0] for r in conn.execute(queries.query("ledger_tenants")).fetchall()]
        results = [_verify_tenant(conn, t) for t in tenants]
    return VerifyReport(tenants=results, seconds=time.perf_counter() - started)


__all__ = ["verify_independently"]
