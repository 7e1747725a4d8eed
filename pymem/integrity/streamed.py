"""Verification streamed out of the database and hashed in Python, on several connections.

Postgres's sha256 is generic C on many builds (the embedded server's among them), and with the
re-hash of every live row it is most of what verification costs; Python's hashlib uses the CPU's
SHA instructions. So the database streams the bytes each hash covers and Python hashes them,
while other connections stream the next ranges: a tenant's ledger in ranges of seq, its rows in
ranges of id, every connection reading the same snapshot (one exports it, the others import
it). The checks, their order and the fault each tenant reports are exactly pymem.verify_chain's
(the tests compare them case by case), in four steps per tenant:

1. the chain: contiguous seq, prev_hash linkage, a known hash_version, chain_hash recomputed
   (the first fault by seq);
2. the head row points at the last entry;
3. every row against its own hash (with the version of its latest memory event) and that
   event (the first fault by the event's seq, rows without one first, then by id);
4. every memory the ledger says is live exists.

Two encoders feed it. `DatabaseBytes` takes the bytes from the database's own hash functions
(pymem._event_bytes_v1/_v2, pymem._content_bytes_v2): what `pymem verify` runs. `PythonBytes`
(pymem.integrity.independent) computes them in Python from the raw columns and calls no pymem
function, so a function replaced inside the database cannot vouch for itself.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import queue
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql

from .. import db, queries, telemetry
from ..context import Context
from ..errors import AccessDenied
from . import hashing
from .reports import TenantVerification, VerifyReport

#: Ledger entries and rows per range: a tenant bigger than this is verified on several connections.
RANGE = 20_000
#: Rows fetched per round trip.
FETCH = 2_000
#: Tenants in flight at once (each holds its ledger's latest event per memory until its rows are checked).
IN_FLIGHT = 4

NO_EVENT = "memory has no ledger event (written with triggers disabled)"
DELETED = "memory exists but its latest ledger event is a delete"
CONTENT = "content does not match content_hash (row edited outside the chain)"
LEDGER_HASH = "content_hash differs from the latest ledger event"
REVISION = "revision differs from the latest ledger event"
HEAD = "chain head does not match the last ledger entry (entries removed or appended outside the chain)"
MISSING = "memory is missing but its latest ledger event is not a delete (row deleted outside the chain)"
SEAL = "entries of an erased actor do not match the seal of their erasure"


@dataclass(frozen=True)
class Entry:
    """What the checks need of a ledger entry; `chain` is its recomputed chain_hash (None for
    an unknown hash version)."""

    seq: int
    event: str
    memory_id: str | None
    revision: int | None
    content_hash: bytes | None
    hash_version: int
    prev_hash: bytes
    chain_hash: bytes
    chain: bytes | None
    #: An erased person's pre-0013 entry (its id is gone, so `chain` cannot be recomputed): its
    #: pseudonym's token and its leaf, checked against the seal of the erasure (step 1b).
    sealed: tuple[str, bytes] | None = None


def entry(seq: int, event: str, memory_id: str | None, revision: int | None, content_hash: bytes | None,
          version: int, prev: bytes, chain_hash: bytes, data: bytes | None, token: str | None,
          stays: bytes | None) -> Entry:
    """An Entry from an entry's fields and the bytes its hash covers (`data`); for a sealed entry
    (`token`), its bytes as they stay (`stays`) make its leaf, and its chain_hash stands."""
    if token is not None and stays is not None:
        return Entry(seq, event, memory_id, revision, content_hash, version, prev, chain_hash, chain_hash,
                     (token, hashing.leaf(prev, stays)))
    return Entry(seq, event, memory_id, revision, content_hash, version, prev, chain_hash,
                 None if data is None else hashlib.sha256(prev + data).digest())


@dataclass(frozen=True)
class Row:
    """What the checks need of a memory row; `hashes(version)` is whether its stored hash matches
    its content under that version (None: the database must say, see DatabaseBytes)."""

    id: str
    revision: int
    erased: bool
    content_hash: bytes
    hashes: Callable[[int], bool | None]


class DatabaseBytes:
    """Bytes from the database's hash functions, hashed here."""

    name = "database"

    def entries(self, conn: psycopg.Connection, tenant: str, low: int | None, high: int | None) -> Iterator[Entry]:
        for seq, event, mid, rev, content_hash, version, prev, chain, data, token, stays in _stream(
                conn, queries.query("ledger_bytes"), (tenant, low, low, high, high)):
            yield entry(seq, event, mid, rev, content_hash, version, prev, chain, data, token, stays)

    def rows(self, conn: psycopg.Connection, tenant: str, low: str | None, high: str | None) -> Iterator[Row]:
        return self._rows(_stream(conn, queries.query("memory_bytes"), (tenant, low, low, high, high)))

    def rows_of(self, conn: psycopg.Connection, tenant: str, ids: list[str]) -> Iterator[Row]:
        """The rows with these ids (verification since a checkpoint: pymem.integrity.incremental)."""
        return self._rows(_stream(conn, queries.query("memory_bytes_of"), (tenant, ids)))

    @staticmethod
    def _rows(found: Iterator[tuple[Any, ...]]) -> Iterator[Row]:
        for mid, rev, erased, content_hash, data in found:
            ok = None if data is None else hashlib.sha256(data).digest() == content_hash
            yield Row(mid, rev, erased, content_hash, _v2_only(ok))

    def failing_v1(self, conn: psycopg.Connection, tenant: str, ids: list[str]) -> set[str]:
        """Hash version 1 is checked by the database (rows the re-hash migration left as they were)."""
        return {r[0] for r in conn.execute(queries.query("memories_failing_v1"), (tenant, ids), prepare=False)}


def _v2_only(ok: bool | None) -> Callable[[int], bool | None]:
    """A row's `hashes` when only hash version 2 was re-computed here (`ok`); other versions: None."""
    return lambda version: ok if version == 2 else None


def _stream(conn: psycopg.Connection, text: str, params: tuple[Any, ...]) -> Iterator[tuple[Any, ...]]:
    """Rows of a query through a server-side cursor (binary), FETCH at a time."""
    with conn.cursor(name="pymem_verify", binary=True) as cur:
        cur.itersize = FETCH
        cur.execute(text, params)
        while rows := cur.fetchmany(FETCH):
            yield from rows


def _first_fault(a: tuple[Any, ...] | None, b: tuple[Any, ...] | None) -> tuple[Any, ...] | None:
    """The earlier of two faults, each (order key, ...) or None."""
    return a if b is None or (a is not None and a[0] <= b[0]) else b


@dataclass
class _Part:
    """What one range found: filled by a worker thread, merged by the main thread."""

    count: int = 0
    fault: tuple[Any, ...] | None = None
    last_event: dict[str, tuple[int, str, bytes | None, int | None, int]] = field(default_factory=dict)
    last_entry: Entry | None = None
    deferred: list[tuple[Row, tuple[Any, ...]]] = field(default_factory=list)
    sealed: list[tuple[int, str, bytes]] = field(default_factory=list)

    def row_found(self, last: tuple[Any, ...] | None, memory_id: str, problem: str) -> None:
        seq = last[0] if last else None
        # pymem.verify_chain orders row faults by the latest event's seq, rows without one first, then id
        self.fault = _first_fault(self.fault, ((seq is not None, seq or 0, memory_id), seq, memory_id, problem))


@dataclass
class _Tenant:
    """One tenant's verification, assembled from its ranges."""

    name: str
    ledger_ranges: list[tuple[int | None, int | None]]
    parts: list[tuple[Any, _Part]] = field(default_factory=list)
    entries: int = 0
    head_seq: int | None = None
    last_chain: bytes | None = None  # chain_hash of the entry at head_seq
    chain_fault: tuple[Any, ...] | None = None  # (seq for ordering, bad seq, memory id, problem)
    last_event: dict[str, tuple[int, str, bytes | None, int | None, int]] = field(default_factory=dict)
    rows_checked: int = 0
    row_fault: tuple[Any, ...] | None = None  # (order key, last seq, memory id, problem)
    deferred: list[tuple[Row, tuple[Any, ...]]] = field(default_factory=list)
    pending: int = 0
    sealed: list[tuple[int, str, bytes]] = field(default_factory=list)
    seal_fault: tuple[Any, ...] | None = None  # (seq for ordering, bad seq, None, problem)

    def merge_ledger(self) -> None:
        """The ledger ranges, in seq order: later entries of a memory win."""
        for _, part in sorted(self.parts, key=lambda p: -1 if p[0] is None else p[0]):
            self.entries += part.count
            self.sealed += part.sealed
            self.chain_fault = _first_fault(self.chain_fault, part.fault)
            self.last_event.update(part.last_event)
            if part.last_entry is not None and (self.head_seq is None or part.last_entry.seq > self.head_seq):
                self.head_seq, self.last_chain = part.last_entry.seq, part.last_entry.chain_hash
        self.parts = []

    def merge_rows(self) -> None:
        for _, part in self.parts:
            self.rows_checked += part.count
            self.row_fault = _first_fault(self.row_fault, part.fault)
            self.deferred += part.deferred
        self.parts = []


def _check_entries(name: str, entries: Iterator[Entry], low: int | None) -> _Part:
    """Step 1 over one range of the chain. A range after the first reads one entry early: its
    chain_hash is what the range's first prev_hash must be (and if it is missing, that is a gap)."""
    part = _Part()
    expected_seq, expected_prev = (1, hashing.genesis_hash(name)) if low is None else (low - 1, None)
    overlap = low is not None
    for e in entries:
        if overlap and low is not None:
            overlap = False
            if e.seq == low - 1:
                expected_seq, expected_prev = low, e.chain_hash
                continue
        part.count += 1
        part.last_entry = e
        if e.memory_id is not None and e.event.startswith("memory."):
            part.last_event[e.memory_id] = (e.seq, e.event, e.content_hash, e.revision, e.hash_version)
        if e.sealed is not None:
            part.sealed.append((e.seq, *e.sealed))
        if part.fault is not None:
            continue
        if e.seq != expected_seq:
            part.fault = (e.seq, expected_seq, None, f"seq gap: expected {expected_seq}, found {e.seq}")
        elif e.prev_hash != expected_prev:
            part.fault = (e.seq, e.seq, e.memory_id, "prev_hash does not match the previous entry's chain_hash")
        elif e.hash_version not in hashing.VERSIONS:
            part.fault = (e.seq, e.seq, e.memory_id, f"unknown hash_version {e.hash_version}")
        elif e.chain_hash != e.chain:
            part.fault = (e.seq, e.seq, e.memory_id, "chain_hash does not match the entry's fields")
        expected_seq += 1
        expected_prev = e.chain_hash
    return part


def _check_rows(t: _Tenant, rows: Iterator[Row]) -> _Part:
    """Step 3 over one range of rows. A row whose latest event is hash version 1 waits for the
    database (DatabaseBytes.failing_v1). Each row takes its latest event out of the tenant's
    map (a dict pop, safe between threads): what is left afterwards was never found (step 4)."""
    part = _Part()
    for r in rows:
        part.count += 1
        last = t.last_event.pop(r.id, None)
        if last is None:
            part.row_found(None, r.id, NO_EVENT)
        elif last[1] == "memory.delete":
            part.row_found(last, r.id, DELETED)
        else:
            ok = True if r.erased else r.hashes(last[4])
            if ok is None:
                part.deferred.append((r, last))
            elif not ok:
                part.row_found(last, r.id, CONTENT)
            else:
                _check_against_event(part, r, last)
    return part


def _check_against_event(part: _Part, r: Row, last: tuple[Any, ...]) -> None:
    if last[2] is not None and r.content_hash != last[2]:
        part.row_found(last, r.id, LEDGER_HASH)
    elif r.revision != last[3]:
        part.row_found(last, r.id, REVISION)


def _report(t: _Tenant, head: tuple[int, bytes] | None) -> TenantVerification:
    head_hash = bytes(head[1]) if head else None

    def report(bad_seq: int | None = None, bad_id: str | None = None, problem: str | None = None) -> TenantVerification:
        return TenantVerification(tenant=t.name, entries=t.entries, rows_checked=t.rows_checked,
                                  head_seq=t.head_seq, head_hash=head_hash.hex() if head_hash is not None else None,
                                  bad_seq=bad_seq, bad_memory_id=bad_id, problem=problem)

    if t.chain_fault is not None:
        return report(*t.chain_fault[1:])
    if t.seal_fault is not None:
        return report(*t.seal_fault[1:])
    if (t.head_seq or 0) != (head[0] if head else 0) or (t.head_seq is not None and head_hash != t.last_chain):
        return report((t.head_seq or 0) + 1, None, HEAD)
    if t.row_fault is not None:
        return report(*t.row_fault[1:])
    missing = sorted((last[0], mid) for mid, last in t.last_event.items() if last[1] != "memory.delete")
    if missing:
        return report(missing[0][0], missing[0][1], MISSING)
    return report()


def _ranges(count: int) -> list[tuple[int | None, int | None]]:
    """Seq ranges [low, high] covering 1..count in RANGE-sized parts; the first is open below and
    the last open above, so an entry outside the expected numbers is still read."""
    parts = max(1, -(-count // RANGE))
    bounds = [1 + i * count // parts for i in range(parts)]
    return [(None if i == 0 else bounds[i], None if i == parts - 1 else bounds[i + 1] - 1)
            for i in range(parts)]


class _Connections:
    """`jobs` connections in one transaction each, all reading the snapshot the first exported."""

    def __init__(self, stack: ExitStack, connect: Callable[[], Any], jobs: int, ctx: Context | None):
        self.free: queue.Queue[psycopg.Connection] = queue.Queue()
        first: psycopg.Connection | None = None
        snapshot = None
        for _ in range(max(1, jobs)):
            conn = stack.enter_context(connect())
            stack.enter_context(conn.transaction())
            conn.execute(queries.query("repeatable_read"))
            if first is None:
                first = conn
                if jobs > 1:
                    snapshot = conn.execute(queries.query("export_snapshot")).fetchone()[0]
            else:
                conn.execute(queries.template("import_snapshot", snapshot=sql.Literal(snapshot)))
            if ctx is not None:
                db.set_context(conn, ctx)
            self.free.put(conn)
        assert first is not None  # the loop runs at least once
        self.first: psycopg.Connection = first

    def run(self, job: Callable[[psycopg.Connection], Any]) -> Any:
        conn = self.free.get()
        try:
            return job(conn)
        finally:
            self.free.put(conn)


def verify_streamed(connect: Callable[[], Any], tenant: str | None, encoder: Any, *, jobs: int = 2) -> VerifyReport:
    """Verify one tenant (`connect` gives app connections, whose context is set to it) or every
    tenant (`connect` gives administrative connections) on `jobs` connections."""
    started = time.perf_counter()
    ctx = Context(tenant=tenant) if tenant else None
    with ExitStack() as stack:
        stack.enter_context(db.translate_errors())
        conns = _Connections(stack, connect, jobs, ctx)
        first = conns.first
        if ctx is not None and not db.one(first.execute(queries.query("context_is_whole_tenant")).fetchone())[0]:
            raise AccessDenied("verifying a tenant's chain needs a whole-tenant context (no scope, no read allow-list)")
        sizes = first.execute(queries.query("verify_sizes"), (tenant, tenant)).fetchall()
        heads = {t: None if seq is None else (seq, chain) for t, seq, chain, _ in sizes}
        row_ranges = {t: _id_ranges(first, t, rows) for t, _, _, rows in sizes}
        todo = [_Tenant(t, _ranges(seq or 0)) for t, seq, _, _ in sizes]
        results: dict[str, TenantVerification] = {}
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            running: dict[Future[Any], tuple[str, _Tenant, Any]] = {}

            def submit(kind: str, t: _Tenant, key: Any, job: Callable[[psycopg.Connection], Any]) -> None:
                t.pending += 1
                running[pool.submit(conns.run, job)] = (kind, t, key)

            def start(t: _Tenant) -> None:
                for low, high in t.ledger_ranges:
                    # a range after the first reads from the entry before it (see _check_entries)
                    def ledger(c: psycopg.Connection, t: _Tenant = t, low: int | None = low,
                               high: int | None = high) -> _Part:
                        return _check_entries(t.name,
                                              encoder.entries(c, t.name, None if low is None else low - 1, high),
                                              low)
                    submit("ledger", t, low, ledger)

            def check_rows(t: _Tenant) -> None:
                for low, high in row_ranges[t.name]:
                    def rows(c: psycopg.Connection, t: _Tenant = t, low: str | None = low,
                             high: str | None = high) -> _Part:
                        return _check_rows(t, encoder.rows(c, t.name, low, high))
                    submit("rows", t, low, rows)

            queued = list(todo)
            while queued or running:
                while queued and len({t.name for _, t, _ in running.values()}) < IN_FLIGHT:
                    start(queued.pop(0))
                done, _ = wait(list(running), return_when=FIRST_COMPLETED)
                for future in done:
                    kind, t, key = running.pop(future)
                    t.parts.append((key, future.result()))
                    t.pending -= 1
                    if t.pending:
                        continue
                    if kind == "ledger":
                        t.merge_ledger()
                        if t.sealed and t.chain_fault is None:
                            t.seal_fault = conns.run(functools.partial(_check_seals, t=t))
                        check_rows(t)
                        continue
                    t.merge_rows()
                    if t.deferred:
                        deferred, t.deferred = t.deferred, []

                        def v1(c: psycopg.Connection, t: _Tenant = t,
                               deferred: list[tuple[Row, tuple[Any, ...]]] = deferred) -> _Part:
                            return _check_v1(t, encoder, c, deferred)
                        submit("rows", t, None, v1)
                    else:
                        results[t.name] = _report(t, heads[t.name])
    report = VerifyReport(tenants=[results[t] for t, _, _, _ in sizes], seconds=time.perf_counter() - started)
    telemetry.count("pymem_verify_runs_total", mode="full", verifier=encoder.name,
                    result="clean" if report.clean else "tampered")
    return report


def _check_seals(conn: psycopg.Connection, *, t: _Tenant) -> tuple[Any, ...] | None:
    """Step 1b: an erased person's pre-0013 entries, token by token, against the seal their
    erasure (an actor.erased event, itself checked in step 1) chained; the first failing token's
    first entry, as pymem.verify_chain names it."""
    seals = {token: (count, digest) for token, count, digest in
             conn.execute(queries.query("erasure_seals"), (t.name,), prepare=False)}
    groups: dict[str, list[tuple[int, bytes]]] = {}
    for seq, token, leaf in t.sealed:
        groups.setdefault(token, []).append((seq, leaf))
    bad = [min(s for s, _ in entries) for token, entries in groups.items()
           if seals.get(token) != (len(entries), hashing.seal(entries).hex())]
    return (min(bad), min(bad), None, SEAL) if bad else None


def _check_v1(t: _Tenant, encoder: Any, conn: psycopg.Connection, deferred: list[tuple[Row, tuple[Any, ...]]]) -> _Part:
    part = _Part()
    failing = encoder.failing_v1(conn, t.name, [r.id for r, _ in deferred])
    for r, last in deferred:
        if r.id in failing:
            part.row_found(last, r.id, CONTENT)
        else:
            _check_against_event(part, r, last)
    return part


def _id_ranges(conn: psycopg.Connection, tenant: str, rows: int) -> list[tuple[str | None, str | None]]:
    """Id ranges [low, high) of about RANGE rows each; the first open below, the last open above."""
    parts = max(1, -(-rows // RANGE))
    cuts: list[str] = []
    for i in range(1, parts):
        row = conn.execute(queries.query("memory_id_at"), (tenant, i * rows // parts)).fetchone()
        if row is not None and (not cuts or row[0] > cuts[-1]):
            cuts.append(row[0])
    bounds: Sequence[str | None] = [None, *cuts, None]
    return list(itertools.pairwise(bounds))


__all__ = ["DatabaseBytes", "Entry", "Row", "entry", "verify_streamed", "RANGE"]
