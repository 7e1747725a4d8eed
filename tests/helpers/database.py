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

    def settings(self, **overrides) -> Settings:
        values = dict(dsn=self.app_dsn, admin_dsn=self.admin_dsn, embedding_dim=DIM)
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
