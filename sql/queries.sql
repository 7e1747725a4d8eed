-- pymem: every statement the library runs, by name.
--
-- The schema (schema.sql) is the store; this file is how the Python layer talks to it. pymem
-- loads it once (pymem/queries.py) and refers to each statement by its name, so a DBA can review
-- everything the library can run without opening Python. The tooling in pymem/tools (the
-- benchmark's raw-pgvector baselines in a scratch database, the demo's deliberate tampering) keeps
-- its own statements: they are not the library's.
--
-- Format: each statement starts with a header line `-- name: <name> --` and a one-line `-- `
-- description, and runs to the next header. Parameters are psycopg placeholders (%s, in the order
-- the description gives). Two kinds of statement are templates, filled in by pymem/queries.py:
--   * `{name}` placeholders take identifiers (a role, a database) quoted by psycopg.sql;
--   * a statement whose description says "one VALUES row per memory" is sent with its VALUES row
--     repeated once per row of the batch (queries.repeated(name, rows)): one multi-row INSERT per
--     batch, because COPY is refused under row-level security.

-- ============================================================================================
-- connections and context
-- ============================================================================================

-- name: vector_type_exists --
-- Whether pgvector is installed in this database (an administrative connection may arrive first)
select to_regtype('vector') is not null

-- name: login_needs_app_role --
-- Is the login a superuser or BYPASSRLS, and is it already the role %s?
select r.rolsuper or r.rolbypassrls, current_user = %s from pg_roles r where r.rolname = current_user

-- name: set_role --
-- Switch a privileged login to the app role so row-level security applies
set role {role}

-- name: set_context --
-- The transaction's context: tenant, actor, adapter, scope, read-adapter allow-list
select pymem.set_context(%s, %s, %s, %s, %s)

-- name: reset_session --
-- Clean a pooled connection on return: held cursors, LISTEN, advisory locks, temporary objects, the role, every setting
close all; unlisten *; select pg_advisory_unlock_all(); discard temp; discard sequences;
set session authorization default; reset role; reset all

-- name: set_lock_timeout --
-- A transaction-local lock_timeout (a refusal's audit must not wait forever for a chain lock)
select set_config('lock_timeout', %s, true)

-- ============================================================================================
-- schema and server facts
-- ============================================================================================

-- name: store_embedding_dim --
-- The dimension memories.embedding was created with
select embedding_dim from pymem.store_info

-- name: schema_version_table_exists --
-- Whether pymem was ever migrated into this database
select to_regclass('pymem.alembic_version') is not null

-- name: schema_revision --
-- The schema revision Alembic recorded
select version_num from pymem.alembic_version

-- name: server_version --
-- The server's version string
show server_version

-- name: pgvector_version --
-- The installed pgvector version, if any
select extversion from pg_extension where extname = 'vector'

-- name: pgvector_available_version --
-- The pgvector version the server could install
select default_version from pg_available_extensions where name = 'vector'

-- name: database_exists --
-- Whether the database %s exists (the embedded server creates pymem's on first start)
select 1 from pg_database where datname = %s

-- name: create_database --
-- Create the embedded server's database
create database {database}

-- name: allow_app_login --
-- On the embedded server only: let pymem_app log in over the private socket
alter role pymem_app login

-- name: allow_auditor_login --
-- On the embedded server only: let pymem_auditor log in over the private socket
alter role pymem_auditor login

-- ============================================================================================
-- writing memories (the one write path: pymem/storage/rows.py)
-- ============================================================================================

-- name: insert_memories --
-- Insert memory rows, one VALUES row per memory; fails on an existing id
insert into pymem.memories as m (tenant_id, id, scope, kind, content, record, embedding, tags, importance,
                                 confidence, origin, source_adapter, provenance, injection_source,
                                 policy_fingerprint, valid_from, invalidated_at, superseded_by)
values (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, coalesce(%s, now()), %s, %s)
returning m.id, m.revision

-- name: upsert_memories --
-- Insert or replace chunk rows, one VALUES row per memory; replaces only what a chunk determines
insert into pymem.memories as m (tenant_id, id, scope, kind, content, record, embedding, tags, importance,
                                 confidence, origin, source_adapter, provenance, injection_source,
                                 policy_fingerprint, valid_from, invalidated_at, superseded_by)
values (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, coalesce(%s, now()), %s, %s)
on conflict (tenant_id, id) do update
   set scope = excluded.scope, content = excluded.content, record = excluded.record,
       embedding = excluded.embedding, origin = excluded.origin, provenance = excluded.provenance,
       injection_source = excluded.injection_source, source_adapter = excluded.source_adapter
returning m.id, m.revision

-- name: create_stage --
-- A session-local staging table for one bulk write, with the write columns' own types (read from pymem.memories, so no type name is looked up); dropped at commit
create temp table pymem_stage on commit drop as
select tenant_id, id, scope, kind, content, record, embedding, tags, importance, confidence, origin, source_adapter,
       provenance, injection_source, policy_fingerprint, valid_from, invalidated_at, superseded_by
  from pymem.memories with no data

-- name: copy_stage --
-- Binary COPY of a batch of memory rows into the staging table (the write columns, in order)
copy pg_temp.pymem_stage (tenant_id, id, scope, kind, content, record, embedding, tags, importance, confidence,
                          origin, source_adapter, provenance, injection_source, policy_fingerprint, valid_from,
                          invalidated_at, superseded_by) from stdin (format binary)

-- name: upsert_from_stage --
-- upsert_memories for every staged row in one statement: the caller's RLS, the triggers and one chain lock per tenant
insert into pymem.memories as m (tenant_id, id, scope, kind, content, record, embedding, tags, importance,
                                 confidence, origin, source_adapter, provenance, injection_source,
                                 policy_fingerprint, valid_from, invalidated_at, superseded_by)
select s.tenant_id, s.id, s.scope, s.kind, s.content, s.record, s.embedding, s.tags, s.importance, s.confidence,
       s.origin, s.source_adapter, s.provenance, s.injection_source, s.policy_fingerprint,
       coalesce(s.valid_from, now()), s.invalidated_at, s.superseded_by
  from pg_temp.pymem_stage s
on conflict (tenant_id, id) do update
   set scope = excluded.scope, content = excluded.content, record = excluded.record,
       embedding = excluded.embedding, origin = excluded.origin, provenance = excluded.provenance,
       injection_source = excluded.injection_source, source_adapter = excluded.source_adapter
returning m.id, m.revision

-- name: drop_stage --
-- Drop the staging table once its rows are written (the next bulk write of the transaction makes its own)
drop table pg_temp.pymem_stage

-- name: current_revisions --
-- Revisions of the context tenant's live memories with these ids (%s tenant, %s ids)
select id, revision from pymem.memories where tenant_id = %s and id = any(%s) and erased_at is null

-- name: claim_idempotency_key --
-- Claim a key for a call (tenant, verb, actor, key, digest, result, lifetime); no row back = taken and live; the adapter is the connection's (a column default RLS checks)
insert into pymem.idempotency_keys as k (tenant_id, verb, actor, key, digest, result, expires_at)
values (%s, %s, %s, %s, %s, %s, now() + %s)
on conflict (tenant_id, verb, adapter, actor, key) do update
   set digest = excluded.digest, result = excluded.result, created_at = now(), expires_at = excluded.expires_at
 where k.expires_at <= now()
returning true

-- name: idempotency_key --
-- The digest and result stored for a key (tenant, verb, actor, key) under the connection's adapter
select digest, result from pymem.idempotency_keys
 where tenant_id = %s and verb = %s and adapter = coalesce(pymem._ctx_adapter(), '') and actor = %s and key = %s

-- name: purge_idempotency_keys --
-- Delete the context tenant's (and adapter's) expired idempotency keys; returns how many
select pymem.purge_idempotency_keys()

-- name: count_memories --
-- How many of these ids (%s tenant, %s ids) the context can see
select count(*) from pymem.memories where tenant_id = %s and id = any(%s)

-- name: delete_memories --
-- Delete the context's memories by id (%s ids), one ledger event each; whether each had been erased (logins hold no DELETE privilege)
select erased from pymem.delete_memories(%s)

-- ============================================================================================
-- reading memories
-- ============================================================================================

-- name: memory_row --
-- One whole memory row (%s tenant, %s id)
select id, scope, kind, content, record, embedding, tags, importance, confidence, origin, source_adapter,
       provenance, injection_source, policy_fingerprint, revision, created_at, updated_at, valid_from,
       invalidated_at, superseded_by, erased_at, content_hash
  from pymem.memories
 where tenant_id = %s and id = %s

-- name: chunks_by_id --
-- The live chunks with these ids (%s tenant, %s ids); the vector only for rows without a record
select id, record, revision, content, scope, kind, tags, origin, provenance, injection_source,
       case when record is null then embedding end as embedding
  from pymem.memories
 where tenant_id = %s and id = any(%s) and erased_at is null

-- name: export_chunks --
-- Every live chunk of the tenant (%s), in primary-key order, for export
select id, record, content, scope, kind, tags, origin, provenance, injection_source,
       case when record is null then embedding end as embedding
  from pymem.memories
 where tenant_id = %s and erased_at is null
 order by tenant_id, id

-- name: search --
-- Cosine search in the transaction's context (query, top_k, scope filter, superseded, vectors, plan)
select * from pymem.search(p_query => %s, p_top_k => %s, p_scope_filter => %s, p_include_superseded => %s,
                           p_with_vectors => %s, p_plan => %s)

-- name: search_as_chunks --
-- search_as for the storage contract: id, record, score, revision, and the columns a record-less row's chunk is built from (NULL when the row has a record); sent as a prepared statement
select h.id, h.record, h.score, h.revision,
       case when h.record is null then h.content end, case when h.record is null then h.scope end,
       case when h.record is null then h.kind end, case when h.record is null then h.tags end,
       case when h.record is null then h.origin end, case when h.record is null then h.provenance end,
       case when h.record is null then h.injection_source end
  from pymem.search_as(p_tenant => %s, p_actor => %s, p_adapter => %s, p_scope => %s, p_read_adapters => %s,
                       p_query => %s, p_top_k => %s, p_scope_filter => %s, p_include_superseded => %s,
                       p_with_vectors => %s) h

-- ============================================================================================
-- admission and integrity
-- ============================================================================================

-- name: holds_chain_lock --
-- Does this transaction hold the tenant's (%s) chain-head lock? (the gate cannot audit a refusal then)
select pymem.holds_chain_lock(%s)

-- name: record_refusal --
-- Chain an admission refusal (origin, source, reason, signature, digest, policy fingerprint)
select pymem.record_refusal(%s, %s, %s, %s, %s, %s)

-- name: refusals --
-- The tenant's most recent refusals at or after a time, oldest first (tenant, since, since, limit)
select r.* from (
  select * from pymem.audit_refusals
   where tenant_id = %s and (%s::timestamptz is null or occurred_at >= %s::timestamptz)
   order by seq desc limit %s) r
 order by r.seq

-- name: memory_history --
-- A memory's ledger events with its current provenance, oldest first (tenant, memory id)
select * from pymem.memory_history where tenant_id = %s and memory_id = %s order by seq

-- name: verify_chain --
-- Verify one tenant's chain (%s) or, with NULL, every tenant's
select * from pymem.verify_chain(%s)

-- name: repeatable_read --
-- Make the transaction one snapshot (first statement of the transaction)
set transaction isolation level repeatable read

-- name: export_snapshot --
-- Name this (repeatable read) transaction's snapshot, so that other connections can read the same one
select pg_export_snapshot()

-- name: import_snapshot --
-- Read from a snapshot another connection exported (after repeatable_read, before any query)
set transaction snapshot {snapshot}

-- name: context_is_whole_tenant --
-- Whether the context covers the whole tenant (no scope, no read allow-list): verifying a chain names every memory
select pymem._ctx_scope() = '{}'::jsonb and pymem._ctx_read_adapters() is null

-- name: verify_sizes --
-- Each tenant (%s, or every tenant with NULL) with its head row (seq and chain_hash, NULL without one) and live row count (to split its verification into ranges)
select t.tenant_id, h.seq, h.chain_hash, coalesce(h.live_rows, 0)
  from (select tenant_id from pymem.chain_heads union select tenant_id from pymem.ledger
        union select tenant_id from pymem.memories) t
  left join pymem.chain_heads h on h.tenant_id = t.tenant_id
 where %s::text is null or t.tenant_id = %s
 order by 1

-- name: memory_id_at --
-- The id at a position of a tenant's memories in id order (%s tenant, %s position): where a range of rows to verify ends
select id from pymem.memories where tenant_id = %s order by id offset %s limit 1

-- name: ledger_bytes --
-- A tenant's ledger entries with seq in a range (tenant, low or NULL, low, high or NULL, high), each with the bytes its chain_hash covers (the database's encoding)
select l.seq, l.event, l.memory_id, l.revision, l.content_hash, l.hash_version, l.prev_hash, l.chain_hash,
       case l.hash_version when 2 then pymem._event_bytes_v2(l) when 1 then pymem._event_bytes_v1(l) end
  from pymem.ledger l
 where l.tenant_id = %s and (%s::bigint is null or l.seq >= %s) and (%s::bigint is null or l.seq <= %s)
 order by l.seq

-- name: memory_bytes --
-- A tenant's memories with ids in a range (tenant, low or NULL, low, high or NULL, high): stored hash, revision, and the version-2 bytes of each live row (the database's encoding)
select m.id, m.revision, m.erased_at is not null, m.content_hash,
       case when m.erased_at is null then pymem._content_bytes_v2(m) end
  from pymem.memories m
 where m.tenant_id = %s and (%s::text is null or m.id >= %s) and (%s::text is null or m.id < %s)

-- name: memories_failing_v1 --
-- Which of these memories (%s tenant, %s ids) no longer match their hash version 1
select m.id from pymem.memories m
 where m.tenant_id = %s and m.id = any(%s) and m.content_hash <> pymem._content_hash_v1(m)

-- ============================================================================================
-- what vouches for the chain from outside (the independent verifier, checkpoints)
-- ============================================================================================

-- name: raw_ledger --
-- A tenant's ledger entries with seq in a range (tenant, low or NULL, low, high or NULL, high), in chain order, jsonb as text, for recomputing hashes outside the database
select tenant_id, seq, event, memory_id, revision, content_hash, actor, adapter, details::text as details,
       occurred_at, hash_version, prev_hash, chain_hash
  from pymem.ledger
 where tenant_id = %s and (%s::bigint is null or seq >= %s) and (%s::bigint is null or seq <= %s)
 order by seq

-- name: raw_memories --
-- A tenant's memory rows with ids in a range (tenant, low or NULL, low, high or NULL, high), jsonb and the vector as text (pgvector prints each float4 exactly)
select tenant_id, id, scope::text as scope, kind, content, record::text as record, embedding::text as embedding,
       tags, importance, confidence, origin, source_adapter, provenance::text as provenance, injection_source,
       policy_fingerprint, revision, created_at, valid_from, invalidated_at, superseded_by, erased_at, content_hash
  from pymem.memories
 where tenant_id = %s and (%s::text is null or id >= %s) and (%s::text is null or id < %s)

-- name: ledger_entry_hash --
-- The chain hash of one entry (tenant, seq)
select chain_hash from pymem.ledger where tenant_id = %s and seq = %s

-- name: ledger_last_seq --
-- The last seq of a tenant's (%s) ledger
select max(seq) from pymem.ledger where tenant_id = %s

-- name: heads_to_anchor --
-- Each tenant's head row beside its last ledger entry, with the database's clock and name (tenant or NULL = all, twice)
select h.tenant_id, h.seq as head_seq, h.chain_hash as head_hash, l.seq as last_seq, l.chain_hash as last_hash,
       l.occurred_at, clock_timestamp() as taken_at, current_database() as database
  from pymem.chain_heads h
  left join lateral (select x.seq, x.chain_hash, x.occurred_at from pymem.ledger x
                      where x.tenant_id = h.tenant_id order by x.seq desc limit 1) l on true
 where %s::text is null or h.tenant_id = %s
 order by h.tenant_id

-- ============================================================================================
-- login bindings (administrative connection)
-- ============================================================================================

-- name: role_is_superuser --
-- Whether a role (%s) is a superuser; no row when it does not exist
select rolsuper from pg_roles where rolname = %s

-- name: bind_login --
-- Bind or rebind a role (role, adapter, tenants, all_tenants, scope); the binding log records it
insert into pymem.login_bindings as b (role_name, adapter, tenants, all_tenants, scope)
values (%s, %s, %s, %s, %s)
on conflict (role_name) do update
   set adapter = excluded.adapter, tenants = excluded.tenants, all_tenants = excluded.all_tenants,
       scope = excluded.scope
returning role_name, adapter, tenants, all_tenants, scope, created_at, created_by

-- name: unbind_login --
-- Remove a role's (%s) binding; the binding log records it
delete from pymem.login_bindings where role_name = %s

-- name: login_bindings --
-- Every binding, by role name
select role_name, adapter, tenants, all_tenants, scope, created_at, created_by
  from pymem.login_bindings order by role_name
