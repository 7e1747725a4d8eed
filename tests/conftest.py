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
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from helpers import flavours
from helpers import pgbouncer as bouncer
from helpers.database import (
    AGENT_LOGIN,
    APP_LOGIN,
    AUDITOR_LOGIN,
    DIM,
    PASSWORD,
    STRANGER_LOGIN,
    TestDatabase,
    with_user,
)

from pymem import migrate

warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")


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


@pytest.fixture(scope="session")
def pgbouncer_address(server_dsn):
    """(host, port) of a real PgBouncer in transaction mode in front of the test server; skips
    with the reason where pgbouncer is not installed."""
    if bouncer.binary() is None:
        pytest.skip(bouncer.SKIP_REASON)
    if not (urlsplit(server_dsn).query or "").count("host=/"):
        pytest.skip("the PgBouncer fixture runs in front of the embedded test server (a Unix socket)")
    with bouncer.pgbouncer(server_dsn) as address:
        yield address


#: PYMEM_TEST_POOLER=pgbouncer: every test's app connections go through PgBouncer in transaction
#: mode, with pymem's pooler setting on (tests/db/test_pgbouncer.py runs suites that way).
POOLED = os.environ.get("PYMEM_TEST_POOLER") == "pgbouncer"

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
        if not conn.execute("select 1 from pg_roles where rolname = %s", (STRANGER_LOGIN,)).fetchone():
            conn.execute(f"create role {STRANGER_LOGIN} login password '{PASSWORD}'")  # no pymem role
    yield name
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f'drop database if exists "{name}" with (force)')


@contextmanager
def _fresh_database(server_dsn, template_db, pooler_address=None):
    name = f"pymem_test_{os.getpid()}_{next(_names)}"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f'create database "{name}" template "{template_db}"')
    superuser = urlsplit(server_dsn).username or "postgres"
    app = with_user(server_dsn, APP_LOGIN, database=name, password=PASSWORD)
    try:
        yield TestDatabase(
            name=name,
            admin_dsn=with_user(server_dsn, superuser, database=name),
            app_dsn=bouncer.through(app, *pooler_address) if pooler_address else app,
            auditor_dsn=with_user(server_dsn, AUDITOR_LOGIN, database=name, password=PASSWORD),
            pooler="transaction" if pooler_address else None,
            direct_app_dsn=app if pooler_address else None,
        )
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            conn.execute(f'drop database if exists "{name}" with (force)')


@pytest.fixture
def database(request, server_dsn, template_db):
    address = request.getfixturevalue("pgbouncer_address") if POOLED else None
    with _fresh_database(server_dsn, template_db, address) as db:
        yield db


@pytest.fixture
def another_database(server_dsn, template_db):
    """A second, independent database (another installation), for tests that compare two."""
    with _fresh_database(server_dsn, template_db) as db:
        yield db


def pytest_generate_tests(metafunc):
    """A module marked `parity` runs each test that uses `store` against both surfaces, the sync
    library and pymem.aio (helpers/flavours.py)."""
    if metafunc.definition.get_closest_marker("parity") and "flavour" in metafunc.fixturenames:
        metafunc.parametrize("flavour", flavours.FLAVOURS, indirect=True)


@pytest.fixture
def flavour(request):
    """Which surface `store` is: "sync" (pymem.Store), or "async" in a parity module's second run."""
    return getattr(request, "param", "sync")


@pytest.fixture
def store(database, flavour):
    s = database.store() if flavour == "sync" else flavours.BlockingStore(database.settings())
    yield s
    s.close()


@pytest.fixture
def kstore(database, tmp_path):
    """A store whose installation signing key is a file in the test's own directory (never the
    user's home), for the tests that sign convention receipts."""
    s = database.store(signing_key=tmp_path / "keys" / "signing-ed25519.pem")
    yield s
    s.close()
