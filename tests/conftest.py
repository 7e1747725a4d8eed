"""Test fixtures: a real Postgres with pgvector, and a fresh database per test.

By default the embedded server is started in a temporary directory for the session; set
PYMEM_TEST_DSN (a superuser DSN) to run against another server instead. The schema is migrated
once into a template database; every test gets its own copy (CREATE DATABASE ... TEMPLATE), so
tests are isolated and fast.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit, quote

import psycopg
import pytest

from pymem import migrate
from pymem.config import Settings
from pymem.store import Endpoints, Store

warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")

DIM = 384
APP_LOGIN = "pymem_test_app"
AUDITOR_LOGIN = "pymem_test_auditor"
AGENT_LOGIN = "pymem_test_agent"  # a member of pymem_app that tests bind to an adapter
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


@pytest.fixture(scope="session")
def server_dsn():
    """A superuser DSN to the `postgres` database of the test server."""
    external = os.environ.get("PYMEM_TEST_DSN")
    if external:
        yield external
        return
    from pymem import embedded

    home = Path(tempfile.mkdtemp(prefix="pymem-test-"))
    server = embedded.start(home)
    try:
        yield server.dsn(database="postgres")
    finally:
        embedded.stop(home)
        shutil.rmtree(home, ignore_errors=True)


_names = itertools.count()


@pytest.fixture(scope="session")
def template_db(server_dsn):
    """A migrated template database, plus the login roles the tests use."""
    name = f"pymem_tmpl_{os.getpid()}"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f'drop database if exists "{name}"')
        conn.execute(f'create database "{name}"')
    admin = with_user(server_dsn, urlsplit(server_dsn).username or "postgres", database=name)
    migrate.upgrade(admin, embedding_dim=DIM)
    with psycopg.connect(admin, autocommit=True) as conn:
        for login, group in ((APP_LOGIN, "pymem_app"), (AUDITOR_LOGIN, "pymem_auditor"), (AGENT_LOGIN, "pymem_app")):
            exists = conn.execute("select 1 from pg_roles where rolname = %s", (login,)).fetchone()
            if not exists:
                conn.execute(f"create role {login} login password '{PASSWORD}' in role {group}")
    yield name
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f'drop database if exists "{name}" with (force)')


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


@pytest.fixture
def database(server_dsn, template_db):
    name = f"pymem_test_{os.getpid()}_{next(_names)}"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f'create database "{name}" template "{template_db}"')
    superuser = urlsplit(server_dsn).username or "postgres"
    db = TestDatabase(
        name=name,
        admin_dsn=with_user(server_dsn, superuser, database=name),
        app_dsn=with_user(server_dsn, APP_LOGIN, database=name, password=PASSWORD),
        auditor_dsn=with_user(server_dsn, AUDITOR_LOGIN, database=name, password=PASSWORD),
    )
    yield db
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f'drop database if exists "{name}" with (force)')


@pytest.fixture
def store(database):
    s = database.store()
    yield s
    s.close()


def login_dsn(database: TestDatabase, login: str) -> str:
    """A DSN for one of the test logins (APP_LOGIN, AGENT_LOGIN, AUDITOR_LOGIN) to `database`."""
    return with_user(database.admin_dsn, login, database=database.name, password=PASSWORD)


def bind_login(database: TestDatabase, role: str, *, adapter: str, tenants: list[str] | None = None,
               scope: dict | None = None) -> None:
    """Bind a login (or group) role to an adapter and the tenants and scope it may act in."""
    from psycopg.types.json import Jsonb

    with database.admin() as conn:
        if conn.execute("select to_regclass('pymem.login_bindings')").fetchone()[0] is None:
            conn.execute("insert into pymem.adapter_bindings (role_name, adapter) values (%s, %s)", (role, adapter))
            return
        conn.execute(
            "insert into pymem.login_bindings (role_name, adapter, tenants, all_tenants, scope)"
            " values (%s, %s, %s, %s, %s)",
            (role, adapter, tenants, tenants is None, Jsonb(scope or {})))
