-- Runs once, when the container's data directory is first initialised, before pymem's migration.
-- pymem's own group roles are created here already (the migration's role creation is idempotent)
-- so that the login roles below can join them:
--   pymem        the application's login: a member of pymem_app only (no superuser, no BYPASSRLS)
--   pymem_audit  an auditor's login: reads every tenant's ledger, writes nothing
create role pymem_owner nologin;
create role pymem_app nologin;
create role pymem_auditor nologin;
create role pymem login password 'pymem' in role pymem_app;
create role pymem_audit login password 'pymem' in role pymem_auditor;
