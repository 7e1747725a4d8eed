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

-- name: replace_memories --
-- Insert or replace whole memory rows, one VALUES row per memory; every column a row determines is replaced
insert into pymem.memories as m (tenant_id, id, scope, kind, content, record, embedding, tags, importance,
                                 confidence, origin, source_adapter, provenance, injection_source,
                                 policy_fingerprint, valid_from, invalidated_at, superseded_by)
values (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, coalesce(%s, now()), %s, %s)
on conflict (tenant_id, id) do update
   set scope = excluded.scope, kind = excluded.kind, content = excluded.content, record = excluded.record,
       embedding = excluded.embedding, tags = excluded.tags, importance = excluded.importance,
       confidence = excluded.confidence, origin = excluded.origin, source_adapter = excluded.source_adapter,
       provenance = excluded.provenance, injection_source = excluded.injection_source,
       policy_fingerprint = excluded.policy_fingerprint, valid_from = excluded.valid_from,
       invalidated_at = excluded.invalidated_at, superseded_by = excluded.superseded_by
returning m.id, m.revision

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

-- name: search_as --
-- Set the context and search in one statement (the context's five values, then as for search)
select * from pymem.search_as(p_tenant => %s, p_actor => %s, p_adapter => %s, p_scope => %s,
                              p_read_adapters => %s, p_query => %s, p_top_k => %s, p_scope_filter => %s,
                              p_include_superseded => %s, p_with_vectors => %s, p_plan => %s)

-- ============================================================================================
-- the LangGraph store (pymem/langgraph): items are memories whose scope holds their namespace
-- ============================================================================================
-- A LangGraph filter arrives as a jsonb array of conditions {"path": [...], "op": ..., "value": ...}
-- on the item's value (pymem/langgraph/filters.py), so each statement keeps one fixed shape. A
-- missing field reads as JSON null, as in LangGraph's in-memory store; range operators compare
-- numbers as numbers and strings by code point, and any other pair of types never matches.

-- name: langgraph_write_state --
-- The database clock, and the items among these ids (%s tenant, %s ids) with the creation time and ranks they keep
select clock_timestamp() as now, m.id, m.record -> 'created_at' as created_at, m.record -> 'rank' as rank,
       m.record -> 'ns_rank' as ns_rank
  from (select 1) one
  left join pymem.memories m on m.tenant_id = %s and m.id = any(%s) and m.erased_at is null

-- name: langgraph_namespace_rank --
-- The rank of a namespace that still holds an item (%s tenant, %s the namespace's exact scope), if any
select m.record -> 'ns_rank' from pymem.memories m
 where m.tenant_id = %s and m.scope @> %s and m.erased_at is null
 limit 1

-- name: langgraph_items --
-- Items under a namespace scope that match a filter: by cosine distance to a query vector (NULL: none), then in the order they were first put (query, tenant, scope, filter twice, which: all/embedded/unembedded, limit, offset)
select d.record, 1 - d.distance as score
  from (select m.id, m.record, m.embedding <=> %s::vector as distance
          from pymem.memories m
         where m.tenant_id = %s and m.scope @> %s and m.erased_at is null
           and (%s::jsonb = '[]'::jsonb or not exists (
                 select 1
                   from jsonb_array_elements(%s::jsonb) as c(cond)
                   cross join lateral (
                     select coalesce(m.record -> 'value' #> array(select jsonb_array_elements_text(c.cond -> 'path')),
                                     'null'::jsonb) as x,
                            c.cond -> 'value' as v) t
                  where not coalesce(case c.cond ->> 'op'
                          when 'eq' then t.x = t.v
                          when 'ne' then t.x <> t.v
                          when 'object' then jsonb_typeof(t.x) = 'object'
                          when 'array' then case when jsonb_typeof(t.x) = 'array'
                                                 then jsonb_array_length(t.x) = (t.v)::integer end
                          else case jsonb_typeof(t.x) || '/' || jsonb_typeof(t.v)
                                 when 'number/number' then case c.cond ->> 'op'
                                   when 'gt' then (t.x)::numeric > (t.v)::numeric
                                   when 'gte' then (t.x)::numeric >= (t.v)::numeric
                                   when 'lt' then (t.x)::numeric < (t.v)::numeric
                                   when 'lte' then (t.x)::numeric <= (t.v)::numeric end
                                 when 'string/string' then case c.cond ->> 'op'
                                   when 'gt' then (t.x #>> '{}') collate "C" > (t.v #>> '{}') collate "C"
                                   when 'gte' then (t.x #>> '{}') collate "C" >= (t.v #>> '{}') collate "C"
                                   when 'lt' then (t.x #>> '{}') collate "C" < (t.v #>> '{}') collate "C"
                                   when 'lte' then (t.x #>> '{}') collate "C" <= (t.v #>> '{}') collate "C" end
                               end
                        end, false)))
           and case %s::text when 'embedded' then m.embedding is not null
                             when 'unembedded' then m.embedding is null
                             else true end
        offset 0) d  -- offset 0: every distance computed, never an HNSW scan that could come back short
 where d.distance is null or d.distance <> 'NaN'::double precision
 order by d.distance, (d.record ->> 'ns_rank')::numeric, (d.record ->> 'rank')::numeric, d.id
 limit %s offset %s

-- name: langgraph_namespaces --
-- The distinct namespaces of the items under a namespace scope (%s tenant, %s scope)
select distinct m.record -> 'namespace'
  from pymem.memories m
 where m.tenant_id = %s and m.scope @> %s and m.erased_at is null

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

-- ============================================================================================
-- what vouches for the chain from outside (the independent verifier, checkpoints)
-- ============================================================================================

-- name: ledger_tenants --
-- Every tenant with a head, a ledger entry or a memory
select tenant_id from pymem.chain_heads union select tenant_id from pymem.ledger
union select tenant_id from pymem.memories order by 1

-- name: raw_ledger --
-- A tenant's (%s) ledger entries in chain order, jsonb as text, for recomputing hashes outside the database
select tenant_id, seq, event, memory_id, revision, content_hash, actor, adapter, details::text as details,
       occurred_at, hash_version, prev_hash, chain_hash
  from pymem.ledger where tenant_id = %s order by seq

-- name: raw_memories --
-- A tenant's (%s) memory rows, jsonb and the vector as text (pgvector prints each float4 exactly), by id
select tenant_id, id, scope::text as scope, kind, content, record::text as record, embedding::text as embedding,
       tags, importance, confidence, origin, source_adapter, provenance::text as provenance, injection_source,
       policy_fingerprint, revision, created_at, valid_from, invalidated_at, superseded_by, erased_at, content_hash
  from pymem.memories where tenant_id = %s order by id

-- name: raw_chain_head --
-- A tenant's (%s) head row
select seq, chain_hash from pymem.chain_heads where tenant_id = %s

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
