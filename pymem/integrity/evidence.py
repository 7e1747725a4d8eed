"""The chain checked against evidence the database cannot forge, for a whole store.

`audit_chain` runs the database's own verification, checks every convention receipt against its
signature and its anchoring ledger entry (pymem.integrity.receipt_audit) and, on request, runs the
independent Python verifier and compares with the signed checkpoints; `anchor_store` signs the
current heads. Both pick the right connection: the app's for one tenant, the administrative one
for every tenant.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg

from ..errors import InvalidArguments
from .checkpoints import Checkpoint, CheckpointReport, anchor, check_checkpoints, open_sink
from .incremental import newest_checkpoints, verify_since
from .independent import PythonBytes, verify_independently
from .receipt_audit import ReceiptAudit, audit_receipts
from .signing import load_key, load_or_create_key, load_public_hex, public_bytes
from .streamed import DatabaseBytes
from .verify import JOBS, VerifyReport, verify_store

if TYPE_CHECKING:
    from ..storage.store import Store


@contextmanager
def _connection(store: Store, tenant: str | None) -> Iterator[psycopg.Connection]:
    if tenant:
        with store.pool.connection() as conn:
            yield conn
    else:
        with store.admin_connection() as conn:
            yield conn


@dataclass(frozen=True)
class ChainAudit:
    """The database's verdict, the receipts' check, and what the independent verifier and the
    checkpoints say."""

    database: VerifyReport
    independent: VerifyReport | None = None
    checkpoints: CheckpointReport | None = None
    receipts: ReceiptAudit | None = None

    @property
    def clean(self) -> bool:
        return all(r.clean for r in (self.database, self.independent, self.checkpoints, self.receipts)
                   if r is not None)

    def to_json(self) -> dict[str, Any]:
        out = self.database.to_json()
        if self.receipts is not None:
            out["receipts"] = self.receipts.to_json()
        if self.independent is not None:
            out["independent"] = self.independent.to_json()
        if self.checkpoints is not None:
            out["checkpoints"] = self.checkpoints.to_json()
        out["clean"] = self.clean
        return out


def trusted_public_key(store: Store, public_key: str | Path | None = None) -> str:
    """The hex key checkpoints must carry: from `public_key` (a file of hex or PEM), else derived
    from the installation's signing key (PYMEM_SIGNING_KEY)."""
    if public_key is not None:
        return public_bytes(load_public_hex(Path(public_key).read_text(encoding="utf-8"))).hex()
    return load_key(store.settings.signing_key_path).public_hex


def _receipt_key(store: Store, public_key: str | Path | None) -> str | None:
    """The key receipts must be signed with: `public_key` if given, else the installation key
    file's (None when there is none: receipts then cannot be trusted)."""
    if public_key is not None or Path(store.settings.signing_key_path).expanduser().is_file():
        return trusted_public_key(store, public_key)
    return None


def audit_chain(store: Store, tenant: str | None = None, *, independent: bool = False, checkpoints: str | None = None,
                public_key: str | Path | None = None, jobs: int = JOBS, since_checkpoint: bool = False) -> ChainAudit:
    """Verify the chain with the database's hash functions (on `jobs` connections, hashed in
    Python) and the convention receipts against their signatures and anchors (`public_key`, else
    the installation key file, is the key they must carry), and optionally recompute the chain in
    Python from the raw rows and compare it with the signed checkpoints in `checkpoints` (a file
    or `SCHEME:TARGET`).

    `since_checkpoint` (needs `checkpoints`): verify only from each tenant's newest checkpoint,
    in time proportional to what was written since (pymem.integrity.incremental, which says what
    that does not prove); receipts are then left to the full verification."""
    if since_checkpoint:
        return _audit_since(store, tenant, independent=independent, checkpoints=checkpoints, public_key=public_key)
    database = verify_store(store, tenant, jobs=jobs)
    with _connection(store, tenant) as conn:
        found_receipts = audit_receipts(conn, tenant, lambda: _receipt_key(store, public_key))
    found_independent = found_checkpoints = None
    if independent:
        with _connection(store, tenant) as conn:
            found_independent = verify_independently(conn, tenant)
    if checkpoints:
        trusted = trusted_public_key(store, public_key)
        with _connection(store, tenant) as conn:
            found_checkpoints = check_checkpoints(conn, open_sink(checkpoints).read(), trusted_key=trusted,
                                                  tenant=tenant)
    return ChainAudit(database, found_independent, found_checkpoints, found_receipts)


def _audit_since(store: Store, tenant: str | None, *, independent: bool, checkpoints: str | None,
                 public_key: str | Path | None) -> ChainAudit:
    if not checkpoints:
        raise InvalidArguments("verifying since a checkpoint needs the checkpoints (a file or SCHEME:TARGET)")
    trusted = trusted_public_key(store, public_key)
    recorded = list(open_sink(checkpoints).read())

    def connect() -> AbstractContextManager[psycopg.Connection]:
        return _connection(store, tenant)

    database = verify_since(connect, tenant, DatabaseBytes(), recorded, trusted_key=trusted)
    found_independent = verify_since(connect, tenant, PythonBytes(), recorded, trusted_key=trusted) \
        if independent else None
    with _connection(store, tenant) as conn:
        found_checkpoints = check_checkpoints(conn, newest_checkpoints(recorded, tenant).values(),
                                              trusted_key=trusted, tenant=tenant)
    return ChainAudit(database, found_independent, found_checkpoints, None)


@dataclass(frozen=True)
class AnchorResult:
    """What `anchor_store` returns: the checkpoints it recorded, the check of the earlier ones, and the public key
    that signs them."""

    anchored: list[Checkpoint]
    earlier: CheckpointReport
    public_key: str

    @property
    def clean(self) -> bool:
        return self.earlier.clean

    def to_json(self) -> dict[str, Any]:
        return {"anchored": [cp.__dict__ for cp in self.anchored], "earlier": self.earlier.to_json(),
                "public_key": self.public_key}


def anchor_store(store: Store, checkpoints: str, tenant: str | None = None) -> AnchorResult:
    """Sign each tenant's head with the installation's key (created on first use) and append it
    to `checkpoints`; nothing is signed when the chain no longer extends an earlier checkpoint."""
    key = load_or_create_key(store.settings.signing_key_path)
    with _connection(store, tenant) as conn:
        made, earlier = anchor(conn, open_sink(checkpoints), key, tenant=tenant)
    return AnchorResult(made, earlier, key.public_hex)


__all__ = ["ChainAudit", "AnchorResult", "audit_chain", "anchor_store", "trusted_public_key"]
