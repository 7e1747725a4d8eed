"""Signed checkpoints of each tenant's chain head, kept outside the database.

`anchor` records every tenant's head (seq, chain hash, time) as a checkpoint signed with the
installation's Ed25519 key and appends it to a sink outside the database: by default a file of
JSON lines; any object with `append` and `read` will do (object storage, a transparency log),
registered under the `pymem.checkpoint_sinks` entry-point group and named as `SCHEME:TARGET`.

`check_checkpoints` then proves the current chain still *extends* every checkpoint: the entry at
each checkpoint's seq exists and carries the checkpointed hash, and (with the chain's own links,
which verification walks) so does everything before it. Truncating the tail, rewinding the head,
rewriting history and recomputing every later hash, or forking a tenant's chain all break that,
whatever the database's own functions report. What a checkpoint cannot pin is what happened after
it: an event appended after the newest checkpoint is only as trustworthy as the database until the
next one, so anchor often.
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

import psycopg
from psycopg.rows import dict_row

from .. import db, queries
from ..context import Context
from ..errors import InvalidArguments
from .signing import SigningKey, verify_signature

FORMAT = "pymem.checkpoint.v1"
SINK_GROUP = "pymem.checkpoint_sinks"


@dataclass(frozen=True)
class Checkpoint:
    """One tenant's chain head at a moment, signed."""

    tenant: str
    seq: int
    chain_hash: str          # hex
    head_at: str             # the head entry's occurred_at (ISO 8601)
    taken_at: str            # when the head was read (the database's clock, ISO 8601)
    database: str
    public_key: str          # hex of the Ed25519 public key that signed it
    signature: str = ""      # base64 of the signature over `signed_bytes()`
    format: str = FORMAT

    def signed_bytes(self) -> bytes:
        body = {k: v for k, v in asdict(self).items() if k != "signature"}
        return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    def signature_ok(self) -> bool:
        try:
            raw = base64.b64decode(self.signature, validate=True)
        except ValueError:
            return False
        return verify_signature(self.public_key, raw, self.signed_bytes())

    def to_line(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, data: Any) -> Checkpoint:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} record")
        fields = {k: data[k] for k in ("tenant", "seq", "chain_hash", "head_at", "taken_at", "database",
                                       "public_key", "signature", "format")}
        if not isinstance(fields["seq"], int) or isinstance(fields["seq"], bool):
            raise ValueError("seq must be an integer")
        return cls(**fields)


class CheckpointSink(Protocol):
    """Where checkpoints live, outside the database."""

    def append(self, checkpoints: list[Checkpoint]) -> None: ...

    def read(self) -> Iterator[Checkpoint]: ...


class FileSink:
    """Checkpoints as JSON lines appended to a file (fsynced; created 0600)."""

    def __init__(self, path: str | Path):
        self.path = Path(path).expanduser()

    def append(self, checkpoints: list[Checkpoint]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            for cp in checkpoints:
                f.write(cp.to_line() + "\n")
            f.flush()
            os.fsync(f.fileno())

    def read(self) -> Iterator[Checkpoint]:
        if not self.path.exists():
            return
        with self.path.open(encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    yield Checkpoint.from_json(json.loads(line))
                except (ValueError, KeyError, TypeError) as exc:
                    raise InvalidArguments(f"{self.path}:{number} is not a checkpoint: {exc}") from None


def open_sink(target: str | Path) -> CheckpointSink:
    """A sink from its name: `SCHEME:TARGET` for a sink registered under the entry-point group
    `pymem.checkpoint_sinks` (called with TARGET), `file:PATH`, or a plain file path."""
    text = str(target)
    scheme, sep, rest = text.partition(":")
    if sep and scheme and scheme.isidentifier() and len(scheme) > 1:
        if scheme == "file":
            return FileSink(rest)
        from importlib.metadata import entry_points

        for ep in entry_points(group=SINK_GROUP):
            if ep.name == scheme:
                return cast("CheckpointSink", ep.load()(rest))
        raise InvalidArguments(f"no checkpoint sink named {scheme!r} (entry-point group {SINK_GROUP})")
    return FileSink(text)


@dataclass(frozen=True)
class CheckpointFinding:
    tenant: str
    seq: int
    problem: str


@dataclass(frozen=True)
class CheckpointReport:
    """How many recorded checkpoints were checked against the chain, and what was found wrong (none: `ok`)."""

    checked: int = 0
    findings: list[CheckpointFinding] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.findings

    def to_json(self) -> dict[str, Any]:
        return {"clean": self.clean, "checked": self.checked, "findings": [asdict(f) for f in self.findings]}


def _iso(value: _dt.datetime) -> str:
    return value.astimezone(_dt.UTC).isoformat()


def check_checkpoints(conn: psycopg.Connection, checkpoints: Iterable[Checkpoint], *, trusted_key: str,
                      tenant: str | None = None) -> CheckpointReport:
    """Does the current chain extend every checkpoint? Reads the ledger with plain SELECTs.

    `trusted_key` is the hex public key the checkpoints must be signed with; a checkpoint signed
    by another key, or whose signature does not verify, is a finding.
    """
    selected = [cp for cp in checkpoints if tenant is None or cp.tenant == tenant]
    findings: list[CheckpointFinding] = []
    with db.translate_errors(), conn.transaction():
        if tenant:
            db.set_context(conn, Context(tenant=tenant))
        for cp in selected:
            if cp.public_key != trusted_key:
                findings.append(CheckpointFinding(cp.tenant, cp.seq, "checkpoint signed by an unknown key"))
                continue
            if not cp.signature_ok():
                findings.append(CheckpointFinding(cp.tenant, cp.seq, "checkpoint signature does not verify"))
                continue
            row = conn.execute(queries.query("ledger_entry_hash"), (cp.tenant, cp.seq), prepare=False).fetchone()
            if row is None:
                last = db.one(conn.execute(queries.query("ledger_last_seq"), (cp.tenant,), prepare=False).fetchone())[0]
                findings.append(CheckpointFinding(
                    cp.tenant, cp.seq, f"chain truncated: the checkpoint at seq {cp.seq} (taken {cp.taken_at}) "
                                       f"is gone, the chain now ends at seq {last or 0}"))
            elif bytes(row[0]).hex() != cp.chain_hash:
                findings.append(CheckpointFinding(
                    cp.tenant, cp.seq, f"chain rewritten or forked: the entry at seq {cp.seq} no longer has "
                                       f"the hash checkpointed at {cp.taken_at}"))
    return CheckpointReport(checked=len(selected), findings=findings)


def anchor(conn: psycopg.Connection, sink: CheckpointSink, key: SigningKey, *,
           tenant: str | None = None) -> tuple[list[Checkpoint], CheckpointReport]:
    """Sign and append each tenant's current head; returns (new checkpoints, check of the old).

    Nothing is signed unless the chain still extends every earlier checkpoint in `sink` and each
    tenant's head row points at its last ledger entry: a rewritten chain never gets a fresh
    signature. `conn` is an administrative connection, or an app connection with `tenant`.
    """
    earlier = check_checkpoints(conn, sink.read(), trusted_key=key.public_hex, tenant=tenant)
    if not earlier.clean:
        return [], earlier
    with db.translate_errors(), conn.transaction():
        if tenant:
            db.set_context(conn, Context(tenant=tenant))
        with conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(queries.query("heads_to_anchor"), (tenant, tenant), prepare=False).fetchall()
    findings, out = [], []
    for r in rows:
        if r["last_seq"] is None or r["head_seq"] != r["last_seq"] or bytes(r["head_hash"]) != bytes(r["last_hash"]):
            findings.append(CheckpointFinding(r["tenant_id"], r["head_seq"],
                                              "chain head does not match the last ledger entry"))
            continue
        cp = Checkpoint(tenant=r["tenant_id"], seq=r["last_seq"], chain_hash=bytes(r["last_hash"]).hex(),
                        head_at=_iso(r["occurred_at"]), taken_at=_iso(r["taken_at"]), database=r["database"],
                        public_key=key.public_hex)
        out.append(Checkpoint(**dict(asdict(cp), signature=base64.b64encode(key.sign(cp.signed_bytes())).decode())))
    if findings:
        return [], CheckpointReport(checked=earlier.checked, findings=findings)
    if out:
        sink.append(out)
    return out, earlier


__all__ = ["Checkpoint", "CheckpointSink", "FileSink", "open_sink", "CheckpointFinding", "CheckpointReport",
           "check_checkpoints", "anchor", "FORMAT"]
