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

-- name: join_transaction --
-- The first statement pymem runs on a caller's idle connection: the driver begins the caller's transaction before it, and pymem works inside that transaction
select 1

-- name: reset_session --
-- Clean a pooled connection on return: held cursors, LISTEN, advisory locks, temporary objects, the role, every setting
close all; unlisten *; select pg_advisory_unlock_all(); discard temp; discard sequences;
set session authorization default; reset role; reset all

-- name: set_lock_timeout --
-- A transaction-local lock_timeout (a refusal's audit must not wait forever for a chain lock)
select set_config('lock_timeout', %s, true)

-- name: set_call_timeouts --
-- A transaction's lock_timeout and statement_timeout (each NULL: left as the server has it), so a held row lock or a runaway statement fails the call instead of holding its connection
select set_config('lock_timeout', coalesce(%s, current_setting('lock_timeout')), true),
       set_config('statement_timeout', coalesce(%s, current_setting('statement_timeout')), true)

-- name: set_session_timeouts --
-- The same two limits for the whole session of a connection pymem keeps for one-statement calls (never reset, never shared)
select set_config('lock_timeout', coalesce(%s, current_setting('lock_timeout')), false),
       set_config('statement_timeout', coalesce(%s, current_setting('statement_timeout')), false)

-- ============================================================================================
-- schema and server facts
-- ============================================================================================

-- name: upgrade_preflight --
-- What decides whether this login can migrate this server: versions, pgvector, who owns the pymem schema
select current_setting('server_version') as server_version,
       current_setting('server_version_num')::int as server_version_num,
       (select extversion from pg_extension where extname = 'vector') as vector_installed,
       (select default_version from pg_available_extensions where name = 'vector') as vector_available,
       current_user as login,
       (select rolsuper from pg_roles where rolname = current_user) as superuser,
       (select nspowner::regrole::text from pg_namespace where nspname = 'pymem') as schema_owner,
       coalesce((select pg_has_role(current_user, nspowner, 'USAGE') from pg_namespace where nspname = 'pymem'),
                false) as owns_schema,
       has_database_privilege(current_database(), 'CREATE') as can_create

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
                                 policy_fingerprint, valid_from, invalidated_at, superseded_by, embedder, ttl, subject)
values (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, coalesce(%s, now()), %s, %s, %s, %s, %s)
returning m.id, m.revision

-- name: upsert_memories --
-- Insert or replace chunk rows, one VALUES row per memory; replaces only what a chunk determines
insert into pymem.memories as m (tenant_id, id, scope, kind, content, record, embedding, tags, importance,
                                 confidence, origin, source_adapter, provenance, injection_source,
                                 policy_fingerprint, valid_from, invalidated_at, superseded_by, embedder, ttl, subject)
values (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, coalesce(%s, now()), %s, %s, %s, %s, %s)
on conflict (tenant_id, id) do update
   set scope = excluded.scope, content = excluded.content, record = excluded.record,
       embedding = excluded.embedding, origin = excluded.origin, provenance = excluded.provenance,
       injection_source = excluded.injection_source, source_adapter = excluded.source_adapter,
       embedder = excluded.embedder, ttl = excluded.ttl, subject = excluded.subject
returning m.id, m.revision

-- name: replace_memories --
-- Insert or replace whole memory rows, one VALUES row per memory; every column a row determines is replaced
insert into pymem.memories as m (tenant_id, id, scope, kind, content, record, embedding, tags, importance,
                                 confidence, origin, source_adapter, provenance, injection_source,
                                 policy_fingerprint, valid_from, invalidated_at, superseded_by, embedder, ttl, subject)
values (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, coalesce(%s, now()), %s, %s, %s, %s, %s)
on conflict (tenant_id, id) do update
   set scope = excluded.scope, kind = excluded.kind, content = excluded.content, record = excluded.record,
       embedding = excluded.embedding, tags = excluded.tags, importance = excluded.importance,
       confidence = excluded.confidence, origin = excluded.origin, source_adapter = excluded.source_adapter,
       provenance = excluded.provenance, injection_source = excluded.injection_source,
       policy_fingerprint = excluded.policy_fingerprint, valid_from = excluded.valid_from,
       invalidated_at = excluded.invalidated_at, superseded_by = excluded.superseded_by,
       embedder = excluded.embedder, ttl = excluded.ttl, subject = excluded.subject
returning m.id, m.revision

-- name: create_stage --
-- A session-local staging table for one bulk write, with the write columns' own types (read from pymem.memories, so no type name is looked up); dropped at commit
create temp table pymem_stage on commit drop as
select tenant_id, id, scope, kind, content, record, embedding, tags, importance, confidence, origin, source_adapter,
       provenance, injection_source, policy_fingerprint, valid_from, invalidated_at, superseded_by, embedder, ttl,
       subject
  from pymem.memories with no data

-- name: copy_stage --
-- Binary COPY of a batch of memory rows into the staging table (the write columns, in order)
copy pg_temp.pymem_stage (tenant_id, id, scope, kind, content, record, embedding, tags, importance, confidence,
                          origin, source_adapter, provenance, injection_source, policy_fingerprint, valid_from,
                          invalidated_at, superseded_by, embedder, ttl, subject) from stdin (format binary)

-- name: upsert_from_stage --
-- upsert_memories for every staged row in one statement: the caller's RLS, the triggers and one chain lock per tenant; rows are taken in id order (code points, as Python sorts them) so overlapping batches lock them in one order and queue instead of deadlocking
insert into pymem.memories as m (tenant_id, id, scope, kind, content, record, embedding, tags, importance,
                                 confidence, origin, source_adapter, provenance, injection_source,
                                 policy_fingerprint, valid_from, invalidated_at, superseded_by, embedder, ttl, subject)
select s.tenant_id, s.id, s.scope, s.kind, s.content, s.record, s.embedding, s.tags, s.importance, s.confidence,
       s.origin, s.source_adapter, s.provenance, s.injection_source, s.policy_fingerprint,
       coalesce(s.valid_from, now()), s.invalidated_at, s.superseded_by, s.embedder, s.ttl, s.subject
  from pg_temp.pymem_stage s
 order by s.id collate "C"
on conflict (tenant_id, id) do update
   set scope = excluded.scope, content = excluded.content, record = excluded.record,
       embedding = excluded.embedding, origin = excluded.origin, provenance = excluded.provenance,
       injection_source = excluded.injection_source, source_adapter = excluded.source_adapter,
       embedder = excluded.embedder, ttl = excluded.ttl, subject = excluded.subject
returning m.id, m.revision

-- name: reap_expired --
-- Delete the context tenant's expired memories among the ids about to be written (%s ids), so the write inserts them afresh
select pymem.reap_expired(%s)

-- name: drop_stage --
-- Drop the staging table once its rows are written (the next bulk write of the transaction makes its own)
drop table pg_temp.pymem_stage

-- name: current_revisions --
-- Revisions of the context tenant's live memories with these ids (%s tenant, %s ids)
select id, revision from pymem.memories where tenant_id = %s and id = any(%s) and erased_at is null

-- name: claim_idempotency_key --
-- Claim a key for a call (tenant, verb, actor, key, digest, result, lifetime); no row back = taken and live; the adapter is the connection's (a column default RLS checks); the conflict clause reads the time as excluded.created_at (the column's default, now()) because Citus refuses now() there
insert into pymem.idempotency_keys as k (tenant_id, verb, actor, key, digest, result, expires_at)
values (%s, %s, %s, %s, %s, %s, now() + %s)
on conflict (tenant_id, verb, adapter, actor, key) do update
   set digest = excluded.digest, result = excluded.result, created_at = excluded.created_at,
       expires_at = excluded.expires_at
 where k.expires_at <= excluded.created_at
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

-- name: list_chunks --
-- A page of the tenant's live chunks in id order (%s tenant, %s id to start after or null, again, %s page size)
select id, record, revision, content, scope, kind, tags, origin, provenance, injection_source,
       case when record is null then embedding end as embedding
  from pymem.memories
 where tenant_id = %s and erased_at is null and (%s::text is null or id > %s)
 order by tenant_id, id
 limit %s

-- name: export_chunks --
-- Every live chunk of the tenant (%s), in primary-key order, for export
select id, record, content, scope, kind, tags, origin, provenance, injection_source,
       case when record is null then embedding end as embedding
  from pymem.memories
 where tenant_id = %s and erased_at is null
 order by tenant_id, id

-- name: search --
-- Cosine search in the transaction's context (query, top_k, scope filter, superseded, vectors, plan, query text: hybrid when not NULL, text weight, rank constant: NULL fuses by score)
select * from pymem.search(p_query => %s, p_top_k => %s, p_scope_filter => %s, p_include_superseded => %s,
                           p_with_vectors => %s, p_plan => %s, p_text => %s, p_text_weight => %s, p_rrf_k => %s)

-- name: claim_embedder --
-- Record the store's embedder if none is (name, dimension); returns the recorded one
select pymem.claim_embedder(%s, %s)

-- name: store_embedder --
-- The embedder the store records (NULL before the first write)
select embedder from pymem.store_info

-- name: record_reembedded --
-- After a re-embedding: record the new embedder once every content-embedded row has it; returns the recorded one
select pymem.record_reembedded(%s)

-- name: reembed_tenants --
-- Tenants, and the adapters of their rows, still holding vectors another embedder computed from content (administrative connection)
select distinct m.tenant_id, m.source_adapter
  from pymem.memories m
 where m.erased_at is null and m.embedding is not null and m.content is not null
   and m.embedder is distinct from %s and (m.embedder is not null or m.record_lite is null)
 order by 1, 2

-- name: reembed_pending --
-- How many rows are still to be re-embedded to an embedder (administrative connection)
select count(*)
  from pymem.memories m
 where m.erased_at is null and m.embedding is not null and m.content is not null
   and m.embedder is distinct from %s and (m.embedder is not null or m.record_lite is null)

-- name: reembed_batch --
-- The next rows of the context tenant and adapter to re-embed to an embedder (tenant, adapter, embedder, limit), locked until commit
select m.id, m.content
  from pymem.memories m
 where m.tenant_id = %s and m.source_adapter is not distinct from %s
   and m.erased_at is null and m.embedding is not null and m.content is not null
   and m.embedder is distinct from %s and (m.embedder is not null or m.record_lite is null)
 order by m.id
 limit %s
 for update

-- name: reembed_rows --
-- Write re-embedded vectors (tenant, embedder, ids, vectors): one memory.update event each, chained as any update
update pymem.memories m set embedding = v.embedding, embedder = %s
  from unnest(%s::text[], %s::vector[]) as v (id, embedding)
 where m.tenant_id = %s and m.id = v.id

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
-- the LangGraph store (pymem/langgraph): items are memories whose scope holds their namespace
-- ============================================================================================
-- A LangGraph filter arrives as a jsonb array of conditions {"path": [...], "op": ..., "value": ...}
-- on the item's value (pymem/langgraph/filters.py), so each statement keeps one fixed shape. A
-- missing field reads as JSON null, as in LangGraph's in-memory store; range operators compare
-- numbers as numbers and strings by code point, and any other pair of types never matches.

-- name: langgraph_write_state --
-- The database clock, and the store's own items among these ids (%s tenant, %s ids) with the creation time and ranks they keep
select clock_timestamp() as now, m.id, m.record -> 'created_at' as created_at, m.record -> 'rank' as rank,
       m.record -> 'ns_rank' as ns_rank
  from (select 1) one
  left join pymem.memories m on m.tenant_id = %s and m.id = any(%s) and m.erased_at is null
   and m.kind = 'langgraph' and m.source_adapter is not distinct from (select pymem._ctx_adapter())

-- name: langgraph_namespace_rank --
-- The rank of a namespace that still holds one of the store's own items (%s tenant, %s the namespace's exact scope), if any
select m.record -> 'ns_rank' from pymem.memories m
 where m.tenant_id = %s and m.scope @> %s and m.erased_at is null
   and m.kind = 'langgraph' and m.source_adapter is not distinct from (select pymem._ctx_adapter())
   and jsonb_typeof(m.record -> 'ns_rank') = 'number'
 limit 1

-- name: langgraph_items --
-- The store's own items (kind langgraph, written by the context's adapter) under a namespace scope that match a filter, shaped like search hits: by cosine distance to a query vector (NULL: none), then in the order they were first put (query, tenant, scope, filter twice, which: all/embedded/unembedded, limit, offset)
select d.id, d.record, d.content, d.kind, d.tags, d.scope, d.origin, d.provenance, d.confidence, d.source_adapter,
       d.injection_source, d.policy_fingerprint, d.created_at, d.revision, 1 - d.distance as score
  from (select m.id, m.record, m.content, m.kind, m.tags, m.scope, m.origin, m.provenance, m.confidence,
               m.source_adapter, m.injection_source, m.policy_fingerprint, m.created_at, m.revision,
               m.embedding <=> %s::vector as distance
          from pymem.memories m
         where m.tenant_id = %s and m.scope @> %s and m.erased_at is null
           and m.kind = 'langgraph' and m.source_adapter is not distinct from (select pymem._ctx_adapter())
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
 order by d.distance,
          case when jsonb_typeof(d.record -> 'ns_rank') = 'number' then (d.record ->> 'ns_rank')::numeric end,
          case when jsonb_typeof(d.record -> 'rank') = 'number' then (d.record ->> 'rank')::numeric end, d.id
 limit %s offset %s

-- name: langgraph_namespaces --
-- The distinct namespaces of the store's own items under a namespace scope (%s tenant, %s scope)
select distinct m.record -> 'namespace'
  from pymem.memories m
 where m.tenant_id = %s and m.scope @> %s and m.erased_at is null
   and m.kind = 'langgraph' and m.source_adapter is not distinct from (select pymem._ctx_adapter())

-- name: langgraph_get --
-- The store's own items among these ids (kind langgraph, written by the context's adapter), shaped like search hits with score 0 (%s tenant, %s ids)
select id, record, content, kind, tags, scope, origin, provenance, confidence, source_adapter, injection_source,
       policy_fingerprint, created_at, revision, 0::double precision as score
  from pymem.memories m
 where m.tenant_id = %s and m.id = any(%s) and m.erased_at is null
   and m.kind = 'langgraph' and m.source_adapter is not distinct from (select pymem._ctx_adapter())

-- name: search_as_hits --
-- search_as returning whole search hits, records without vectors (tenant, actor, adapter, scope, read adapters, query, top_k, scope filter); the LangGraph store keeps its own among them
select * from pymem.search_as(p_tenant => %s, p_actor => %s, p_adapter => %s, p_scope => %s, p_read_adapters => %s,
                              p_query => %s, p_top_k => %s, p_scope_filter => %s, p_include_superseded => false,
                              p_with_vectors => false)

-- ============================================================================================
-- admission and integrity
-- ============================================================================================

-- name: holds_chain_lock --
-- Does this transaction hold the tenant's (%s) chain-head lock? (the gate cannot audit a refusal then)
select pymem.holds_chain_lock(%s)

-- name: record_refusal --
-- Chain an admission refusal (origin, source, reason, signature, digest, policy fingerprint, score, piece digest)
select pymem.record_refusal(%s, %s, %s, %s, %s, %s, %s, %s)

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

-- name: verify_heads_skip --
-- verify_sizes without reading every row: each tenant (tenant or NULL = all, four times over) with its head row, the tenants found by skipping along the ledger's and the memories' primary keys (one index probe per tenant, not per row), for verification since a checkpoint
with recursive
  l(t) as (select min(tenant_id) from pymem.ledger where %s::text is null or tenant_id = %s
           union all
           select (select min(x.tenant_id) from pymem.ledger x where x.tenant_id > l.t) from l where l.t is not null),
  m(t) as (select min(tenant_id) from pymem.memories where %s::text is null or tenant_id = %s
           union all
           select (select min(x.tenant_id) from pymem.memories x where x.tenant_id > m.t) from m where m.t is not null),
  t(tenant_id) as (select tenant_id from pymem.chain_heads where %s::text is null or tenant_id = %s
                   union select t from l where t is not null union select t from m where t is not null)
select t.tenant_id, h.seq, h.chain_hash, coalesce(h.live_rows, 0)
  from t left join pymem.chain_heads h on h.tenant_id = t.tenant_id
 where %s::text is null or t.tenant_id = %s
 order by 1

-- name: memory_id_at --
-- The id at a position of a tenant's memories in id order (%s tenant, %s position): where a range of rows to verify ends
select id from pymem.memories where tenant_id = %s order by id offset %s limit 1

-- name: ledger_bytes --
-- A tenant's ledger entries with seq in a range (tenant, low or NULL, low, high or NULL, high), each with the bytes its chain_hash covers (the database's encoding; a pre-0013 entry's with its escrowed actor id), and for an erased person's pre-0013 entry its token and its bytes as it stays (checked against its erasure's seal)
select l.seq, l.event, l.memory_id, l.revision, l.content_hash, l.hash_version, l.prev_hash, l.chain_hash,
       case when l.actor like 'e:%%' then pymem._event_bytes_as(l, a.actor)
            when l.hash_version = 2 then pymem._event_bytes_v2(l) when l.hash_version = 1 then pymem._event_bytes_v1(l) end,
       case when l.actor like 'e:%%' and a.actor is null then substr(l.actor, 3) end,
       case when l.actor like 'e:%%' and a.actor is null then pymem._event_bytes(l) end
  from pymem.ledger l
  left join pymem.actor_pseudonyms a on a.tenant_id = l.tenant_id and l.actor like 'e:%%' and a.token = substr(l.actor, 3)
 where l.tenant_id = %s and (%s::bigint is null or l.seq >= %s) and (%s::bigint is null or l.seq <= %s)
 order by l.seq

-- name: memory_bytes --
-- A tenant's memories with ids in a range (tenant, low or NULL, low, high or NULL, high): stored hash, revision, and the version-2 bytes of each live row (the database's encoding)
select m.id, m.revision, m.erased_at is not null, m.content_hash,
       case when m.erased_at is null then pymem._content_bytes_v2(m) end
  from pymem.memories m
 where m.tenant_id = %s and (%s::text is null or m.id >= %s) and (%s::text is null or m.id < %s)

-- name: memory_bytes_of --
-- A tenant's memories with these ids (%s tenant, %s ids), as memory_bytes gives them: what verification since a checkpoint re-hashes (the memories with an event after it), by primary key, never a scan of the tenant
select m.id, m.revision, m.erased_at is not null, m.content_hash,
       case when m.erased_at is null then pymem._content_bytes_v2(m) end
  from pymem.memories m
 where m.tenant_id = %s and m.id = any(%s)

-- name: memories_failing_v1 --
-- Which of these memories (%s tenant, %s ids) no longer match their hash version 1
select m.id from pymem.memories m
 where m.tenant_id = %s and m.id = any(%s) and m.content_hash <> pymem._content_hash_v1(m)

-- ============================================================================================
-- the quarantine (pymem/admission/quarantine.py): notes the write gate held
-- ============================================================================================

-- name: hold_note --
-- Hold a note the gate was unsure of (tenant, id, scope, kind, content, record, embedding, tags, importance, confidence, origin, adapter, provenance, injection source, policy fingerprint, embedder, ttl, subject, reason, name, score, piece digest); returns when it was held
insert into pymem.quarantine as q (tenant_id, id, scope, kind, content, record, embedding, tags, importance, confidence,
                                   origin, source_adapter, provenance, injection_source, policy_fingerprint, embedder,
                                   ttl, subject, reason, signature, score, piece_digest)
values (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
returning q.held_at

-- name: held_event_seq --
-- The seq of the quarantine.held event of a note held in this transaction (tenant, id)
select max(l.seq) from pymem.ledger l where l.tenant_id = %s and l.memory_id = %s and l.event = 'quarantine.held'

-- name: quarantined_notes --
-- The quarantined notes this context may read, in one status or any (tenant, status or NULL, limit), oldest first; with content, who held and decided them named as the audit views name actors
select q.id, q.status, q.reason, q.signature, q.score, q.piece_digest, q.origin, q.source_adapter, q.scope, q.kind,
       q.content, q.tags, q.confidence, q.provenance, q.policy_fingerprint, q.ttl, q.subject, q.held_at,
       pymem._actor_name(q.tenant_id, q.held_by) as held_by, q.decided_at,
       pymem._actor_name(q.tenant_id, q.decided_by) as decided_by, q.decision_reason, q.erased_at
  from pymem.quarantine q
 where q.tenant_id = %s and (%s::text is null or q.status = %s::text)
 order by q.held_at, q.hold_id
 limit %s

-- name: quarantined_note --
-- The latest hold of an id this context may read (tenant, id); with content, who held and decided it named as the audit views name actors
select q.id, q.status, q.reason, q.signature, q.score, q.piece_digest, q.origin, q.source_adapter, q.scope, q.kind,
       q.content, q.tags, q.confidence, q.provenance, q.policy_fingerprint, q.ttl, q.subject, q.held_at,
       pymem._actor_name(q.tenant_id, q.held_by) as held_by, q.decided_at,
       pymem._actor_name(q.tenant_id, q.decided_by) as decided_by, q.decision_reason, q.erased_at
  from pymem.quarantine q
 where q.tenant_id = %s and q.id = %s
 order by q.hold_id desc
 limit 1

-- name: release_quarantined --
-- An operator releases a held note into memories (id, reason); returns the quarantine.released seq
select pymem.release_quarantined(%s, %s)

-- name: reject_quarantined --
-- An operator rejects a held note (id, reason); returns the quarantine.rejected seq
select pymem.reject_quarantined(%s, %s)

-- ============================================================================================
-- what vouches for the chain from outside (the independent verifier, checkpoints)
-- ============================================================================================

-- name: raw_ledger --
-- A tenant's ledger entries with seq in a range (tenant, low or NULL, low, high or NULL, high), in chain order, jsonb as text, with a pre-0013 entry's escrowed actor id, for recomputing hashes outside the database
select l.tenant_id, l.seq, l.event, l.memory_id, l.revision, l.content_hash, l.actor, l.adapter,
       l.details::text as details, l.occurred_at, l.hash_version, l.prev_hash, l.chain_hash, a.actor as escrowed_actor
  from pymem.ledger l
  left join pymem.actor_pseudonyms a on a.tenant_id = l.tenant_id and l.actor like 'e:%%' and a.token = substr(l.actor, 3)
 where l.tenant_id = %s and (%s::bigint is null or l.seq >= %s) and (%s::bigint is null or l.seq <= %s)
 order by l.seq

-- name: raw_memories --
-- A tenant's memory rows with ids in a range (tenant, low or NULL, low, high or NULL, high), jsonb and the vector as text (pgvector prints each float4 exactly)
select tenant_id, id, scope::text as scope, kind, content, record::text as record, embedding::text as embedding,
       tags, importance, confidence, origin, source_adapter, provenance::text as provenance, injection_source,
       policy_fingerprint, revision, created_at, valid_from, invalidated_at, superseded_by, erased_at, content_hash
  from pymem.memories
 where tenant_id = %s and (%s::text is null or id >= %s) and (%s::text is null or id < %s)

-- name: raw_memories_of --
-- A tenant's memory rows with these ids (%s tenant, %s ids), as raw_memories gives them: the independent verifier's rows to re-hash since a checkpoint, by primary key
select tenant_id, id, scope::text as scope, kind, content, record::text as record, embedding::text as embedding,
       tags, importance, confidence, origin, source_adapter, provenance::text as provenance, injection_source,
       policy_fingerprint, revision, created_at, valid_from, invalidated_at, superseded_by, erased_at, content_hash
  from pymem.memories
 where tenant_id = %s and id = any(%s)

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

-- ============================================================================================
-- sessions (pymem/storage/session_rows.py, pymem/delivery/sessions.py)
-- ============================================================================================

-- name: session_row --
-- One session as the context sees it (%s tenant, %s id)
select tenant_id, id, scope, source_adapter, surface, incognito, topic, summary, started_at, ended_at, erased_at
  from pymem.sessions where tenant_id = %s and id = %s

-- name: start_session --
-- Start a session (tenant, id, scope, surface, incognito, topic); the adapter and the time are the database's
insert into pymem.sessions as s (tenant_id, id, scope, surface, incognito, topic)
values (%s, %s, %s, %s, %s, %s)
returning s.tenant_id, s.id, s.scope, s.source_adapter, s.surface, s.incognito, s.topic, s.summary, s.started_at,
          s.ended_at, s.erased_at

-- name: end_session --
-- End an open session, with its summary or none (summary, tenant, id); the end time is the database's
update pymem.sessions as s set ended_at = now(), summary = %s
 where s.tenant_id = %s and s.id = %s and s.ended_at is null
returning s.tenant_id, s.id, s.scope, s.source_adapter, s.surface, s.incognito, s.topic, s.summary, s.started_at,
          s.ended_at, s.erased_at

-- name: replace_session_summary --
-- Set or replace a session's summary (summary, tenant, id), a session.summary event
update pymem.sessions as s set summary = %s
 where s.tenant_id = %s and s.id = %s
returning s.tenant_id, s.id, s.scope, s.source_adapter, s.surface, s.incognito, s.topic, s.summary, s.started_at,
          s.ended_at, s.erased_at

-- name: recent_sessions --
-- The tenant's visible, non-incognito, non-erased sessions, newest first, except one (tenant, id to leave out or NULL, limit)
select tenant_id, id, scope, source_adapter, surface, incognito, topic, summary, started_at, ended_at, erased_at
  from pymem.sessions
 where tenant_id = %s and not incognito and erased_at is null and id is distinct from %s
 order by started_at desc, id
 limit %s

-- name: live_memory_ids --
-- Which of tenant %s's memories %s are still live in this context (a delivery drops the ones deleted or erased since it ranked them)
select m.id from pymem.memories m where m.tenant_id = %s and m.id = any(%s) and m.erased_at is null

-- name: session_start_times --
-- When each of these sessions started (%s tenant, %s ids)
select id, started_at from pymem.sessions where tenant_id = %s and id = any(%s)

-- name: digest_sessions --
-- The other sessions a session's digest may list: visible, non-incognito, non-erased, of the same scope or a narrower one, newest first (tenant, the session's scope, its id, limit)
select tenant_id, id, scope, source_adapter, surface, incognito, topic, summary, started_at, ended_at, erased_at
  from pymem.sessions
 where tenant_id = %s and scope @> %s and not incognito and erased_at is null and id <> %s
 order by started_at desc, id
 limit %s

-- name: erase_session --
-- Erase a session's topic and summary with a reason (id, reason); returns the reason event's seq
select pymem.erase_session(%s, %s)

-- name: search_as_of --
-- Exact cosine search over what was believed at a past time, in the transaction's context (query, top_k, time, scope filter)
select * from pymem.search_as_of(p_query => %s, p_top_k => %s, p_as_of => %s, p_scope_filter => %s)

-- ============================================================================================
-- delivery (pymem/delivery)
-- ============================================================================================

-- name: session_hot --
-- The live hot memories a session receives (its scope's and its ancestors'), newest first, shaped like search hits with score 0 (%s session, %s limit)
select * from pymem.session_hot(%s, %s)

-- name: session_search --
-- Cosine search over the memories a session receives, in the transaction's context (session, query, top_k, plan)
select * from pymem.session_search(p_session => %s, p_query => %s, p_top_k => %s, p_plan => %s)

-- name: session_search_hybrid --
-- Hybrid search over the memories a session receives: the vector ranking fused with the query text's (session, query, text, top_k, plan, text weight, rank constant: NULL fuses by score)
select * from pymem.session_search_hybrid(p_session => %s, p_query => %s, p_text => %s, p_top_k => %s, p_plan => %s,
                                          p_text_weight => %s, p_rrf_k => %s)

-- name: session_receives --
-- Which of these ids are live memories the session receives, in order (%s session, %s ids)
select pymem.session_receives(%s, %s)

-- name: supersede_memory --
-- Mark a live memory superseded by another (new id, tenant, old id); the changed row carries the writer's adapter
update pymem.memories as m
   set invalidated_at = now(), superseded_by = %s, source_adapter = pymem._ctx_adapter()
 where m.tenant_id = %s and m.id = %s and m.invalidated_at is null and m.erased_at is null
returning m.id, m.invalidated_at

-- name: erase_memory --
-- Erase a memory's content, record and embedding with a reason (id, reason); returns the reason event's seq
select pymem.erase_memory(%s, %s)

-- name: record_injection --
-- Chain what a delivery put into a turn (session, turn, memory ids, hot ids, digest sessions, sha256 hex, tokens, budget, truncated, counter, policy and tiers fingerprints, lesson ids)
select pymem.record_injection(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)

-- name: last_injected_turn --
-- The highest turn recorded for a session (%s tenant, %s session), NULL when none
select max(turn) from pymem.audit_injections where tenant_id = %s and session_id = %s

-- name: session_injections --
-- A session's injection records, oldest first, of one turn or all (tenant, session, turn or NULL, turn or NULL)
select * from pymem.audit_injections
 where tenant_id = %s and session_id = %s and (%s::integer is null or turn = %s::integer)
 order by seq

-- name: memory_injections --
-- Every turn a memory entered, oldest first (%s tenant, %s memory id)
select * from pymem.memory_injections where tenant_id = %s and memory_id = %s order by seq

-- name: inspect_memories --
-- The context's live (not erased) memories for the inspector, newest first (tenant, superseded too, session or NULL twice, hot only, limit)
select id, kind, content, tags, origin, provenance, source_adapter, confidence, created_at, valid_from,
       invalidated_at, superseded_by, revision
  from pymem.memories
 where tenant_id = %s and erased_at is null
   and (%s or invalidated_at is null)
   and (%s::text is null or provenance ->> 'session_id' = %s::text)
   and (not %s or 'hot' = any (tags))
 order by created_at desc, id
 limit %s

-- ============================================================================================
-- lessons (pymem/lessons)
-- ============================================================================================

-- name: lock_for_filing --
-- Serialize the context tenant's filings of one kind (%s name, %s timeout in ms) until the transaction ends, so a duplicate or contradiction check and the write it decides on cannot race; a row only the tenant's context can lock, never an advisory key
select pymem.lock_for_filing(%s, %s)

-- name: lesson_duplicate_candidates --
-- Lessons a new one could be merged into: same tenant, type and scope, written by the same adapter, a tag in common (tenant, type, scope, adapter, tags)
select id, content, tags, confidence, version, source_task, created_at, revision
  from pymem.lessons
 where tenant_id = %s and memory_type = %s and scope = %s and source_adapter is not distinct from %s::text
   and tags && %s::text[]
 order by created_at, id

-- name: merge_lesson --
-- Confirm a lesson again: its stored confidence and version, and (by the update itself) its filing time (confidence, version, confidence, tenant, id, expected revision)
update pymem.memories as m
   set confidence = %s, record = m.record || jsonb_build_object('version', %s::integer, 'confidence', %s::real)
 where m.tenant_id = %s and m.id = %s and m.revision = %s and m.kind = 'lesson' and m.erased_at is null
returning m.id, m.confidence, m.revision

-- name: list_lessons --
-- The context's lessons, last filed first, with the confidence decayed to a time and the age in days (time or NULL = now, tenant, type or NULL twice, tag or NULL twice, limit)
select l.id, l.memory_type, l.tags, l.content, l.confidence,
       pymem.lesson_confidence(l.confidence, l.memory_type, n.t - l.filed_at) as decayed_confidence,
       l.version, l.source_task, l.origin, l.source_adapter, l.created_at, l.filed_at,
       (extract(epoch from n.t - l.filed_at) / 86400)::double precision as age_days
  from (select coalesce(%s::timestamptz, now()) as t) n
 cross join pymem.lessons l
 where l.tenant_id = %s and (%s::text is null or l.memory_type = %s::text) and (%s::text is null or %s::text = any (l.tags))
 order by l.filed_at desc, l.id
 limit %s

-- name: lessons_for_task --
-- Lessons sharing a tag with a task, best first by shared tags + decayed confidence; shaped like search hits, plus type, version, source task, filing time, decayed confidence and age in days (time or NULL = now, tenant, task tags twice, limit)
select l.id, l.record, l.content, 'lesson'::text as kind, l.tags, l.scope, l.origin, l.provenance, l.confidence,
       l.source_adapter, l.injection_source, l.policy_fingerprint, l.created_at, l.revision,
       0::double precision as score, l.memory_type, l.version, l.source_task, l.filed_at, d.decayed, d.age_days
  from (select coalesce(%s::timestamptz, now()) as t) n
 cross join pymem.lessons l
 cross join lateral (select pymem.lesson_confidence(l.confidence, l.memory_type, n.t - l.filed_at) as decayed,
                            (extract(epoch from n.t - l.filed_at) / 86400)::double precision as age_days) d
 where l.tenant_id = %s and l.tags && %s::text[]
 order by cardinality(array(select unnest(l.tags) intersect select unnest(%s::text[]))) + coalesce(d.decayed, 0) desc,
          l.id
 limit %s

-- name: session_lessons --
-- The lessons for a task that a session receives (filed in its scope or an ancestor's), shaped as lessons_for_task's rows (session, task tags, limit, time or NULL = now)
select * from pymem.session_lessons(p_session => %s, p_tags => %s, p_limit => %s, p_at => %s)

-- ============================================================================================
-- convention receipts (pymem/conventions, pymem/integrity/receipt_audit.py)
-- ============================================================================================

-- name: register_signing_key --
-- Register the installation's public key (%s, hex) if none is; refused if another one is (the administrative connection only)
select pymem.register_signing_key(%s)

-- name: conventions_in_force --
-- The context's rules in force at their latest version, by subject then id (%s tenant)
select * from pymem.conventions where tenant_id = %s and status = 'active' order by subject, id

-- name: convention_by_id --
-- One receipt at its latest version, with its status (%s tenant, %s id)
select * from pymem.conventions where tenant_id = %s and id = %s

-- name: insert_receipt --
-- File a signed receipt version (tenant, id, version, scope, subject, symbol, rule text, rule sha256, base commit, assertion, lesson id, public key, signature, receipt sha256); the database chains it
insert into pymem.convention_receipts (tenant_id, id, version, scope, subject, subject_symbol, rule_text, rule_sha256,
                                       base_commit, assertion, lesson_id, public_key, signature, receipt_sha256)
values (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)

-- name: end_convention --
-- Retire or expire a rule (tenant, receipt id, status, reason, head commit or NULL); the database chains it
insert into pymem.convention_endings (tenant_id, receipt_id, status, reason, head_commit)
values (%s, %s, %s, %s, %s)

-- name: registered_signing_key --
-- The installation key registered in the database, if any
select public_key from pymem.signing_keys

-- name: receipts_to_audit --
-- Every receipt version of a tenant (or of all, with NULL), to check signatures and anchors (tenant or NULL, twice)
select tenant_id, id, version, scope, source_adapter, subject, subject_symbol, rule_text, rule_sha256, base_commit,
       assertion, lesson_id, public_key, signature, receipt_sha256
  from pymem.convention_receipts
 where %s::text is null or tenant_id = %s
 order by tenant_id, id, version

-- name: convention_events_to_audit --
-- Every convention event of a tenant's chain (or of all, with NULL), in chain order (tenant or NULL, twice)
select tenant_id, seq, event, content_hash, details
  from pymem.ledger
 where (%s::text is null or tenant_id = %s) and event like 'convention.%%'
 order by tenant_id, seq

-- name: convention_endings_to_audit --
-- Every ended rule of a tenant (or of all, with NULL) (tenant or NULL, twice)
select tenant_id, receipt_id, status, reason, head_commit
  from pymem.convention_endings
 where %s::text is null or tenant_id = %s
 order by tenant_id, receipt_id

-- ============================================================================================
-- shared facts (pymem/facts)
-- ============================================================================================

-- name: shared_facts --
-- The context's shared facts with a tag, of a run or tenant-wide, oldest first; with ids, only those (tenant, tag, scope, run or NULL, ids or NULL, twice)
select id, record, content, source_adapter, content_hash, created_at
  from pymem.memories
 where tenant_id = %s and kind = 'shared_fact' and erased_at is null and %s::text = any (tags)
   and record ->> 'reach' = %s::text
   and (record ->> 'reach' = 'tenant' or record ->> 'run_id' = %s::text)
   and (%s::text[] is null or id = any (%s::text[]))
 order by created_at, id

-- name: fact_channel --
-- The channel the context tenant's (%s) new shared facts are announced on (refused for any other tenant)
select pymem.fact_channel(%s)

-- name: fact_cursor --
-- Where the context tenant's (%s) chain ends now: a follower reads what comes after it
select coalesce((select seq from pymem.chain_heads where tenant_id = %s), 0) as seq

-- name: facts_between --
-- The context's shared facts with a tag, of a run or tenant-wide, whose insert is chained after one seq and up to another, in chain order (tenant, after, up to, tag, scope, run or NULL)
select m.id, m.record, m.content, m.source_adapter, m.content_hash, m.created_at
  from pymem.ledger l
  join pymem.memories m on m.tenant_id = l.tenant_id and m.id = l.memory_id
 where l.tenant_id = %s and l.seq > %s and l.seq <= %s and l.event = 'memory.insert'
   and m.kind = 'shared_fact' and m.erased_at is null and %s::text = any (m.tags)
   and m.record ->> 'reach' = %s::text
   and (m.record ->> 'reach' = 'tenant' or m.record ->> 'run_id' = %s::text)
 order by l.seq

-- name: listen --
-- Listen on a channel (a follower's own connection, never a pooled one)
listen {channel}

-- name: retention_policy --
-- The context tenant's retention policy (%s tenant): default and maximum ttl, when and by whom it was set
select default_ttl, max_ttl, set_at, set_by::text from pymem.retention_policies where tenant_id = %s

-- name: set_retention --
-- Set (or with NULL, NULL remove) the context tenant's default and maximum ttl (%s default, %s maximum); returns the retention.set event's seq
select pymem.set_retention(%s::interval, %s::interval)

-- name: purge_expired --
-- Delete up to %s of the context tenant's expired memories this context may delete; returns how many
select pymem.purge_expired(%s)

-- name: purge_expired_all --
-- Every tenant's expired memories (owner or superuser only): one row per tenant purged, at most %s rows each
select tenant_id, purged from pymem.purge_expired_all(%s)

-- name: refresh_expiry --
-- Restart the clock of the context's live memories with these ids that have a ttl (%s tenant, %s ids): a write of the ttl they have
update pymem.memories set ttl = ttl where tenant_id = %s and id = any(%s) and ttl is not null returning id

-- name: erase_actor --
-- Erase a person from the context tenant (%s actor id, %s reason): memories, idempotency records, the pseudonym's link
select memories, idempotency_keys, ledger_entries, legacy_entries, seq from pymem.erase_actor(%s, %s)

-- name: erasure_seals --
-- The seals of a tenant's erasures of persons (%s tenant): pseudonym token, sealed pre-0013 entries and their digest, first per token
select distinct on (details ->> 'pseudonym') details ->> 'pseudonym', (details ->> 'legacy_entries')::bigint,
       details ->> 'legacy_seal'
  from pymem.ledger
 where tenant_id = %s and event = 'actor.erased' and details ->> 'pseudonym' is not null
 order by details ->> 'pseudonym', seq

-- ============================================================================================
-- Citus: distributing the store by tenant (pymem/storage/distribution.py, administrative connection)
-- ============================================================================================

-- name: migrate_before_distribution --
-- A migration on a Citus coordinator before `pymem db distribute` creates the schema there alone (no-op elsewhere, and once distributed)
select set_config('citus.enable_ddl_propagation', 'off', true)
 where exists (select from pg_extension where extname = 'citus')
   and coalesce(current_setting('citus.propagate_set_commands', true), '') <> 'local'

-- name: citus_version --
-- The citus extension's version in this database; no row on a server without it
select extversion from pg_extension where extname = 'citus'

-- name: pymem_tables --
-- Every table of the pymem schema, with whether it has a tenant_id column
select c.relname as name,
       exists (select from pg_attribute a where a.attrelid = c.oid and a.attname = 'tenant_id' and not a.attisdropped)
         as tenant_keyed
  from pg_class c join pg_namespace n on n.oid = c.relnamespace
 where n.nspname = 'pymem' and c.relkind in ('r', 'p')
 order by 1

-- name: citus_tables --
-- The pymem tables Citus already manages, with their kind (distributed or reference)
select relname as name, citus_table_type as kind
  from pg_class c join pg_namespace n on n.oid = c.relnamespace
  join citus_tables t on t.table_name = c.oid
 where n.nspname = 'pymem'

-- name: pymem_policies_with_subqueries --
-- The policies on pymem tables whose expressions hold a scalar subquery (Citus refuses them)
select tablename as table_name, policyname as policy_name, qual, with_check
  from pg_policies
 where schemaname = 'pymem' and (qual like '%( SELECT %' or with_check like '%( SELECT %')
 order by 1, 2

-- name: defaulted_columns_without_insert_grant --
-- Columns with a default that a role (%s) may not INSERT into while it may insert into the table's other columns
select c.table_name, string_agg(quote_ident(c.column_name), ', ' order by c.ordinal_position) as columns
  from information_schema.columns c
 where c.table_schema = 'pymem' and (c.column_default is not null or c.is_identity = 'YES')
   and not has_column_privilege(%s, format('pymem.%%I', c.table_name), c.column_name, 'INSERT')
   and exists (select from information_schema.column_privileges p
                where p.table_schema = 'pymem' and p.table_name = c.table_name and p.grantee = %s
                  and p.privilege_type = 'INSERT')
 group by 1 order by 1

-- name: pymem_functions_not_distributed --
-- The functions of the pymem schema Citus does not propagate yet (what their bodies call is invisible to it)
select p.oid::regprocedure::text as signature
  from pg_proc p join pg_namespace n on n.oid = p.pronamespace
 where n.nspname = 'pymem'
   and not exists (select from pg_dist_object o where o.classid = 'pg_proc'::regclass and o.objid = p.oid)
 order by 1

-- name: citus_worker_count --
-- How many worker nodes the coordinator has (active primaries)
select count(*) from pg_dist_node where noderole = 'primary' and isactive and groupid <> 0

-- name: citus_on_workers --
-- Run a script (%s) on every worker, each in its own transaction; what each node answered
select nodename, nodeport, success, result from run_command_on_workers(%s)

-- name: citus_propagate_context --
-- SET LOCAL reaches the worker shards of a transaction (the context the shards' policies read); on every node
alter database {database} set citus.propagate_set_commands = 'local'

-- name: citus_allow_triggers --
-- Let this session distribute tables that have triggers (every pymem trigger touches one tenant's colocated rows)
set citus.enable_unsafe_triggers = on

-- name: on_citus --
-- Whether this database is set up as a Citus store (the database's citus.propagate_set_commands, as a new session reads it)
select pymem._on_citus()

-- name: role_can_log_in --
-- Whether a role (%s) may log in
select rolcanlogin from pg_roles where rolname = %s

-- name: citus_owner_login --
-- The owner role may log in: Citus runs a definer function's statements on the shards over a connection as its owner
alter role pymem_owner login

-- name: citus_alter_policy --
-- A policy's expressions without scalar subqueries (the helpers called directly), which Citus can push to the shards
alter policy {policy} on {table} {clauses}

-- name: citus_grant_insert --
-- INSERT on defaulted columns: Citus writes every column explicitly (the triggers still set them)
grant insert ({columns}) on {table} to {role}

-- name: functions_forcing_generic_plans --
-- The pymem functions whose SET clause forces generic plans (Citus cannot plan their parameterised statements)
select p.oid::regprocedure::text from pg_proc p join pg_namespace n on n.oid = p.pronamespace
 where n.nspname = 'pymem' and 'plan_cache_mode=force_generic_plan' = any (p.proconfig)
 order by 1

-- name: citus_custom_plans --
-- A function's statements planned with their values (Citus routes a statement by the tenant it names)
alter function {function} set plan_cache_mode = force_custom_plan

-- name: citus_reference_table --
-- A global table (%s) copied to every node
select create_reference_table(%s)

-- name: citus_distribute_table --
-- A tenant table (%s) sharded by tenant_id, colocated with pymem.memories (%s)
select create_distributed_table(%s, 'tenant_id', colocate_with => %s)

-- name: citus_distribute_function --
-- A function (%s) propagated to every node
select create_distributed_function(%s)

-- name: login_bindings_json --
-- The coordinator's bindings as one json array (what every worker's node-local copy is set to)
select coalesce(jsonb_agg(to_jsonb(b) order by b.role_name), '[]'::jsonb)::text from pymem.login_bindings b
