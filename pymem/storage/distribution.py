"""Distributing a migrated store over a Citus cluster, sharded by tenant (`pymem db distribute`).

The schema (sql/schema.sql) runs as it is on plain Postgres and on a Citus coordinator; what only
a cluster needs is this layer, applied once by the administrative connection on the coordinator
after `pymem db upgrade`:

* the context reaches the shards: `citus.propagate_set_commands = 'local'` for the database, which
  is also the switch (pymem._on_citus()) that makes pymem.set_context use SET LOCAL;
* policies without scalar subqueries (Citus refuses them on distributed tables): each
  `(select pymem._ctx_...())` becomes the direct call, on the cluster only, so plain Postgres
  keeps its once-per-query form;
* INSERT on the defaulted columns for the roles that insert (Citus names every column in what it
  sends to a shard; the triggers still decide those values);
* TENANT_TABLES sharded by tenant_id, all colocated with pymem.memories, so every statement of a
  tenant, triggers included, runs on one node; REFERENCE_TABLES copied to every node;
  NODE_LOCAL_TABLES stay on each node (the login bindings: every shard's policy reads them, and a
  policy that read a distributed table would nest a distributed query inside a shard's);
* custom plans where the schema forces generic ones (Citus cannot distribute a generic plan);
* every function of the schema propagated (Citus follows what tables and triggers name, not what
  a function body calls), and the owner role allowed to log in (a definer function's statements
  reach the shards over a connection as its owner).

Every step is idempotent: a second run finds the work done and does nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import ClientCursor, sql

from .. import migrate, queries
from ..errors import ClusterUnavailable, SchemaError, ServerError
from ..resources import render_sql

__all__ = ["TENANT_TABLES", "REFERENCE_TABLES", "NODE_LOCAL_TABLES", "DistributionReport", "distribution_plan",
           "distribute", "distribution_sql", "sync_bindings", "citus_version", "inline_scalar_subqueries"]

#: Sharded by tenant_id and colocated with the first (every trigger touches only these, of one tenant).
TENANT_TABLES = ("memories", "chain_heads", "scope_rows", "ledger", "idempotency_keys", "sessions",
                 "convention_receipts", "convention_endings", "filing_locks", "retention_policies",
                 "actor_pseudonyms", "quarantine")
#: Global, small, read everywhere: one copy on every node.
REFERENCE_TABLES = ("store_info", "signing_keys", "installation_secrets")
#: Kept on each node: the login bindings (each node's copy set by sync_bindings), their log and
#: Alembic's version table (the coordinator's).
NODE_LOCAL_TABLES = ("login_bindings", "binding_log", "alembic_version")

_OWNER = "pymem_owner"
_INSERTING_ROLES = ("pymem_app",)


#: What every worker needs before the first table reaches it. Citus creates a schema a table
#: depends on with no owner but the connecting superuser, and then replays the table's grants as
#: their grantor (the owner role), which may not use that schema; and the migration created the
#: roles and pgvector on the coordinator only.
_WORKER_SCHEMA = """set citus.enable_ddl_propagation = off;
do $$
begin
  if not exists (select from pg_roles where rolname = 'pymem_owner') then create role pymem_owner nologin; end if;
  if not exists (select from pg_roles where rolname = 'pymem_app') then create role pymem_app nologin; end if;
  if not exists (select from pg_roles where rolname = 'pymem_auditor') then create role pymem_auditor nologin; end if;
end
$$;
create extension if not exists vector;
create schema if not exists pymem authorization pymem_owner;
alter schema pymem owner to pymem_owner;
revoke all on schema pymem from public;
grant usage on schema pymem to pymem_app, pymem_auditor;"""


@dataclass(frozen=True)
class Step:
    """One statement of the plan, what it is for, and its text as a DBA would run it."""

    why: str
    statement: sql.SQL | sql.Composed
    params: tuple[Any, ...] = ()

    def text(self, conn: psycopg.Connection) -> str:
        with ClientCursor(conn) as cur:
            return cur.mogrify(self.statement, self.params or None)


@dataclass(frozen=True)
class DistributionReport:
    """What `distribute` did: the statements it ran (none when the store was distributed already)."""

    citus_version: str
    workers: int
    statements: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"citus_version": self.citus_version, "workers": self.workers, "statements": list(self.statements)}


def citus_version(conn: psycopg.Connection) -> str | None:
    """The citus extension's version in the database, None where it is not installed."""
    row = conn.execute(queries.query("citus_version")).fetchone()
    return None if row is None else str(row[0])


def inline_scalar_subqueries(expr: str) -> str:
    """A policy expression (as pg_policies prints it) with each scalar subquery that reads no
    table, `( SELECT f() AS f)` or `( SELECT (a = b))`, replaced by its expression."""
    out, i = [], 0
    while True:
        j = expr.find("( SELECT ", i)
        if j < 0:
            out.append(expr[i:])
            return "".join(out)
        k, depth = j, 0
        while True:
            ch = expr[k]
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth == 0:
                    break
            elif ch == "'":
                k = expr.index("'", k + 1)  # a literal's '' doubles are two adjacent literals here
            k += 1
        inner = expr[j + len("( SELECT "):k]
        if " FROM " in inner.upper():
            out.append(expr[i:k + 1])
        else:
            alias = inner.rfind(" AS ")
            if alias > 0 and inner[alias + 4:].isidentifier():
                inner = inner[:alias]
            out.append(expr[i:j] + "(" + inline_scalar_subqueries(inner) + ")")
        i = k + 1


def _table(name: str) -> sql.Composable:
    return sql.Identifier("pymem", name)


def _node_local_bindings_script(rows_json: str | None) -> str:
    """What every worker runs to hold its own pymem.login_bindings and pymem._login_binding()
    (taken from the schema as it stands), and, given rows, to hold the coordinator's bindings."""
    schema = render_sql("schema.sql", embedding_dim=1)
    table = schema[schema.index("create table pymem.login_bindings ("):
                   schema.index("comment on table pymem.login_bindings")]
    function = schema[schema.index("create function pymem._login_binding()"):
                      schema.index("comment on function pymem._login_binding()")]
    parts = ["set citus.enable_ddl_propagation = off;"]
    if rows_json is None:
        parts += [table.replace("create table", "create table if not exists", 1),
                  function.replace("create function", "create or replace function", 1),
                  f"alter table pymem.login_bindings owner to {_OWNER};",
                  f"alter function pymem._login_binding() owner to {_OWNER};",
                  "revoke all on pymem.login_bindings from public;",
                  "revoke all on function pymem._login_binding() from public;",
                  "grant execute on function pymem._login_binding() to pymem_app, pymem_auditor;"]
    else:
        literal = "'" + rows_json.replace("'", "''") + "'"
        parts += ["delete from pymem.login_bindings;",
                  "insert into pymem.login_bindings select * from "
                  f"jsonb_populate_recordset(null::pymem.login_bindings, {literal}::jsonb);"]
    return "\n".join(parts)


def distribution_plan(conn: psycopg.Connection) -> list[Step]:
    """The statements that distribute the store at `conn` (a coordinator, administrative login),
    in order; only those not done yet. Refuses (ClusterUnavailable) a server without Citus, and
    (SchemaError) a schema that is missing or behind."""
    if citus_version(conn) is None:
        raise ClusterUnavailable(
            "this database has no Citus: `pymem db distribute` needs the citus extension on the coordinator and "
            "every worker (install Citus as Citus documents, CREATE EXTENSION citus, add the workers), then "
            "`pymem db upgrade`; a single Postgres needs no distribution")
    revision = migrate.current_revision(conn)
    if revision != migrate.head_revision():
        raise SchemaError(f"the schema is at revision {revision or 'none'}, not {migrate.head_revision()}: "
                          "run `pymem db upgrade` first")
    tables = {r[0]: r[1] for r in conn.execute(queries.query("pymem_tables"))}
    unplaced = sorted(set(tables) - set(TENANT_TABLES) - set(REFERENCE_TABLES) - set(NODE_LOCAL_TABLES))
    if unplaced:
        raise SchemaError(f"pymem does not know where to place the tables {', '.join(unplaced)} on a cluster")
    placed = {r[0]: r[1] for r in conn.execute(queries.query("citus_tables"))}
    steps = []
    if not conn.execute(queries.query("on_citus")).fetchone()[0]:  # type: ignore[index]
        steps.append(Step("the context reaches the shards (SET LOCAL replayed there); the switch pymem._on_citus()",
                          queries.template("citus_propagate_context", database=sql.Identifier(conn.info.dbname))))
    if not set(TENANT_TABLES) <= set(placed):
        steps.append(Step("distributing tables that have triggers", queries.template("citus_allow_triggers")))
    if "memories" not in placed:
        steps.append(Step("the schema on every worker as on the coordinator: the owner role's, used by the others",
                          sql.SQL(queries.query("citus_on_workers")), (_WORKER_SCHEMA,)))
    for table_name, policy, qual, check in conn.execute(queries.query("pymem_policies_with_subqueries")).fetchall():
        clauses = []
        if qual:
            clauses.append(sql.SQL("using ({})").format(sql.SQL(inline_scalar_subqueries(qual))))
        if check:
            clauses.append(sql.SQL("with check ({})").format(sql.SQL(inline_scalar_subqueries(check))))
        steps.append(Step("no scalar subquery in a policy of a distributed table",
                          queries.template("citus_alter_policy", policy=sql.Identifier(policy),
                                           table=_table(table_name), clauses=sql.SQL(" ").join(clauses))))
    for (signature,) in conn.execute(queries.query("functions_forcing_generic_plans")).fetchall():
        steps.append(Step("custom plans: Citus cannot make a distributed plan of a generic one",
                          queries.template("citus_custom_plans", function=sql.SQL(signature))))
    for role in _INSERTING_ROLES:
        for table_name, columns in conn.execute(queries.query("defaulted_columns_without_insert_grant"), (role, role)):
            if table_name in TENANT_TABLES:
                steps.append(Step("Citus names every column of a row it sends to a shard",
                                  queries.template("citus_grant_insert", columns=sql.SQL(columns),
                                                   table=_table(table_name), role=sql.Identifier(role))))
    for name in REFERENCE_TABLES:
        if name not in placed:
            steps.append(Step("a global table on every node", sql.SQL(queries.query("citus_reference_table")),
                              (f"pymem.{name}",)))
    for name in TENANT_TABLES:
        if name not in placed:
            steps.append(Step("a tenant table sharded by tenant_id, colocated",
                              sql.SQL(queries.query("citus_distribute_table")),
                              (f"pymem.{name}", "default" if name == TENANT_TABLES[0] else "pymem.memories")))
    # Last: while the owner may log in, Citus creates shards over a connection as the table's
    # owner, which the schema's propagation has not made the owner of the schema on the workers.
    if not owner_logs_in(conn):
        steps.append(Step("a definer function's statements reach the shards as its owner",
                          queries.template("citus_owner_login")))
    return steps


def owner_logs_in(conn: psycopg.Connection) -> bool:
    row = conn.execute(queries.query("role_can_log_in"), (_OWNER,)).fetchone()
    return bool(row and row[0])


def _functions_to_distribute(conn: psycopg.Connection) -> list[str]:
    return [r[0] for r in conn.execute(queries.query("pymem_functions_not_distributed"))
            if r[0] != "pymem._login_binding()"]


def distribute(conn: psycopg.Connection) -> DistributionReport:
    """Distribute the store at `conn` (autocommit, administrative login on the coordinator);
    a no-op when it is distributed already. Then propagate every function and copy the bindings."""
    version = citus_version(conn)
    steps = distribution_plan(conn)
    ran: list[str] = []
    done = not steps and not _functions_to_distribute(conn)
    try:
        if done:  # distributed already: each worker's bindings (a new worker's table too), set again
            bindings = Step("", sql.SQL(queries.query("citus_on_workers")), (_node_local_bindings_script(None),))
            conn.execute(bindings.statement, bindings.params)
        for step in steps:
            conn.execute(step.statement, step.params or None)
            ran.append(step.text(conn))
        # A function's body is checked where it is created: a SQL function that calls one not yet
        # on the workers fails there, and so does a plpgsql function that declares a variable of
        # the bindings' row type before each worker has its own bindings table (whose CHECKs call
        # functions that the first pass propagates). Each pass propagates what it can.
        bindings = Step("", sql.SQL(queries.query("citus_on_workers")), (_node_local_bindings_script(None),))
        local_bindings = done
        pending = [] if done else _functions_to_distribute(conn)
        while pending or not local_bindings:
            for signature in pending:
                try:
                    conn.execute(queries.query("citus_distribute_function"), (signature,))
                    ran.append(Step("", sql.SQL(queries.query("citus_distribute_function")), (signature,)).text(conn))
                except psycopg.Error:
                    continue
            left = _functions_to_distribute(conn)
            if left and len(left) == len(pending) and local_bindings:
                raise ServerError(f"Citus could not propagate {len(left)} function(s), first {left[0]}")
            if not local_bindings and (not left or len(left) == len(pending)):
                failed = [f"{a[0]}:{a[1]} ({a[3]})" for a in conn.execute(bindings.statement, bindings.params)
                          if not a[2]]
                if failed:
                    raise ServerError(f"the node-local login bindings could not be created on {', '.join(failed)}")
                ran.append(bindings.text(conn))
                local_bindings = True
            pending = left
        sync_bindings(conn)
    except psycopg.Error as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ServerError(f"distributing the store failed ({type(exc).__name__}): {first}") from exc
    workers = int(conn.execute(queries.query("citus_worker_count")).fetchone()[0])  # type: ignore[index]
    return DistributionReport(citus_version=version or "", workers=workers, statements=tuple(ran))


def distribution_sql(conn: psycopg.Connection) -> str:
    """The plan as a script for a DBA: each statement after a comment saying why."""
    lines = []
    for step in distribution_plan(conn):
        lines.append(f"-- {step.why}")
        lines.append(step.text(conn).rstrip() + ";")
    lines.append("-- then every function of the schema, until none is left:")
    lines.append("--   select create_distributed_function(oid::regprocedure) for each pymem function")
    lines.append("--   not in pg_dist_object")
    lines.append("--   (pymem._login_binding() excepted: it reads the node-local bindings)")
    lines.append("-- then on every worker (run_command_on_workers), its node-local bindings table and reader:")
    lines.extend("--   " + line for line in _node_local_bindings_script(None).splitlines())
    lines.append("-- and each worker's bindings set to the coordinator's")
    lines.append("-- (pymem db bind-login and unbind-login do it after each change)")
    return "\n".join(lines) + "\n"


def sync_bindings(conn: psycopg.Connection) -> None:
    """Set every worker's node-local pymem.login_bindings to the coordinator's rows, as `conn`
    sees them (inside its transaction, before it commits). A no-op on a server without Citus
    or where the store is not distributed. Raises ServerError if a worker did not take them: a
    worker without the binding would let a bound login name another tenant on its shards."""
    if citus_version(conn) is None or "memories" not in {r[0] for r in conn.execute(queries.query("citus_tables"))}:
        return
    if not conn.execute(queries.query("citus_worker_count")).fetchone()[0]:  # type: ignore[index]
        return
    rows = conn.execute(queries.query("login_bindings_json")).fetchone()[0]  # type: ignore[index]
    json.loads(rows)  # a well-formed array, whatever the table held
    answers = conn.execute(queries.query("citus_on_workers"), (_node_local_bindings_script(rows),)).fetchall()
    failed = [f"{a[0]}:{a[1]} ({a[3]})" for a in answers if not a[2]]
    if failed:
        raise ServerError(f"the login bindings did not reach every worker: {', '.join(failed)}")
