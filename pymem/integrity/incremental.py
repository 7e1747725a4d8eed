"""Verification since the newest signed checkpoint: work in proportion to what changed.

A checkpoint (pymem.integrity.checkpoints) is a tenant's chain head at seq S, signed outside the
database. If its signature holds and the ledger's entry at S still carries its hash, everything up
to S is what was signed, as far as the chain can say: rewriting any earlier entry would change the
hash at S. So this verification starts there, and per tenant:

1. takes the tenant's newest checkpoint in the sink (the last one appended); one signed by
   another key, or whose signature does not verify, is refused and nothing is verified for that
   tenant (a finding, never a silent fall-back to an older one);
2. checks the entry at S carries the checkpointed hash (else the chain was truncated or rewritten);
3. walks the chain from S to the head exactly as the full verification does (contiguous seq,
   prev_hash links, every chain_hash recomputed) and checks the head row points at its end;
4. re-hashes the rows of the memories with a ledger event after S, fetched by primary key, against
   their own hash and their latest event, and checks that every one the ledger says is live exists.

A tenant with no checkpoint is verified in full (from its first entry, every row): everything it
holds is new since no checkpoint.

What it does **not** prove, by design: anything about rows whose memory has no event after S. A row
edited, inserted or deleted outside the chain (triggers disabled, a superuser's UPDATE) is caught by
the full verification, which reads every row, and not by this one unless its memory also had an
event since. Nor does it re-walk the entries before S: their links were verified when the
checkpoint was taken (`pymem anchor` refuses to sign a chain that no longer extends the previous
checkpoint, and a full verification re-walks them). Run the full one on a schedule too.

The encoders are pymem.integrity.streamed's `DatabaseBytes` (the database's own hash functions,
hashed in Python) and pymem.integrity.independent's `PythonBytes` (every hash from the raw rows,
no pymem function called); the checks and their messages are streamed's, so a fault found here
reads the same as the full verification's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from typing import Any

import psycopg

from .. import db, queries, telemetry
from ..context import Context
from ..errors import AccessDenied
from .checkpoints import Checkpoint
from .reports import TenantVerification, VerifyReport
from .streamed import FETCH, _check_entries, _check_rows, _check_v1, _report, _Tenant

__all__ = ["IncrementalReport", "newest_checkpoints", "verify_since", "REFUSED", "TRUNCATED", "REWRITTEN", "GONE"]

REFUSED = "the newest checkpoint {why}: refused, nothing verified since it"
TRUNCATED = "chain truncated: the checkpointed entry at seq {seq} is gone (the chain ends at seq {last})"
REWRITTEN = "chain rewritten or forked: the entry at seq {seq} no longer carries the checkpointed hash"
GONE = "the checkpointed tenant has no ledger any more (chain removed)"


@dataclass(frozen=True)
class IncrementalReport(VerifyReport):
    """A `VerifyReport` of the entries and rows verified since each tenant's newest checkpoint:
    `since` maps each tenant to the checkpoint's seq it started from (None: no checkpoint, verified
    in full)."""

    since: dict[str, int | None] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "since_checkpoint": dict(self.since)}


def newest_checkpoints(checkpoints: Iterable[Checkpoint], tenant: str | None = None) -> dict[str, Checkpoint]:
    """Each tenant's newest checkpoint: the last one appended to the sink (sinks append in order)."""
    newest: dict[str, Checkpoint] = {}
    for cp in checkpoints:
        if tenant is None or cp.tenant == tenant:
            newest[cp.tenant] = cp
    return newest


def _refusal(cp: Checkpoint, trusted_key: str) -> str | None:
    if cp.public_key != trusted_key:
        return REFUSED.format(why="is signed by an unknown key")
    if not cp.signature_ok():
        return REFUSED.format(why="has a signature that does not verify")
    return None


def _since(encoder: Any, conn: psycopg.Connection, name: str, cp: Checkpoint,
           head: tuple[int, bytes] | None) -> TenantVerification:
    """Steps 2-4 for one tenant from its (validly signed) checkpoint `cp`."""
    t = _Tenant(name, [])

    def problem(message: str, memory_id: str | None = None) -> TenantVerification:
        return TenantVerification(tenant=name, entries=0, rows_checked=0, head_seq=head[0] if head else None,
                                  head_hash=bytes(head[1]).hex() if head else None, bad_seq=cp.seq,
                                  bad_memory_id=memory_id, problem=message)

    at = conn.execute(queries.query("ledger_entry_hash"), (name, cp.seq), prepare=False).fetchone()
    if at is None:
        last = db.one(conn.execute(queries.query("ledger_last_seq"), (name,), prepare=False).fetchone())[0]
        return problem(TRUNCATED.format(seq=cp.seq, last=last or 0))
    if bytes(at[0]).hex() != cp.chain_hash:
        return problem(REWRITTEN.format(seq=cp.seq))
    # the walk reads the entry at S first (_check_entries: a range starting at S + 1 reads one early)
    t.head_seq, t.last_chain = cp.seq, bytes(at[0])
    t.parts = [(cp.seq + 1, _check_entries(name, encoder.entries(conn, name, cp.seq, None), cp.seq + 1))]
    t.merge_ledger()
    _rows(encoder, conn, t, list(t.last_event))
    return _report(t, head)


def _full(encoder: Any, conn: psycopg.Connection, name: str, head: tuple[int, bytes] | None) -> TenantVerification:
    """A tenant without a checkpoint: its whole chain and every row, on this one connection."""
    t = _Tenant(name, [])
    t.parts = [(None, _check_entries(name, encoder.entries(conn, name, None, None), None))]
    t.merge_ledger()
    t.parts = [(None, _check_rows(t, encoder.rows(conn, name, None, None)))]
    _finish_rows(encoder, conn, t)
    return _report(t, head)


def _rows(encoder: Any, conn: psycopg.Connection, t: _Tenant, ids: list[str]) -> None:
    """Step 4: the rows of `ids`, FETCH ids per query, by primary key."""
    for start in range(0, len(ids), FETCH):
        t.parts.append((start, _check_rows(t, encoder.rows_of(conn, t.name, ids[start:start + FETCH]))))
    _finish_rows(encoder, conn, t)


def _finish_rows(encoder: Any, conn: psycopg.Connection, t: _Tenant) -> None:
    t.merge_rows()
    if t.deferred:  # rows whose latest event is hash version 1: the database checks them
        deferred, t.deferred = t.deferred, []
        t.parts = [(None, _check_v1(t, encoder, conn, deferred))]
        t.merge_rows()


def verify_since(connect: Callable[[], AbstractContextManager[psycopg.Connection]], tenant: str | None,
                 encoder: Any, checkpoints: Iterable[Checkpoint], *, trusted_key: str) -> IncrementalReport:
    """Verify one tenant (`connect` gives an app connection, whose context is set to it) or every
    tenant (an administrative connection) from each one's newest checkpoint in `checkpoints`, which
    must be signed with `trusted_key` (hex). One connection, one snapshot (repeatable read)."""
    started = time.perf_counter()
    newest = newest_checkpoints(checkpoints, tenant)
    results: list[TenantVerification] = []
    since: dict[str, int | None] = {}
    with ExitStack() as stack:
        stack.enter_context(db.translate_errors())
        conn = stack.enter_context(connect())
        stack.enter_context(conn.transaction())
        conn.execute(queries.query("repeatable_read"))
        if tenant:
            db.set_context(conn, Context(tenant=tenant))
            if not db.one(conn.execute(queries.query("context_is_whole_tenant")).fetchone())[0]:
                raise AccessDenied("verifying a tenant's chain needs a whole-tenant context (no scope, no read "
                                   "allow-list)")
        sizes = conn.execute(queries.query("verify_heads_skip"), (tenant,) * 8).fetchall()
        present = set()
        for name, seq, chain, _ in sizes:
            present.add(name)
            head = None if seq is None else (seq, bytes(chain))
            cp = newest.get(name)
            since[name] = None if cp is None else cp.seq
            refused = None if cp is None else _refusal(cp, trusted_key)
            if cp is None:
                results.append(_full(encoder, conn, name, head))
            elif refused is not None:
                results.append(TenantVerification(tenant=name, entries=0, rows_checked=0, head_seq=seq,
                                                  head_hash=bytes(chain).hex() if chain is not None else None,
                                                  bad_seq=cp.seq, problem=refused))
            else:
                results.append(_since(encoder, conn, name, cp, head))
        for name, cp in sorted(newest.items()):
            if name not in present:  # signed once, now without a single entry or head row
                since[name] = cp.seq
                refused = _refusal(cp, trusted_key)
                results.append(TenantVerification(tenant=name, entries=0, rows_checked=0, head_seq=None,
                                                  head_hash=None, bad_seq=cp.seq, problem=refused or GONE))
    report = IncrementalReport(tenants=results, seconds=time.perf_counter() - started, since=since)
    telemetry.count("pymem_verify_runs_total", mode="since_checkpoint", verifier=encoder.name,
                    result="clean" if report.clean else "tampered")
    return report
