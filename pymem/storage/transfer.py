"""Import and export of chunk records as JSON Lines (one chunk object per line).

Import is resumable: every batch is an upsert_many whose idempotency key is derived from the
file's content digest and the batch's position, so re-running an interrupted import replays the
batches that committed (no write) and writes the rest; no record is stored twice. The whole
file is checked before the first write, so a malformed line stops the import with its line number
and nothing written.

Export writes each visible chunk verbatim, in primary-key order, from one snapshot: its output
imports back to the same records.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from psycopg.rows import dict_row

from .. import queries
from ..errors import InvalidArguments
from ..vocabulary import canonical_json
from .chunks import chunk_from_row, parse_chunk

if TYPE_CHECKING:  # pragma: no cover
    from .memories import Memories

DEFAULT_BATCH = 500
IMPORT_CLASS = "long"  # keys live 30 days: an interrupted import can be resumed that long


@dataclass
class ImportReport:
    """What `import_file` did: the records read, the batches written and those replayed (already imported, by
    idempotency key)."""

    records: int = 0
    batches: int = 0
    written_batches: int = 0
    replayed_batches: int = 0
    digest: str = ""
    batch_size: int = DEFAULT_BATCH
    screened: bool = False  # whether a screen judged the records (import_file's `screen`)
    quarantined: int = 0  # records the screen held instead of importing
    refused: int = 0  # records the screen refused

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"records": self.records, "batches": self.batches,
                               "written_batches": self.written_batches, "replayed_batches": self.replayed_batches,
                               "batch_size": self.batch_size, "digest": self.digest}
        if self.screened:
            out.update(quarantined=self.quarantined, refused=self.refused)
        return out


#: What a screen makes of one batch, on the batch's connection: the chunks to import, and how many
#: it held and refused (pymem.admission.importing judges chunks as the write gate does).
Screen = Callable[[list[dict[str, Any]], Any], tuple[list[dict[str, Any]], int, int]]


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, chunk) for every non-blank line; InvalidArguments names the bad line."""
    with path.open("r", encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InvalidArguments(f"{path.name}, line {number}: not valid JSON "
                                       f"({exc.msg} at column {exc.colno})") from None
            except UnicodeDecodeError:  # pragma: no cover - open() decodes before json does
                raise InvalidArguments(f"{path.name}, line {number}: not valid UTF-8") from None
            if not isinstance(value, dict):
                raise InvalidArguments(f"{path.name}, line {number}: expected a JSON object, "
                                       f"got {type(value).__name__}")
            yield number, value


def _batches(path: Path, batch_size: int) -> Iterator[list[tuple[int, dict[str, Any]]]]:
    batch: list[tuple[int, dict[str, Any]]] = []
    for item in _lines(path):
        batch.append(item)
        if len(batch) == batch_size:
            yield batch
            batch = []
    if batch:
        yield batch


def check_file(mem: Memories, path: Path, batch_size: int) -> tuple[str, int]:
    """Validate every line as a chunk (before anything is written); returns (digest, records)."""
    hasher = hashlib.sha256()
    try:
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                hasher.update(block)
    except OSError as exc:
        raise InvalidArguments(f"cannot read {path}: {exc.strerror}") from None
    store = mem.store
    count = 0
    try:
        for batch in _batches(path, batch_size):
            seen: dict[str, int] = {}
            for number, chunk in batch:
                where = f"{path.name}, line {number}"
                parsed = parse_chunk(chunk, dim=store.embedding_dim, default_scope=mem.ctx.scope,
                                     max_content_bytes=store.settings.max_content_bytes, where=where)
                if parsed.id in seen:
                    raise InvalidArguments(f"{where}: id repeats line {seen[parsed.id]} in the same batch")
                seen[parsed.id] = number
                count += 1
    except UnicodeDecodeError as exc:
        raise InvalidArguments(f"{path.name} is not valid UTF-8 (byte {exc.start})") from None
    return hasher.hexdigest(), count


def import_file(mem: Memories, path: str | Path, *, batch_size: int = DEFAULT_BATCH,
                on_batch: Callable[[int, int, bool], None] | None = None,
                checked: tuple[str, int] | None = None, screen: Screen | None = None) -> ImportReport:
    """Upsert every chunk of a JSONL file, `batch_size` per transaction, resumably.

    on_batch(index, records_in_batch, replayed) is called after each batch commits (progress
    bars; tests use it to interrupt an import). `checked` is check_file()'s result when the
    caller already ran it (to size a progress bar), so the file is not checked twice.
    `screen(chunks, conn)`, when given, decides each batch first, in the batch's transaction: only
    the chunks it returns are upserted (a record it holds or refuses is counted, not imported).
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= 10_000:
        raise InvalidArguments("batch_size must be an integer between 1 and 10000")
    path = Path(path)
    digest, total = checked if checked is not None else check_file(mem, path, batch_size)
    report = ImportReport(records=total, digest=digest, batch_size=batch_size, screened=screen is not None)
    for index, batch in enumerate(_batches(path, batch_size)):
        key = f"import:{digest}:{batch_size}:{index}"
        chunks = [chunk for _, chunk in batch]
        if screen is None:
            result = mem.upsert_many(chunks, idempotency_key=key, idempotency_class=IMPORT_CLASS)
        else:
            with mem.store.transaction(mem.ctx) as conn:
                chunks, held, refused = screen(chunks, conn)
                report.quarantined += held
                report.refused += refused
                result = (mem.upsert_many(chunks, idempotency_key=key, idempotency_class=IMPORT_CLASS, conn=conn)
                          if chunks else {"replayed": False})
        report.batches += 1
        if result["replayed"]:
            report.replayed_batches += 1
        else:
            report.written_batches += 1
        if on_batch is not None:
            on_batch(index, len(batch), result["replayed"])
    return report


def export_records(mem: Memories, out: IO[str], *, fetch_size: int = 1000) -> int:
    """Write every visible, non-erased chunk of the context as one JSON line; returns the count.

    One transaction (one snapshot), primary-key order, keys sorted: the same data exports to the
    same bytes.
    """
    count = 0
    with mem.store.transaction(mem.ctx) as conn, conn.cursor(name="pymem_export", row_factory=dict_row) as cur:
        cur.itersize = fetch_size
        cur.execute(queries.query("export_chunks"), (mem.ctx.tenant,))
        for row in cur:
            out.write(canonical_json(chunk_from_row(row)))
            out.write("\n")
            count += 1
    return count


__all__ = ["DEFAULT_BATCH", "ImportReport", "Screen", "import_file", "export_records", "check_file"]
