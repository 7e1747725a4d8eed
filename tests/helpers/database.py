"""What the tests share besides fixtures: the test logins, DSN helpers and the per-test database."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg

from pymem.config import Settings
from pymem.storage.endpoints import Endpoints
from pymem.storage.store import Store

DIM = 384
APP_LOGIN = "pymem_test_app"
AUDITOR_LOGIN = "pymem_test_auditor"
AGENT_LOGIN = "pymem_test_agent"  # a member of pymem_app that tests bind to an adapter
STRANGER_LOGIN = "pymem_test_stranger"  # a login with no pymem role at all (only PUBLIC's rights)
PASSWORD = "pymem-test"


def with_user(dsn: str, user: str, database: str | None = None, password: str | None = None) -> str:
    """The same server as `dsn`, logging in as `user` (and to `database`)."""
    parts = urlsplit(dsn)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    auth = quote(user) + (":" + quote(password) if password else "")
    path = "/" + database if database else parts.path
    return urlunsplit((parts.scheme, f"{auth}@{host}", path, parts.query, ""))


@dataclass
class TestDatabase:
    __test__ = False  # a fixture value, not a test class

    name: str
    admin_dsn: str
    app_dsn: str
    auditor_dsn: str
    pooler: str | None = None  # "transaction": app_dsn goes through PgBouncer (PYMEM_TEST_POOLER)
    direct_app_dsn: str | None = None  # app_dsn without the pooler (what needs a session: LISTEN)

    def settings(self, **overrides) -> Settings:
        values = dict(dsn=self.app_dsn, admin_dsn=self.admin_dsn, embedding_dim=DIM)
        if self.pooler is not None:
            values.update(pooler=self.pooler, direct_dsn=self.direct_app_dsn)
        values.update(overrides)
        return Settings(**values)

    def store(self, **overrides) -> Store:
        settings = self.settings(**overrides)
        return Store(Endpoints(app=settings.dsn, admin=settings.admin_dsn), settings)

    def admin(self) -> psycopg.Connection:
        return psycopg.connect(self.admin_dsn, autocommit=True)

    def app(self, autocommit: bool = False) -> psycopg.Connection:
        """A raw connection logged in as a member of pymem_app (never a superuser)."""
        return psycopg.connect(self.app_dsn, autocommit=autocommit)


def login_dsn(database: TestDatabase, login: str) -> str:
    """A DSN for one of the test logins (APP_LOGIN, AGENT_LOGIN, AUDITOR_LOGIN, STRANGER_LOGIN) to `database`."""
    return with_user(database.admin_dsn, login, database=database.name, password=PASSWORD)


def bind_login(database: TestDatabase, role: str, *, adapter: str, tenants: list[str] | None = None,
               scope: dict | None = None) -> None:
    """Bind a login (or group) role to an adapter and the tenants and scope it may act in."""
    from psycopg.types.json import Jsonb

    with database.admin() as conn:
        conn.execute(
            "insert into pymem.login_bindings (role_name, adapter, tenants, all_tenants, scope)"
            " values (%s, %s, %s, %s, %s)",
            (role, adapter, tenants, tenants is None, Jsonb(scope or {})))
