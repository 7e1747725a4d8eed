"""An independent verifier: every hash recomputed in Python from the raw rows.

It reads pymem.ledger, pymem.chain_heads and pymem.memories with plain SELECTs and never calls a
pymem function, so a verification function replaced or altered inside the database cannot vouch
for itself. It makes pymem.verify_chain's checks, in the same order, and names the first fault of
each tenant the same way, so the two can be compared case by case. The walk over ranges, the
snapshot and the order of faults are pymem.integrity.streamed's; this module only encodes:
pymem.integrity.hashing turns each raw row into the bytes its hash covers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.rows import dict_row

from .. import queries
from . import hashing
from .reports import VerifyReport
from .streamed import FETCH, Entry, Row, entry, verify_streamed


def _stream(conn: psycopg.Connection, text: str, params: tuple[Any, ...]) -> Iterator[dict[str, Any]]:
    with conn.cursor(name="pymem_verify_raw", row_factory=dict_row) as cur:
        cur.itersize = FETCH
        cur.execute(text, params)
        while rows := cur.fetchmany(FETCH):
            yield from rows


def _vector(text: str | None) -> list[float] | None:
    return None if text is None else [float(x) for x in text.strip("[]").split(",")]


def _rehashes(row: dict[str, Any], stored: bytes) -> Callable[[int], bool | None]:
    """A row's `hashes`: its content re-hashed here under a version, compared with the stored hash."""
    return lambda version: hashing.content_hash_of(version, row) == stored


class PythonBytes:
    """Bytes computed in Python from the raw columns (pymem.integrity.hashing)."""

    name = "independent"

    def entries(self, conn: psycopg.Connection, tenant: str, low: int | None, high: int | None) -> Iterator[Entry]:
        for e in _stream(conn, queries.query("raw_ledger"), (tenant, low, low, high, high)):
            prev = bytes(e["prev_hash"])
            escrowed = e["actor"] is not None and e["actor"].startswith("e:")
            token = e["actor"][2:] if escrowed and e["escrowed_actor"] is None else None
            # a pre-0013 entry hashes its actor's id (escrowed); an erased person's, as it stays
            hashed = dict(e, actor=e["escrowed_actor"]) if escrowed else e
            data = hashing.event_bytes_of(hashed)
            yield entry(e["seq"], e["event"], e["memory_id"], e["revision"],
                        None if e["content_hash"] is None else bytes(e["content_hash"]), e["hash_version"], prev,
                        bytes(e["chain_hash"]), data, token, hashing.event_bytes_of(e) if token else None)

    def rows(self, conn: psycopg.Connection, tenant: str, low: str | None, high: str | None) -> Iterator[Row]:
        return self._rows(_stream(conn, queries.query("raw_memories"), (tenant, low, low, high, high)))

    def rows_of(self, conn: psycopg.Connection, tenant: str, ids: list[str]) -> Iterator[Row]:
        """The rows with these ids (verification since a checkpoint: pymem.integrity.incremental)."""
        return self._rows(_stream(conn, queries.query("raw_memories_of"), (tenant, ids)))

    @staticmethod
    def _rows(found: Iterator[dict[str, Any]]) -> Iterator[Row]:
        for m in found:
            stored = bytes(m["content_hash"])
            row = dict(m, embedding=_vector(m["embedding"]))
            yield Row(m["id"], m["revision"], m["erased_at"] is not None, stored, _rehashes(row, stored))


def verify_independently(conn: psycopg.Connection, tenant: str | None = None) -> VerifyReport:
    """Recompute every tenant's chain and live-row hashes in Python (one tenant with a tenant
    context on an app connection, or every tenant on an administrative connection), on `conn`."""

    @contextmanager
    def connect() -> Iterator[psycopg.Connection]:
        yield conn

    return verify_streamed(connect, tenant, PythonBytes(), jobs=1)


__all__ = ["verify_independently", "PythonBytes"]
