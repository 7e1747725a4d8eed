-- pymem migration 0007: performance.
--
-- * Hash version 2. A memory's content_hash and a ledger entry's chain_hash are now computed from
--   one expression of built-in renderings (jsonb's text output, vector_send, timestamptz_send,
--   float4send, int8send) instead of a PL/pgSQL walk of every jsonb value with one helper call
--   per field: writes and verification re-hash about five times faster. What the canonical form
--   depends on is stated in the README ("Hash versions"). Version 1 stays defined and verifiable:
--   ledger entries are never rewritten, and each is checked with the version it was written with.
-- * Every live memory that verifies under version 1 is re-hashed with version 2, and one
--   memory.rehash event per row is chained into its tenant's ledger (so a row's latest event
--   always carries the hash the row has now). A row that does NOT verify is left as it is: its
--   fault stays visible to pymem verify instead of being laundered into a fresh hash.
-- * The context helpers every row-level security policy calls are plpgsql (as SQL functions they
--   cost tens of microseconds per call), and a store without login bindings answers after one
--   probe of the bindings table. The policies skip their per-row scope containment test for a
--   whole-tenant context (scope {}), which every row passes.
-- * Search: a cheap check for flat scopes, the exact plan ranks (id, distance) pairs and reads the
--   top_k rows only, and a stored record_lite (the record without its vector keys, for records
--   that carry one) so that searches returning no vectors do not de-TOAST and trim whole records.
-- * The chain trigger reads the context's actor and adapter once per statement and writes each
--   tenant's events with one INSERT.
--
-- The HNSW index is dropped before the rows are re-hashed (each UPDATE would otherwise insert
-- every row into the graph again, about 5 ms per row) and built once at the end.

set role pymem_owner;

-- ============================================================================================
-- context: helpers every policy calls, and a flat-scope check, made cheap (they run for every
-- statement, write and search)
-- ============================================================================================

create or replace function pymem._login_binding() returns pymem.login_bindings
language plpgsql stable security definer parallel safe
set search_path = pg_catalog, pg_temp
as $$
-- The binding in force for this session's login: its own, else that of the one bound role it is
-- a member of. A login in several bound roles without a binding of its own is ambiguous and is
-- bound to nothing (role_name NULL, no tenant): it fails closed. Superusers count as members of
-- every role, and are never bound. Definer, so logins need no SELECT on the bindings table.
-- Every policy reads it (through the context helpers): a store without bindings answers after
-- one probe.
declare
  b pymem.login_bindings;
  n integer;
begin
  if not exists (select from pymem.login_bindings) then
    return null;
  end if;
  select x.* into b from pymem.login_bindings x where x.role_name = session_user;
  if found then
    return b;
  end if;
  if (select r.rolsuper from pg_catalog.pg_roles r where r.rolname = session_user) then
    return null;
  end if;
  select count(*) into n
    from pymem.login_bindings x join pg_catalog.pg_roles r on r.rolname = x.role_name
   where pg_catalog.pg_has_role(session_user, r.oid, 'MEMBER');
  if n = 0 then
    return null;
  elsif n = 1 then
    select x.* into b
      from pymem.login_bindings x join pg_catalog.pg_roles r on r.rolname = x.role_name
     where pg_catalog.pg_has_role(session_user, r.oid, 'MEMBER');
    return b;
  end if;
  b.role_name := null;
  b.tenants := '{}';
  b.all_tenants := false;
  b.scope := '{}';
  return b;
end
$$;

-- The context helpers are plpgsql: as SQL functions with a FROM clause (not inlined, because of
-- their SET clause) each call cost tens of microseconds, and every policy calls them.

create or replace function pymem._ctx_tenant() returns text
language plpgsql stable parallel safe
set search_path = pg_catalog, pg_temp
as $$
declare
  t text := nullif(current_setting('pymem.tenant', true), '');
  b pymem.login_bindings;
begin
  if t is null then
    return null;
  end if;
  -- A bound login sees its setting only for a tenant its binding names: a tenant set by hand with
  -- set_config() outside the binding reads as unset, so every policy fails closed.
  b := pymem._login_binding();
  if (b.role_name is null and b.tenants is null) or b.all_tenants or t = any (b.tenants) then
    return t;
  end if;
  return null;
end
$$;

create or replace function pymem._ctx_adapter() returns text
language plpgsql stable parallel safe
set search_path = pg_catalog, pg_temp
as $$
declare
  b pymem.login_bindings := pymem._login_binding();
begin
  -- A bound login always writes as its adapter, whatever the setting says: this is what stops an
  -- agent's connection from writing untagged (trusted) rows.
  if b.role_name is not null or b.tenants is not null then
    return b.adapter;
  end if;
  return nullif(current_setting('pymem.adapter', true), '');
end
$$;

create or replace function pymem._ctx_scope() returns jsonb
language plpgsql stable parallel safe
set search_path = pg_catalog, pg_temp
as $$
declare
  v jsonb := coalesce(nullif(current_setting('pymem.scope', true), '')::jsonb, '{}'::jsonb);
  b pymem.login_bindings := pymem._login_binding();
begin
  -- A bound login's scope always contains its binding's scope. A setting that contradicts it
  -- (another value for a bound axis) becomes {"": ""}, which no row's scope contains.
  if b.scope is null or b.scope = '{}'::jsonb then
    return v;
  end if;
  if exists (select from jsonb_each_text(b.scope) e where v ? e.key and (v ->> e.key) is distinct from e.value) then
    return '{"": ""}'::jsonb;
  end if;
  return v || b.scope;
end
$$;

create or replace function pymem._ctx_read_adapters() returns text[]
language plpgsql stable parallel safe
set search_path = pg_catalog, pg_temp
as $$
declare
  s text := nullif(current_setting('pymem.read_adapters', true), '');
begin
  if s is null then
    return null;
  end if;
  return array(select jsonb_array_elements_text(s::jsonb));
end
$$;


create or replace function pymem._scope_is_flat(p_scope jsonb) returns boolean
language plpgsql immutable parallel safe
set search_path = pg_catalog, pg_temp
as $$
begin
  -- plpgsql and a jsonpath instead of a SQL function over jsonb_each: one simple expression,
  -- about 8x cheaper per call. '?' finds an empty key; silent: true keeps non-objects an answer.
  return jsonb_typeof(p_scope) = 'object'
     and not (p_scope ? '')
     and not jsonb_path_exists(p_scope, 'strict $.* ? (@.type() != "string" || @ == "")', '{}', true);
end
$$;

create or replace function pymem.set_context(
  p_tenant text,
  p_actor text default null,
  p_adapter text default null,
  p_scope jsonb default '{}'::jsonb,
  p_read_adapters text[] default null
) returns void
language plpgsql volatile
set search_path = pg_catalog, pg_temp
as $$
declare
  b pymem.login_bindings := pymem._login_binding();
begin
  if p_tenant is null or p_tenant = '' or length(p_tenant) > 200 or not pymem._is_plain_text(p_tenant) then
    raise exception 'pymem: tenant must be a non-empty string of at most 200 characters, without control or format characters'
      using errcode = '22023';
  end if;
  if (p_actor is not null and (length(p_actor) > 200 or not pymem._is_plain_text(p_actor)))
     or (p_adapter is not null and (length(p_adapter) > 200 or not pymem._is_plain_text(p_adapter))) then
    raise exception 'pymem: actor and adapter must be at most 200 characters, without control or format characters'
      using errcode = '22023';
  end if;
  if p_scope is null or (p_scope <> '{}'::jsonb and not pymem._scope_is_flat(p_scope)) then
    raise exception 'pymem: scope must be a flat object of non-empty string values'
      using errcode = '22023';
  end if;
  if b.role_name is not null or b.tenants is not null then
    if b.role_name is null then
      raise exception 'pymem: this login is a member of several bound roles; bind the login itself'
        using errcode = '42501';
    end if;
    if p_adapter is distinct from b.adapter then
      raise exception 'pymem: this login is bound to adapter %, it cannot act as %', b.adapter, coalesce(p_adapter, 'the operator')
        using errcode = '42501';
    end if;
    if not (b.all_tenants or p_tenant = any (b.tenants)) then
      raise exception 'pymem: this login is not bound to tenant %', p_tenant
        using errcode = '42501';
    end if;
    if not (p_scope @> b.scope) then
      raise exception 'pymem: this login is bound to scope %, the context scope must contain it', b.scope
        using errcode = '42501';
    end if;
  end if;
  -- one statement for the five settings
  perform set_config('pymem.tenant', p_tenant, true),
          set_config('pymem.actor', coalesce(p_actor, ''), true),
          set_config('pymem.adapter', coalesce(p_adapter, ''), true),
          set_config('pymem.scope', p_scope::text, true),
          set_config('pymem.read_adapters',
                     case when p_read_adapters is null then '' else to_jsonb(p_read_adapters)::text end, true);
end
$$;

-- ============================================================================================
-- row-level security: a whole-tenant context (scope {}) skips the per-row containment test
-- ============================================================================================
alter policy memories_read on pymem.memories
  using (tenant_id = (select pymem._ctx_tenant())
         and ((select pymem._ctx_scope() = '{}'::jsonb) or scope @> (select pymem._ctx_scope()))
         and ((select pymem._ctx_read_adapters()) is null
              or source_adapter = any ((select pymem._ctx_read_adapters())::text[])));
alter policy memories_insert on pymem.memories
  with check (tenant_id = (select pymem._ctx_tenant())
              and ((select pymem._ctx_scope() = '{}'::jsonb) or scope @> (select pymem._ctx_scope()))
              and source_adapter is not distinct from (select pymem._ctx_adapter()));
alter policy memories_update on pymem.memories
  using (tenant_id = (select pymem._ctx_tenant())
         and ((select pymem._ctx_scope() = '{}'::jsonb) or scope @> (select pymem._ctx_scope()))
         and ((select pymem._ctx_adapter()) is null or source_adapter = (select pymem._ctx_adapter()))
         and ((select pymem._ctx_read_adapters()) is null
              or source_adapter = any ((select pymem._ctx_read_adapters())::text[])))
  with check (tenant_id = (select pymem._ctx_tenant())
              and ((select pymem._ctx_scope() = '{}'::jsonb) or scope @> (select pymem._ctx_scope()))
              and source_adapter is not distinct from (select pymem._ctx_adapter()));
alter policy memories_delete on pymem.memories
  using (tenant_id = (select pymem._ctx_tenant())
         and ((select pymem._ctx_scope() = '{}'::jsonb) or scope @> (select pymem._ctx_scope()))
         and ((select pymem._ctx_adapter()) is null or source_adapter = (select pymem._ctx_adapter()))
         and ((select pymem._ctx_read_adapters()) is null
              or source_adapter = any ((select pymem._ctx_read_adapters())::text[])));
alter policy ledger_read on pymem.ledger
  using (tenant_id = (select pymem._ctx_tenant())
         and ((select pymem._ctx_scope() = '{}'::jsonb) or coalesce(details -> 'scope', '{}'::jsonb) @> (select pymem._ctx_scope()))
         and ((select pymem._ctx_read_adapters()) is null
              or (details ->> 'source_adapter') = any ((select pymem._ctx_read_adapters())::text[])));

-- ============================================================================================
-- hash version 2
-- ============================================================================================

alter function pymem._content_hash(pymem.memories) rename to _content_hash_v1;
comment on function pymem._content_hash_v1(pymem.memories) is 'sha256 of a memory''s hashed fields, hash version 1 (kept to verify rows whose latest event is version 1)';
alter function pymem._event_bytes(pymem.ledger) rename to _event_bytes_v1;
comment on function pymem._event_bytes_v1(pymem.ledger) is 'The hashed field list of a ledger entry, hash version 1';

create function pymem._content_bytes_v2(m pymem.memories) returns bytea
language plpgsql immutable parallel safe
set search_path = pg_catalog, pg_temp
as $$
-- Version 2: '\x0002' and then, in this order, every hashed field as
--   NULL -> 0x00; variable length -> 0x01, int4 byte length, bytes; fixed width -> 0x01, bytes:
--   tenant_id, id, kind, content, origin, source_adapter, injection_source, policy_fingerprint,
--   superseded_by (UTF-8 text); scope, provenance (jsonb text output, UTF-8); tags (to_jsonb(tags)
--   text output, UTF-8); importance, confidence (float4send); revision (int8send); created_at,
--   valid_from, invalidated_at (timestamptz_send: int8 microseconds since 2000-01-01 UTC);
--   record (jsonb text output, UTF-8); embedding (vector_send).
-- One expression of built-ins: no helper call per field, and the record and the vector (the big
-- fields) come last so the growing bytea is copied in full as little as possible. convert_to,
-- never textsend or jsonb_send: those convert to the client's encoding.
declare
  v_content bytea := convert_to(m.content, 'UTF8');
  v_scope bytea := convert_to(m.scope::text, 'UTF8');
  v_provenance bytea := convert_to(m.provenance::text, 'UTF8');
  v_tags bytea := convert_to(to_jsonb(m.tags)::text, 'UTF8');
  v_record bytea := convert_to(m.record::text, 'UTF8');
  v_vector bytea := vector_send(m.embedding);
begin
  return '\x0002'::bytea
    || case when m.tenant_id is null then '\x00'::bytea else '\x01'::bytea || int4send(length(convert_to(m.tenant_id, 'UTF8'))) || convert_to(m.tenant_id, 'UTF8') end
    || case when m.id is null then '\x00'::bytea else '\x01'::bytea || int4send(length(convert_to(m.id, 'UTF8'))) || convert_to(m.id, 'UTF8') end
    || case when m.kind is null then '\x00'::bytea else '\x01'::bytea || int4send(length(convert_to(m.kind, 'UTF8'))) || convert_to(m.kind, 'UTF8') end
    || case when v_content is null then '\x00'::bytea else '\x01'::bytea || int4send(length(v_content)) || v_content end
    || case when m.origin is null then '\x00'::bytea else '\x01'::bytea || int4send(length(convert_to(m.origin, 'UTF8'))) || convert_to(m.origin, 'UTF8') end
    || case when m.source_adapter is null then '\x00'::bytea else '\x01'::bytea || int4send(length(convert_to(m.source_adapter, 'UTF8'))) || convert_to(m.source_adapter, 'UTF8') end
    || case when m.injection_source is null then '\x00'::bytea else '\x01'::bytea || int4send(length(convert_to(m.injection_source, 'UTF8'))) || convert_to(m.injection_source, 'UTF8') end
    || case when m.policy_fingerprint is null then '\x00'::bytea else '\x01'::bytea || int4send(length(convert_to(m.policy_fingerprint, 'UTF8'))) || convert_to(m.policy_fingerprint, 'UTF8') end
    || case when m.superseded_by is null then '\x00'::bytea else '\x01'::bytea || int4send(length(convert_to(m.superseded_by, 'UTF8'))) || convert_to(m.superseded_by, 'UTF8') end
    || case when v_scope is null then '\x00'::bytea else '\x01'::bytea || int4send(length(v_scope)) || v_scope end
    || case when v_provenance is null then '\x00'::bytea else '\x01'::bytea || int4send(length(v_provenance)) || v_provenance end
    || case when v_tags is null then '\x00'::bytea else '\x01'::bytea || int4send(length(v_tags)) || v_tags end
    || case when m.importance is null then '\x00'::bytea else '\x01'::bytea || float4send(m.importance) end
    || case when m.confidence is null then '\x00'::bytea else '\x01'::bytea || float4send(m.confidence) end
    || case when m.revision is null then '\x00'::bytea else '\x01'::bytea || int8send(m.revision::bigint) end
    || case when m.created_at is null then '\x00'::bytea else '\x01'::bytea || timestamptz_send(m.created_at) end
    || case when m.valid_from is null then '\x00'::bytea else '\x01'::bytea || timestamptz_send(m.valid_from) end
    || case when m.invalidated_at is null then '\x00'::bytea else '\x01'::bytea || timestamptz_send(m.invalidated_at) end
    || case when v_record is null then '\x00'::bytea else '\x01'::bytea || int4send(length(v_record)) || v_record end
    || case when v_vector is null then '\x00'::bytea else '\x01'::bytea || int4send(length(v_vector)) || v_vector end;
end
$$;
comment on function pymem._content_bytes_v2(pymem.memories) is 'The hashed bytes of a memory, hash version 2: built-in renderings only, one expression (verification streams them and hashes them outside)';

create function pymem._content_hash_v2(m pymem.memories) returns bytea
language plpgsql immutable parallel safe
set search_path = pg_catalog, pg_temp
as $$
begin
  return sha256(pymem._content_bytes_v2(m));
end
$$;
comment on function pymem._content_hash_v2(pymem.memories) is 'sha256 of a memory''s hashed fields, hash version 2 (of pymem._content_bytes_v2)';

create function pymem._event_bytes_v2(l pymem.ledger) returns bytea
language plpgsql immutable parallel safe
set search_path = pg_catalog, pg_temp
as $$
-- Version 2: '\x0002', then tenant_id, seq, event, memory_id, revision, content_hash, actor,
-- adapter, details, occurred_at, framed as in pymem._content_hash_v2 (details: jsonb text output).
declare
  v_details bytea := convert_to(l.details::text, 'UTF8');
begin
  return '\x0002'::bytea
    || case when l.tenant_id is null then '\x00'::bytea else '\x01'::bytea || int4send(length(convert_to(l.tenant_id, 'UTF8'))) || convert_to(l.tenant_id, 'UTF8') end
    || case when l.seq is null then '\x00'::bytea else '\x01'::bytea || int8send(l.seq) end
    || case when l.event is null then '\x00'::bytea else '\x01'::bytea || int4send(length(convert_to(l.event, 'UTF8'))) || convert_to(l.event, 'UTF8') end
    || case when l.memory_id is null then '\x00'::bytea else '\x01'::bytea || int4send(length(convert_to(l.memory_id, 'UTF8'))) || convert_to(l.memory_id, 'UTF8') end
    || case when l.revision is null then '\x00'::bytea else '\x01'::bytea || int8send(l.revision::bigint) end
    || case when l.content_hash is null then '\x00'::bytea else '\x01'::bytea || int4send(length(l.content_hash)) || l.content_hash end
    || case when l.actor is null then '\x00'::bytea else '\x01'::bytea || int4send(length(convert_to(l.actor, 'UTF8'))) || convert_to(l.actor, 'UTF8') end
    || case when l.adapter is null then '\x00'::bytea else '\x01'::bytea || int4send(length(convert_to(l.adapter, 'UTF8'))) || convert_to(l.adapter, 'UTF8') end
    || case when v_details is null then '\x00'::bytea else '\x01'::bytea || int4send(length(v_details)) || v_details end
    || case when l.occurred_at is null then '\x00'::bytea else '\x01'::bytea || timestamptz_send(l.occurred_at) end;
end
$$;
comment on function pymem._event_bytes_v2(pymem.ledger) is 'The hashed field list of a ledger entry, hash version 2: built-in renderings only, one expression';

create function pymem._content_hash(m pymem.memories) returns bytea
language sql immutable parallel safe
set search_path = pg_catalog, pg_temp
as $$ select pymem._content_hash_v2(m) $$;
comment on function pymem._content_hash(pymem.memories) is 'sha256 of a memory''s hashed fields with the current hash version (2); erased_at and updated_at are bookkeeping, not content';

create function pymem._event_bytes(l pymem.ledger) returns bytea
language sql immutable parallel safe
set search_path = pg_catalog, pg_temp
as $$
  select case l.hash_version when 2 then pymem._event_bytes_v2(l) when 1 then pymem._event_bytes_v1(l) end
$$;
comment on function pymem._event_bytes(pymem.ledger) is 'The hashed field list of a ledger entry with the hash version it was written with (NULL for an unknown version)';

-- vector_send resolves through the search_path: pin it to the schema pgvector lives in.
do $$
begin
  execute format('alter function pymem._content_bytes_v2(pymem.memories) set search_path = pg_catalog, %I, pg_temp',
                 (select n.nspname from pg_extension e join pg_namespace n on n.oid = e.extnamespace where e.extname = 'vector'));
end
$$;

alter table pymem.store_info alter column hash_version set default 2;
alter table pymem.ledger alter column hash_version set default 2;

-- ============================================================================================
-- triggers: writes hash with version 2
-- ============================================================================================

create or replace function pymem._memories_before_write() returns trigger
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
  if tg_op = 'INSERT' then
    new.revision := 1;
    -- The database's time, whatever the statement said: a caller's claim of when something
    -- became true belongs in valid_from.
    new.created_at := now();
  else
    -- The revision moves on every update, whatever the statement said.
    new.revision := old.revision + 1;
    new.created_at := old.created_at;
  end if;
  new.updated_at := now();
  if new.erased_at is not null and (tg_op = 'INSERT' or old.erased_at is null) then
    -- Erasure keeps the hash of what was erased so the chain stays verifiable.
    if tg_op = 'UPDATE' then
      new.content_hash := old.content_hash;
    else
      raise exception 'pymem: a memory cannot be inserted already erased' using errcode = '22023';
    end if;
  elsif new.erased_at is not null then
    raise exception 'pymem: an erased memory cannot be changed' using errcode = '22023';
  else
    new.content_hash := pymem._content_hash_v2(new);
  end if;
  return new;
end
$$;

create or replace function pymem._append_events(p_events pymem._pending_event[])
returns pymem.ledger
language plpgsql security definer
set search_path = pg_catalog, pg_temp
as $$
-- Chains a batch of events under ONE lock and ONE update of each tenant's head row. Locking the
-- head once per statement (not once per row) keeps a batch from building a long chain of dead
-- head-row versions, and writers of one tenant serialize here while other tenants never wait.
-- The events' time is read after the lock is held, so along a tenant's chain time never goes
-- backwards, and an event placed after a checkpoint cannot claim to be older than it. Actor and
-- adapter are read once per call (each read looks up the login's binding); each tenant's events
-- are written with one INSERT.
declare
  v_tenant text;
  v_head pymem.chain_heads;
  v_entry pymem.ledger;
  v_entries pymem.ledger[];
  v_live bigint;
  v_at timestamptz;
  v_actor text := pymem._ctx_actor();
  v_adapter text := pymem._ctx_adapter();
  e pymem._pending_event;
begin
  for v_tenant in select distinct x.tenant_id from unnest(p_events) x order by 1 loop
    if v_tenant is distinct from pymem._ctx_tenant() then
      raise exception 'pymem: ledger events can only be appended for the context tenant' using errcode = '42501';
    end if;
    select * into v_head from pymem.chain_heads h where h.tenant_id = v_tenant for update;
    if not found then
      insert into pymem.chain_heads (tenant_id, seq, chain_hash)
        values (v_tenant, 0, pymem._genesis_hash(v_tenant))
        on conflict (tenant_id) do nothing;
      select * into v_head from pymem.chain_heads h where h.tenant_id = v_tenant for update;
    end if;
    v_at := clock_timestamp();
    v_live := 0;
    v_entries := '{}';
    for e in select x.* from unnest(p_events) x where x.tenant_id = v_tenant order by x.memory_id, x.event loop
      v_entry.tenant_id := v_tenant;
      v_entry.seq := v_head.seq + 1;
      v_entry.event := e.event;
      v_entry.memory_id := e.memory_id;
      v_entry.revision := e.revision;
      v_entry.content_hash := e.content_hash;
      v_entry.actor := v_actor;
      v_entry.adapter := v_adapter;
      v_entry.details := coalesce(e.details, '{}'::jsonb);
      v_entry.occurred_at := v_at;
      v_entry.hash_version := 2;
      v_entry.prev_hash := v_head.chain_hash;
      v_entry.chain_hash := sha256(v_entry.prev_hash || pymem._event_bytes_v2(v_entry));
      v_entries := v_entries || v_entry;
      v_head.seq := v_entry.seq;
      v_head.chain_hash := v_entry.chain_hash;
      v_live := v_live + coalesce(e.live_delta, 0);
    end loop;
    insert into pymem.ledger select x.* from unnest(v_entries) x;
    update pymem.chain_heads h
       set seq = v_head.seq, chain_hash = v_head.chain_hash, live_rows = h.live_rows + v_live, updated_at = v_at
     where h.tenant_id = v_tenant;
  end loop;
  return v_entry;
end
$$;

-- ============================================================================================
-- verification: each entry and each row with the hash version it was written with
-- ============================================================================================

create or replace function pymem.verify_chain(p_tenant text default null)
returns table (
  tenant_id text,
  entries bigint,
  rows_checked bigint,
  head_seq bigint,
  head_hash bytea,
  bad_seq bigint,
  bad_memory_id text,
  problem text
)
language plpgsql stable security definer
set search_path = pg_catalog, pg_temp
as $$
-- Walks each tenant's chain (contiguous seq, prev_hash linkage, recomputed chain_hash, head row)
-- and re-hashes every live memory against its stored content_hash and its latest ledger event.
-- Each entry is checked with its own hash_version, each row with the version of its latest
-- event (the version its hash was computed with). Returns one row per tenant; problem is NULL
-- when the tenant is clean, else the first fault.
declare
  v_ctx text := pymem._ctx_tenant();
  t record;
  v_bad record;
  v_live bigint;
begin
  if v_ctx is not null then
    if p_tenant is not null and p_tenant <> v_ctx then
      raise exception 'pymem: a tenant context can only verify its own chain' using errcode = '42501';
    end if;
    -- The chain names every memory of the tenant; a context confined to a scope or to a read
    -- allow-list may not learn the ids and hashes of what it cannot read.
    if pymem._ctx_scope() <> '{}'::jsonb or pymem._ctx_read_adapters() is not null then
      raise exception 'pymem: verifying a tenant''s chain needs a whole-tenant context (no scope, no read allow-list)'
        using errcode = '42501';
    end if;
    p_tenant := v_ctx;
  elsif not pg_has_role(session_user, 'pymem_auditor', 'MEMBER') then
    raise exception 'pymem: verifying every tenant needs the pymem_auditor role (or set a tenant)' using errcode = '42501';
  end if;

  for t in
    select x.tenant_id from (
      select h.tenant_id from pymem.chain_heads h
      union select l.tenant_id from pymem.ledger l
      union select m.tenant_id from pymem.memories m) x
    where p_tenant is null or x.tenant_id = p_tenant
    order by 1
  loop
    tenant_id := t.tenant_id;
    bad_seq := null; bad_memory_id := null; problem := null;
    select count(*), max(l.seq) into entries, head_seq from pymem.ledger l where l.tenant_id = t.tenant_id;
    select count(*) into rows_checked from pymem.memories m where m.tenant_id = t.tenant_id;
    select h.chain_hash into head_hash from pymem.chain_heads h where h.tenant_id = t.tenant_id;

    -- 1. the chain itself, in one window pass
    -- a missing entry is named by the seq that should have been there
    select case when c.seq <> c.expected_seq then c.expected_seq else c.seq end as seq,
           case when c.seq <> c.expected_seq then null else c.memory_id end as memory_id,
           case when c.seq <> c.expected_seq then format('seq gap: expected %s, found %s', c.expected_seq, c.seq)
                when c.prev_hash <> c.expected_prev then 'prev_hash does not match the previous entry''s chain_hash'
                when c.hash_version not in (1, 2) then format('unknown hash_version %s', c.hash_version)
                else 'chain_hash does not match the entry''s fields' end as what
      into v_bad
      from (select l as entry, l.seq, l.memory_id, l.prev_hash, l.chain_hash, l.hash_version,
                   row_number() over (order by l.seq) as expected_seq,
                   coalesce(lag(l.chain_hash) over (order by l.seq), pymem._genesis_hash(l.tenant_id)) as expected_prev
              from pymem.ledger l where l.tenant_id = t.tenant_id) c
     where c.seq <> c.expected_seq or c.prev_hash <> c.expected_prev or c.hash_version not in (1, 2)
        or c.chain_hash <> sha256(c.prev_hash || case c.hash_version when 2 then pymem._event_bytes_v2(c.entry)
                                                                      else pymem._event_bytes_v1(c.entry) end)
     order by c.seq limit 1;
    if found then
      bad_seq := v_bad.seq; bad_memory_id := v_bad.memory_id; problem := v_bad.what;
      return next; continue;
    end if;

    -- 2. the head row must point at the last entry
    if coalesce(head_seq, 0) <> coalesce((select h.seq from pymem.chain_heads h where h.tenant_id = t.tenant_id), 0)
       or (head_seq is not null and head_hash is distinct from
           (select l.chain_hash from pymem.ledger l where l.tenant_id = t.tenant_id and l.seq = head_seq)) then
      bad_seq := coalesce(head_seq, 0) + 1;
      problem := 'chain head does not match the last ledger entry (entries removed or appended outside the chain)';
      return next; continue;
    end if;

    -- 3. every live row against its own hash and its latest ledger event
    select m.id, last.seq as last_seq,
           case when last.seq is null then 'memory has no ledger event (written with triggers disabled)'
                when last.event = 'memory.delete' then 'memory exists but its latest ledger event is a delete'
                when m.erased_at is null
                     and m.content_hash <> case last.hash_version when 1 then pymem._content_hash_v1(m)
                                                                  else pymem._content_hash_v2(m) end
                  then 'content does not match content_hash (row edited outside the chain)'
                when m.content_hash <> last.content_hash then 'content_hash differs from the latest ledger event'
                else 'revision differs from the latest ledger event' end as what
      into v_bad
      from pymem.memories m
      left join lateral (select l.seq, l.event, l.content_hash, l.revision, l.hash_version from pymem.ledger l
                          where l.tenant_id = m.tenant_id and l.memory_id = m.id
                            and l.event like 'memory.%'
                          order by l.seq desc limit 1) last on true
     where m.tenant_id = t.tenant_id
       and (last.seq is null or last.event = 'memory.delete'
            or (m.erased_at is null
                and m.content_hash <> case last.hash_version when 1 then pymem._content_hash_v1(m)
                                                             else pymem._content_hash_v2(m) end)
            or m.content_hash <> last.content_hash or m.revision <> last.revision)
     order by last.seq nulls first, m.id limit 1;
    if found then
      bad_seq := v_bad.last_seq; bad_memory_id := v_bad.id; problem := v_bad.what;
      return next; continue;
    end if;

    -- 4. every memory the ledger says is live must exist: step 3 matched each existing row to a
    --    live event, so equal counts prove it; the search that names the missing row runs only
    --    when they differ.
    select count(*) into v_live
      from (select distinct on (l.memory_id) l.event from pymem.ledger l
             where l.tenant_id = t.tenant_id and l.memory_id is not null and l.event like 'memory.%'
             order by l.memory_id, l.seq desc) last
     where last.event <> 'memory.delete';
    if v_live <> rows_checked then
      select last.memory_id, last.seq into v_bad
        from (select distinct on (l.memory_id) l.memory_id, l.seq, l.event from pymem.ledger l
               where l.tenant_id = t.tenant_id and l.memory_id is not null and l.event like 'memory.%'
               order by l.memory_id, l.seq desc) last
       where last.event <> 'memory.delete'
         and not exists (select from pymem.memories m where m.tenant_id = t.tenant_id and m.id = last.memory_id)
       order by last.seq limit 1;
      bad_seq := v_bad.seq; bad_memory_id := v_bad.memory_id;
      problem := 'memory is missing but its latest ledger event is not a delete (row deleted outside the chain)';
    end if;
    return next;
  end loop;
end
$$;
comment on function pymem.verify_chain(text) is 'Verifies the hash chain and re-hashes live rows, each with the hash version it was written with; one row per tenant, problem NULL when clean';

-- ============================================================================================
-- re-hash: every live row that verifies under version 1 gets its version-2 hash and a
-- memory.rehash event
-- ============================================================================================

-- The graph is rebuilt once at the end (see the header).
drop index pymem.memories_embedding_hnsw;

-- Under ALTER TABLE's lock, for this transaction only: the bookkeeping triggers stay out of the
-- re-hash (it is no new revision, and it chains events of its own), and row-level security is
-- not forced on the owner (an operator context may not update adapter-tagged rows).
alter table pymem.memories disable trigger memories_before_write;
alter table pymem.memories disable trigger memories_chain_update;
alter table pymem.memories no force row level security;

do $$
declare
  v_tenant text;
  v_events pymem._pending_event[];
begin
  for v_tenant in select distinct m.tenant_id from pymem.memories m where m.erased_at is null order by 1 loop
    -- the ledger's and the heads' policies admit the owner for the context tenant only
    perform set_config('pymem.tenant', v_tenant, true), set_config('pymem.actor', '', true),
            set_config('pymem.adapter', '', true), set_config('pymem.scope', '{}', true),
            set_config('pymem.read_adapters', '', true);
    -- exactly the rows pymem.verify_chain finds clean: own hash (version 1), latest event
    with last as (
      select distinct on (l.memory_id) l.memory_id, l.event, l.content_hash, l.revision, l.hash_version
        from pymem.ledger l
       where l.tenant_id = v_tenant and l.memory_id is not null and l.event like 'memory.%'
       order by l.memory_id, l.seq desc),
    clean as (
      select m.id
        from pymem.memories m join last on last.memory_id = m.id
       where m.tenant_id = v_tenant and m.erased_at is null
         and last.hash_version = 1 and last.event <> 'memory.delete'
         and m.content_hash = last.content_hash and m.revision = last.revision
         and m.content_hash = pymem._content_hash_v1(m)),
    rehashed as (
      update pymem.memories m set content_hash = pymem._content_hash_v2(m)
        from clean c
       where m.tenant_id = v_tenant and m.id = c.id
      returning m.tenant_id, m.id, m.revision, m.content_hash, m.scope, m.source_adapter)
    select array_agg(row(r.tenant_id, 'memory.rehash', r.id, r.revision, r.content_hash, 0,
                         jsonb_build_object('scope', r.scope, 'source_adapter', r.source_adapter))::pymem._pending_event)
      into v_events from rehashed r;
    if v_events is not null then
      perform pymem._append_events(v_events);
    end if;
  end loop;
end
$$;

alter table pymem.memories force row level security;
alter table pymem.memories enable trigger memories_before_write;
alter table pymem.memories enable trigger memories_chain_update;

update pymem.store_info set hash_version = 2;

-- ============================================================================================
-- search
-- ============================================================================================

-- Adding a stored generated column rewrites the table once (which also drops the dead row
-- versions the re-hash left).
alter table pymem.memories add column record_lite jsonb
  generated always as (case when jsonb_typeof(record) = 'object' and (record ? 'embedding' or record ? 'vector')
                            then record - '{embedding,vector}'::text[] end) stored;
comment on column pymem.memories.record_lite is 'The record without its embedding/vector keys, for records that carry one (NULL otherwise): what searches that return no vectors send back; kept by the database';

set local maintenance_work_mem = '1GB';  -- the graph is built in memory (much faster than spilling)
create index memories_embedding_hnsw on pymem.memories using hnsw (embedding vector_cosine_ops);
comment on index pymem.memories_embedding_hnsw is 'Approximate cosine search; iterative scans keep filtered results complete';
reset maintenance_work_mem;

create or replace function pymem.search(
  p_query vector,
  p_top_k integer,
  p_scope_filter jsonb default '{}'::jsonb,
  p_include_superseded boolean default false,
  p_with_vectors boolean default true,
  p_plan text default 'auto',
  p_exact_below bigint default 2000,
  p_ef_search integer default null,
  p_max_scan_tuples integer default 20000
) returns setof pymem.search_hit
language plpgsql volatile security invoker
-- The plan is chosen below from an exact count, and each branch pins its shape with planner
-- settings, so no estimate of the tenant's size matters and the cached generic plans are safe:
-- planning each call afresh (a custom plan) cost more than the whole search on small tenants.
set plan_cache_mode = force_generic_plan
set enable_seqscan = off  -- the exact plan reads the tenant's rows through a tenant-first index
set enable_sort = on      -- switched off for the HNSW statement only (see below)
set enable_indexscan = on -- switched off for the exact statement only (see below)
-- Iterative scans keep fetching candidates until top_k rows pass RLS and the filters. These
-- SET clauses also scope the set_config(..., true) calls below to this function call.
set hnsw.iterative_scan = 'relaxed_order'
set hnsw.ef_search = 40
set hnsw.max_scan_tuples = 20000
as $$
-- Returns the p_top_k visible, non-erased rows of the context tenant whose scope contains
-- p_scope_filter (and the context scope, through RLS), best first (score desc, then id).
-- Superseded rows (invalidated_at set) are left out unless p_include_superseded: recall wants
-- what is believed now. Rows without an embedding never match. p_with_vectors = false drops the
-- record's "embedding"/"vector" keys from the result (less to send back): the stored record_lite.
--
-- Plan (p_plan 'auto'): exact (the tenant's rows by the primary key, sorted by distance) when
-- the tenant is small, else HNSW with an iterative scan, re-sorted, falling back to exact
-- whenever the scan ran out of candidates before finding p_top_k rows. An HNSW visit costs about
-- 8 exact row visits and a scan visits about top_k * table_rows / tenant_rows tuples, hence the
-- rule below. 'exact' and 'hnsw' force a plan (tests, benchmarks); 'hnsw' still falls back.
declare
  v_tenant text := pymem._ctx_tenant();
  v_rows bigint;
  v_table_rows double precision;
  v_hits pymem.search_hit[];
  v_any_scope boolean := p_scope_filter = '{}'::jsonb;  -- once, not per row
begin
  if p_query is null or vector_norm(p_query) = 0 then
    raise exception 'pymem: the query vector must be a non-zero vector' using errcode = '22023';
  end if;
  if p_top_k is null or p_top_k < 1 or p_top_k > 1000 then
    raise exception 'pymem: top_k must be between 1 and 1000' using errcode = '22023';
  end if;
  if p_scope_filter is null or (p_scope_filter <> '{}'::jsonb and not pymem._scope_is_flat(p_scope_filter)) then
    raise exception 'pymem: the scope filter must be a flat object of non-empty string values' using errcode = '22023';
  end if;
  if p_plan is null or p_plan not in ('auto', 'exact', 'hnsw') then
    raise exception 'pymem: plan must be auto, exact or hnsw' using errcode = '22023';
  end if;
  if v_tenant is null then
    return;  -- no tenant, no visible rows
  end if;
  select h.live_rows into v_rows from pymem.chain_heads h where h.tenant_id = v_tenant;
  if coalesce(v_rows, 0) = 0 then
    return;
  end if;
  if p_plan = 'hnsw' or (p_plan = 'auto' and v_rows >= p_exact_below) then
    select greatest(c.reltuples, v_rows) into v_table_rows
      from pg_catalog.pg_class c where c.oid = 'pymem.memories'::regclass;
  end if;

  if p_plan = 'hnsw' or (p_plan = 'auto' and v_rows >= p_exact_below
                         and v_rows::double precision * v_rows >= 8.0 * p_top_k * v_table_rows) then
    -- enable_sort off: the only way to order the candidates without a sort is the HNSW index,
    -- so the planner cannot fall back to "tenant index + sort" (exact, and slow on big tenants).
    perform set_config('hnsw.ef_search', coalesce(p_ef_search, pymem._search_ef(p_top_k))::text, true),
            set_config('hnsw.max_scan_tuples', p_max_scan_tuples::text, true),
            set_config('enable_sort', 'off', true);
    -- The materialized CTE is the shape iterative scans need. Its rows come back in relaxed
    -- order, so they are re-sorted; on "distance + 0", because Postgres would otherwise take the
    -- CTE as already sorted by distance and only sort ties (an incremental sort).
    with candidates as materialized (
      select m.id, case when p_with_vectors then m.record else coalesce(m.record_lite, m.record) end as record,
             m.content, m.kind, m.tags, m.scope, m.origin, m.provenance, m.confidence,
             m.source_adapter, m.injection_source, m.policy_fingerprint, m.created_at, m.revision,
             m.embedding <=> p_query as distance
        from pymem.memories m
       where m.tenant_id = v_tenant
         and (v_any_scope or m.scope @> p_scope_filter)
         and m.erased_at is null
         and (p_include_superseded or m.invalidated_at is null)
       order by m.embedding <=> p_query
       limit p_top_k)
    select array_agg(row(c.id, c.record, c.content, c.kind, c.tags, c.scope, c.origin, c.provenance, c.confidence,
                         c.source_adapter, c.injection_source, c.policy_fingerprint, c.created_at,
                         c.revision, 1 - c.distance)::pymem.search_hit
                     order by c.distance + 0, c.id)
      into v_hits
      from candidates c
     where c.distance <> 'NaN'::double precision;
    perform set_config('enable_sort', 'on', true);
    if coalesce(cardinality(v_hits), 0) >= p_top_k then
      return query select h.* from unnest(v_hits) h;
      return;
    end if;
  end if;

  -- Rank narrow (id, distance) pairs, then read the top_k rows by the primary key: the sort
  -- copies two columns per candidate instead of fifteen, and only the top_k records are read.
  -- enable_indexscan off: the tenant's rows come through a bitmap scan and a top-N sort, never
  -- the HNSW index (which only an index scan can use), with no extra plan node per row. Zero
  -- vectors have no direction (a NaN distance), and NaN sorts after every number: dropping them
  -- after the limit loses no row that belonged in the top_k.
  perform set_config('enable_indexscan', 'off', true);
  return query
    select m.id, case when p_with_vectors then m.record else coalesce(m.record_lite, m.record) end,
           m.content, m.kind, m.tags, m.scope, m.origin, m.provenance, m.confidence, m.source_adapter,
           m.injection_source, m.policy_fingerprint, m.created_at, m.revision, 1 - t.distance
      from (select m.id, m.embedding <=> p_query as distance
              from pymem.memories m
             where m.tenant_id = v_tenant
               and (v_any_scope or m.scope @> p_scope_filter)
               and m.erased_at is null
               and (p_include_superseded or m.invalidated_at is null)
               and m.embedding is not null
             order by 2, 1
             limit p_top_k) t
      join pymem.memories m on m.tenant_id = v_tenant and m.id = t.id
     where t.distance <> 'NaN'::double precision
     order by t.distance, t.id;
end
$$;

-- Operators resolve through the search_path; pin it to the schema pgvector lives in, whatever
-- the caller's is.
create or replace function pymem.search_as(
  p_tenant text,
  p_actor text,
  p_adapter text,
  p_scope jsonb,
  p_read_adapters text[],
  p_query vector,
  p_top_k integer,
  p_scope_filter jsonb default '{}'::jsonb,
  p_include_superseded boolean default false,
  p_with_vectors boolean default true,
  p_plan text default 'auto'
) returns setof pymem.search_hit
language plpgsql volatile security invoker
-- The plan is chosen below from an exact count, and each branch pins its shape with planner
-- settings, so no estimate of the tenant's size matters and the cached generic plans are safe:
-- planning each call afresh (a custom plan) cost more than the whole search on small tenants.
set plan_cache_mode = force_generic_plan
set enable_seqscan = off  -- the exact plan reads the tenant's rows through a tenant-first index
set enable_sort = on      -- switched off for the HNSW statement only (see below)
set enable_indexscan = on -- switched off for the exact statement only (see below)
-- Iterative scans keep fetching candidates until top_k rows pass RLS and the filters. These
-- SET clauses also scope the set_config(..., true) calls below to this function call.
set hnsw.iterative_scan = 'relaxed_order'
set hnsw.ef_search = 40
set hnsw.max_scan_tuples = 20000
as $$
-- pymem.set_context, then pymem.search's body: a search in one statement, so an autocommit
-- caller pays one round trip instead of four (begin, context, search, commit). The context stays
-- set for the rest of the transaction, exactly as if pymem.set_context had been called. The
-- body is pymem.search's, repeated rather than called: a nested call (and the copy of its rows)
-- cost as much as the smallest searches themselves. Keep the two identical below the prologue.
-- Returns the p_top_k visible, non-erased rows of the context tenant whose scope contains
-- p_scope_filter (and the context scope, through RLS), best first (score desc, then id).
-- Superseded rows (invalidated_at set) are left out unless p_include_superseded: recall wants
-- what is believed now. Rows without an embedding never match. p_with_vectors = false drops the
-- record's "embedding"/"vector" keys from the result (less to send back): the stored record_lite.
--
-- Plan (p_plan 'auto'): exact (the tenant's rows by the primary key, sorted by distance) when
-- the tenant is small, else HNSW with an iterative scan, re-sorted, falling back to exact
-- whenever the scan ran out of candidates before finding p_top_k rows. An HNSW visit costs about
-- 8 exact row visits and a scan visits about top_k * table_rows / tenant_rows tuples, hence the
-- rule below. 'exact' and 'hnsw' force a plan (tests, benchmarks); 'hnsw' still falls back.
declare
  v_tenant text := p_tenant;  -- set_context (below) refuses a tenant the login may not act in
  -- what pymem.search takes as arguments
  p_exact_below bigint := 2000;
  p_ef_search integer := null;
  p_max_scan_tuples integer := 20000;
  v_rows bigint;
  v_table_rows double precision;
  v_hits pymem.search_hit[];
  v_any_scope boolean := p_scope_filter = '{}'::jsonb;  -- once, not per row
begin
  perform pymem.set_context(p_tenant, p_actor, p_adapter, p_scope, p_read_adapters);
  if p_query is null or vector_norm(p_query) = 0 then
    raise exception 'pymem: the query vector must be a non-zero vector' using errcode = '22023';
  end if;
  if p_top_k is null or p_top_k < 1 or p_top_k > 1000 then
    raise exception 'pymem: top_k must be between 1 and 1000' using errcode = '22023';
  end if;
  if p_scope_filter is null or (p_scope_filter <> '{}'::jsonb and not pymem._scope_is_flat(p_scope_filter)) then
    raise exception 'pymem: the scope filter must be a flat object of non-empty string values' using errcode = '22023';
  end if;
  if p_plan is null or p_plan not in ('auto', 'exact', 'hnsw') then
    raise exception 'pymem: plan must be auto, exact or hnsw' using errcode = '22023';
  end if;
  if v_tenant is null then
    return;  -- no tenant, no visible rows
  end if;
  select h.live_rows into v_rows from pymem.chain_heads h where h.tenant_id = v_tenant;
  if coalesce(v_rows, 0) = 0 then
    return;
  end if;
  if p_plan = 'hnsw' or (p_plan = 'auto' and v_rows >= p_exact_below) then
    select greatest(c.reltuples, v_rows) into v_table_rows
      from pg_catalog.pg_class c where c.oid = 'pymem.memories'::regclass;
  end if;

  if p_plan = 'hnsw' or (p_plan = 'auto' and v_rows >= p_exact_below
                         and v_rows::double precision * v_rows >= 8.0 * p_top_k * v_table_rows) then
    -- enable_sort off: the only way to order the candidates without a sort is the HNSW index,
    -- so the planner cannot fall back to "tenant index + sort" (exact, and slow on big tenants).
    perform set_config('hnsw.ef_search', coalesce(p_ef_search, pymem._search_ef(p_top_k))::text, true),
            set_config('hnsw.max_scan_tuples', p_max_scan_tuples::text, true),
            set_config('enable_sort', 'off', true);
    -- The materialized CTE is the shape iterative scans need. Its rows come back in relaxed
    -- order, so they are re-sorted; on "distance + 0", because Postgres would otherwise take the
    -- CTE as already sorted by distance and only sort ties (an incremental sort).
    with candidates as materialized (
      select m.id, case when p_with_vectors then m.record else coalesce(m.record_lite, m.record) end as record,
             m.content, m.kind, m.tags, m.scope, m.origin, m.provenance, m.confidence,
             m.source_adapter, m.injection_source, m.policy_fingerprint, m.created_at, m.revision,
             m.embedding <=> p_query as distance
        from pymem.memories m
       where m.tenant_id = v_tenant
         and (v_any_scope or m.scope @> p_scope_filter)
         and m.erased_at is null
         and (p_include_superseded or m.invalidated_at is null)
       order by m.embedding <=> p_query
       limit p_top_k)
    select array_agg(row(c.id, c.record, c.content, c.kind, c.tags, c.scope, c.origin, c.provenance, c.confidence,
                         c.source_adapter, c.injection_source, c.policy_fingerprint, c.created_at,
                         c.revision, 1 - c.distance)::pymem.search_hit
                     order by c.distance + 0, c.id)
      into v_hits
      from candidates c
     where c.distance <> 'NaN'::double precision;
    perform set_config('enable_sort', 'on', true);
    if coalesce(cardinality(v_hits), 0) >= p_top_k then
      return query select h.* from unnest(v_hits) h;
      return;
    end if;
  end if;

  -- Rank narrow (id, distance) pairs, then read the top_k rows by the primary key: the sort
  -- copies two columns per candidate instead of fifteen, and only the top_k records are read.
  -- enable_indexscan off: the tenant's rows come through a bitmap scan and a top-N sort, never
  -- the HNSW index (which only an index scan can use), with no extra plan node per row. Zero
  -- vectors have no direction (a NaN distance), and NaN sorts after every number: dropping them
  -- after the limit loses no row that belonged in the top_k.
  perform set_config('enable_indexscan', 'off', true);
  return query
    select m.id, case when p_with_vectors then m.record else coalesce(m.record_lite, m.record) end,
           m.content, m.kind, m.tags, m.scope, m.origin, m.provenance, m.confidence, m.source_adapter,
           m.injection_source, m.policy_fingerprint, m.created_at, m.revision, 1 - t.distance
      from (select m.id, m.embedding <=> p_query as distance
              from pymem.memories m
             where m.tenant_id = v_tenant
               and (v_any_scope or m.scope @> p_scope_filter)
               and m.erased_at is null
               and (p_include_superseded or m.invalidated_at is null)
               and m.embedding is not null
             order by 2, 1
             limit p_top_k) t
      join pymem.memories m on m.tenant_id = v_tenant and m.id = t.id
     where t.distance <> 'NaN'::double precision
     order by t.distance, t.id;
end
$$;

do $$
declare
  v_schema text := (select n.nspname from pg_extension e join pg_namespace n on n.oid = e.extnamespace where e.extname = 'vector');
begin
  execute format('alter function pymem.search(vector, integer, jsonb, boolean, boolean, text, bigint, integer, integer) set search_path = pg_catalog, %I, pg_temp', v_schema);
  execute format('alter function pymem.search_as(text, text, text, jsonb, text[], vector, integer, jsonb, boolean, boolean, text) set search_path = pg_catalog, %I, pg_temp', v_schema);
end
$$;

reset role;

-- privileges: see sql/schema.sql, section 8 (record_lite is generated: nobody writes it)
revoke all on function pymem._content_bytes_v2(pymem.memories), pymem._content_hash_v2(pymem.memories),
  pymem._event_bytes_v2(pymem.ledger),
  pymem._content_hash(pymem.memories), pymem._event_bytes(pymem.ledger) from public;
grant execute on function pymem._content_bytes_v2(pymem.memories), pymem._content_hash_v2(pymem.memories),
  pymem._content_hash(pymem.memories), pymem._event_bytes_v2(pymem.ledger), pymem._event_bytes(pymem.ledger)
  to pymem_app, pymem_auditor;
