"""Settings from the environment. Read when a store is opened, never at import time."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import overload

from .errors import InvalidArguments
from .vocabulary import MAX_CONTENT_BYTES

DEFAULT_EMBEDDING_DIM = 384
DEFAULT_MAX_CONTENT_BYTES = 65536
#: PYMEM_POOLER values: unset (a direct connection, or a session-mode pooler) or "transaction".
POOLERS = (None, "transaction")
#: How long a lesson or convention filing waits for another filing of the same kind in its tenant
#: before giving up with LockTimeout (milliseconds).
DEFAULT_FILING_LOCK_TIMEOUT_MS = 5000
#: How long a call waits for a pooled connection before it fails with PoolExhausted (seconds).
DEFAULT_POOL_WAIT = 5.0


def default_home() -> Path:
    """Where the embedded Postgres keeps its data when PYMEM_HOME is not set.

    As a normal user: the platform's user data directory (e.g. ~/.local/share/pymem).
    As root: /var/lib/pymem. The embedded server, run as root, hands the data directory to a
    separate system user and adds group/other read+execute to *every parent folder* of it; under
    /root that would open root's home to every user, while /var/lib and its parents are already
    world-traversable, so nothing changes there.
    """
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path("/var/lib/pymem")
    import platformdirs

    return Path(platformdirs.user_data_dir("pymem", appauthor=False))


@overload
def _int(env: Mapping[str, str], name: str, default: int, lo: int, hi: int) -> int: ...
@overload
def _int(env: Mapping[str, str], name: str, default: None, lo: int, hi: int) -> int | None: ...
def _int(env: Mapping[str, str], name: str, default: int | None, lo: int, hi: int) -> int | None:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidArguments(f"{name} must be an integer, got {raw!r}") from None
    if not lo <= value <= hi:
        raise InvalidArguments(f"{name} must be between {lo} and {hi}, got {value}")
    return value


def _seconds(env: Mapping[str, str], name: str, default: float, lo: float, hi: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise InvalidArguments(f"{name} must be a number of seconds, got {raw!r}") from None
    if not lo <= value <= hi:  # NaN fails both comparisons
        raise InvalidArguments(f"{name} must be between {lo:g} and {hi:g} seconds, got {raw}")
    return value


def check_timeout_ms(value: int | None, what: str) -> int | None:
    """None (no limit) or a whole number of milliseconds from 1 to a day."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 86_400_000:
        raise InvalidArguments(f"{what} must be a whole number of milliseconds from 1 to 86400000, or unset")
    return value


@dataclass(frozen=True)
class Settings:
    """What pymem reads from the environment.

    dsn: PYMEM_DSN, the application's connection (a login that is a member of pymem_app).
         Unset => the embedded Postgres in `home`.
    admin_dsn: PYMEM_ADMIN_DSN, for `pymem db upgrade` and other DDL; defaults to dsn.
    home: PYMEM_HOME, the embedded server's directory.
    embedding_dim: PYMEM_EMBEDDING_DIM, used when the schema is first created.
    signing_key: PYMEM_SIGNING_KEY, the installation's Ed25519 private key (PEM) that signs
                 ledger checkpoints; default `home/keys/signing-ed25519.pem`, created on first use.
    pooler: PYMEM_POOLER=transaction when `dsn` reaches Postgres through a transaction-mode pooler
            (PgBouncer, RDS Proxy, Supavisor): no server-side prepared statements, no session state.
    direct_dsn: PYMEM_DIRECT_DSN, a direct connection (no pooler) for what needs a session of its
                own: following facts (LISTEN). Unset: `dsn`, refused by `follow` behind a pooler.
    filing_lock_timeout_ms: PYMEM_FILING_LOCK_TIMEOUT_MS, how long a lesson or convention filing
                 waits for another filing of its kind in its tenant (then LockTimeout); 1 to 600000.
    lock_timeout_ms: PYMEM_LOCK_TIMEOUT_MS, the longest a transaction pymem opens waits for a row
                 lock (a chain head, a memory another call is writing) before the call fails with
                 LockTimeout; None: no limit (`pymem serve` defaults it, see pymem.service.limits).
    statement_timeout_ms: PYMEM_STATEMENT_TIMEOUT_MS, the longest one statement of such a
                 transaction runs before it is cancelled (StatementTimeout); None: no limit.
    pool_wait: PYMEM_POOL_WAIT, seconds a call waits for a pooled connection before it fails
                 with PoolExhausted (every connection busy) or ServerError (none can be opened).
    """

    dsn: str | None = None
    admin_dsn: str | None = None
    home: Path = field(default_factory=default_home)
    embedding_dim: int = DEFAULT_EMBEDDING_DIM
    max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES
    signing_key: Path | None = None
    filing_lock_timeout_ms: int = DEFAULT_FILING_LOCK_TIMEOUT_MS
    pooler: str | None = None
    direct_dsn: str | None = None
    lock_timeout_ms: int | None = None
    statement_timeout_ms: int | None = None
    pool_wait: float = DEFAULT_POOL_WAIT

    def __post_init__(self) -> None:
        if self.pooler not in POOLERS:
            raise InvalidArguments(f"PYMEM_POOLER must be one of: {', '.join(p for p in POOLERS if p)} (or unset), "
                                   f"got {self.pooler!r}")
        check_timeout_ms(self.lock_timeout_ms, "lock_timeout_ms")
        check_timeout_ms(self.statement_timeout_ms, "statement_timeout_ms")
        if isinstance(self.pool_wait, bool) or not isinstance(self.pool_wait, (int, float)) \
                or not 0.1 <= self.pool_wait <= 600:
            raise InvalidArguments("pool_wait must be between 0.1 and 600 seconds")

    @property
    def transaction_pooler(self) -> bool:
        """Whether connections reach Postgres through a transaction-mode pooler."""
        return self.pooler == "transaction"

    @property
    def signing_key_path(self) -> Path:
        return self.signing_key if self.signing_key is not None else self.home / "keys" / "signing-ed25519.pem"

    @property
    def embedded(self) -> bool:
        return not self.dsn

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        dsn = env.get("PYMEM_DSN", "").strip() or None
        home = env.get("PYMEM_HOME", "").strip()
        key = env.get("PYMEM_SIGNING_KEY", "").strip()
        return cls(
            dsn=dsn,
            admin_dsn=env.get("PYMEM_ADMIN_DSN", "").strip() or dsn,
            home=Path(home).expanduser() if home else default_home(),
            embedding_dim=_int(env, "PYMEM_EMBEDDING_DIM", DEFAULT_EMBEDDING_DIM, 1, 16000),
            max_content_bytes=_int(env, "PYMEM_MAX_CONTENT_BYTES", DEFAULT_MAX_CONTENT_BYTES, 1, MAX_CONTENT_BYTES),
            signing_key=Path(key).expanduser() if key else None,
            pooler=env.get("PYMEM_POOLER", "").strip().lower() or None,
            direct_dsn=env.get("PYMEM_DIRECT_DSN", "").strip() or None,
            filing_lock_timeout_ms=_int(env, "PYMEM_FILING_LOCK_TIMEOUT_MS", DEFAULT_FILING_LOCK_TIMEOUT_MS, 1,
                                        600_000),
            lock_timeout_ms=_int(env, "PYMEM_LOCK_TIMEOUT_MS", None, 1, 86_400_000),
            statement_timeout_ms=_int(env, "PYMEM_STATEMENT_TIMEOUT_MS", None, 1, 86_400_000),
            pool_wait=_seconds(env, "PYMEM_POOL_WAIT", DEFAULT_POOL_WAIT, 0.1, 600),
        )
