"""Test fixtures: a real Postgres with pgvector, and a fresh database per test.

By default the embedded server is started in a temporary directory for the session; set
PYMEM_TEST_DSN (a superuser DSN) to run against another server instead. The schema is migrated
once into a template database; every test gets its own copy (CREATE DATABASE ... TEMPLATE), so
tests are isolated and fast. The next copy is made in the background while a test runs (_Copies).
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import threading
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from helpers import citus as citus_nodes
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
        dsn = server.dsn(database="postgres")
        with psycopg.connect(dsn, autocommit=True) as conn:
            # A throw-away server: what an fsync guards against (the machine losing power) is no
            # test's subject, and the fsyncs of the CREATE and DROP DATABASE every test makes
            # cost more than most tests.
            conn.execute("alter system set fsync = off")
            conn.execute("select pg_reload_conf()")
        yield dsn
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


@pytest.fixture(scope="session")
def citus_cluster():
    """A Citus coordinator and two workers on loopback (tests/helpers/citus.py) for the tests
    marked `citus`; skips with the reason where the citus extension is not installed in the
    server pymem uses."""
    reason = citus_nodes.skip_reason()
    if reason:
        pytest.skip(reason)
    home = Path(tempfile.mkdtemp(prefix="pymem-citus-"))
    try:
        with citus_nodes.cluster(home / "nodes") as cluster:
            yield cluster
    finally:
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def citus_database(citus_cluster):
    """The store on the cluster: migrated (`pymem db upgrade`) and distributed (`pymem db
    distribute`) once, with the test logins. One database for the session (Citus needs it on every
    node): each test works in tenants of its own."""
    from pymem.admin import distribute

    coordinator = citus_cluster.coordinator
    admin = coordinator.dsn()
    migrate.upgrade(admin, embedding_dim=DIM)
    with psycopg.connect(admin, autocommit=True) as conn:
        distribute(conn)
        for login, group in ((APP_LOGIN, "pymem_app"), (AUDITOR_LOGIN, "pymem_auditor"), (AGENT_LOGIN, "pymem_app")):
            conn.execute(f"create role {login} login password '{PASSWORD}' in role {group}")
        conn.execute(f"create role {STRANGER_LOGIN} login password '{PASSWORD}'")
    return TestDatabase(name=citus_nodes.DATABASE, admin_dsn=admin,
                        app_dsn=coordinator.dsn(APP_LOGIN, password=PASSWORD),
                        auditor_dsn=coordinator.dsn(AUDITOR_LOGIN, password=PASSWORD))


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
    copies = _COPIES.pop((server_dsn, name), None)
    if copies is not None:
        copies.close()
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f'drop database if exists "{name}" with (force)')


class _Copies:
    """Fresh copies of one template. Making a copy costs a test more than most tests take, so one
    background thread makes the next copy while a test runs (dropping one in the background too was
    measured slower: DROP DATABASE checkpoints, and then writes out the copy being made). A copy
    made ahead is the same fresh copy of the template (no test changes the template); if making it
    there failed, the copy is made in the foreground."""

    def __init__(self, server_dsn: str, template: str):
        self.server_dsn, self.template = server_dsn, template
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pymem-test-copies")
        self.next: Future | None = None
        self.lock = threading.Lock()

    def _sql(self, statement: str) -> None:
        with psycopg.connect(self.server_dsn, autocommit=True) as conn:
            conn.execute(statement)

    def _create(self) -> str:
        name = f"pymem_test_{os.getpid()}_{next(_names)}"
        self._sql(f'create database "{name}" template "{self.template}"')
        return name

    def take(self) -> str:
        with self.lock:
            made, self.next = self.next, self.worker.submit(self._create)
        try:
            return made.result() if made is not None else self._create()
        except Exception:  # noqa: BLE001 - a failure ahead (say, while a test traps connections) is retried here
            return self._create()

    def give_back(self, name: str) -> None:
        self._sql(f'drop database if exists "{name}" with (force)')

    def close(self) -> None:
        with self.lock:
            spare, self.next = self.next, None
        if spare is not None:
            with suppress(Exception):  # a copy that was never made needs no drop
                self.give_back(spare.result())
        self.worker.shutdown(wait=True)


#: (server DSN, template) -> its copies; closed with the template.
_COPIES: dict[tuple[str, str], _Copies] = {}


@contextmanager
def _fresh_database(server_dsn, template_db, pooler_address=None):
    copies = _COPIES.get((server_dsn, template_db)) or _COPIES.setdefault((server_dsn, template_db),
                                                                           _Copies(server_dsn, template_db))
    name = copies.take()
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
        copies.give_back(name)


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
