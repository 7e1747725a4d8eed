"""The guided demo behind `pymem demo`.

On the embedded default it runs in a database of its own (`pymem_demo`, recreated each run) so a
user's memories are never touched; with PYMEM_DSN it uses fresh, uniquely named tenants.
Every step checks what it shows: the demo fails (returns False) if a guarantee does not hold.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass

import psycopg

from .. import db, embedded, migrate
from ..config import Settings
from ..context import Context
from ..errors import AccessDenied, MemoryAdmissionError
from ..integrity.verify import verify_chain
from ..storage.endpoints import Endpoints, resolve
from ..storage.store import Store
from .demo_admission import admission_demo
from .demo_delivery import delivery_demo

DEMO_DATABASE = "pymem_demo"

Echo = Callable[[str], None]


class DemoFailure(AssertionError):
    """A guarantee the demo shows did not hold."""


def _vec(dim: int, hot: int) -> list[float]:
    v = [0.0] * dim
    v[hot % dim] = 1.0
    v[(hot + 1) % dim] = 0.5
    return v


@dataclass
class Demo:
    store: Store
    echo: Echo
    suffix: str = ""

    def ctx(self, tenant: str, adapter: str | None = None, actor: str = "demo") -> Context:
        return Context(tenant=tenant + self.suffix, actor=actor, adapter=adapter)

    @property
    def dim(self) -> int:
        return self.store.embedding_dim

    def step(self, title: str) -> None:
        self.echo("")
        self.echo(f"== {title}")

    def ok(self, text: str) -> None:
        self.echo(f"   ok  {text}")

    def check(self, condition: bool, what: str) -> None:
        """Fail the demo unless `condition` holds: every step checks what it shows."""
        if not condition:
            raise DemoFailure(what)

    def refused(self, fn: Callable[[], object]) -> MemoryAdmissionError:
        """The MemoryAdmissionError `fn` raises; the demo fails if it raises none."""
        try:
            fn()
        except MemoryAdmissionError as exc:
            return exc
        raise DemoFailure("the write gate admitted a record it should have refused")

    # -- the steps -------------------------------------------------------------------------

    def isolation(self) -> dict[str, list[str]]:
        self.step("Tenant isolation: two tenants, two agent adapters")
        acme = self.store.bind(self.ctx("acme", adapter="claude-code"))
        globex = self.store.bind(self.ctx("globex", adapter="codex"))
        acme_ids = acme.add([
            {"content": "Acme's deploys happen on Tuesdays.", "embedding": _vec(self.dim, 1), "kind": "fact"},
            {"content": "Acme prefers terse status updates.", "embedding": _vec(self.dim, 2), "kind": "preference"},
        ])
        globex_ids = globex.add([
            {"content": "Globex's staging database is read-only on Fridays.", "embedding": _vec(self.dim, 3)},
        ])
        self.echo(f"   acme (adapter claude-code) wrote {len(acme_ids)} memories; "
                  f"globex (adapter codex) wrote {len(globex_ids)}")
        self.check(acme.get_row(acme_ids[0]) is not None, "acme reads its own memory")
        self.check(acme.get_row(globex_ids[0]) is None, "acme cannot read globex's memory")
        self.check(globex.get_row(acme_ids[0]) is None, "globex cannot read acme's memory")
        self.ok("acme sees its own memory; globex's memory id returns nothing to acme, and vice versa")
        with self.store.pool.connection() as conn, db.transaction(conn, self.ctx("acme", adapter="claude-code")):
            n = db.one(conn.execute("select count(*) from pymem.memories").fetchone())[0]
        self.check(n == len(acme_ids), "an unfiltered SELECT sees only the context tenant")
        self.ok(f"even `select count(*) from pymem.memories` (no WHERE) counts {n}: row-level security")
        return {"acme": acme_ids, "globex": globex_ids}

    def adapter_tagging(self) -> None:
        self.step("Adapter tagging: an agent cannot write as another adapter, nor untagged")
        ctx = self.ctx("acme", adapter="codex", actor="agent-7")
        for tag, label in (("claude-code", "tagged as claude-code"), (None, "untagged (operator-trusted)")):
            try:
                with self.store.pool.connection() as conn, db.transaction(conn, ctx):
                    conn.execute(
                        "insert into pymem.memories (tenant_id, id, content, source_adapter) values (%s, %s, %s, %s)",
                        (ctx.tenant, "forged-" + secrets.token_hex(4), "a forged note", tag),
                    )
            except AccessDenied:
                self.ok(f"a codex connection writing a row {label}: refused by Postgres")
            else:
                raise DemoFailure(f"a codex connection could write a row {label}")

    def tamper(self, acme_ids: list[str], admin_dsn: str) -> None:
        self.step("Tamper evidence: a superuser edits a memory with triggers disabled")
        tenant = self.ctx("acme").tenant
        target = acme_ids[0]
        with psycopg.connect(admin_dsn, autocommit=True) as admin:
            try:
                admin.execute("set session_replication_role = replica")
            except psycopg.errors.InsufficientPrivilege:
                self.echo("   (skipped: the admin login is not a superuser, so it cannot disable triggers)")
                return
            original = db.one(admin.execute(
                "select content from pymem.memories where tenant_id = %s and id = %s", (tenant, target)
            ).fetchone())[0]
            admin.execute("update pymem.memories set content = %s where tenant_id = %s and id = %s",
                          ("Acme's deploys happen on Fridays.", tenant, target))
            self.echo("   a superuser ran, with session_replication_role = replica:")
            self.echo("     update pymem.memories set content = '...Fridays.' where id = ...")
            with self.store.pool.connection() as conn:
                report = verify_chain(conn, tenant)
            bad = report.first_problem
            self.check(bad is not None and bad.bad_memory_id == target, "verify names the edited memory")
            assert bad is not None  # check() stopped the demo otherwise
            self.ok(f"pymem verify: TAMPERING DETECTED at seq {bad.bad_seq}, memory {bad.bad_memory_id}: {bad.problem}")
            admin.execute("update pymem.memories set content = %s where tenant_id = %s and id = %s",
                          (original, tenant, target))
        with self.store.pool.connection() as conn:
            report = verify_chain(conn, tenant)
        self.check(report.clean, "restoring the original content makes the chain verify again")
        t = report.tenants[0]
        self.ok(f"content restored: {t.entries} entries verify again, head hash {(t.head_hash or '')[:16]}...")


def _demo_store(settings: Settings) -> tuple[Store, str, str]:
    """The store the demo runs in, its admin DSN, and a tenant suffix."""
    if settings.embedded:
        server = embedded.start(settings.home)
        with psycopg.connect(server.dsn(database="postgres"), autocommit=True) as conn:
            conn.execute(f'drop database if exists "{DEMO_DATABASE}" with (force)')
            conn.execute(f'create database "{DEMO_DATABASE}"')
        admin = server.dsn("postgres", database=DEMO_DATABASE)
        migrate.upgrade(admin, embedding_dim=settings.embedding_dim)
        embedded.enable_local_logins(server, database=DEMO_DATABASE)
        ends = Endpoints(app=server.dsn("pymem_app", database=DEMO_DATABASE), admin=admin, embedded=server)
        return Store(ends, settings), admin, ""
    ends = resolve(settings)
    return Store(ends, settings), ends.admin, "-" + secrets.token_hex(3)


def run_demo(echo: Echo, settings: Settings | None = None) -> bool:
    settings = settings or Settings.from_env()
    store, admin_dsn, suffix = _demo_store(settings)
    where = f"database {DEMO_DATABASE} on the embedded Postgres in {settings.home}" if settings.embedded \
        else f"PYMEM_DSN, tenants suffixed {suffix}"
    echo(f"pymem demo ({where})")
    try:
        with store:
            demo = Demo(store, echo, suffix)
            ids = demo.isolation()
            demo.adapter_tagging()
            demo.tamper(ids["acme"], admin_dsn)
            admission_demo(demo)
            delivery_demo(demo)
    except DemoFailure as exc:
        echo(f"\nFAILED: {exc}")
        return False
    echo("\nAll demo checks passed.")
    return True
