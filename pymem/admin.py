"""Administering an installation: what an operator or a DBA does, not an agent.

Login bindings (`bind_login`: which tenants, scope and adapter a database login may act as),
the schema (`upgrade_schema` applies the migrations with the admin connection; `upgrade_sql`
prints them for a DBA to apply), its distribution over a Citus cluster by tenant (`distribute`;
`distribution_sql` prints the plan), the embedded server (`stop_embedded`), the admin connection
itself, the database's status (`database_status`), the registration of the installation's
signing key (`register_signing_key`), import and export of memories, what `reembed` reports, and
retention: the tenant's policy (`set_retention`, `retention_policy`), the purge of expired
memories (`purge_expired`, `purge_expired_all` for every tenant) and the restart of their clocks (`refresh_expiry`).

Upgrading loads Alembic and SQLAlchemy, on first use only.
"""

from __future__ import annotations

from .conventions.signing_key import register_signing_key, registered_signing_key
from .migrate import upgrade_sql
from .storage.bindings import LoginBinding, bind_login, list_bindings, unbind_login
from .storage.distribution import DistributionReport, distribute, distribution_sql
from .storage.endpoints import admin_connection, stop_embedded, upgrade_schema
from .storage.reembed import ReembedReport
from .storage.retention import (
    RetentionPolicy,
    purge_expired,
    purge_expired_all,
    refresh_expiry,
    retention_policy,
    set_retention,
)
from .storage.status import DatabaseStatus, database_status
from .storage.transfer import ImportReport, check_file, export_records, import_file

__all__ = ["bind_login", "unbind_login", "list_bindings", "LoginBinding", "upgrade_schema", "upgrade_sql",
           "stop_embedded", "admin_connection", "database_status", "DatabaseStatus", "register_signing_key",
           "registered_signing_key", "import_file", "export_records", "check_file", "ImportReport", "ReembedReport",
           "RetentionPolicy", "retention_policy", "set_retention", "purge_expired", "purge_expired_all",
           "refresh_expiry", "distribute", "distribution_sql", "DistributionReport"]

