"""The one configuration: `Settings`, built once (from the environment, a file, or code) and held
by the `Store`. Nothing else in the library reads the environment (a test walks every module).

The environment is read when a Settings is built (`Settings.from_env()`, which `Store.open()`
calls when given none), never at import time and never inside a verb. Besides the connection
and its limits, a Settings keeps the `PYMEM_*` variables it was built from (`environ`), from which
the policies are built: the admission policy, the adapter trust policy, the trust tiers, the
excluded lesson roles, the similarity floor, the default embedder. "The policy in force now" is
the one built from those values, and from the files they name (PYMEM_POLICY_FILE,
PYMEM_TIERS_FILE) as they are now: a policy is built once and reused (`in_force`), built again
when a file it was read from changes (its modification time or size), or when asked
(`Store.reload()`, `Settings.reload()`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar, cast, overload

from .errors import InvalidArguments
from .vocabulary import MAX_CONTENT_BYTES

T = TypeVar("T")

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


def _stamp(path: str) -> tuple[int, int] | None:
    """What tells that a file changed: its modification time and size (None: it cannot be read)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


class InForce:
    """The policies built from one Settings, each kept until a file it was read from changes or
    `reload()` is called; thread-safe. A build that fails is not kept (the next call tries again)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._built: dict[str, tuple[tuple[Any, ...], Any]] = {}
        self.builds = 0  # how many times a policy was built (tests read it)

    def get(self, name: str, build: Callable[[], T], files: tuple[str, ...] = ()) -> T:
        stamps = tuple((f, _stamp(f)) for f in files)
        with self._lock:
            kept = self._built.get(name)
            if kept is not None and kept[0] == stamps:
                return cast(T, kept[1])
        value = build()
        with self._lock:
            self._built[name] = (stamps, value)
            self.builds += 1
        return value

    def reload(self) -> None:
        with self._lock:
            self._built.clear()


def environment() -> Mapping[str, str]:
    """The PYMEM_* variables of this process's environment, now: what a `from_env()` given no
    mapping reads (`Settings.from_env`, `AdmissionPolicy.from_env`, ...). Verbs never call it:
    they read the store's settings."""
    return MappingProxyType({k: v for k, v in os.environ.items() if k.startswith("PYMEM_")})


def child_environ(**extra: str) -> dict[str, str]:
    """The environment for a child process pymem starts (git): this process's, with `extra`."""
    return {**os.environ, **extra}


def read_settings_file(path: str | os.PathLike[str]) -> dict[str, str]:
    """The variables a settings file sets: a TOML table of `name = value`, where a name is a
    PYMEM_* variable's name without the prefix, in lower case (`dsn`, `trusted_adapters`,
    `policy_file`, ...); a list is joined with commas, a boolean is "true" or "false"."""
    import tomllib

    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InvalidArguments(f"cannot read settings file {str(p)!r}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InvalidArguments(f"settings file {str(p)!r} is not UTF-8 TOML: {exc}") from None
    env: dict[str, str] = {}
    for key, value in data.items():
        if not isinstance(key, str) or not key.replace("_", "").isalnum() or key.lower() != key:
            raise InvalidArguments(f"settings file {str(p)!r}: {str(key)[:40]!r} is not a lower-case setting name")
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, (int, float, str)):
            text = str(value)
        elif isinstance(value, list) and all(isinstance(v, (int, float, str)) and not isinstance(v, bool)
                                             for v in value):
            text = ",".join(str(v) for v in value)
        else:
            raise InvalidArguments(f"settings file {str(p)!r}: {key} must be a string, number, boolean or list")
        env["PYMEM_" + key.upper()] = text
    return env


@dataclass(frozen=True)
class Settings:
    """pymem's configuration; each field names the PYMEM_* variable `from_env` reads it from.

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
    embed_threads: PYMEM_EMBED_THREADS, the e5 engine's threads (1 to 256) when this process
                 first loads it; None: one.
    environ: the PYMEM_* variables the settings were built from, from which the policies are built
                 (see the module docstring); empty when built in code: every policy its default.
    in_force: the policies built from them, kept until a file they name changes or `reload()`.
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
    embed_threads: int | None = None
    environ: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    in_force: InForce = field(default_factory=InForce, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.pooler not in POOLERS:
            raise InvalidArguments(f"pooler must be one of: {', '.join(p for p in POOLERS if p)} (or unset), "
                                   f"got {self.pooler!r}")
        check_timeout_ms(self.lock_timeout_ms, "lock_timeout_ms")
        check_timeout_ms(self.statement_timeout_ms, "statement_timeout_ms")
        if isinstance(self.pool_wait, bool) or not isinstance(self.pool_wait, (int, float)) \
                or not 0.1 <= self.pool_wait <= 600:
            raise InvalidArguments("pool_wait must be between 0.1 and 600 seconds")
        if self.embed_threads is not None and (isinstance(self.embed_threads, bool)
                                               or not isinstance(self.embed_threads, int)
                                               or not 1 <= self.embed_threads <= 256):
            raise InvalidArguments("embed_threads must be an integer between 1 and 256, or unset")
        if not isinstance(self.environ, Mapping):
            raise InvalidArguments("environ must be a mapping of PYMEM_* names to strings")
        object.__setattr__(self, "environ", MappingProxyType(dict(self.environ)))

    def __hash__(self) -> int:
        return hash((self.dsn, self.admin_dsn, self.home, self.pooler, frozenset(self.environ.items())))

    def value(self, name: str) -> str:
        """The variable `name` (a PYMEM_* name) these settings were built with, stripped; "" if unset."""
        return (self.environ.get(name) or "").strip()

    def reload(self) -> None:
        """Build every policy again at its next use: the files they name are read again."""
        self.in_force.reload()

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
    def from_file(cls, path: str | os.PathLike[str]) -> Settings:
        """Settings from a TOML file (see read_settings_file), and nothing from the environment."""
        return cls.from_env(read_settings_file(path))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Settings from the environment (or from `environ`, a mapping of PYMEM_* variables), read now."""
        env = environment() if environ is None else environ
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
            filing_lock_timeout_ms=_int(env, "PYMEM_FILING_LOCK_TIMEOUT_MS", DEFAULT_FILING_LOCK_TIMEOUT_MS,
                                        1, 600_000),
            lock_timeout_ms=_int(env, "PYMEM_LOCK_TIMEOUT_MS", None, 1, 86_400_000),
            statement_timeout_ms=_int(env, "PYMEM_STATEMENT_TIMEOUT_MS", None, 1, 86_400_000),
            pool_wait=_seconds(env, "PYMEM_POOL_WAIT", DEFAULT_POOL_WAIT, 0.1, 600),
            embed_threads=_int(env, "PYMEM_EMBED_THREADS", None, 1, 256),
            environ={k: v for k, v in env.items() if k.startswith("PYMEM_") and isinstance(v, str)},
        )

    # -- The command line's and the embedder's use of the environment, read here like the rest --

    @property
    def context_scope(self) -> str:
        """PYMEM_SCOPE: the scope (comma-separated AXIS=VALUE pairs) a command's context carries
        when it is given no --scope; "" if unset."""
        return self.value("PYMEM_SCOPE")

    @property
    def jwt_key(self) -> str:
        """PYMEM_JWT_KEY: the service's HS256 key, which `pymem token` signs with; "" if unset."""
        return self.value("PYMEM_JWT_KEY")


def forbid_model_downloads() -> None:
    """Tell the Hugging Face libraries of this process never to download (HF_HUB_OFFLINE=1,
    TRANSFORMERS_OFFLINE=1): a model pymem loads comes from disk, never from the network at run time."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
