-- pymem: the canonical schema.
--
-- This file is the whole store as a DBA reviews it. The Alembic revisions in migrations/ apply the
-- numbered plain-SQL files in sql/migrations/ (0001 the frozen foundation, then one delta per
-- revision); tests prove that `upgrade head` from an empty database gives exactly what this file
-- gives.
--
-- Sections, always in this order:
--   1. roles and schema          5. row-level security
--   2. context                   6. triggers: revision, content hash, hash chain, append-only
--   3. hashing helpers           7. verbs (search, verify, audit) and views
--   4. tables and indexes        8. privileges
--
-- Placeholders substituted by the migration: {{embedding_dim}} (from PYMEM_EMBEDDING_DIM when the
-- schema is first created). Everything else is plain SQL.

-- ============================================================================================
-- 1. roles and schema
-- ============================================================================================

-- Roles are cluster-wide, so creating them is idempotent: several databases (or a re-run) may
-- share them. They are NOLOGIN groups; deployments grant them to their own login roles.
do $$
begin
  if not exists (select from pg_roles where rolname = 'pymem_owner') then
    create role pymem_owner nologin;
  end if;
  if not exists (select from pg_roles where rolname = 'pymem_app') then
    create role pymem_app nologin;
  end if;
  if not exists (select from pg_roles where rolname = 'pymem_auditor') then
    create role pymem_auditor nologin;
  end if;
end
$$;

-- pgvector must be >= 0.8 for iterative index scans (see pymem.search). It is created by the
-- migrating role because extension creation usually needs more rights than the owner role has.
create extension if not exists vector;

create schema if not exists pymem authorization pymem_owner;
-- Alembic may have created the schema already (it keeps its version table there): own it anyway.
alter schema pymem owner to pymem_owner;
comment on schema pymem is 'pymem: agent memory with provenance, row-level isolation and a per-tenant hash chain';

-- Every object below is created by, and so owned by, pymem_owner: the app and auditor roles own
-- nothing, so they cannot ALTER, DISABLE TRIGGER, or DISABLE ROW LEVEL SECURITY on anything.
grant pymem_owner to current_user;
set role pymem_owner;

-- ============================================================================================
-- 2. context
-- ============================================================================================
-- The context (tenant, actor, adapter, scope, read-adapter allow-list) lives in transaction-local
-- settings, set by pymem.set_context(). Session-level SET would leak across pooled connections.
-- Policies read it through these helpers, always wrapped in (select ...) so Postgres evaluates
-- them once per query instead of once per row. NULL and '' both mean "unset": a pooled
-- connection that once set a value reads '' afterwards, and that must fail closed too.

-- Text that lands in audit records (names, reasons, sources) must read as what it is: no control
-- characters, and no Unicode format characters (right-to-left overrides, zero-width spaces,
-- invisible separators...) that would make one name look like another on an auditor's screen.
-- The class below is Unicode's general categories Cc (C1 controls; [[:cntrl:]] may only know the
-- ASCII ones) and Cf, plus the line and paragraph separators.
create function pymem._is_plain_text(p text) returns boolean
language sql immutable parallel safe
set search_path = pg_catalog, pg_temp
as $$
  select p !~ '[[:cntrl:]]'
     and p !~ '[\u0080-\u009f\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]'
$$;
comment on function pymem._is_plain_text(text) is 'True when text has no control or Unicode format characters (no visual spoofing in audit records)';

create function pymem._scope_is_flat(p_scope jsonb) returns boolean
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
comment on function pymem._scope_is_flat(jsonb) is 'A scope is a flat {axis: value} map of non-empty strings; nesting would make @> ambiguous';

-- Login bindings: what a connection cannot choose. An agent that holds database credentials is
-- exactly the actor these exist to contain, so a bound login always writes as its adapter, acts
-- only in the tenants named here, and only inside the scope named here, whatever it sets.
-- Binding a group role binds every login that is a member of it.
create table pymem.login_bindings (
  role_name name primary key,
  adapter text not null check (adapter <> '' and length(adapter) <= 200 and pymem._is_plain_text(adapter)),
  tenants text[] check (tenants is null or (cardinality(tenants) <= 1000
                        and array_position(tenants, null) is null and '' <> all (tenants))),
  all_tenants boolean not null default false,
  scope jsonb not null default '{}'::jsonb check (pymem._scope_is_flat(scope)),
  created_at timestamptz not null default now(),
  created_by name not null default session_user,
  constraint login_bindings_tenants_named check ((tenants is null) = all_tenants)
);
comment on table pymem.login_bindings is 'Login (or group) roles that always act as one adapter, in the named tenants and scope; unbound logins are operators';
comment on column pymem.login_bindings.role_name is 'A login or group role (session_user, or a role it is a member of); cluster-wide, so not tenant-keyed';
comment on column pymem.login_bindings.adapter is 'The adapter every write of that login is tagged with';
comment on column pymem.login_bindings.tenants is 'The only tenants the login may act in ({} = none yet); NULL only together with all_tenants';
comment on column pymem.login_bindings.all_tenants is 'An explicit opt-in to every tenant (a binding never widens to all tenants by omission)';
comment on column pymem.login_bindings.scope is 'Scope the login is confined to: its context scope must contain this map';
comment on column pymem.login_bindings.created_at is 'When the binding was last set';
comment on column pymem.login_bindings.created_by is 'The login that set it';
comment on constraint login_bindings_tenants_named on pymem.login_bindings is 'Either a list of tenants or an explicit all_tenants, never neither';

create table pymem.binding_log (
  seq bigint generated always as identity primary key,
  event text not null check (event in ('login.bound', 'login.unbound')),
  role_name name not null,
  adapter text,
  tenants text[],
  all_tenants boolean,
  scope jsonb,
  changed_by name not null,
  changed_at timestamptz not null default clock_timestamp()
);
comment on table pymem.binding_log is 'Append-only record of every change to pymem.login_bindings (who bound or unbound which login, to what)';
comment on column pymem.binding_log.seq is 'Order of the changes';
comment on column pymem.binding_log.event is 'login.bound (created or changed) or login.unbound';
comment on column pymem.binding_log.role_name is 'The role whose binding changed';
comment on column pymem.binding_log.adapter is 'The adapter it is bound to after the change (NULL once unbound)';
comment on column pymem.binding_log.tenants is 'The tenants it may act in after the change';
comment on column pymem.binding_log.all_tenants is 'Whether it may act in every tenant after the change';
comment on column pymem.binding_log.scope is 'The scope it is confined to after the change';
comment on column pymem.binding_log.changed_by is 'session_user of the change';
comment on column pymem.binding_log.changed_at is 'When the change was made';

create function pymem._login_binding() returns pymem.login_bindings
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
comment on function pymem._login_binding() is 'The login binding in force for session_user (own, else its one bound group); NULL when unbound; bound-to-nothing when ambiguous';

-- The context helpers are plpgsql: as SQL functions with a FROM clause (not inlined, because of
-- their SET clause) each call cost tens of microseconds, and every policy calls them.
create function pymem._ctx_tenant() returns text
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
comment on function pymem._ctx_tenant() is 'Tenant of the current transaction, NULL when unset or outside the login''s binding (NULL matches no row)';

create function pymem._ctx_actor() returns text
language sql stable parallel safe
set search_path = pg_catalog, pg_temp
as $$ select nullif(current_setting('pymem.actor', true), '') $$;
comment on function pymem._ctx_actor() is 'Actor (user or agent id) of the current transaction, recorded in the ledger';

create function pymem._ctx_adapter() returns text
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
comment on function pymem._ctx_adapter() is 'Source adapter of the current transaction (the login''s binding first, then the setting); NULL = operator, untagged';

create function pymem._ctx_scope() returns jsonb
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
comment on function pymem._ctx_scope() is 'Scope of the current transaction, within the login''s bound scope; rows are visible only if their scope contains it ({} = whole tenant)';

create function pymem._ctx_read_adapters() returns text[]
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
comment on function pymem._ctx_read_adapters() is 'Strict read allow-list of adapters; NULL = no filter, {} = nothing readable';

-- Where the SQL differs between plain Postgres and Citus, it asks this switch. `pymem db
-- distribute` sets citus.propagate_set_commands = 'local' for the database on every node; nothing
-- else does. A login that sets it by hand on plain Postgres gets the same results by the slower
-- path (SET LOCAL, single-row appends), and one that clears it on Citus gets a context that does
-- not reach the shards: every shard then reads as empty and refuses writes (fail closed).
create function pymem._on_citus() returns boolean
language sql stable parallel safe
set search_path = pg_catalog, pg_temp
as $$ select coalesce(current_setting('citus.propagate_set_commands', true), '') = 'local' $$;
comment on function pymem._on_citus() is 'True where `pymem db distribute` made this database a Citus store (its statements then take the forms Citus can route)';

create function pymem.set_context(
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
  -- On Citus (where `pymem db distribute` sets citus.propagate_set_commands = 'local' for the
  -- database) the settings are made with SET LOCAL: Citus replays SET LOCAL statements on every
  -- worker connection of the transaction, so the policies of the worker shards read the same
  -- context. set_config() is a function call Citus cannot see: every shard would read the context
  -- as unset and fail closed. On plain Postgres both forms are the same transaction-local
  -- settings; set_config() stays there, one statement instead of five (SET LOCAL through EXECUTE
  -- measured about 10 us more per transaction).
  if pymem._on_citus() then
    execute format('set local pymem.tenant = %L', p_tenant);
    execute format('set local pymem.actor = %L', coalesce(p_actor, ''));
    execute format('set local pymem.adapter = %L', coalesce(p_adapter, ''));
    execute format('set local pymem.scope = %L', p_scope::text);
    execute format('set local pymem.read_adapters = %L',
                   case when p_read_adapters is null then '' else to_jsonb(p_read_adapters)::text end);
    return;
  end if;
  perform set_config('pymem.tenant', p_tenant, true),
          set_config('pymem.actor', coalesce(p_actor, ''), true),
          set_config('pymem.adapter', coalesce(p_adapter, ''), true),
          set_config('pymem.scope', p_scope::text, true),
          set_config('pymem.read_adapters',
                     case when p_read_adapters is null then '' else to_jsonb(p_read_adapters)::text end, true);
end
$$;
comment on function pymem.set_context(text, text, text, jsonb, text[]) is 'Sets the transaction-local context every policy reads, within the login''s binding; the only supported way to set it';

-- ============================================================================================
-- 3. hashing helpers
-- ============================================================================================
-- Hashes cover an explicit, versioned field list. Every field is length-prefixed, NULL has its
-- own marker, timestamps are integer microseconds. Version 1 (these helpers) walks jsonb into a
-- canonical byte form with one helper call per field and per key; version 2 (section 6:
-- pymem._content_hash_v2, pymem._event_bytes_v2) is one expression of built-in renderings
-- (jsonb's text output, vector_send, timestamptz_send), about five times faster. New entries and
-- rows use version 2; version 1 stays to verify what was written with it. What version 2 depends
-- on (the server's jsonb text output, a UTF8 database) is stated in the README.

create function pymem._b(p text) returns bytea
language sql immutable parallel safe
set search_path = pg_catalog, pg_temp
as $$
  select case when p is null then '\x00'::bytea
              else '\x01'::bytea || int4send(octet_length(convert_to(p, 'UTF8'))) || convert_to(p, 'UTF8') end
$$;
comment on function pymem._b(text) is 'Length-prefixed UTF-8 bytes of a text field, 0x00 for NULL';

create function pymem._b(p bytea) returns bytea
language sql immutable parallel safe
set search_path = pg_catalog, pg_temp
as $$ select case when p is null then '\x00'::bytea else '\x01'::bytea || int4send(length(p)) || p end $$;
comment on function pymem._b(bytea) is 'Length-prefixed bytes of a bytea field, 0x00 for NULL';

create function pymem._b(p bigint) returns bytea
language sql immutable parallel safe
set search_path = pg_catalog, pg_temp
as $$ select case when p is null then '\x00'::bytea else '\x01'::bytea || int8send(p) end $$;
comment on function pymem._b(bigint) is 'Fixed-width bytes of an integer field, 0x00 for NULL';

create function pymem._b(p timestamptz) returns bytea
language sql immutable parallel safe
set search_path = pg_catalog, pg_temp
as $$
  select case when p is null then '\x00'::bytea
              else '\x01'::bytea || int8send((extract(epoch from p) * 1000000)::bigint) end
$$;
comment on function pymem._b(timestamptz) is 'Timestamp as integer microseconds since the epoch, 0x00 for NULL';

create function pymem._b(p jsonb) returns bytea
language plpgsql immutable parallel safe
set search_path = pg_catalog, pg_temp
as $$
-- plpgsql rather than SQL: a SQL function with subqueries is re-planned on every call, which
-- made this the most expensive step of every write and of verification.
declare
  v_out bytea;
begin
  if p is null then
    return '\x00'::bytea;
  end if;
  case jsonb_typeof(p)
    when 'object' then
      if p = '{}'::jsonb then
        return '\x6f00000000'::bytea;
      end if;
      -- one query per container; pymem._bv inlines scalars, so only nested containers recurse
      select '\x6f'::bytea || int4send(count(*)::int)
             || coalesce(string_agg(pymem._b(e.key) || pymem._bv(e.value), ''::bytea
                                    order by convert_to(e.key, 'UTF8')), ''::bytea)
        into v_out from jsonb_each(p) e;
      return v_out;
    when 'array' then
      -- Arrays of numbers (an embedding kept inside a record) have their own encoding: tag 'N',
      -- the count, then the numbers' canonical text (numeric_out, as ::numeric::text gives)
      -- joined by commas, which no number's text contains. One text aggregate instead of one
      -- bytea concatenation per element: about 7x faster on a 384-number array.
      if not jsonb_path_exists(p, 'strict $[*] ? (@.type() != "number")') then
        select '\x4e'::bytea || int4send(count(*)::int) || pymem._b(string_agg(e.t, ',' order by e.ord))
          into v_out from jsonb_array_elements_text(p) with ordinality e(t, ord);
        return v_out;
      end if;
      select '\x61'::bytea || int4send(count(*)::int)
             || coalesce(string_agg(pymem._bv(e.value), ''::bytea order by e.ord), ''::bytea)
        into v_out from jsonb_array_elements(p) with ordinality e(value, ord);
      return v_out;
    when 'string' then
      return '\x73'::bytea || pymem._b(p #>> '{}');
    when 'number' then
      return '\x6e'::bytea || pymem._b((p #>> '{}')::numeric::text);
    when 'boolean' then
      return case when p = 'true'::jsonb then '\x74'::bytea else '\x66'::bytea end;
    else
      return '\x7a'::bytea;  -- json null
  end case;
end
$$;
comment on function pymem._b(jsonb) is 'Canonical bytes of a jsonb value: type tag, sorted keys, length prefixes';

create function pymem._bv(p jsonb) returns bytea
language sql immutable parallel safe
set search_path = pg_catalog, pg_temp
as $$
  select case jsonb_typeof(p)
    when 'string' then '\x73'::bytea || pymem._b(p #>> '{}')
    when 'number' then '\x6e'::bytea || pymem._b((p #>> '{}')::numeric::text)
    when 'boolean' then case when p = 'true'::jsonb then '\x74'::bytea else '\x66'::bytea end
    when 'null' then '\x7a'::bytea
    else pymem._b(p)
  end
$$;
comment on function pymem._bv(jsonb) is 'A jsonb value inside a container: scalars encoded inline (same bytes as pymem._b), containers via pymem._b';

create function pymem._b(p text[]) returns bytea
language sql immutable parallel safe
set search_path = pg_catalog, pg_temp
as $$ select pymem._b(array_send(p)) $$;
comment on function pymem._b(text[]) is 'A text array in Postgres''s binary array format (element type, bounds, lengths), length-prefixed';

create function pymem._b(p real) returns bytea
language sql immutable parallel safe
set search_path = pg_catalog, pg_temp
as $$ select case when p is null then '\x00'::bytea else '\x01'::bytea || float4send(p) end $$;
comment on function pymem._b(real) is 'IEEE-754 bytes of a real field, 0x00 for NULL';

create function pymem._genesis_hash(p_tenant text) returns bytea
language sql immutable parallel safe
set search_path = pg_catalog, pg_temp
as $$ select sha256(convert_to('pymem-chain-v1', 'UTF8') || pymem._b(p_tenant)) $$;
comment on function pymem._genesis_hash(text) is 'prev_hash of a tenant''s first ledger entry; bound to the tenant so chains cannot be swapped';

-- ============================================================================================
-- 4. tables and indexes
-- ============================================================================================
-- Every tenant table is keyed by tenant_id first (primary keys, unique constraints, indexes), so
-- the schema can be distributed by tenant (Citus create_distributed_table(..., 'tenant_id')).

-- The origins, stated once: the column and pymem.record_refusal both take them from this domain
-- (pymem/vocabulary.py is the Python side; tests/db/test_sql_contract.py keeps the two equal).
create domain pymem.origin as text
  check (value in ('user_asserted', 'operator', 'model_inferred', 'tool_output', 'retrieved_content',
                   'unproven', 'injected_context'));
comment on domain pymem.origin is 'How a memory came to be believed; drives admission and recall re-judging';

create table pymem.store_info (
  singleton boolean primary key default true check (singleton),
  embedding_dim integer not null check (embedding_dim between 1 and 16000),
  hash_version smallint not null default 2,
  created_at timestamptz not null default now(),
  embedder text check (embedder <> '' and length(embedder) <= 100),
  text_search_config regconfig not null default 'pg_catalog.english'
);
comment on table pymem.store_info is 'One row of store-wide facts the Python layer checks against its configuration';
comment on column pymem.store_info.embedding_dim is 'Dimension of memories.embedding, fixed when the schema was created';
comment on column pymem.store_info.hash_version is 'Version of the field lists hashed into content_hash and chain_hash';
comment on column pymem.store_info.embedder is 'Name of the embedder whose vectors the store holds (NULL until the first write claims it); another embedder is refused';
comment on column pymem.store_info.text_search_config is 'Text-search configuration of memories.search_text and of search queries; changed only while the store holds no memory';
insert into pymem.store_info (embedding_dim) values ({{embedding_dim}});

create table pymem.memories (
  tenant_id text not null check (tenant_id <> '' and length(tenant_id) <= 200),
  id text not null check (id <> '' and length(id) <= 256),
  scope jsonb not null default '{}'::jsonb check (pymem._scope_is_flat(scope)),
  kind text not null default 'fact' check (kind ~ '^[a-z][a-z0-9_]{0,39}$'),
  content text check (octet_length(content) <= 1048576),
  record jsonb,
  embedding vector({{embedding_dim}}),
  tags text[] not null default '{}',
  importance real check (importance between 0 and 1),
  confidence real check (confidence between 0 and 1),
  origin pymem.origin,
  source_adapter text check (source_adapter <> ''),
  provenance jsonb check (provenance is null or jsonb_typeof(provenance) = 'object'),
  injection_source text,
  policy_fingerprint text,
  revision integer not null default 1,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  valid_from timestamptz not null default now(),
  invalidated_at timestamptz,
  superseded_by text,
  erased_at timestamptz,
  content_hash bytea not null,
  record_lite jsonb
  generated always as (case when jsonb_typeof(record) = 'object' and (record ? 'embedding' or record ? 'vector')
                            then record - '{embedding,vector}'::text[] end) stored,
  embedder text check (embedder <> '' and length(embedder) <= 100),
  search_text tsvector,
  ttl interval,
  expires_at timestamptz,
  subject text,
  primary key (tenant_id, id),
  constraint memories_injection_source_rule
    check ((origin is not distinct from 'injected_context') = (injection_source is not null))
);
comment on table pymem.memories is 'One row per memory chunk; every change is chained into pymem.ledger by triggers';
comment on column pymem.memories.tenant_id is 'Isolation boundary: rows of other tenants are invisible and unwritable (RLS)';
comment on column pymem.memories.id is 'Caller-supplied or generated chunk id, unique within the tenant';
comment on column pymem.memories.scope is 'Flat {axis: value} map; a row is visible only if it contains the context scope';
comment on column pymem.memories.kind is 'fact, preference, summary, lesson, ...';
comment on column pymem.memories.content is 'The text of the memory; NULL once erased';
comment on column pymem.memories.record is 'The caller''s record, verbatim, for round-trip reads; NULL once erased';
comment on column pymem.memories.embedding is 'Embedding for cosine search; NULL once erased or when none was given';
-- The vector stays in the row (storage main) rather than going out of line (pgvector's default,
-- external): a 384-dimension row is just over the 2 kB toast threshold, and an exact search then
-- read the TOAST index and heap for every row it ranked (10,000 rows: 16 ms instead of 3 ms).
-- Vectors too big for a page still go out of line.
alter table pymem.memories alter column embedding set storage main;
comment on column pymem.memories.tags is 'Free tags for filtering';
comment on column pymem.memories.importance is 'Caller-assigned importance in [0, 1]';
comment on column pymem.memories.confidence is 'Confidence the admission policy believes the memory at, in [0, 1]';
comment on column pymem.memories.origin is 'How the memory came to be believed; drives admission and recall re-judging';
comment on column pymem.memories.source_adapter is 'Agent adapter that wrote the row; NULL = operator (untagged); always the context adapter (RLS)';
comment on column pymem.memories.provenance is 'Who and what produced it: origin, session, run, turn, source, citation, adapter';
comment on column pymem.memories.injection_source is 'Where injected context came from; required iff origin = injected_context';
comment on column pymem.memories.policy_fingerprint is 'Fingerprint of the admission policy that admitted the row';
comment on column pymem.memories.revision is 'Set to 1 on insert and bumped on every update by a trigger; optimistic locking compares it';
comment on column pymem.memories.created_at is 'When the row was first written (kept across updates)';
comment on column pymem.memories.updated_at is 'When the row was last written';
comment on column pymem.memories.valid_from is 'Start of the period the memory is believed true';
comment on column pymem.memories.invalidated_at is 'When the memory stopped being believed (supersession); rows are superseded, not overwritten';
comment on column pymem.memories.superseded_by is 'Id of the memory that replaced this one';
comment on column pymem.memories.erased_at is 'When content, record and embedding were erased; content_hash is kept so the chain still verifies';
comment on column pymem.memories.content_hash is 'sha256 over the row''s hashed fields, computed by a trigger; verify recomputes it';
comment on column pymem.memories.record_lite is 'The record without its embedding/vector keys, for records that carry one (NULL otherwise): what searches that return no vectors send back; kept by the database';
comment on column pymem.memories.embedder is 'The embedder that computed this row''s vector from its content; NULL when the caller supplied the vector (or before migration 0011)';
comment on column pymem.memories.search_text is 'The content as a tsvector in the store''s text-search configuration, plus one position-less lexeme naming the tenant (see pymem._tenant_lexeme); kept by the database';
comment on column pymem.memories.ttl is 'The memory''s time-to-live as its writer named it (else the tenant''s default); the clock restarts at every write';
comment on column pymem.memories.expires_at is 'When the memory expires: the database''s now() + ttl at the last write (NULL = never); expired rows are invisible to every read and deleted by pymem.purge_expired';
comment on column pymem.memories.subject is 'Pseudonym (p:<token>) of the person the memory is about, from the subject key its writer set; pymem.erase_actor erases every memory about that person';
-- Kept in the row (main, not extended): next to a vector of a few hundred dimensions a row passes
-- the TOAST threshold, and an extended tsvector would be the first moved out of line, to be read
-- back from the TOAST table by every text candidate of a hybrid search.
alter table pymem.memories alter column search_text set storage main;
comment on constraint memories_injection_source_rule on pymem.memories is 'injected_context needs its injection_source; any other origin must not carry one';

-- HNSW for cosine search at scale; small row sets are searched exactly (see pymem.search).
create index memories_embedding_hnsw on pymem.memories using hnsw (embedding vector_cosine_ops);
comment on index pymem.memories_embedding_hnsw is 'Approximate cosine search; iterative scans keep filtered results complete';
create index memories_tenant_created on pymem.memories (tenant_id, created_at);
comment on index pymem.memories_tenant_created is 'Tenant-first listing and export in write order';
-- A scoped search reads its in-scope rows through this index (see pymem._search_in_scope). The
-- tenant rides along as the key '' (no scope has that key), so one containment test finds the
-- rows of one tenant in one scope, and a scope value many tenants share costs nothing extra.
-- Only the definer function can use it: jsonb @> is not leakproof, so under row-level security
-- the planner may not turn it into an index condition. fastupdate off: with GIN's pending list
-- every search rescans up to 4 MB of recent entries (2 ms instead of 0.2 ms for a 20-row scope
-- after a bulk load); writing each row's few entries in place costs far less than its HNSW entry.
create index memories_tenant_scope on pymem.memories
  using gin ((scope || jsonb_object(array['', tenant_id])) jsonb_path_ops) with (fastupdate = off);
comment on index pymem.memories_tenant_scope is 'A tenant''s rows whose scope contains a filter (scoped exact search)';
-- A session's memories are read by their exact scope (pymem._session_scopes names the scopes):
-- the sha256 of the scope's text (jsonb's text output is canonical), as pymem.scope_rows_key has it.
create index memories_tenant_scope_key on pymem.memories (tenant_id, sha256(scope::text::bytea));
comment on index pymem.memories_tenant_scope_key is 'A tenant''s rows of exactly one scope: what a session receives from its own scope and each ancestor';

-- fastupdate off, as for the scope index: with GIN's pending list every search would rescan the
-- recent entries.
create index memories_search_text on pymem.memories using gin (search_text) with (fastupdate = off);
comment on index pymem.memories_search_text is 'Full-text candidates of a hybrid search (one tenant at a time, through its tenant lexeme)';
-- Every delivery reads a session's hot memories first (pymem.session_hot); without an index it
-- read every row of the session's scopes to find the few tagged hot.
create index memories_hot on pymem.memories (tenant_id, created_at)
  where 'hot' = any (tags) and erased_at is null and invalidated_at is null;
comment on index pymem.memories_hot is 'Live hot memories of a tenant by time: what every delivery reads first (pymem.session_hot)';

create table pymem.chain_heads (
  tenant_id text primary key,
  seq bigint not null check (seq >= 0),
  chain_hash bytea not null,
  live_rows bigint not null default 0 check (live_rows >= 0),
  updated_at timestamptz not null default now()
);
comment on table pymem.chain_heads is 'One row per tenant: the last seq and chain_hash of its ledger; locking it serializes that tenant''s writers only';
comment on column pymem.chain_heads.seq is 'seq of the tenant''s last ledger entry (0 = none yet)';
comment on column pymem.chain_heads.chain_hash is 'chain_hash of the last entry; anchor it outside the database to detect a rewritten tail';
comment on column pymem.chain_heads.live_rows is 'Exact count of the tenant''s memories, kept by the chain trigger; search picks its plan from it';

-- How many memories each distinct (scope, source adapter) of a tenant holds: what a scoped search
-- sizes its scope by (summing the counts of the scopes that contain its filter, for the adapters
-- the context may read) without reading the rows. Kept by the chain trigger under the tenant's
-- head-row lock; rows at zero are removed, so a filter that matches n rows here matches at
-- least n memories.
create table pymem.scope_rows (
  tenant_id text not null,
  scope jsonb not null,
  source_adapter text,
  live_rows bigint not null check (live_rows > 0)
);
comment on table pymem.scope_rows is 'Live memory count per (tenant, scope, source adapter), kept by the chain trigger; pymem.search sizes scoped searches from it';
comment on column pymem.scope_rows.scope is 'One distinct scope of the tenant''s memories';
comment on column pymem.scope_rows.source_adapter is 'The adapter the counted memories carry (NULL = operator), for the read allow-list';
comment on column pymem.scope_rows.live_rows is 'How many of the tenant''s memories have exactly this scope and adapter (erased ones included, as in chain_heads.live_rows)';
-- A scope can be longer than a btree entry may be: the sha256 of its text identifies it.
create unique index scope_rows_key on pymem.scope_rows (tenant_id, coalesce(source_adapter, ''), sha256(scope::text::bytea));
comment on index pymem.scope_rows_key is 'One row per (tenant, adapter, scope); jsonb text output is canonical, so equal scopes have equal digests';
create index scope_rows_scope on pymem.scope_rows
  using gin ((scope || jsonb_object(array['', tenant_id])) jsonb_path_ops) with (fastupdate = off);
comment on index pymem.scope_rows_scope is 'The scopes of a tenant that contain a filter, keyed as memories_tenant_scope';
create index scope_rows_scope_key on pymem.scope_rows (tenant_id, sha256(scope::text::bytea));
comment on index pymem.scope_rows_scope_key is 'Whether a tenant holds rows of one exact scope, whatever their adapter (the ancestors of a session''s scope)';

create table pymem.ledger (
  tenant_id text not null,
  seq bigint not null check (seq >= 1),
  event text not null check (event ~ '^[a-z_]+\.[a-z_]+$'),
  memory_id text,
  revision integer,
  content_hash bytea,
  actor text,
  adapter text,
  details jsonb not null default '{}'::jsonb check (jsonb_typeof(details) = 'object'),
  occurred_at timestamptz not null,
  hash_version smallint not null default 2,
  prev_hash bytea not null,
  chain_hash bytea not null,
  primary key (tenant_id, seq)
);
comment on table pymem.ledger is 'Append-only audit ledger: one hash chain per tenant; never updated or deleted';
comment on column pymem.ledger.seq is 'Position in the tenant''s chain, contiguous from 1; the primary key is the backstop against forks';
comment on column pymem.ledger.event is 'memory.insert, memory.update, memory.delete, admission.refused, ...';
comment on column pymem.ledger.memory_id is 'The memory the event concerns, if any';
comment on column pymem.ledger.revision is 'The memory''s revision after the event';
comment on column pymem.ledger.content_hash is 'The memory''s content_hash after the event (before it, for a delete)';
comment on column pymem.ledger.actor is 'Context actor of the transaction that caused the event';
comment on column pymem.ledger.adapter is 'Context adapter of that transaction (NULL = operator)';
comment on column pymem.ledger.details is 'Event details: digests and reasons, never memory content; scope and source_adapter decide who may read the event';
comment on column pymem.ledger.occurred_at is 'Wall-clock time of the event, hashed as integer microseconds';
comment on column pymem.ledger.hash_version is 'Which field list chain_hash covers';
comment on column pymem.ledger.prev_hash is 'chain_hash of the previous entry (a tenant-bound genesis hash for seq 1)';
comment on column pymem.ledger.chain_hash is 'sha256(prev_hash || this entry''s fields)';
create index ledger_tenant_memory on pymem.ledger (tenant_id, memory_id, seq);
comment on index pymem.ledger_tenant_memory is 'A memory''s history, and its latest event for verification';

create table pymem.idempotency_keys (
  tenant_id text not null,
  verb text not null,
  actor text not null,
  key text not null check (key <> '' and length(key) <= 256),
  digest text not null,
  result jsonb not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  -- the writing connection's adapter, never the caller's claim (the default, checked by RLS): an
  -- agent cannot plant a key that an operator's (or another adapter's) later call would replay
  adapter text not null default coalesce(pymem._ctx_adapter(), ''),
  primary key (tenant_id, verb, adapter, actor, key)
);
comment on table pymem.idempotency_keys is 'Replay-or-conflict records of write calls, keyed by (verb, adapter, actor, key) within a tenant';
comment on column pymem.idempotency_keys.actor is 'Context actor (empty string when unset): keys are actor-scoped';
comment on column pymem.idempotency_keys.adapter is 'Context adapter (empty string for the operator): each adapter has keys of its own';
comment on column pymem.idempotency_keys.digest is 'Digest of the call''s arguments: same digest replays, different digest conflicts';
comment on column pymem.idempotency_keys.result is 'What the original call returned, replayed verbatim';
comment on column pymem.idempotency_keys.expires_at is 'After this the key may be reused; set from the idempotency class';

-- Sessions and delivery (migration 0004).

-- The surfaces a session can come from, stated once (pymem/vocabulary.py SURFACES is the Python
-- side; tests/db/test_sql_contract.py keeps the two equal).
create domain pymem.surface as text
  check (value in ('chat', 'background', 'a2a', 'api', 'cli'));
comment on domain pymem.surface is 'Where a session runs: chat, background job, agent-to-agent, API or command line';

create table pymem.sessions (
  tenant_id text not null check (tenant_id <> '' and length(tenant_id) <= 200),
  id text not null check (id <> '' and length(id) <= 256 and pymem._is_plain_text(id)),
  scope jsonb not null default '{}'::jsonb check (pymem._scope_is_flat(scope)),
  -- the starting connection's adapter, never the caller's claim (logins cannot name this column)
  source_adapter text default pymem._ctx_adapter() check (source_adapter <> ''),
  surface pymem.surface not null,
  incognito boolean not null default false,
  topic text check (topic <> '' and length(topic) <= 200 and pymem._is_plain_text(topic)),
  summary text check (summary <> '' and octet_length(summary) <= 65536),
  started_at timestamptz not null default now(),
  ended_at timestamptz,
  erased_at timestamptz,
  primary key (tenant_id, id),
  constraint sessions_incognito_keeps_nothing check (not incognito or (topic is null and summary is null)),
  constraint sessions_erased_keeps_nothing check (erased_at is null or (topic is null and summary is null))
);
comment on table pymem.sessions is 'One row per session of a tenant; memories name their session, deliveries list other sessions by id, time, surface and topic';
comment on column pymem.sessions.tenant_id is 'Isolation boundary, as for memories (RLS)';
comment on column pymem.sessions.id is 'Caller-chosen session id: there is no default or shared session';
comment on column pymem.sessions.scope is 'Scope the session was started in; visible only to contexts whose scope it contains';
comment on column pymem.sessions.source_adapter is 'Adapter of the connection that started it; NULL = operator';
comment on column pymem.sessions.surface is 'Where the session runs (chat, background, a2a, api, cli)';
comment on column pymem.sessions.incognito is 'Nothing from an incognito session is stored: no memory names it, no topic, no summary, no injection record';
comment on column pymem.sessions.topic is 'Short topic taken from the first user message only (never assistant text); NULL when none or withheld';
comment on column pymem.sessions.summary is 'The session''s summary, returned on demand (recall_session), never injected; NULL once erased';
comment on column pymem.sessions.started_at is 'When it started (the database''s time)';
comment on column pymem.sessions.ended_at is 'When it ended (the database''s time); NULL while open';
comment on column pymem.sessions.erased_at is 'When its topic and summary were erased';
comment on constraint sessions_incognito_keeps_nothing on pymem.sessions is 'An incognito session stores neither topic nor summary';
comment on constraint sessions_erased_keeps_nothing on pymem.sessions is 'An erased session keeps neither topic nor summary';

create index sessions_tenant_started on pymem.sessions (tenant_id, started_at desc, id);
comment on index pymem.sessions_tenant_started is 'The digest: a tenant''s most recent sessions first';

-- Lessons, convention receipts and shared facts (migration 0005).

-- Lessons and shared facts are listed per tenant and kind, newest last; no other kind needs it.
create index memories_tenant_kind on pymem.memories (tenant_id, kind, created_at)
  where kind in ('lesson', 'shared_fact');
comment on index pymem.memories_tenant_kind is 'Listing a tenant''s lessons and shared facts without scanning its other memories';

-- The installation's Ed25519 public key: every convention receipt names it, and verification
-- checks it against the key file outside the database, so a key swapped here is caught.
create table pymem.signing_keys (
  public_key text primary key check (public_key ~ '^[0-9a-f]{64}$'),
  registered_at timestamptz not null default now(),
  registered_by name not null default session_user
);
comment on table pymem.signing_keys is 'The installation''s Ed25519 public key (one row): what convention receipts are signed with';
comment on column pymem.signing_keys.public_key is 'The raw Ed25519 public key, 64 lowercase hex digits';
comment on column pymem.signing_keys.registered_at is 'When it was registered';
comment on column pymem.signing_keys.registered_by is 'The login that registered it';
create unique index signing_keys_one on pymem.signing_keys ((true));
comment on index pymem.signing_keys_one is 'One installation key at a time: a second key is an administrator''s replacement, never an addition';

create table pymem.convention_receipts (
  tenant_id text not null check (tenant_id <> '' and length(tenant_id) <= 200),
  id text not null check (id ~ '^[A-Za-z0-9_.:-]{1,100}$'),
  version integer not null check (version >= 1),
  scope jsonb not null default '{}'::jsonb check (pymem._scope_is_flat(scope)),
  -- the filing connection's adapter, never the caller's claim (logins cannot name this column)
  source_adapter text default pymem._ctx_adapter() check (source_adapter <> ''),
  subject text not null check (subject <> '' and length(subject) <= 100 and pymem._is_plain_text(subject)),
  subject_symbol text check (subject_symbol ~ '^[A-Za-z_][A-Za-z0-9_.:]{0,199}$'),
  rule_text text not null check (rule_text <> '' and length(rule_text) <= 2000 and pymem._is_plain_text(rule_text)),
  rule_sha256 bytea not null check (length(rule_sha256) = 32),
  base_commit text not null check (base_commit ~ '^([0-9a-f]{40}|[0-9a-f]{64})$'),
  assertion text not null check (assertion <> '' and length(assertion) <= 1000 and pymem._is_plain_text(assertion)),
  lesson_id text not null,
  public_key text not null check (public_key ~ '^[0-9a-f]{64}$'),
  signature bytea not null check (length(signature) = 64),
  receipt_sha256 bytea not null check (length(receipt_sha256) = 32),
  filed_at timestamptz not null default now(),
  primary key (tenant_id, id, version)
);
comment on table pymem.convention_receipts is 'Every signed version of a review rule: subject, rule text and its hash, pinned commit, assertion; append-only, each version chained';
comment on column pymem.convention_receipts.tenant_id is 'Isolation boundary, as for memories (RLS)';
comment on column pymem.convention_receipts.id is 'The receipt''s id, the same for every version of one rule';
comment on column pymem.convention_receipts.version is 'How many times the same correction was filed (1, then one more per repeat)';
comment on column pymem.convention_receipts.scope is 'Scope the rule was filed in; visible only to contexts whose scope it contains';
comment on column pymem.convention_receipts.source_adapter is 'Adapter of the filing connection; NULL = operator';
comment on column pymem.convention_receipts.subject is 'The path or glob the rule applies to';
comment on column pymem.convention_receipts.subject_symbol is 'The symbol within the subject the rule is about; the rule expires when it no longer resolves';
comment on column pymem.convention_receipts.rule_text is 'The rule as the reviewer wrote it (one line)';
comment on column pymem.convention_receipts.rule_sha256 is 'sha256 of rule_text (UTF-8), checked on insert and by verification';
comment on column pymem.convention_receipts.base_commit is 'The commit the rule was stated against (full SHA-1 or SHA-256 hex)';
comment on column pymem.convention_receipts.assertion is 'The command that checks the rule (exit status 0 = the rule holds)';
comment on column pymem.convention_receipts.lesson_id is 'The feedback lesson (a memory) filed with the receipt';
comment on column pymem.convention_receipts.public_key is 'The key that signed it: the installation key in pymem.signing_keys';
comment on column pymem.convention_receipts.signature is 'Ed25519 signature over the receipt''s canonical form (pymem/integrity/receipts.py)';
comment on column pymem.convention_receipts.receipt_sha256 is 'sha256 of the signed canonical form; the content_hash of its ledger event';
comment on column pymem.convention_receipts.filed_at is 'When this version was filed (the database''s time)';

create table pymem.convention_endings (
  tenant_id text not null check (tenant_id <> '' and length(tenant_id) <= 200),
  receipt_id text not null,
  status text not null check (status in ('retired', 'expired')),
  reason text not null check (reason <> '' and length(reason) <= 300 and pymem._is_plain_text(reason)),
  head_commit text check (head_commit ~ '^([0-9a-f]{40}|[0-9a-f]{64})$'),
  scope jsonb not null default '{}'::jsonb check (pymem._scope_is_flat(scope)),
  source_adapter text default pymem._ctx_adapter() check (source_adapter <> ''),
  ended_at timestamptz not null default now(),
  primary key (tenant_id, receipt_id),
  constraint convention_endings_expiry_names_commit check ((status = 'expired') = (head_commit is not null))
);
comment on table pymem.convention_endings is 'When a rule stopped being in force, and why: retired by hand or expired at a commit; append-only, never a delete';
comment on column pymem.convention_endings.tenant_id is 'Isolation boundary, as for memories (RLS)';
comment on column pymem.convention_endings.receipt_id is 'The receipt (every version of it) that is no longer in force';
comment on column pymem.convention_endings.status is 'retired (by hand) or expired (its symbol no longer resolves)';
comment on column pymem.convention_endings.reason is 'Why, in one line';
comment on column pymem.convention_endings.head_commit is 'For an expiry: the HEAD commit at which the symbol no longer resolved';
comment on column pymem.convention_endings.scope is 'The receipt''s scope (set by a trigger), so whoever sees the rule sees that it ended';
comment on column pymem.convention_endings.source_adapter is 'Adapter of the connection that ended it; NULL = operator';
comment on column pymem.convention_endings.ended_at is 'When it ended (the database''s time)';
comment on constraint convention_endings_expiry_names_commit on pymem.convention_endings is 'An expiry names the commit it was found at; a retirement names none';

-- Filing locks and installation secrets (migration 0009).

-- Filings of one kind in one tenant serialise on one row of this table, locked FOR UPDATE until
-- the filing's transaction ends. Advisory locks were computable and holdable by any login; a row
-- here can be locked only through pymem.lock_for_filing (logins hold no privilege on the table),
-- and only for the context's own tenant (row-level security applies to the owner too).
create table pymem.filing_locks (
  tenant_id text not null check (tenant_id <> '' and length(tenant_id) <= 200),
  name text not null check (name ~ '^[a-z][a-z0-9_]{0,39}(:[a-z0-9_]{1,40})?$'),
  primary key (tenant_id, name)
);
comment on table pymem.filing_locks is 'One row per (tenant, kind of filing), locked FOR UPDATE by each filing of that kind; only the tenant''s own context can lock it (an advisory-lock key is computable and holdable by any login)';
comment on column pymem.filing_locks.tenant_id is 'The tenant whose filings the row serialises (RLS: only its context can lock it)';
comment on column pymem.filing_locks.name is 'What is filed: lessons:<type> or conventions';

-- Secrets of the installation that no login may read; only the owner's definer functions do.
create table pymem.installation_secrets (
  name text primary key check (name ~ '^[a-z][a-z0-9_]{0,39}$'),
  secret bytea not null check (length(secret) >= 16),
  created_at timestamptz not null default now()
);
comment on table pymem.installation_secrets is 'Per-installation secrets (the fact channels'' key); no role has any privilege on it, only the owner''s definer functions read it';
comment on column pymem.installation_secrets.name is 'What the secret keys: fact_channels';
comment on column pymem.installation_secrets.secret is 'Random bytes from gen_random_uuid (a strong random source), made once when the schema is created';
comment on column pymem.installation_secrets.created_at is 'When it was made';
insert into pymem.installation_secrets (name, secret)
  values ('fact_channels', decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex'));

-- Retention and erasure of a person (migration 0013).

-- A tenant's retention policy, set by its operator (pymem.set_retention): the expiry a memory
-- gets when its writer names none, and the longest any writer may name. Writers never set an
-- expiry time themselves: the database computes it from a ttl with its own clock.
create table pymem.retention_policies (
  tenant_id text primary key check (tenant_id <> '' and length(tenant_id) <= 200),
  default_ttl interval check (default_ttl > interval '0'),
  max_ttl interval check (max_ttl > interval '0'),
  set_at timestamptz not null default now(),
  set_by name not null default session_user,
  constraint retention_policies_default_within_max check (default_ttl is null or max_ttl is null or default_ttl <= max_ttl)
);
comment on table pymem.retention_policies is 'Each tenant''s retention policy: the default and the maximum time-to-live of its memories; set by an operator through pymem.set_retention';
comment on column pymem.retention_policies.tenant_id is 'The tenant the policy is for (RLS: a context reads only its own)';
comment on column pymem.retention_policies.default_ttl is 'The ttl of a memory whose writer names none; NULL = such memories never expire (unless max_ttl is set)';
comment on column pymem.retention_policies.max_ttl is 'The longest ttl any writer may name (a longer one is refused); NULL = no limit';
comment on column pymem.retention_policies.set_at is 'When the policy was last set';
comment on column pymem.retention_policies.set_by is 'The login that set it';
comment on constraint retention_policies_default_within_max on pymem.retention_policies is 'The default never exceeds the maximum';

-- Who did what is recorded under a pseudonym. The ledger (and a memory's subject key) hold
-- 'p:' and 32 random hex digits, never the actor's own id; this table is the only link between
-- the two, outside the hash chain. Erasing a person (pymem.erase_actor) deletes the link: the
-- chain still verifies (it covers the pseudonym), and nothing left names the person. The token is
-- random, not a keyed hash of the id, so no key survives from which it could be recomputed.
create table pymem.actor_pseudonyms (
  tenant_id text not null check (tenant_id <> '' and length(tenant_id) <= 200),
  actor text not null check (actor <> '' and length(actor) <= 256),
  token text not null check (token ~ '^[0-9a-f]{32}$'),
  created_at timestamptz not null default now(),
  primary key (tenant_id, actor)
);
comment on table pymem.actor_pseudonyms is 'The only link between an actor (or subject) id and the pseudonym the ledger and memories carry; deleted by pymem.erase_actor (crypto-shredding: the chain verifies without it)';
comment on column pymem.actor_pseudonyms.tenant_id is 'Pseudonyms are per tenant: one person has unlinkable pseudonyms in two tenants';
comment on column pymem.actor_pseudonyms.actor is 'The actor or subject id as the caller named it (often an e-mail address)';
comment on column pymem.actor_pseudonyms.token is 'Random 128-bit token: ledger entries carry p:<token> (e:<token> for entries written before migration 0013, whose chain hash covers the id itself)';
comment on column pymem.actor_pseudonyms.created_at is 'When the pseudonym was first needed';
create unique index actor_pseudonyms_token on pymem.actor_pseudonyms (tenant_id, token);
comment on index pymem.actor_pseudonyms_token is 'A pseudonym back to its actor (audit views, verification of pre-0013 entries)';

-- Purges find a tenant's expired rows, and erasure a person's subject rows, without a scan.
create index memories_tenant_expires on pymem.memories (tenant_id, expires_at) where expires_at is not null;
comment on index pymem.memories_tenant_expires is 'A tenant''s memories that expire, soonest first (pymem.purge_expired)';
create index memories_tenant_subject on pymem.memories (tenant_id, subject) where subject is not null;
comment on index pymem.memories_tenant_subject is 'A tenant''s memories about one person (pymem.erase_actor)';

-- The quarantine (migration 0014): notes the write gate held, a table of their own so that no
-- read path of memories can return one.

create table pymem.quarantine (
  tenant_id text not null check (tenant_id <> '' and length(tenant_id) <= 200),
  hold_id bigint generated always as identity,
  id text not null check (id <> '' and length(id) <= 256),
  scope jsonb not null default '{}'::jsonb check (pymem._scope_is_flat(scope)),
  kind text not null default 'fact' check (kind ~ '^[a-z][a-z0-9_]{0,39}$'),
  content text check (octet_length(content) <= 1048576),
  record jsonb,
  embedding vector({{embedding_dim}}),
  tags text[] not null default '{}',
  importance real check (importance between 0 and 1),
  confidence real check (confidence between 0 and 1),
  origin pymem.origin not null,
  source_adapter text check (source_adapter <> ''),
  provenance jsonb not null check (jsonb_typeof(provenance) = 'object'),
  injection_source text,
  policy_fingerprint text,
  embedder text check (embedder <> '' and length(embedder) <= 100),
  ttl interval check (ttl > interval '0' and ttl <= interval '36500 days'),
  subject text check (subject ~ '^p:[0-9a-f]{32}$'),
  reason text not null check (reason <> '' and length(reason) <= 300 and pymem._is_plain_text(reason)),
  signature text check (signature ~ '^[a-z0-9_.]{1,100}$'),
  score double precision check (score >= 0 and score <= 1),
  piece_digest text check (piece_digest ~ '^sha256:[0-9a-f]{64}$'),
  held_at timestamptz not null default now(),
  held_by text,
  status text not null default 'held' check (status in ('held', 'released', 'rejected')),
  decided_at timestamptz,
  decided_by text,
  decision_reason text check (decision_reason <> '' and length(decision_reason) <= 300
                              and pymem._is_plain_text(decision_reason)),
  erased_at timestamptz,
  content_hash bytea not null,
  primary key (tenant_id, hold_id),
  constraint quarantine_injection_source_rule
    check ((origin = 'injected_context') = (injection_source is not null)),
  constraint quarantine_decided
    check ((status = 'held') = (decided_at is null)),
  constraint quarantine_erased
    check (erased_at is null or status <> 'held')
);
comment on table pymem.quarantine is 'Notes the write gate held (neither admitted nor refused): never read by search, recall or delivery; released or rejected by an operator';
comment on column pymem.quarantine.tenant_id is 'Isolation boundary, as in pymem.memories (RLS)';
comment on column pymem.quarantine.hold_id is 'Which hold this is: an id may be held again once its earlier hold was decided';
comment on column pymem.quarantine.id is 'The memory id the note will have if released; at most one held note per id of the tenant';
comment on column pymem.quarantine.scope is 'Flat {axis: value} map; a held note is visible only to contexts whose scope it contains';
comment on column pymem.quarantine.kind is 'fact, preference, summary, ... (as the writer asked)';
comment on column pymem.quarantine.content is 'The held text; NULL once released (it then lives in pymem.memories), rejected or erased';
comment on column pymem.quarantine.record is 'The record as the gate would have stored it; NULL once released, rejected or erased';
comment on column pymem.quarantine.embedding is 'The vector the memory would carry; NULL once released, rejected or erased';
comment on column pymem.quarantine.tags is 'Tags as the writer gave them; emptied when the note''s person is erased';
comment on column pymem.quarantine.importance is 'Caller-assigned importance in [0, 1]';
comment on column pymem.quarantine.confidence is 'The confidence the admission policy would believe the note at';
comment on column pymem.quarantine.origin is 'How the note came to be (the provenance''s origin)';
comment on column pymem.quarantine.source_adapter is 'Adapter that wrote the note; NULL = operator; always the context adapter (RLS)';
comment on column pymem.quarantine.provenance is 'Who and what produced it, as the gate stamped it; only its origin and adapter stay when the note''s person is erased';
comment on column pymem.quarantine.injection_source is 'Where injected context came from; required iff origin = injected_context';
comment on column pymem.quarantine.policy_fingerprint is 'Fingerprint of the admission policy that held the note';
comment on column pymem.quarantine.embedder is 'The embedder that computed the vector from the content; NULL when the caller gave it';
comment on column pymem.quarantine.ttl is 'The time-to-live its writer named (NULL: the tenant''s default); a released memory expires this long after the release';
comment on column pymem.quarantine.subject is 'Pseudonym (p:<token>) of the person the note is about, from the writer''s subject key, never the id itself; the released memory keeps it';
comment on column pymem.quarantine.reason is 'Why the gate held it (names and scores, never content)';
comment on column pymem.quarantine.signature is 'The name of what held it: classifier.v1 (the score band) or a detector doubt';
comment on column pymem.quarantine.score is 'The classifier''s score of the note, in [0, 1]';
comment on column pymem.quarantine.piece_digest is 'sha256 of the normalised piece that scored highest (never the piece)';
comment on column pymem.quarantine.held_at is 'When the gate held it (the database''s time)';
comment on column pymem.quarantine.held_by is 'Pseudonym (p:<token>) of the context actor of the write that was held, as the ledger records it';
comment on column pymem.quarantine.status is 'held, released (now a memory) or rejected; only an operator context moves it';
comment on column pymem.quarantine.decided_at is 'When it was released or rejected; NULL while held';
comment on column pymem.quarantine.decided_by is 'Pseudonym (p:<token>) of the context actor of the operator who released or rejected it';
comment on column pymem.quarantine.decision_reason is 'The operator''s reason for the release or rejection (chained)';
comment on column pymem.quarantine.erased_at is 'When pymem.erase_actor erased the person who wrote the note or whom it is about (NULL: never)';
comment on column pymem.quarantine.content_hash is 'sha256 of the held fields (pymem._quarantine_hash), chained by quarantine.held; kept when the content goes';
comment on constraint quarantine_injection_source_rule on pymem.quarantine is 'injected_context needs its injection_source; any other origin must not carry one';
comment on constraint quarantine_decided on pymem.quarantine is 'A held note has no decision time; a released or rejected one has one';
comment on constraint quarantine_erased on pymem.quarantine is 'An erasure decides a held note (rejected): no note waits for review once erased';

create index quarantine_tenant_held on pymem.quarantine (tenant_id, held_at) where status = 'held';
comment on index pymem.quarantine_tenant_held is 'The notes a tenant holds, oldest first (what an operator reviews)';
create unique index quarantine_one_held on pymem.quarantine (tenant_id, id) where status = 'held';
comment on index pymem.quarantine_one_held is 'At most one note held per id: a decision names one note';
create index quarantine_tenant_id on pymem.quarantine (tenant_id, id, hold_id);
comment on index pymem.quarantine_tenant_id is 'A note''s holds by id, latest last (what a decision and a lookup read)';

-- ============================================================================================
-- 5. row-level security
-- ============================================================================================
-- ENABLE + FORCE on every tenant table: FORCE makes the owner subject to the policies as well, so
-- even the SECURITY DEFINER functions below only see what their explicit policies grant them.

alter table pymem.memories enable row level security;
alter table pymem.memories force row level security;
alter table pymem.ledger enable row level security;
alter table pymem.ledger force row level security;
alter table pymem.chain_heads enable row level security;
alter table pymem.chain_heads force row level security;
alter table pymem.idempotency_keys enable row level security;
alter table pymem.idempotency_keys force row level security;
alter table pymem.scope_rows enable row level security;
alter table pymem.scope_rows force row level security;

-- memories: tenant, scope containment and the optional read allow-list. jsonb @> is not
-- leakproof, so scope must be checked here and not left to a query filter. A whole-tenant
-- context (scope {}) skips the containment test, which every row's scope (an object) passes:
-- one comparison per statement instead of a jsonb containment per row.
create policy memories_read on pymem.memories for select
  using (tenant_id = (select pymem._ctx_tenant())
         and ((select pymem._ctx_scope() = '{}'::jsonb) or scope @> (select pymem._ctx_scope()))
         and ((select pymem._ctx_read_adapters()) is null
              or source_adapter = any ((select pymem._ctx_read_adapters())::text[]))
         -- retention: an expired row is gone for every reader
         and (expires_at is null or expires_at > now()));
comment on policy memories_read on pymem.memories is 'Visible: own tenant, scope containing the context scope, adapter in the allow-list when one is set, not expired';

-- Writes carry the context's adapter: an agent connection cannot write an untagged (trusted) row
-- nor one tagged as another adapter.
create policy memories_insert on pymem.memories for insert
  with check (tenant_id = (select pymem._ctx_tenant())
              and ((select pymem._ctx_scope() = '{}'::jsonb) or scope @> (select pymem._ctx_scope()))
              and source_adapter is not distinct from (select pymem._ctx_adapter()));
comment on policy memories_insert on pymem.memories is 'Inserts only into the context tenant and scope, tagged with the context adapter';

-- An adapter may change only its own rows; the operator (no adapter) may change any row of the
-- tenant, and the changed row then carries the operator's (NULL) tag. A row the read allow-list
-- hides cannot be changed either: a context never writes what it may not read.
create policy memories_update on pymem.memories for update
  using (tenant_id = (select pymem._ctx_tenant())
         and ((select pymem._ctx_scope() = '{}'::jsonb) or scope @> (select pymem._ctx_scope()))
         and ((select pymem._ctx_adapter()) is null or source_adapter = (select pymem._ctx_adapter()))
         and ((select pymem._ctx_read_adapters()) is null
              or source_adapter = any ((select pymem._ctx_read_adapters())::text[]))
         -- retention: an expired row is never revived
         and (expires_at is null or expires_at > now()))
  with check (tenant_id = (select pymem._ctx_tenant())
              and ((select pymem._ctx_scope() = '{}'::jsonb) or scope @> (select pymem._ctx_scope()))
              and source_adapter is not distinct from (select pymem._ctx_adapter()));
comment on policy memories_update on pymem.memories is 'Updates own-adapter rows (operator: any) of the context tenant and scope that the read allow-list admits and that have not expired';

create policy memories_delete on pymem.memories for delete
  using (tenant_id = (select pymem._ctx_tenant())
         and ((select pymem._ctx_scope() = '{}'::jsonb) or scope @> (select pymem._ctx_scope()))
         and ((select pymem._ctx_adapter()) is null or source_adapter = (select pymem._ctx_adapter()))
         and ((select pymem._ctx_read_adapters()) is null
              or source_adapter = any ((select pymem._ctx_read_adapters())::text[])));
comment on policy memories_delete on pymem.memories is 'Deletes own-adapter rows (operator: any) of the context tenant and scope that the read allow-list admits';

-- The owner reads across tenants only inside the SECURITY DEFINER verifier and the
-- pymem.memory_history view, which return hashes, ids and provenance, never content.
create policy memories_owner_verify on pymem.memories for select to pymem_owner using (true);
comment on policy memories_owner_verify on pymem.memories is 'Lets pymem.verify_chain re-hash, and the pymem.memory_history view read provenance of, every tenant''s rows (both owned by pymem_owner, neither returns content)';

-- ledger: a context reads the events of its tenant that concern what it could read: the event's
-- scope (the memory's, or the refused write's context scope) must contain the context scope, and
-- its source adapter must pass the read allow-list. Events without a recorded scope count as the
-- whole tenant's, so only a whole-tenant context reads them.
create policy ledger_read on pymem.ledger for select
  using (tenant_id = (select pymem._ctx_tenant())
         and ((select pymem._ctx_scope() = '{}'::jsonb) or coalesce(details -> 'scope', '{}'::jsonb) @> (select pymem._ctx_scope()))
         and ((select pymem._ctx_read_adapters()) is null
              or (details ->> 'source_adapter') = any ((select pymem._ctx_read_adapters())::text[])));
comment on policy ledger_read on pymem.ledger is 'A context reads its tenant''s events within its scope and read allow-list';
create policy ledger_audit on pymem.ledger for select to pymem_auditor, pymem_owner using (true);
comment on policy ledger_audit on pymem.ledger is 'Auditors (and the verifier) read every tenant''s ledger';
create policy ledger_append on pymem.ledger for insert to pymem_owner
  with check (tenant_id = (select pymem._ctx_tenant()));
comment on policy ledger_append on pymem.ledger is 'Only the owner''s definer functions append, and only to the context tenant';

create policy chain_heads_read on pymem.chain_heads for select
  using (tenant_id = (select pymem._ctx_tenant()));
comment on policy chain_heads_read on pymem.chain_heads is 'A tenant reads its own head (live row count, head hash)';
create policy chain_heads_audit on pymem.chain_heads for select to pymem_auditor, pymem_owner using (true);
comment on policy chain_heads_audit on pymem.chain_heads is 'Auditors (and the verifier) read every head';
create policy chain_heads_write on pymem.chain_heads for all to pymem_owner
  using (tenant_id = (select pymem._ctx_tenant()))
  with check (tenant_id = (select pymem._ctx_tenant()));
comment on policy chain_heads_write on pymem.chain_heads is 'Only the owner''s chain trigger moves a head, and only the context tenant''s';

-- scope_rows: only the owner's definer functions touch it (no role is granted anything on it), and
-- they name the tenant themselves. A policy with a condition would keep their scope containment
-- test from using the index (jsonb @> is not leakproof), hence true.
create policy scope_rows_owner on pymem.scope_rows for all to pymem_owner using (true) with check (true);
comment on policy scope_rows_owner on pymem.scope_rows is 'The chain trigger keeps, and pymem._search_in_scope reads, the counts; nobody else';

create policy idempotency_tenant on pymem.idempotency_keys for all
  using (tenant_id = (select pymem._ctx_tenant())
         and adapter = coalesce((select pymem._ctx_adapter()), ''))
  with check (tenant_id = (select pymem._ctx_tenant())
              and adapter = coalesce((select pymem._ctx_adapter()), ''));
comment on policy idempotency_tenant on pymem.idempotency_keys is 'Idempotency records are private to their tenant and to the adapter that wrote them';

-- Sessions and delivery (migration 0004).

alter table pymem.sessions enable row level security;
alter table pymem.sessions force row level security;

create policy sessions_read on pymem.sessions for select
  using (tenant_id = (select pymem._ctx_tenant())
         and scope @> (select pymem._ctx_scope())
         and ((select pymem._ctx_read_adapters()) is null
              or source_adapter = any ((select pymem._ctx_read_adapters())::text[])));
comment on policy sessions_read on pymem.sessions is 'Visible: own tenant, scope containing the context scope, adapter in the allow-list when one is set';

create policy sessions_insert on pymem.sessions for insert
  with check (tenant_id = (select pymem._ctx_tenant())
              and scope @> (select pymem._ctx_scope())
              and source_adapter is not distinct from (select pymem._ctx_adapter()));
comment on policy sessions_insert on pymem.sessions is 'Starts sessions only in the context tenant and scope, tagged with the context adapter';

-- An adapter ends and summarises only the sessions it started; the operator any of the tenant's.
-- The starting adapter stays on the row (a trigger keeps it), so the check does not name it.
create policy sessions_update on pymem.sessions for update
  using (tenant_id = (select pymem._ctx_tenant())
         and scope @> (select pymem._ctx_scope())
         and ((select pymem._ctx_adapter()) is null or source_adapter = (select pymem._ctx_adapter()))
         and ((select pymem._ctx_read_adapters()) is null
              or source_adapter = any ((select pymem._ctx_read_adapters())::text[])))
  with check (tenant_id = (select pymem._ctx_tenant())
              and scope @> (select pymem._ctx_scope()));
comment on policy sessions_update on pymem.sessions is 'Changes own-adapter sessions (operator: any) of the context tenant and scope that the read allow-list admits';

-- Lessons, convention receipts and shared facts (migration 0005).

alter table pymem.convention_receipts enable row level security;
alter table pymem.convention_receipts force row level security;
alter table pymem.convention_endings enable row level security;
alter table pymem.convention_endings force row level security;

create policy convention_receipts_read on pymem.convention_receipts for select
  using (tenant_id = (select pymem._ctx_tenant())
         and scope @> (select pymem._ctx_scope())
         and ((select pymem._ctx_read_adapters()) is null
              or source_adapter = any ((select pymem._ctx_read_adapters())::text[])));
comment on policy convention_receipts_read on pymem.convention_receipts is 'Visible: own tenant, scope containing the context scope, adapter in the allow-list when one is set';
create policy convention_receipts_insert on pymem.convention_receipts for insert
  with check (tenant_id = (select pymem._ctx_tenant())
              and scope @> (select pymem._ctx_scope())
              and source_adapter is not distinct from (select pymem._ctx_adapter()));
comment on policy convention_receipts_insert on pymem.convention_receipts is 'Files receipts only in the context tenant and scope, tagged with the context adapter';
create policy convention_receipts_owner_verify on pymem.convention_receipts for select to pymem_owner using (true);
comment on policy convention_receipts_owner_verify on pymem.convention_receipts is 'Lets the chain triggers and an administrative verification read every tenant''s receipts';

-- No read allow-list here: whoever sees a rule must also see that it ended, or a retired rule
-- would look in force to a reader that does not trust the adapter that retired it.
create policy convention_endings_read on pymem.convention_endings for select
  using (tenant_id = (select pymem._ctx_tenant())
         and scope @> (select pymem._ctx_scope()));
comment on policy convention_endings_read on pymem.convention_endings is 'Visible: own tenant, scope containing the context scope (no allow-list: an ending is never hidden from a reader of its rule)';
create policy convention_endings_insert on pymem.convention_endings for insert
  with check (tenant_id = (select pymem._ctx_tenant())
              and scope @> (select pymem._ctx_scope())
              and source_adapter is not distinct from (select pymem._ctx_adapter()));
comment on policy convention_endings_insert on pymem.convention_endings is 'Ends rules only in the context tenant and scope, tagged with the context adapter';
create policy convention_endings_owner_verify on pymem.convention_endings for select to pymem_owner using (true);
comment on policy convention_endings_owner_verify on pymem.convention_endings is 'Lets the chain triggers and an administrative verification read every tenant''s endings';

-- Filing locks (migration 0009).

alter table pymem.filing_locks enable row level security;
alter table pymem.filing_locks force row level security;
create policy filing_locks_owner on pymem.filing_locks for all to pymem_owner
  using (tenant_id = (select pymem._ctx_tenant()))
  with check (tenant_id = (select pymem._ctx_tenant()));
comment on policy filing_locks_owner on pymem.filing_locks is 'Only pymem.lock_for_filing (owner) creates and locks rows, and only the context tenant''s';

-- Retention and erasure of a person (migration 0013).

alter table pymem.retention_policies enable row level security;
alter table pymem.retention_policies force row level security;
create policy retention_policies_read on pymem.retention_policies for select
  using (tenant_id = (select pymem._ctx_tenant()));
comment on policy retention_policies_read on pymem.retention_policies is 'A context reads its own tenant''s policy (the expiry trigger applies it with the writer''s rights)';
create policy retention_policies_owner on pymem.retention_policies for all to pymem_owner
  using (tenant_id = (select pymem._ctx_tenant()))
  with check (tenant_id = (select pymem._ctx_tenant()));
comment on policy retention_policies_owner on pymem.retention_policies is 'Only pymem.set_retention (owner) writes a policy, and only the context tenant''s';

alter table pymem.actor_pseudonyms enable row level security;
alter table pymem.actor_pseudonyms force row level security;
-- No role but the owner has any privilege on the table; the owner's definer functions read it
-- (each checks who may learn a name), and add or delete only the context tenant's pseudonyms.
create policy actor_pseudonyms_owner_read on pymem.actor_pseudonyms for select to pymem_owner using (true);
comment on policy actor_pseudonyms_owner_read on pymem.actor_pseudonyms is 'The owner''s definer functions resolve pseudonyms (each checks the caller may: its own tenant, or an auditor)';
create policy actor_pseudonyms_owner_add on pymem.actor_pseudonyms for insert to pymem_owner
  with check (tenant_id = (select pymem._ctx_tenant()));
comment on policy actor_pseudonyms_owner_add on pymem.actor_pseudonyms is 'Pseudonyms are made for the context tenant only (pymem._pseudonym)';
create policy actor_pseudonyms_owner_shred on pymem.actor_pseudonyms for delete to pymem_owner
  using (tenant_id = (select pymem._ctx_tenant()));
comment on policy actor_pseudonyms_owner_shred on pymem.actor_pseudonyms is 'Only the context tenant''s pseudonyms are shredded (pymem.erase_actor)';

-- The pseudonym links, for verification outside the database (pymem verify --independent reads
-- tables, never functions): an auditor reads every tenant's, a whole-tenant context its own
-- (what its ledger already named before pseudonyms).
create policy actor_pseudonyms_audit on pymem.actor_pseudonyms for select to pymem_auditor using (true);
comment on policy actor_pseudonyms_audit on pymem.actor_pseudonyms is 'Auditors resolve every tenant''s pseudonyms (verification of pre-0013 entries)';
create policy actor_pseudonyms_context on pymem.actor_pseudonyms for select to pymem_app
  using (tenant_id = (select pymem._ctx_tenant())
         and (select pymem._ctx_scope() = '{}'::jsonb) and (select pymem._ctx_read_adapters()) is null);
comment on policy actor_pseudonyms_context on pymem.actor_pseudonyms is 'A whole-tenant context resolves its own tenant''s pseudonyms (as its ledger named actors before)';

-- pymem.erase_actor deletes a person's idempotency records whatever adapter wrote them.
create policy idempotency_owner_read on pymem.idempotency_keys for select to pymem_owner
  using (tenant_id = (select pymem._ctx_tenant()));
comment on policy idempotency_owner_read on pymem.idempotency_keys is 'The owner''s definer functions see every adapter''s keys of the context tenant (pymem.erase_actor)';
create policy idempotency_owner_erase on pymem.idempotency_keys for delete to pymem_owner
  using (tenant_id = (select pymem._ctx_tenant()));
comment on policy idempotency_owner_erase on pymem.idempotency_keys is 'pymem.erase_actor deletes a person''s keys of the context tenant, whatever adapter wrote them';

-- The quarantine (migration 0014).

alter table pymem.quarantine enable row level security;
alter table pymem.quarantine force row level security;

-- Reading a held note is asking for it explicitly (pymem.quarantine is named by no read path of
-- memories): the same tenant, scope and allow-list rule as memories, so a context never sees a
-- note it could not have read once released.
create policy quarantine_read on pymem.quarantine for select
  using (tenant_id = (select pymem._ctx_tenant())
         and ((select pymem._ctx_scope() = '{}'::jsonb) or scope @> (select pymem._ctx_scope()))
         and ((select pymem._ctx_read_adapters()) is null
              or source_adapter = any ((select pymem._ctx_read_adapters())::text[])));
comment on policy quarantine_read on pymem.quarantine is 'Visible: own tenant, scope containing the context scope, adapter in the allow-list when one is set';

-- The gate writes a held note as its writer, like a memory: the context's tenant, scope, adapter.
create policy quarantine_insert on pymem.quarantine for insert
  with check (tenant_id = (select pymem._ctx_tenant())
              and ((select pymem._ctx_scope() = '{}'::jsonb) or scope @> (select pymem._ctx_scope()))
              and source_adapter is not distinct from (select pymem._ctx_adapter()));
comment on policy quarantine_insert on pymem.quarantine is 'Holds notes only in the context tenant and scope, tagged with the context adapter';

-- No role may update or delete held notes; the owner's definer functions (release, reject)
-- change the status of the context tenant's rows, having checked the context is an operator's.
create policy quarantine_decide on pymem.quarantine for update to pymem_owner
  using (tenant_id = (select pymem._ctx_tenant()))
  with check (tenant_id = (select pymem._ctx_tenant()));
comment on policy quarantine_decide on pymem.quarantine is 'Only pymem.release_quarantined and pymem.reject_quarantined change a held note, in its tenant';
create policy quarantine_owner_verify on pymem.quarantine for select to pymem_owner using (true);
comment on policy quarantine_owner_verify on pymem.quarantine is 'Lets the owner''s definer functions find a note by id within the tenant they name';

-- A released note is written into memories with its writer's adapter tag, by the operator's
-- release: the one insert the context's own adapter (NULL) would not allow. Only the owner's
-- definer code inserts under this policy, and only into the context tenant.
create policy memories_release on pymem.memories for insert to pymem_owner
  with check (tenant_id = (select pymem._ctx_tenant()));
comment on policy memories_release on pymem.memories is 'Lets pymem.release_quarantined write a released note under its writer''s adapter, in the context tenant';

-- ============================================================================================
-- 6. triggers: revision, content hash, hash chain, append-only
-- ============================================================================================

create function pymem._content_hash_v1(m pymem.memories) returns bytea
language plpgsql immutable parallel safe
set search_path = pg_catalog, pg_temp
as $$
begin
  -- plpgsql for the same reason as pymem._event_bytes: one cached, inlined plan.
  return sha256(
    '\x0001'::bytea                       -- field list version 1
    || pymem._b(m.tenant_id) || pymem._b(m.id) || pymem._b(m.scope) || pymem._b(m.kind)
    || pymem._b(m.content) || pymem._b(m.record)
    -- the vector's float4 array in binary form: a cast and array_send resolve without search_path
    || pymem._b(array_send(m.embedding::real[]))
    || pymem._b(m.tags) || pymem._b(m.importance) || pymem._b(m.confidence)
    || pymem._b(m.origin) || pymem._b(m.source_adapter) || pymem._b(m.provenance)
    || pymem._b(m.injection_source) || pymem._b(m.policy_fingerprint)
    || pymem._b(m.revision::bigint) || pymem._b(m.created_at) || pymem._b(m.valid_from)
    || pymem._b(m.invalidated_at) || pymem._b(m.superseded_by));
end
$$;
comment on function pymem._content_hash_v1(pymem.memories) is 'sha256 of a memory''s hashed fields, hash version 1 (kept to verify rows whose latest event is version 1)';

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

create function pymem._content_hash(m pymem.memories) returns bytea
language sql immutable parallel safe
set search_path = pg_catalog, pg_temp
as $$ select pymem._content_hash_v2(m) $$;
comment on function pymem._content_hash(pymem.memories) is 'sha256 of a memory''s hashed fields with the current hash version (2); erased_at and updated_at are bookkeeping, not content';

-- vector_send resolves through the search_path: pin it to the schema pgvector lives in.
do $$
begin
  execute format('alter function pymem._content_bytes_v2(pymem.memories) set search_path = pg_catalog, %I, pg_temp',
                 (select n.nspname from pg_extension e join pg_namespace n on n.oid = e.extnamespace where e.extname = 'vector'));
end
$$;

create function pymem._memories_before_write() returns trigger
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
  if tg_op = 'INSERT' then
    new.revision := 1;
    -- The database's time, whatever the statement said: a caller's claim of when something
    -- became true belongs in valid_from.
    new.created_at := now();
    if new.erased_at is not null then
      raise exception 'pymem: a memory cannot be inserted already erased' using errcode = '22023';
    end if;
  else
    -- An erased row stays as its erasure left it: never un-erased, never rewritten (its
    -- content_hash is the erased content's, which nothing re-checks).
    if old.erased_at is not null then
      raise exception 'pymem: an erased memory cannot be changed (nor un-erased)' using errcode = '22023';
    end if;
    -- The revision moves on every update, whatever the statement said.
    new.revision := old.revision + 1;
    new.created_at := old.created_at;
  end if;
  new.updated_at := now();
  if new.erased_at is not null then
    -- An erasure, however it was asked for (pymem.erase_memory or an UPDATE of erased_at): the
    -- content, record and embedding go, at the database's time, and nothing else changes with
    -- them; the hash of what was erased stays so the chain still verifies.
    if row(new.scope, new.kind, new.tags, new.importance, new.confidence, new.origin, new.provenance,
           new.injection_source, new.policy_fingerprint, new.valid_from, new.invalidated_at, new.superseded_by)
       is distinct from
       row(old.scope, old.kind, old.tags, old.importance, old.confidence, old.origin, old.provenance,
           old.injection_source, old.policy_fingerprint, old.valid_from, old.invalidated_at, old.superseded_by) then
      raise exception 'pymem: an erasure clears content, record and embedding and changes nothing else' using errcode = '22023';
    end if;
    new.content := null;
    new.record := null;
    new.embedding := null;
    new.erased_at := now();
    new.content_hash := old.content_hash;
  else
    -- row(new.*)::pymem.memories, not new: on Citus this trigger fires on a shard, whose row type
    -- is the shard's (memories_102008), and the hash function takes the distributed table's.
    new.content_hash := pymem._content_hash_v2(row(new.*)::pymem.memories);
  end if;
  return new;
end
$$;
comment on function pymem._memories_before_write() is 'Sets revision (1, then +1), created_at/updated_at and content_hash; completes an erasure and freezes an erased row; callers cannot forge them';

create trigger memories_before_write
  before insert or update on pymem.memories
  for each row execute function pymem._memories_before_write();
comment on trigger memories_before_write on pymem.memories is 'Revision bump and content hash on every write';

create function pymem._memories_operator_origin() returns trigger
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
-- Origin operator ranks a memory highest (tier operator): it is who the database says wrote the
-- row, never the writer's claim. Row-level security makes a row's source_adapter the writing
-- context's adapter (a bound login always has its adapter), so a tagged row, or a write by a
-- tagged context, cannot carry it, in its column or in its provenance.
begin
  if new.source_adapter is not null or pymem._ctx_adapter() is not null then
    raise exception 'pymem: origin operator is only for the operator''s own (untagged) writes; a context acting as adapter % cannot claim it',
                    coalesce(pymem._ctx_adapter(), new.source_adapter)
      using errcode = '42501';
  end if;
  return new;
end
$$;
comment on function pymem._memories_operator_origin() is 'Refuses origin operator (column or provenance) on a tagged row or from a tagged context';

create trigger memories_operator_origin
  before insert or update on pymem.memories
  for each row when (new.origin = 'operator' or (new.provenance ->> 'origin') = 'operator')
  execute function pymem._memories_operator_origin();
comment on trigger memories_operator_origin on pymem.memories is 'Origin operator only on untagged rows written by an operator context';

-- search_text, kept by the database (hybrid search reads it; it is not content, so not hashed)

create function pymem._tenant_lexeme(p_tenant text) returns text
language sql immutable parallel safe
set search_path = pg_catalog, pg_temp
as $$ select ' tenant ' || md5(p_tenant) $$;
comment on function pymem._tenant_lexeme(text) is 'A lexeme no parser emits (it holds spaces) naming a tenant: a text search ANDs it in, so the GIN index finds one tenant''s rows only';

create function pymem._search_text(p_tenant text, p_content text) returns tsvector
language sql stable parallel safe
set search_path = pg_catalog, pg_temp
as $$
  select case when p_content is not null
              then array_to_tsvector(array[pymem._tenant_lexeme(p_tenant)])
                   || to_tsvector((select s.text_search_config from pymem.store_info s), p_content) end
$$;
comment on function pymem._search_text(text, text) is 'The search_text of a memory: its tenant lexeme and its content in the store''s configuration (NULL without content)';

create function pymem._memories_search_text() returns trigger
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
  if tg_op = 'INSERT' or new.content is distinct from old.content then
    new.search_text := pymem._search_text(new.tenant_id, new.content);
  else
    new.search_text := old.search_text;
  end if;
  return new;
end
$$;
comment on function pymem._memories_search_text() is 'Keeps search_text equal to the content''s tsvector (the app role cannot write the column)';

create trigger memories_search_text
  before insert or update on pymem.memories
  for each row execute function pymem._memories_search_text();
comment on trigger memories_search_text on pymem.memories is 'Keeps search_text in step with the content';

-- Retention and erasure of a person (migration 0013).

-- The expiry is the writer's (a ttl, or the tenant's default), but its time is the database's:
-- expires_at is computed here from now() whatever the statement said, so a writer can neither
-- backdate nor postdate it, nor name a ttl beyond the tenant's maximum. Not hashed (like
-- updated_at, it is bookkeeping): expiry is enforced by the read policy and the purge.
create function pymem._memories_expiry() returns trigger
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
  p pymem.retention_policies;
begin
  if tg_op = 'UPDATE' and new.erased_at is not null then
    -- an erasure changes nothing but the content
    new.ttl := old.ttl;
    new.expires_at := old.expires_at;
    return new;
  end if;
  if new.ttl is not null and (new.ttl <= interval '0' or new.ttl > interval '36500 days') then
    raise exception 'pymem: a ttl must be positive and at most 36500 days' using errcode = '22015';
  end if;
  -- the writer's rights: a context reads its own tenant's policy
  select r.* into p from pymem.retention_policies r where r.tenant_id = new.tenant_id;
  if new.ttl is null then
    new.ttl := coalesce(p.default_ttl, p.max_ttl);
  elsif new.ttl > p.max_ttl then
    if tg_op = 'UPDATE' and new.ttl = old.ttl then
      -- a maximum lowered since the row was written: the row's next write honours it
      new.ttl := p.max_ttl;
    else
      raise exception 'pymem: a ttl of % exceeds the tenant''s maximum of %', new.ttl, p.max_ttl
        using errcode = '22015';
    end if;
  end if;
  new.expires_at := now() + new.ttl;
  return new;
end
$$;
comment on function pymem._memories_expiry() is 'Sets ttl (the writer''s, else the tenant default, within its maximum) and expires_at = now() + ttl at every write; an erasure keeps them';

create trigger memories_expiry
  before insert or update on pymem.memories
  for each row execute function pymem._memories_expiry();
comment on trigger memories_expiry on pymem.memories is 'The database computes every expiry from a ttl with its own clock';

-- A memory's subject key names a person; the row keeps only the person's pseudonym. Definer,
-- because only the owner may make pseudonyms (pymem._pseudonym); a value that already is a
-- pseudonym (an upsert's excluded row, a copy of another row) is kept as it is.
create function pymem._memories_subject() returns trigger
language plpgsql security definer
set search_path = pg_catalog, pg_temp
as $$
begin
  if new.subject is not null and new.subject !~ '^p:[0-9a-f]{32}$' then
    if new.subject = '' or length(new.subject) > 256 or not pymem._is_plain_text(new.subject) then
      raise exception 'pymem: a subject key must be 1-256 characters without control or format characters'
        using errcode = '22023';
    end if;
    new.subject := pymem._pseudonym(new.tenant_id, new.subject);
  end if;
  return new;
end
$$;
comment on function pymem._memories_subject() is 'Replaces a memory''s subject key by the person''s pseudonym (the row never holds the id itself)';

create trigger memories_subject_insert
  before insert on pymem.memories
  for each row when (new.subject is not null)
  execute function pymem._memories_subject();
comment on trigger memories_subject_insert on pymem.memories is 'A memory about a person names their pseudonym';
create trigger memories_subject_update
  before update of subject on pymem.memories
  for each row when (new.subject is distinct from old.subject and new.subject is not null)
  execute function pymem._memories_subject();
comment on trigger memories_subject_update on pymem.memories is 'Re-naming a memory''s subject names their pseudonym';

create function pymem._event_bytes_v1(l pymem.ledger) returns bytea
language plpgsql immutable parallel safe
set search_path = pg_catalog, pg_temp
as $$
begin
  -- plpgsql keeps one cached plan with every _b() inlined; a SQL function taking a row is not
  -- inlined and was re-planned per call.
  return pymem._b(l.hash_version::bigint) || pymem._b(l.tenant_id) || pymem._b(l.seq) || pymem._b(l.event)
      || pymem._b(l.memory_id) || pymem._b(l.revision::bigint) || pymem._b(l.content_hash)
      || pymem._b(l.actor) || pymem._b(l.adapter) || pymem._b(l.details) || pymem._b(l.occurred_at);
end
$$;
comment on function pymem._event_bytes_v1(pymem.ledger) is 'The hashed field list of a ledger entry, hash version 1';

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

create function pymem._event_bytes(l pymem.ledger) returns bytea
language sql immutable parallel safe
set search_path = pg_catalog, pg_temp
as $$
  select case l.hash_version when 2 then pymem._event_bytes_v2(l) when 1 then pymem._event_bytes_v1(l) end
$$;
comment on function pymem._event_bytes(pymem.ledger) is 'The hashed field list of a ledger entry with the hash version it was written with (NULL for an unknown version)';

-- Pseudonyms (migration 0013): what the ledger records as the actor, and a memory as its subject.

create function pymem._pseudonym(p_tenant text, p_name text) returns text
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp
as $$
-- p:<token> for a name in the context tenant, made on first use. Only the owner's definer
-- functions call it (no grant): _append_events for every event's actor, the subject trigger.
-- Random, not derived from the name: once pymem.erase_actor deletes the row, nothing can link
-- the pseudonym back, nor recompute it from a guessed name.
declare
  v_token text;
begin
  if p_name is null then
    return null;
  end if;
  if p_tenant is distinct from pymem._ctx_tenant() then
    raise exception 'pymem: pseudonyms are made for the context tenant only' using errcode = '42501';
  end if;
  select a.token into v_token from pymem.actor_pseudonyms a where a.tenant_id = p_tenant and a.actor = p_name;
  if v_token is null then
    insert into pymem.actor_pseudonyms (tenant_id, actor, token)
      values (p_tenant, p_name, replace(gen_random_uuid()::text, '-', ''))
      on conflict (tenant_id, actor) do nothing;
    select a.token into v_token from pymem.actor_pseudonyms a where a.tenant_id = p_tenant and a.actor = p_name;
  end if;
  return 'p:' || v_token;
end
$$;
comment on function pymem._pseudonym(text, text) is 'The pseudonym (p:<random token>) of an actor or subject id in the context tenant, made on first use';

create function pymem._actor_name(p_tenant text, p_pseudonym text) returns text
language plpgsql stable security definer parallel safe
set search_path = pg_catalog, pg_temp
as $$
-- What the audit views show as an event's actor: the id behind its pseudonym, to whoever may read
-- that tenant's ledger (its own context, or an auditor); the pseudonym itself once the person
-- was erased (or to anyone else).
declare
  v_actor text;
begin
  if p_pseudonym is null or p_pseudonym !~ '^[pe]:[0-9a-f]{32}$' then
    return p_pseudonym;
  end if;
  if p_tenant is distinct from pymem._ctx_tenant()
     and not pg_catalog.pg_has_role(session_user, 'pymem_auditor', 'MEMBER') then
    return p_pseudonym;
  end if;
  select a.actor into v_actor from pymem.actor_pseudonyms a
   where a.tenant_id = p_tenant and a.token = substr(p_pseudonym, 3);
  return coalesce(v_actor, p_pseudonym);
end
$$;
comment on function pymem._actor_name(text, text) is 'The actor id behind a ledger pseudonym, for its own tenant''s context or an auditor; the pseudonym once erased';

create function pymem._event_bytes_as(l pymem.ledger, p_actor text) returns bytea
language plpgsql immutable parallel safe
set search_path = pg_catalog, pg_temp
as $$
-- An entry written before migration 0013 carries e:<token> in its actor column, but its chain
-- hash covers the actor's id itself (kept in pymem.actor_pseudonyms until the person is erased):
-- its hashed bytes with that id put back.
begin
  l.actor := p_actor;
  return case l.hash_version when 2 then pymem._event_bytes_v2(l) when 1 then pymem._event_bytes_v1(l) end;
end
$$;
comment on function pymem._event_bytes_as(pymem.ledger, text) is 'The hashed bytes of a ledger entry with another actor (an escrowed pre-0013 entry''s own id put back)';

-- A statement's events, before they get their place in the chain.
create type pymem._pending_event as (
  tenant_id text,
  event text,
  memory_id text,
  revision integer,
  content_hash bytea,
  live_delta integer,
  details jsonb
);
comment on type pymem._pending_event is 'One ledger event waiting to be chained by pymem._append_events';

create function pymem._append_events(p_events pymem._pending_event[])
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
-- are written with one INSERT. The actor is recorded as its pseudonym (pymem._pseudonym), never
-- as the id itself, so erasing a person (pymem.erase_actor) leaves the chain intact.
declare
  v_tenant text;
  v_head pymem.chain_heads;
  v_entry pymem.ledger;
  v_entries pymem.ledger[];
  v_live bigint;
  v_at timestamptz;
  v_actor text := pymem._ctx_actor();
  v_pseudonym text;
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
    v_pseudonym := pymem._pseudonym(v_tenant, v_actor);
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
      v_entry.actor := v_pseudonym;
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
    if pymem._on_citus() then
      -- Citus runs an INSERT ... SELECT from a non-distributed source as a COPY, which forced
      -- row-level security refuses: one single-row INSERT per entry, each routed to the shard.
      foreach v_entry in array v_entries loop
        insert into pymem.ledger values (v_entry.*);
      end loop;
    else
      insert into pymem.ledger select x.* from unnest(v_entries) x;
    end if;
    update pymem.chain_heads h
       set seq = v_head.seq, chain_hash = v_head.chain_hash, live_rows = h.live_rows + v_live, updated_at = v_at
     where h.tenant_id = v_tenant;
  end loop;
  return v_entry;
end
$$;
comment on function pymem._append_events(pymem._pending_event[]) is 'Appends events to their tenants'' chains under the head-row lock (definer: the app cannot write the ledger directly)';

-- SECURITY DEFINER so that the app role needs no EXECUTE on pymem._append_events: it cannot
-- append a forged event by calling it directly, only by really changing a memory. Statement
-- level, with transition tables, so a multi-row write chains all its rows in one pass.
create function pymem._memories_chain() returns trigger
language plpgsql security definer
set search_path = pg_catalog, pg_temp
as $$
-- Each event carries the row's scope and source adapter (the old row's for a delete): the ledger's
-- read policy shows an event only to contexts that could read the memory it concerns.
declare
  v_events pymem._pending_event[];
  v_deltas pymem.scope_rows[];
  v_delta pymem.scope_rows;
begin
  if tg_op = 'INSERT' then
    select array_agg(row(n.tenant_id, 'memory.insert', n.id, n.revision, n.content_hash, 1,
                         jsonb_build_object('scope', n.scope, 'source_adapter', n.source_adapter))::pymem._pending_event)
      into v_events from pymem_new_rows n;
  elsif tg_op = 'UPDATE' then
    select array_agg(row(n.tenant_id,
             case when n.erased_at is not null and o.erased_at is null then 'memory.erase'
                  when n.invalidated_at is not null and o.invalidated_at is null then 'memory.supersede'
                  else 'memory.update' end,
             n.id, n.revision, n.content_hash, 0,
             jsonb_build_object('scope', n.scope, 'source_adapter', n.source_adapter))::pymem._pending_event)
      into v_events
      from pymem_new_rows n join pymem_old_rows o on o.tenant_id = n.tenant_id and o.id = n.id;
  else
    select array_agg(row(o.tenant_id, 'memory.delete', o.id, o.revision, o.content_hash, -1,
                         jsonb_build_object('scope', o.scope, 'source_adapter', o.source_adapter))::pymem._pending_event)
      into v_events from pymem_old_rows o;
  end if;
  if v_events is null then
    return null;
  end if;
  perform pymem._append_events(v_events);
  -- The per-scope counts (inserts add, deletes remove, an update that changes a row's scope or
  -- adapter moves it), now that the tenant's head row is locked (_append_events holds the lock to
  -- the end of the transaction): writers of one tenant change its counts one after the other.
  if tg_op = 'INSERT' then
    select array_agg(row(d.tenant_id, d.scope, d.source_adapter, d.n)::pymem.scope_rows) into v_deltas
      from (select n.tenant_id, n.scope, n.source_adapter, count(*) as n from pymem_new_rows n group by 1, 2, 3) d;
  elsif tg_op = 'UPDATE' then
    select array_agg(row(d.tenant_id, d.scope, d.source_adapter, d.n)::pymem.scope_rows) into v_deltas
      from (select x.tenant_id, x.scope, x.source_adapter, sum(x.n) as n
              from pymem_new_rows n join pymem_old_rows o on o.tenant_id = n.tenant_id and o.id = n.id
                   cross join lateral (values (n.tenant_id, n.scope, n.source_adapter, 1),
                                              (o.tenant_id, o.scope, o.source_adapter, -1)) x (tenant_id, scope, source_adapter, n)
             where o.scope <> n.scope or o.source_adapter is distinct from n.source_adapter
             group by 1, 2, 3) d;
  else
    select array_agg(row(d.tenant_id, d.scope, d.source_adapter, -d.n)::pymem.scope_rows) into v_deltas
      from (select o.tenant_id, o.scope, o.source_adapter, count(*) as n from pymem_old_rows o group by 1, 2, 3) d;
  end if;
  if v_deltas is not null and pymem._on_citus() then
    -- On Citus a modifying statement over several tenants' rows cannot run inside a shard's
    -- trigger: one statement per (tenant, scope, adapter), each pinned to its tenant's shard.
    foreach v_delta in array v_deltas loop
      if v_delta.live_rows > 0 then
        insert into pymem.scope_rows as s (tenant_id, scope, source_adapter, live_rows)
          values (v_delta.tenant_id, v_delta.scope, v_delta.source_adapter, v_delta.live_rows)
          on conflict (tenant_id, coalesce(source_adapter, ''), sha256(scope::text::bytea))
          do update set live_rows = s.live_rows + excluded.live_rows;
      elsif v_delta.live_rows < 0 then
        update pymem.scope_rows s set live_rows = s.live_rows + v_delta.live_rows
         where s.tenant_id = v_delta.tenant_id and s.source_adapter is not distinct from v_delta.source_adapter
           and sha256(s.scope::text::bytea) = sha256(v_delta.scope::text::bytea) and s.live_rows + v_delta.live_rows > 0;
        delete from pymem.scope_rows s
         where s.tenant_id = v_delta.tenant_id and s.source_adapter is not distinct from v_delta.source_adapter
           and sha256(s.scope::text::bytea) = sha256(v_delta.scope::text::bytea) and s.live_rows + v_delta.live_rows <= 0;
      end if;
    end loop;
  elsif v_deltas is not null then
    with d as (select x.tenant_id, x.scope, x.source_adapter, x.live_rows as n from unnest(v_deltas) x where x.live_rows <> 0),
    added as (
      insert into pymem.scope_rows as s (tenant_id, scope, source_adapter, live_rows)
        select d.tenant_id, d.scope, d.source_adapter, d.n from d where d.n > 0
        on conflict (tenant_id, coalesce(source_adapter, ''), sha256(scope::text::bytea))
        do update set live_rows = s.live_rows + excluded.live_rows),
    lowered as (
      update pymem.scope_rows s set live_rows = s.live_rows + d.n
        from d where d.n < 0 and s.tenant_id = d.tenant_id and s.source_adapter is not distinct from d.source_adapter
                 and sha256(s.scope::text::bytea) = sha256(d.scope::text::bytea) and s.live_rows + d.n > 0)
    delete from pymem.scope_rows s
     using d where d.n < 0 and s.tenant_id = d.tenant_id and s.source_adapter is not distinct from d.source_adapter
               and sha256(s.scope::text::bytea) = sha256(d.scope::text::bytea) and s.live_rows + d.n <= 0;
  end if;
  return null;
end
$$;
comment on function pymem._memories_chain() is 'Chains every inserted, updated and deleted memory of a statement into its tenant''s ledger';

create trigger memories_chain_insert
  after insert on pymem.memories
  referencing new table as pymem_new_rows
  for each statement execute function pymem._memories_chain();
comment on trigger memories_chain_insert on pymem.memories is 'One memory.insert event per inserted row, in the same transaction';
create trigger memories_chain_update
  after update on pymem.memories
  referencing old table as pymem_old_rows new table as pymem_new_rows
  for each statement execute function pymem._memories_chain();
comment on trigger memories_chain_update on pymem.memories is 'One memory.update / supersede / erase event per updated row';
create trigger memories_chain_delete
  after delete on pymem.memories
  referencing old table as pymem_old_rows
  for each statement execute function pymem._memories_chain();
comment on trigger memories_chain_delete on pymem.memories is 'One memory.delete event per deleted row';

-- The primary key would let the owner move a row between tenants; nobody should.
create function pymem._memories_keep_key() returns trigger
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
  if new.tenant_id is distinct from old.tenant_id or new.id is distinct from old.id then
    raise exception 'pymem: a memory''s tenant and id never change' using errcode = '22023';
  end if;
  return new;
end
$$;
comment on function pymem._memories_keep_key() is 'Refuses updates of tenant_id or id';
create trigger memories_keep_key
  before update of tenant_id, id on pymem.memories
  for each row execute function pymem._memories_keep_key();
comment on trigger memories_keep_key on pymem.memories is 'tenant_id and id are immutable';

create function pymem._ledger_append_only() returns trigger
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
  raise exception 'pymem: % is append-only (% refused)', tg_table_name, tg_op using errcode = '42501';
end
$$;
comment on function pymem._ledger_append_only() is 'Refuses UPDATE, DELETE and TRUNCATE of an append-only table (the ledger, the binding log)';

create trigger ledger_no_update_delete
  before update or delete on pymem.ledger
  for each row execute function pymem._ledger_append_only();
comment on trigger ledger_no_update_delete on pymem.ledger is 'Append-only, fires even in replica mode';
create trigger ledger_no_truncate
  before truncate on pymem.ledger
  for each statement execute function pymem._ledger_append_only();
comment on trigger ledger_no_truncate on pymem.ledger is 'Append-only, fires even in replica mode';
-- ALWAYS: session_replication_role = replica must not switch them off.
alter table pymem.ledger enable always trigger ledger_no_update_delete;
alter table pymem.ledger enable always trigger ledger_no_truncate;

-- Login bindings: every change is checked (the role must exist and must not be a superuser, who
-- could not be contained anyway) and written to the append-only binding log, by whatever means
-- it was made.
create function pymem._login_bindings_guard() returns trigger
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
  if tg_op = 'TRUNCATE' then
    insert into pymem.binding_log (event, role_name, changed_by)
      select 'login.unbound', b.role_name, session_user from pymem.login_bindings b order by b.role_name;
    return null;
  end if;
  if tg_op in ('INSERT', 'UPDATE') then
    if not exists (select from pg_catalog.pg_roles r where r.rolname = new.role_name) then
      raise exception 'pymem: role % does not exist', new.role_name using errcode = '42704';
    end if;
    if exists (select from pg_catalog.pg_roles r where r.rolname = new.role_name and r.rolsuper) then
      raise exception 'pymem: % is a superuser; a binding cannot contain it', new.role_name using errcode = '22023';
    end if;
    new.created_at := now();
    new.created_by := session_user;
    insert into pymem.binding_log (event, role_name, adapter, tenants, all_tenants, scope, changed_by)
      values ('login.bound', new.role_name, new.adapter, new.tenants, new.all_tenants, new.scope, session_user);
    if tg_op = 'UPDATE' and new.role_name is distinct from old.role_name then
      insert into pymem.binding_log (event, role_name, changed_by) values ('login.unbound', old.role_name, session_user);
    end if;
    return new;
  end if;
  insert into pymem.binding_log (event, role_name, changed_by) values ('login.unbound', old.role_name, session_user);
  return old;
end
$$;
comment on function pymem._login_bindings_guard() is 'Checks a binding''s role and records every change of pymem.login_bindings in pymem.binding_log';
create trigger login_bindings_guard
  before insert or update or delete on pymem.login_bindings
  for each row execute function pymem._login_bindings_guard();
comment on trigger login_bindings_guard on pymem.login_bindings is 'Role checks and the binding log';
create trigger login_bindings_truncate
  before truncate on pymem.login_bindings
  for each statement execute function pymem._login_bindings_guard();
comment on trigger login_bindings_truncate on pymem.login_bindings is 'A truncate unbinds every login, in the binding log too';
create trigger binding_log_no_update_delete
  before update or delete on pymem.binding_log
  for each row execute function pymem._ledger_append_only();
comment on trigger binding_log_no_update_delete on pymem.binding_log is 'Append-only, fires even in replica mode';
create trigger binding_log_no_truncate
  before truncate on pymem.binding_log
  for each statement execute function pymem._ledger_append_only();
comment on trigger binding_log_no_truncate on pymem.binding_log is 'Append-only, fires even in replica mode';
alter table pymem.login_bindings enable always trigger login_bindings_guard;
alter table pymem.login_bindings enable always trigger login_bindings_truncate;
alter table pymem.binding_log enable always trigger binding_log_no_update_delete;
alter table pymem.binding_log enable always trigger binding_log_no_truncate;

-- Sessions and delivery (migration 0004).

create function pymem._session_hash(s pymem.sessions) returns bytea
language plpgsql immutable parallel safe
set search_path = pg_catalog, pg_temp
as $$
begin
  return sha256(
    '\x0001'::bytea                       -- field list version 1
    || pymem._b(s.tenant_id) || pymem._b(s.id) || pymem._b(s.scope) || pymem._b(s.source_adapter)
    || pymem._b(s.surface::text) || pymem._b(s.incognito::text) || pymem._b(s.topic) || pymem._b(s.summary)
    || pymem._b(s.started_at) || pymem._b(s.ended_at) || pymem._b(s.erased_at));
end
$$;
comment on function pymem._session_hash(pymem.sessions) is 'sha256 of a session''s fields (v1), the content_hash of its ledger events';

create function pymem._sessions_before_write() returns trigger
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
-- The times are the database's, and what identifies a session never changes: otherwise a memory
-- written in a chat session could later appear to come from another one, or an incognito
-- session could stop being one.
begin
  if tg_op = 'INSERT' then
    new.started_at := now();
    new.ended_at := null;
    new.erased_at := null;
    if new.summary is not null then
      raise exception 'pymem: a session starts without a summary' using errcode = '22023';
    end if;
    return new;
  end if;
  if new.tenant_id is distinct from old.tenant_id or new.id is distinct from old.id
     or new.scope is distinct from old.scope or new.source_adapter is distinct from old.source_adapter
     or new.surface is distinct from old.surface or new.incognito is distinct from old.incognito
     or new.started_at is distinct from old.started_at then
    raise exception 'pymem: a session''s id, scope, adapter, surface, incognito flag and start never change'
      using errcode = '22023';
  end if;
  if old.erased_at is not null then
    raise exception 'pymem: an erased session cannot change' using errcode = '22023';
  end if;
  if new.erased_at is not null then
    new.erased_at := now();
    new.topic := null;
    new.summary := null;
    return new;
  end if;
  if new.topic is distinct from old.topic then
    raise exception 'pymem: a session''s topic is set when it starts' using errcode = '22023';
  end if;
  if old.ended_at is not null and new.ended_at is distinct from old.ended_at then
    raise exception 'pymem: session % has already ended', old.id using errcode = '22023';
  end if;
  if old.ended_at is null and new.ended_at is not null then
    new.ended_at := now();
  end if;
  return new;
end
$$;
comment on function pymem._sessions_before_write() is 'Sets start and end times, clears an erased session, refuses changes to what identifies a session';

create trigger sessions_before_write
  before insert or update on pymem.sessions
  for each row execute function pymem._sessions_before_write();
comment on trigger sessions_before_write on pymem.sessions is 'Database times and immutable identity';

create function pymem._sessions_chain() returns trigger
language plpgsql security definer
set search_path = pg_catalog, pg_temp
as $$
-- Each event carries the session's scope and adapter (who may read it), its id, surface and
-- incognito flag, and digests of its topic and summary, never their text.
declare
  v_events pymem._pending_event[];
begin
  if tg_op = 'INSERT' then
    select array_agg(row(n.tenant_id, 'session.start', null, null, pymem._session_hash(row(n.*)::pymem.sessions), 0,
                         jsonb_build_object('session', n.id, 'surface', n.surface, 'incognito', n.incognito,
                                            'topic_sha256', encode(sha256(convert_to(n.topic, 'UTF8')), 'hex'),
                                            'scope', n.scope, 'source_adapter', n.source_adapter))::pymem._pending_event
                     order by n.id)
      into v_events from pymem_new_rows n;
  else
    select array_agg(row(n.tenant_id,
             case when n.erased_at is not null and o.erased_at is null then 'session.erase'
                  when n.ended_at is not null and o.ended_at is null then 'session.end'
                  else 'session.summary' end,
             null, null, pymem._session_hash(row(n.*)::pymem.sessions), 0,
             jsonb_build_object('session', n.id, 'surface', n.surface, 'incognito', n.incognito,
                                'summary_sha256', encode(sha256(convert_to(n.summary, 'UTF8')), 'hex'),
                                'scope', n.scope, 'source_adapter', n.source_adapter))::pymem._pending_event
                     order by n.id)
      into v_events
      from pymem_new_rows n join pymem_old_rows o on o.tenant_id = n.tenant_id and o.id = n.id;
  end if;
  if v_events is not null then
    perform pymem._append_events(v_events);
  end if;
  return null;
end
$$;
comment on function pymem._sessions_chain() is 'Chains every started, ended, summarised and erased session of a statement into its tenant''s ledger';

create trigger sessions_chain_insert
  after insert on pymem.sessions
  referencing new table as pymem_new_rows
  for each statement execute function pymem._sessions_chain();
comment on trigger sessions_chain_insert on pymem.sessions is 'One session.start event per started session';
create trigger sessions_chain_update
  after update on pymem.sessions
  referencing old table as pymem_old_rows new table as pymem_new_rows
  for each statement execute function pymem._sessions_chain();
comment on trigger sessions_chain_update on pymem.sessions is 'One session.end / summary / erase event per changed session';

-- Invoker's rights on purpose: a session the writer cannot see (another scope, an adapter its
-- allow-list excludes) is unknown to it, exactly as it would be to a query.
create function pymem._memories_session_check() returns trigger
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
  v_incognito boolean;
begin
  select s.incognito into v_incognito
    from pymem.sessions s
   where s.tenant_id = new.tenant_id and s.id = new.provenance ->> 'session_id';
  if not found then
    raise exception 'pymem: session % was never started in this tenant (or is not visible here); a memory must name a started session',
                    left(new.provenance ->> 'session_id', 100)
      using errcode = '23503', constraint = 'memories_session_started';
  end if;
  if v_incognito then
    raise exception 'pymem: session % is incognito: nothing from it is stored', left(new.provenance ->> 'session_id', 100)
      using errcode = '42501', constraint = 'memories_session_not_incognito';
  end if;
  return new;
end
$$;
comment on function pymem._memories_session_check() is 'Refuses a memory whose provenance names an unknown or incognito session';

create trigger memories_session_insert
  before insert on pymem.memories
  for each row when (new.provenance ? 'session_id')
  execute function pymem._memories_session_check();
comment on trigger memories_session_insert on pymem.memories is 'A memory written on behalf of a session names a started, non-incognito session of its tenant';
create trigger memories_session_update
  before update of provenance on pymem.memories
  for each row when (new.provenance ? 'session_id'
                     and (new.provenance ->> 'session_id') is distinct from (old.provenance ->> 'session_id'))
  execute function pymem._memories_session_check();
comment on trigger memories_session_update on pymem.memories is 'Re-attributing a memory to a session checks that session';

create function pymem._memories_hot() returns trigger
language plpgsql security definer
set search_path = pg_catalog, pg_temp
as $$
-- Hot memories reach every turn's prompt, so making one hot (or no longer hot) is an event of its
-- own that an inspector can list, next to the memory's insert or update event.
declare
  v_events pymem._pending_event[];
begin
  if tg_op = 'INSERT' then
    select array_agg(row(n.tenant_id, 'hot.marked', n.id, n.revision, n.content_hash, 0,
                         jsonb_build_object('scope', n.scope, 'source_adapter', n.source_adapter))::pymem._pending_event)
      into v_events from pymem_new_rows n where 'hot' = any (n.tags);
  else
    select array_agg(row(n.tenant_id, case when 'hot' = any (n.tags) then 'hot.marked' else 'hot.cleared' end,
                         n.id, n.revision, n.content_hash, 0,
                         jsonb_build_object('scope', n.scope, 'source_adapter', n.source_adapter))::pymem._pending_event)
      into v_events
      from pymem_new_rows n join pymem_old_rows o on o.tenant_id = n.tenant_id and o.id = n.id
     where ('hot' = any (n.tags)) is distinct from ('hot' = any (o.tags));
  end if;
  if v_events is not null then
    perform pymem._append_events(v_events);
  end if;
  return null;
end
$$;
comment on function pymem._memories_hot() is 'Chains a hot.marked / hot.cleared event for every memory that became (or stopped being) hot';

create trigger memories_hot_insert
  after insert on pymem.memories
  referencing new table as pymem_new_rows
  for each statement execute function pymem._memories_hot();
comment on trigger memories_hot_insert on pymem.memories is 'hot.marked for each memory inserted hot';
create trigger memories_hot_update
  after update on pymem.memories
  referencing old table as pymem_old_rows new table as pymem_new_rows
  for each statement execute function pymem._memories_hot();
comment on trigger memories_hot_update on pymem.memories is 'hot.marked / hot.cleared when an update changes a memory''s hot tag';

-- Lessons, convention receipts and shared facts (migration 0005).

create function pymem._convention_receipts_before_insert() returns trigger
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
-- Invoker's rights on purpose: the previous version and the lesson must be visible to the
-- filing context. What Postgres can check, it checks here; the signature itself is checked by
-- verification (Postgres has no Ed25519).
declare
  v_key text;
  v_prev pymem.convention_receipts;
begin
  new.filed_at := now();
  if new.rule_sha256 is distinct from sha256(convert_to(new.rule_text, 'UTF8')) then
    raise exception 'pymem: rule_sha256 is not the sha256 of the rule text' using errcode = '22023';
  end if;
  select k.public_key into v_key from pymem.signing_keys k;
  if v_key is null or new.public_key is distinct from v_key then
    raise exception 'pymem: a receipt must be signed with the installation key registered in this database'
      using errcode = '42501';
  end if;
  if not exists (select from pymem.memories m
                  where m.tenant_id = new.tenant_id and m.id = new.lesson_id and m.kind = 'lesson'
                    and m.erased_at is null) then
    raise exception 'pymem: receipt % names no live lesson of this context', left(new.id, 100) using errcode = '22023';
  end if;
  if new.version > 1 then
    select r.* into v_prev from pymem.convention_receipts r
     where r.tenant_id = new.tenant_id and r.id = new.id and r.version = new.version - 1;
    if not found then
      raise exception 'pymem: receipt % has no version % in this context', left(new.id, 100), new.version - 1
        using errcode = '22023';
    end if;
    if exists (select from pymem.convention_receipts r
                where r.tenant_id = new.tenant_id and r.id = new.id and r.version >= new.version) then
      raise exception 'pymem: receipt % already has version %', left(new.id, 100), new.version using errcode = '23505';
    end if;
    -- a new version restates the same rule for the same subject, where and by whom it was filed
    if new.scope is distinct from v_prev.scope or new.source_adapter is distinct from v_prev.source_adapter
       or new.subject is distinct from v_prev.subject or new.subject_symbol is distinct from v_prev.subject_symbol
       or new.rule_sha256 is distinct from v_prev.rule_sha256 then
      raise exception 'pymem: a new version of receipt % must restate the same rule for the same subject', left(new.id, 100)
        using errcode = '22023';
    end if;
  elsif exists (select from pymem.convention_receipts r where r.tenant_id = new.tenant_id and r.id = new.id) then
    raise exception 'pymem: receipt % already exists', left(new.id, 100) using errcode = '23505';
  end if;
  if exists (select from pymem.convention_endings e where e.tenant_id = new.tenant_id and e.receipt_id = new.id) then
    raise exception 'pymem: receipt % is no longer in force', left(new.id, 100) using errcode = '22023';
  end if;
  return new;
end
$$;
comment on function pymem._convention_receipts_before_insert() is 'Checks a receipt version: rule hash, the registered key, its lesson, contiguous versions of one rule, not ended';

create trigger convention_receipts_before_insert
  before insert on pymem.convention_receipts
  for each row execute function pymem._convention_receipts_before_insert();
comment on trigger convention_receipts_before_insert on pymem.convention_receipts is 'Database time and the checks Postgres can make';

create function pymem._convention_receipts_chain() returns trigger
language plpgsql security definer
set search_path = pg_catalog, pg_temp
as $$
-- The anchoring event of each receipt version: its digest as content_hash, and what it binds
-- (ids, hashes, commit, key, signature), never the rule's text.
declare
  v_events pymem._pending_event[];
begin
  select array_agg(row(n.tenant_id, case when n.version = 1 then 'convention.filed' else 'convention.confirmed' end,
                       null, null, n.receipt_sha256, 0,
                       jsonb_build_object('receipt', n.id, 'version', n.version, 'lesson_id', n.lesson_id,
                                          'subject', n.subject, 'subject_symbol', n.subject_symbol,
                                          'rule_sha256', encode(n.rule_sha256, 'hex'), 'base_commit', n.base_commit,
                                          'public_key', n.public_key, 'signature', encode(n.signature, 'hex'),
                                          'scope', n.scope, 'source_adapter', n.source_adapter))::pymem._pending_event
                   order by n.id, n.version)
    into v_events from pymem_new_rows n;
  if v_events is not null then
    perform pymem._append_events(v_events);
  end if;
  return null;
end
$$;
comment on function pymem._convention_receipts_chain() is 'Chains a convention.filed (version 1) or convention.confirmed event for every receipt version filed';

create trigger convention_receipts_chain
  after insert on pymem.convention_receipts
  referencing new table as pymem_new_rows
  for each statement execute function pymem._convention_receipts_chain();
comment on trigger convention_receipts_chain on pymem.convention_receipts is 'One anchoring ledger event per receipt version';

create trigger convention_receipts_no_update_delete
  before update or delete on pymem.convention_receipts
  for each row execute function pymem._ledger_append_only();
comment on trigger convention_receipts_no_update_delete on pymem.convention_receipts is 'Append-only, fires even in replica mode';
create trigger convention_receipts_no_truncate
  before truncate on pymem.convention_receipts
  for each statement execute function pymem._ledger_append_only();
comment on trigger convention_receipts_no_truncate on pymem.convention_receipts is 'Append-only, fires even in replica mode';
alter table pymem.convention_receipts enable always trigger convention_receipts_no_update_delete;
alter table pymem.convention_receipts enable always trigger convention_receipts_no_truncate;

create function pymem._convention_endings_before_insert() returns trigger
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
-- Invoker's rights: the receipt must be visible to the context that ends it. As for memories, an
-- adapter ends only the rules it filed; the operator any of the tenant's.
declare
  v_receipt pymem.convention_receipts;
begin
  select r.* into v_receipt from pymem.convention_receipts r
   where r.tenant_id = new.tenant_id and r.id = new.receipt_id
   order by r.version desc limit 1;
  if not found then
    raise exception 'pymem: no receipt % in this context', left(new.receipt_id, 100) using errcode = 'P0002';
  end if;
  if pymem._ctx_adapter() is not null and v_receipt.source_adapter is distinct from pymem._ctx_adapter() then
    raise exception 'pymem: receipt % was filed by another adapter; only it or the operator may end it',
                    left(new.receipt_id, 100) using errcode = '42501';
  end if;
  new.scope := v_receipt.scope;
  new.ended_at := now();
  return new;
end
$$;
comment on function pymem._convention_endings_before_insert() is 'An ending names a visible receipt the context may end, and takes its scope';

create trigger convention_endings_before_insert
  before insert on pymem.convention_endings
  for each row execute function pymem._convention_endings_before_insert();
comment on trigger convention_endings_before_insert on pymem.convention_endings is 'The receipt exists, may be ended here, and lends its scope';

create function pymem._convention_endings_chain() returns trigger
language plpgsql security definer
set search_path = pg_catalog, pg_temp
as $$
-- The ending's event carries the digest of the receipt version it ended (its content_hash) and
-- the ending's fields, which verification compares with the row.
declare
  v_events pymem._pending_event[];
begin
  select array_agg(row(n.tenant_id, 'convention.' || n.status, null, null, r.receipt_sha256, 0,
                       jsonb_build_object('receipt', n.receipt_id, 'version', r.version, 'status', n.status,
                                          'reason', n.reason, 'head_commit', n.head_commit,
                                          'scope', n.scope, 'source_adapter', n.source_adapter))::pymem._pending_event
                   order by n.receipt_id)
    into v_events
    from pymem_new_rows n
    join lateral (select x.version, x.receipt_sha256 from pymem.convention_receipts x
                   where x.tenant_id = n.tenant_id and x.id = n.receipt_id
                   order by x.version desc limit 1) r on true;
  if v_events is not null then
    perform pymem._append_events(v_events);
  end if;
  return null;
end
$$;
comment on function pymem._convention_endings_chain() is 'Chains a convention.retired or convention.expired event for every rule that ended';

create trigger convention_endings_chain
  after insert on pymem.convention_endings
  referencing new table as pymem_new_rows
  for each statement execute function pymem._convention_endings_chain();
comment on trigger convention_endings_chain on pymem.convention_endings is 'One ledger event per ended rule';

create trigger convention_endings_no_update_delete
  before update or delete on pymem.convention_endings
  for each row execute function pymem._ledger_append_only();
comment on trigger convention_endings_no_update_delete on pymem.convention_endings is 'Append-only, fires even in replica mode';
create trigger convention_endings_no_truncate
  before truncate on pymem.convention_endings
  for each statement execute function pymem._ledger_append_only();
comment on trigger convention_endings_no_truncate on pymem.convention_endings is 'Append-only, fires even in replica mode';
alter table pymem.convention_endings enable always trigger convention_endings_no_update_delete;
alter table pymem.convention_endings enable always trigger convention_endings_no_truncate;

create function pymem._fact_channel(p_tenant text) returns text
language sql stable security definer parallel safe
set search_path = pg_catalog, pg_temp
as $$
  -- A keyed digest: without the secret nobody can tell which channel belongs to which tenant,
  -- and a channel name is an identifier (at most 63 bytes). Truncated, so no length extension.
  select 'pymem_facts_' || left(encode(sha256(s.secret || '\x00'::bytea || convert_to(p_tenant, 'UTF8')), 'hex'), 32)
    from pymem.installation_secrets s where s.name = 'fact_channels'
$$;
comment on function pymem._fact_channel(text) is 'A tenant''s fact channel: a digest keyed by the installation secret (no role may call it; see pymem.fact_channel)';

create function pymem.fact_channel(p_tenant text) returns text
language plpgsql stable security definer
set search_path = pg_catalog, pg_temp
as $$
-- Any login may LISTEN on (or NOTIFY) any channel it can name: a context is told only its own
-- tenant's channel, so a login can name no other tenant's.
begin
  if p_tenant is null or p_tenant is distinct from pymem._ctx_tenant() then
    raise exception 'pymem: a fact channel is named only to a context of its own tenant' using errcode = '42501';
  end if;
  return pymem._fact_channel(p_tenant);
end
$$;
comment on function pymem.fact_channel(text) is 'The NOTIFY channel the context tenant''s shared facts are announced on (keyed by the installation secret); refused for any other tenant';

create function pymem._memories_fact_notify() returns trigger
language plpgsql security definer
set search_path = pg_catalog, pg_temp
as $$
-- The notification carries nothing (no id, no tenant): it only wakes a follower, which reads what
-- is new in its tenant's chain under its own context, so a NOTIFY sent by anyone else, replayed
-- or forged, delivers nothing old or foreign. Postgres delivers it only if the transaction
-- commits, once per transaction. Definer, to name the channel (pymem._fact_channel).
begin
  perform pg_notify(pymem._fact_channel(new.tenant_id), '');
  return null;
end
$$;
comment on function pymem._memories_fact_notify() is 'Wakes the followers of a tenant''s shared facts (an empty notification on its keyed channel)';

create trigger memories_fact_notify
  after insert on pymem.memories
  for each row when (new.kind = 'shared_fact')
  execute function pymem._memories_fact_notify();
comment on trigger memories_fact_notify on pymem.memories is 'Followers of shared facts learn of each new one when its transaction commits';

-- The quarantine (migration 0014).

create function pymem._quarantine_hash(q pymem.quarantine) returns bytea
language sql immutable parallel safe
set search_path = pg_catalog, pg_temp
as $$
  select sha256('\x0001'::bytea || pymem._b(q.tenant_id) || pymem._b(q.id) || pymem._b(q.scope) || pymem._b(q.kind)
                || pymem._b(q.content) || pymem._b(q.record) || pymem._b(q.embedding::text) || pymem._b(q.tags)
                || pymem._b(q.importance) || pymem._b(q.confidence) || pymem._b(q.origin::text)
                || pymem._b(q.source_adapter) || pymem._b(q.provenance) || pymem._b(q.injection_source)
                || pymem._b(q.policy_fingerprint) || pymem._b(q.reason) || pymem._b(q.signature)
                || pymem._b(q.score::text) || pymem._b(q.piece_digest)
                || pymem._b(extract(epoch from q.ttl)::text) || pymem._b(q.subject))
$$;
comment on function pymem._quarantine_hash(pymem.quarantine) is 'sha256 of a held note''s fields (its ttl and subject pseudonym among them) and the reason it was held (length-prefixed, version 1)';

-- Definer: an id is the tenant's, whichever scope holds it, so the check looks past the writer's
-- RLS (as the primary key of memories does). Bookkeeping is the database's: status, times, actor
-- and hash, whatever the statement said; only the definer functions move a decision. Who held and
-- who decided are kept as pseudonyms (as the ledger keeps them) and so is the subject key, so
-- pymem.erase_actor, which destroys the link, leaves no row naming the person.
create function pymem._quarantine_before_write() returns trigger
language plpgsql security definer
set search_path = pg_catalog, pg_temp
as $$
declare
  v_max interval;
  v_reason text;
begin
  if tg_op = 'INSERT' then
    if exists (select from pymem.memories m where m.tenant_id = new.tenant_id and m.id = new.id) then
      raise exception 'pymem: id % is already a memory of this tenant', left(new.id, 100)
        using errcode = '23505', constraint = 'quarantine_id_free';
    end if;
    -- the writer's ttl obeys the tenant's maximum now, as a memory write would (the release
    -- honours a maximum lowered since); no ttl means the tenant's default, from the release on
    if new.ttl is not null then
      if new.ttl <= interval '0' or new.ttl > interval '36500 days' then
        raise exception 'pymem: a ttl must be positive and at most 36500 days' using errcode = '22015';
      end if;
      select r.max_ttl into v_max from pymem.retention_policies r where r.tenant_id = new.tenant_id;
      if new.ttl > v_max then
        raise exception 'pymem: a ttl of % exceeds the tenant''s maximum of %', new.ttl, v_max using errcode = '22015';
      end if;
    end if;
    -- the subject key as memories keep it (pymem._memories_subject): the person's pseudonym
    if new.subject is not null and new.subject !~ '^p:[0-9a-f]{32}$' then
      if new.subject = '' or length(new.subject) > 256 or not pymem._is_plain_text(new.subject) then
        raise exception 'pymem: a subject key must be 1-256 characters without control or format characters'
          using errcode = '22023';
      end if;
      new.subject := pymem._pseudonym(new.tenant_id, new.subject);
    end if;
    new.status := 'held';
    new.held_at := now();
    -- (a row for another tenant gets no pseudonym: the insert policy refuses it next)
    new.held_by := case when new.tenant_id = pymem._ctx_tenant()
                        then pymem._pseudonym(new.tenant_id, pymem._ctx_actor()) end;
    new.decided_at := null;
    new.decided_by := null;
    new.decision_reason := null;
    new.erased_at := null;
    -- row(new.*)::pymem.quarantine: the shard's row type on Citus (see _memories_before_write)
    new.content_hash := pymem._quarantine_hash(row(new.*)::pymem.quarantine);
    return new;
  end if;
  if old.erased_at is not null then
    raise exception 'pymem: quarantined note % was erased', left(old.id, 100) using errcode = '55000';
  end if;
  if new.erased_at is not null then
    -- pymem.erase_actor (the owner's; no other role may update): what the note said goes, and what
    -- the writer gave beside it, whatever its status; a held note is rejected with the erasure's
    -- reason (chained as quarantine.rejected). The hash stays for the chain.
    v_reason := new.decision_reason;
    new := old;
    new.erased_at := now();
    new.content := null;
    new.record := null;
    new.embedding := null;
    new.tags := '{}';
    new.provenance := jsonb_strip_nulls(jsonb_build_object('origin', old.provenance -> 'origin',
                                                           'adapter', old.provenance -> 'adapter'));
    if old.status = 'held' then
      new.status := 'rejected';
      new.decided_at := now();
      new.decided_by := pymem._pseudonym(new.tenant_id, pymem._ctx_actor());
      new.decision_reason := v_reason;
    end if;
    return new;
  end if;
  if old.status <> 'held' then
    raise exception 'pymem: quarantined note % was already %', left(old.id, 100), old.status using errcode = '55000';
  end if;
  if new.status = 'held'
     or row(new.tenant_id, new.hold_id, new.id, new.scope, new.kind, new.tags, new.importance, new.confidence, new.origin,
            new.source_adapter, new.provenance, new.injection_source, new.policy_fingerprint, new.embedder, new.ttl,
            new.subject, new.reason, new.signature, new.score, new.piece_digest, new.held_at, new.held_by)
        is distinct from
        row(old.tenant_id, old.hold_id, old.id, old.scope, old.kind, old.tags, old.importance, old.confidence, old.origin,
            old.source_adapter, old.provenance, old.injection_source, old.policy_fingerprint, old.embedder, old.ttl,
            old.subject, old.reason, old.signature, old.score, old.piece_digest, old.held_at, old.held_by) then
    raise exception 'pymem: a quarantined note is only released or rejected, never edited' using errcode = '22023';
  end if;
  -- Decided: the note leaves (into memories, or nowhere); its hash stays for the chain.
  new.content := null;
  new.record := null;
  new.embedding := null;
  new.decided_at := now();
  new.decided_by := pymem._pseudonym(new.tenant_id, pymem._ctx_actor());
  new.content_hash := old.content_hash;
  return new;
end
$$;
comment on function pymem._quarantine_before_write() is 'Sets a held note''s status, times, actors (pseudonyms), subject pseudonym and hash; checks its ttl against the tenant''s maximum; refuses an id already used by a memory; a decision only clears the content, an erasure what the writer gave';

create trigger quarantine_before_write
  before insert or update on pymem.quarantine
  for each row execute function pymem._quarantine_before_write();
comment on trigger quarantine_before_write on pymem.quarantine is 'Bookkeeping and hash of every held note; decisions only through the definer functions';

-- The same rules as a memory: origin operator only from an untagged operator context, and a
-- session named in the provenance must be started and not incognito.
create trigger quarantine_operator_origin
  before insert on pymem.quarantine
  for each row when (new.origin = 'operator' or (new.provenance ->> 'origin') = 'operator')
  execute function pymem._memories_operator_origin();
comment on trigger quarantine_operator_origin on pymem.quarantine is 'Origin operator only on untagged notes written by an operator context';
create trigger quarantine_session_insert
  before insert on pymem.quarantine
  for each row when (new.provenance ? 'session_id')
  execute function pymem._memories_session_check();
comment on trigger quarantine_session_insert on pymem.quarantine is 'A held note written on behalf of a session names a started, non-incognito session of its tenant';

-- Definer, like the memories chain: the app role cannot append to the ledger itself.
create function pymem._quarantine_chain() returns trigger
language plpgsql security definer
set search_path = pg_catalog, pg_temp
as $$
-- Each event carries the note's scope and source adapter: the ledger's read policy shows it only
-- to contexts that could read the note. The details hold names, scores and digests, never content.
declare
  v_events pymem._pending_event[];
begin
  if tg_op = 'INSERT' then
    select array_agg(row(n.tenant_id, 'quarantine.held', n.id, null, n.content_hash, 0,
                         jsonb_build_object('decision', 'quarantined', 'origin', n.origin, 'reason', n.reason,
                                            'signature', n.signature, 'score', n.score,
                                            'piece_digest', n.piece_digest,
                                            'policy_fingerprint', n.policy_fingerprint,
                                            'scope', n.scope, 'source_adapter', n.source_adapter))::pymem._pending_event)
      into v_events from pymem_new_rows n;
  else
    select array_agg(row(n.tenant_id, 'quarantine.' || n.status, n.id, null, n.content_hash, 0,
                         jsonb_build_object('reason', n.decision_reason, 'scope', n.scope,
                                            'source_adapter', n.source_adapter))::pymem._pending_event)
      into v_events
      from pymem_new_rows n join pymem_old_rows o on o.tenant_id = n.tenant_id and o.hold_id = n.hold_id
     where o.status <> n.status;
  end if;
  if v_events is not null then
    perform pymem._append_events(v_events);
  end if;
  return null;
end
$$;
comment on function pymem._quarantine_chain() is 'Chains quarantine.held for every held note and quarantine.released / rejected for every decision';

create trigger quarantine_chain_insert
  after insert on pymem.quarantine
  referencing new table as pymem_new_rows
  for each statement execute function pymem._quarantine_chain();
comment on trigger quarantine_chain_insert on pymem.quarantine is 'One quarantine.held event per held note, in the same transaction';
create trigger quarantine_chain_update
  after update on pymem.quarantine
  referencing old table as pymem_old_rows new table as pymem_new_rows
  for each statement execute function pymem._quarantine_chain();
comment on trigger quarantine_chain_update on pymem.quarantine is 'One quarantine.released / quarantine.rejected event per decision';
create trigger quarantine_no_delete
  before delete or truncate on pymem.quarantine
  for each statement execute function pymem._ledger_append_only();
comment on trigger quarantine_no_delete on pymem.quarantine is 'A held note is decided, never deleted: its row is the record of the decision';
alter table pymem.quarantine enable always trigger quarantine_no_delete;

-- ============================================================================================
-- 7. verbs and views
-- ============================================================================================

create function pymem.verify_chain(p_tenant text default null)
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
-- event (the version its hash was computed with). An entry written before migration 0013
-- (actor e:<token>) is hashed with the id behind its pseudonym; once that person was erased, with
-- the seal their erasure chained (step 1b). Returns one row per tenant; problem is NULL when the
-- tenant is clean, else the first fault.
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
      -- row(l.*)::pymem.ledger, not l: pushed down to a Citus shard, l has the shard's row type
      from (select row(l.*)::pymem.ledger as entry, l.seq, l.memory_id, l.prev_hash, l.chain_hash, l.hash_version,
                   l.actor like 'e:%' as escrowed, a.actor as escrowed_actor,
                   row_number() over (order by l.seq) as expected_seq,
                   coalesce(lag(l.chain_hash) over (order by l.seq), pymem._genesis_hash(l.tenant_id)) as expected_prev
              from pymem.ledger l
              left join pymem.actor_pseudonyms a
                on a.tenant_id = l.tenant_id and l.actor like 'e:%' and a.token = substr(l.actor, 3)
             where l.tenant_id = t.tenant_id) c
     where c.seq <> c.expected_seq or c.prev_hash <> c.expected_prev or c.hash_version not in (1, 2)
        or (not (c.escrowed and c.escrowed_actor is null)  -- an erased person's: step 1b
            and c.chain_hash <> sha256(c.prev_hash || case when c.escrowed then pymem._event_bytes_as(c.entry, c.escrowed_actor)
                                                           when c.hash_version = 2 then pymem._event_bytes_v2(c.entry)
                                                           else pymem._event_bytes_v1(c.entry) end))
     order by c.seq limit 1;
    if found then
      bad_seq := v_bad.seq; bad_memory_id := v_bad.memory_id; problem := v_bad.what;
      return next; continue;
    end if;

    -- 1b. an erased person's entries from before migration 0013 (e:<token> whose id is gone):
    --     each as it stays, against the seal their erasure (actor.erased) chained
    select s.first_seq into v_bad
      from (select substr(l.actor, 3) as token, min(l.seq) as first_seq, count(*) as n,
                   sha256(string_agg(int8send(l.seq) || sha256(l.prev_hash || pymem._event_bytes(row(l.*)::pymem.ledger)), ''::bytea
                                     order by l.seq)) as seal
              from pymem.ledger l
             where l.tenant_id = t.tenant_id and l.actor like 'e:%'
               and not exists (select from pymem.actor_pseudonyms a
                                where a.tenant_id = l.tenant_id and a.token = substr(l.actor, 3))
             group by 1) s
      left join lateral (select x.details from pymem.ledger x
                          where x.tenant_id = t.tenant_id and x.event = 'actor.erased'
                            and x.details ->> 'pseudonym' = s.token
                          order by x.seq limit 1) er on true
     where er.details is null or (er.details ->> 'legacy_seal') is distinct from encode(s.seal, 'hex')
        or (er.details ->> 'legacy_entries')::bigint is distinct from s.n
     order by s.first_seq limit 1;
    if found then
      bad_seq := v_bad.first_seq;
      problem := 'entries of an erased actor do not match the seal of their erasure';
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
                     and m.content_hash <> case last.hash_version when 1 then pymem._content_hash_v1(row(m.*)::pymem.memories)
                                                                  else pymem._content_hash_v2(row(m.*)::pymem.memories) end
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
                and m.content_hash <> case last.hash_version when 1 then pymem._content_hash_v1(row(m.*)::pymem.memories)
                                                             else pymem._content_hash_v2(row(m.*)::pymem.memories) end)
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

-- Search. HNSW checks RLS, the tenant and the scope only *after* it fetched candidates, so a
-- plain filtered HNSW scan silently returns fewer than top_k rows for a small tenant or scope.
-- And under RLS the planner cannot see the tenant's size (the policy's tenant is a run-time
-- value), so it guesses the same plan for every tenant. pymem.search therefore chooses the plan
-- itself from an exact count, and top_k always counts rows the caller may see.

create type pymem.search_hit as (
  id text,
  record jsonb,
  content text,
  kind text,
  tags text[],
  scope jsonb,
  origin pymem.origin,
  provenance jsonb,
  confidence real,
  source_adapter text,
  injection_source text,
  policy_fingerprint text,
  created_at timestamptz,
  revision integer,
  score double precision
);
comment on type pymem.search_hit is 'One pymem.search result: what recall needs of the row, and its cosine similarity (1 - cosine distance)';

create function pymem._search_ef(p_top_k integer) returns integer
language sql immutable parallel safe
set search_path = pg_catalog, pg_temp
as $$ select least(1000, greatest(200, 2 * p_top_k)) $$;
comment on function pymem._search_ef(integer) is 'hnsw.ef_search for a top_k: the default 40 gave recall@10 of 0.85-0.94 on filtered scans and 100 about 0.95 (measured, 100k x 384); 200 keeps it above';

-- A function's SET clause may name hnsw.* only once pgvector's library has defined those
-- settings in this session; a cast to vector loads it.
do $$ begin perform '[1]'::vector; end $$;

create function pymem._search_in_scope(
  p_query vector,
  p_top_k integer,
  p_scope_filter jsonb,
  p_include_superseded boolean,
  p_cap bigint
) returns text[]
language plpgsql stable security definer
-- As in pymem.search: the count decides, so the generic plans are safe; both statements can only
-- be bitmap scans of the two scope indexes (no sequential scan, no index scan, hence no HNSW).
set plan_cache_mode = force_generic_plan
set enable_seqscan = off
set enable_indexscan = off
set search_path = pg_catalog, pg_temp
as $$
-- pymem.search's exact plan for a scoped search, reading only the rows in scope: the ids of the
-- context's p_top_k rows closest to p_query (the order pymem.search returns them in) among those
-- whose scope contains p_scope_filter. NULL instead when p_cap is set and the rows in scope may
-- be p_cap or more (by pymem.scope_rows): the caller then takes the HNSW plan.
--
-- Definer, because jsonb @> is not leakproof: under the caller's row-level security the scope
-- condition can never become an index condition, and every row of the tenant would be read. It
-- therefore applies the read policy (pymem.memories_read) itself: the context's tenant, scope and
-- read allow-list; and pymem.search reads the rows it names back under the caller's row-level
-- security, so what the caller may not see is never returned even if the two ever disagreed.
-- The index key carries the tenant under the key '', which no scope has.
declare
  v_tenant text := pymem._ctx_tenant();
  v_scope jsonb := pymem._ctx_scope();
  v_read text[] := pymem._ctx_read_adapters();
  v_key jsonb;
  v_rows bigint;
  v_ids text[];
begin
  if p_scope_filter is null or (p_scope_filter <> '{}'::jsonb and not pymem._scope_is_flat(p_scope_filter)) then
    raise exception 'pymem: the scope filter must be a flat object of non-empty string values' using errcode = '22023';
  end if;
  v_key := v_scope || p_scope_filter;
  -- no tenant; a context scope no row has ({"": ""}, see pymem._ctx_scope); a filter giving an
  -- axis of the context scope another value: nothing is in scope
  if v_tenant is null or v_scope ? '' or not v_key @> v_scope then
    return '{}';
  end if;
  v_key := v_key || jsonb_object(array['', v_tenant]);
  if p_cap is not null then
    select coalesce(sum(c.live_rows), 0) into v_rows
      from (select s.live_rows from pymem.scope_rows s
             where (s.scope || jsonb_object(array['', s.tenant_id])) @> v_key
               and (v_read is null or s.source_adapter = any (v_read))
             limit p_cap) c;
    if v_rows >= p_cap then
      return null;
    end if;
  end if;
  select array_agg(t.id order by t.distance, t.id) into v_ids
    from (select m.id, m.embedding <=> p_query as distance
            from pymem.memories m
           where (m.scope || jsonb_object(array['', m.tenant_id])) @> v_key
             and m.erased_at is null
             and (m.expires_at is null or m.expires_at > now())  -- retention: not expired
             and (p_include_superseded or m.invalidated_at is null)
             and m.embedding is not null
             and (v_read is null or m.source_adapter = any (v_read))
           order by 2, 1
           limit p_top_k) t;
  return coalesce(v_ids, '{}');
end
$$;
comment on function pymem._search_in_scope(vector, integer, jsonb, boolean, bigint) is 'Scoped exact search through the scope index, applying the read policy itself (definer); NULL when the scope holds p_cap rows or more';

-- The store's embedder (pymem/storage/embedding.py checks it) and its text-search configuration.

create function pymem.claim_embedder(p_name text, p_dim integer) returns text
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp
as $$
-- The store's embedder: p_name becomes it if none is recorded yet and p_dim is the store's
-- dimension; returns the recorded name either way (the caller compares). Definer: the app role
-- may not write pymem.store_info, and this can only fill an empty field.
begin
  if p_name is null or p_name = '' or length(p_name) > 100 then
    raise exception 'pymem: an embedder name is 1 to 100 characters' using errcode = '22023';
  end if;
  update pymem.store_info set embedder = p_name where embedder is null and embedding_dim = p_dim;
  return (select embedder from pymem.store_info);
end
$$;
comment on function pymem.claim_embedder(text, integer) is 'Records the store''s embedder if none is recorded (and the dimension matches); returns the recorded one';

create function pymem.record_reembedded(p_name text) returns text
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp
as $$
-- After `pymem reembed`: p_name becomes the store's embedder once no live row of any tenant holds
-- a vector another embedder computed from its content (NULL-embedder rows with a vector-free
-- record count as such: the gate wrote them before 0011). Returns the recorded name. Definer:
-- it reads every tenant's rows, and it can only record what the rows already say.
begin
  if p_name is null or p_name = '' or length(p_name) > 100 then
    raise exception 'pymem: an embedder name is 1 to 100 characters' using errcode = '22023';
  end if;
  if not exists (select from pymem.memories m
                  where m.erased_at is null and m.embedding is not null and m.content is not null
                    and (m.embedder is distinct from p_name)
                    and (m.embedder is not null or m.record_lite is null)) then
    update pymem.store_info set embedder = p_name;
  end if;
  return (select embedder from pymem.store_info);
end
$$;
comment on function pymem.record_reembedded(text) is 'Records p_name as the store''s embedder once every content-embedded live row was embedded by it; returns the recorded one';

create function pymem.set_text_search_config(p_config regconfig) returns void
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp
as $$
-- A configuration is chosen before the first memory: rows indexed in one configuration are not
-- found by queries parsed in another (stemming differs), and re-indexing would re-chain every row.
begin
  if p_config is null then
    raise exception 'pymem: a text-search configuration is required' using errcode = '22023';
  end if;
  if exists (select from pymem.memories) then
    raise exception 'pymem: the text-search configuration can only be changed while the store holds no memory'
      using errcode = '55000';
  end if;
  update pymem.store_info set text_search_config = p_config;
end
$$;
comment on function pymem.set_text_search_config(regconfig) is 'Sets the store''s text-search configuration while it holds no memory (owner only)';

-- Hybrid search: BM25 candidates and their fusion with the vector ranking (see pymem.search).

create function pymem._vector_ranking(
  p_query vector,
  p_top_k integer,
  p_scope_filter jsonb,
  p_include_superseded boolean,
  p_plan text,
  p_exact_below bigint,
  p_ef_search integer,
  p_max_scan_tuples integer
) returns table (id text, distance double precision)
language plpgsql stable security invoker
-- pymem.search's settings, for the same plans (see there)
set plan_cache_mode = force_generic_plan
set enable_seqscan = off
set enable_sort = on
set enable_indexscan = on
set hnsw.iterative_scan = 'relaxed_order'
set hnsw.ef_search = 40
set hnsw.max_scan_tuples = 20000
set search_path = pg_catalog, pg_temp
as $$
-- The ids and cosine distances of the rows pymem.search (vector mode, the same checks) returns,
-- in its order (distance, then id): the ranking pymem._search_hybrid fuses, without the rows. The
-- same plan choice, iterative HNSW scan with its fallback to exact, scoped exact search and
-- complete top_k, under the caller's row-level security; keep the two in step. An expired row is
-- left out by each read as well as by the read policy, so no caller (the owner's policy shows
-- every row) is ranked one. Stable, so it reads with the snapshot of the statement that calls it.
declare
  v_tenant text := pymem._ctx_tenant();
  v_rows bigint;
  v_table_rows double precision;
  v_cap bigint;
  v_plan text := p_plan;
  v_scoped boolean;
  v_ids text[];
  v_dist double precision[];
  v_any_scope boolean := p_scope_filter = '{}'::jsonb;
begin
  -- pymem.search's checks, for a caller of pymem._search_hybrid itself
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
    return;
  end if;
  select h.live_rows into v_rows from pymem.chain_heads h where h.tenant_id = v_tenant;
  if coalesce(v_rows, 0) = 0 then
    return;
  end if;
  v_scoped := (p_plan <> 'auto' or v_rows >= p_exact_below)
              and (not v_any_scope or pymem._ctx_scope() <> '{}'::jsonb);
  if p_plan = 'auto' then
    v_plan := 'exact';
    if v_rows >= p_exact_below then
      select greatest(c.reltuples, v_rows) into v_table_rows
        from pg_catalog.pg_class c where c.oid = 'pymem.memories'::regclass;
      v_cap := greatest(p_exact_below, ceil(sqrt(8.0 * p_top_k * v_table_rows))::bigint);
      if v_scoped then
        v_ids := pymem._search_in_scope(p_query, p_top_k, p_scope_filter, p_include_superseded, v_cap);
        v_plan := case when v_ids is null then 'hnsw' else 'scope' end;
      elsif v_rows >= v_cap then
        v_plan := 'hnsw';
      end if;
    end if;
  end if;

  if v_plan = 'hnsw' then
    perform set_config('hnsw.ef_search', coalesce(p_ef_search, pymem._search_ef(p_top_k))::text, true),
            set_config('hnsw.max_scan_tuples', p_max_scan_tuples::text, true),
            set_config('enable_sort', 'off', true);
    with candidates as materialized (
      select m.id, m.embedding <=> p_query as distance
        from pymem.memories m
       where m.tenant_id = v_tenant
         and (v_any_scope or m.scope @> p_scope_filter)
         and m.erased_at is null
         and (m.expires_at is null or m.expires_at > now())  -- retention: not expired
         and (p_include_superseded or m.invalidated_at is null)
       order by m.embedding <=> p_query
       limit p_top_k)
    select array_agg(c.id order by c.distance + 0, c.id), array_agg(c.distance order by c.distance + 0, c.id)
      into v_ids, v_dist
      from candidates c
     where c.distance <> 'NaN'::double precision;
    perform set_config('enable_sort', 'on', true);
    if coalesce(cardinality(v_ids), 0) >= p_top_k then
      return query select u.id, u.distance from unnest(v_ids, v_dist) u(id, distance);
      return;
    end if;
    v_plan := 'exact';
  end if;

  if v_plan = 'exact' and v_scoped then
    v_ids := pymem._search_in_scope(p_query, p_top_k, p_scope_filter, p_include_superseded, null);
    v_plan := 'scope';
  end if;
  if v_plan = 'scope' then
    return query
      select m.id, d.distance
        from pymem.memories m
             cross join lateral (select m.embedding <=> p_query as distance) d
       where m.tenant_id = v_tenant and m.id = any (v_ids)
         and m.erased_at is null
         and (m.expires_at is null or m.expires_at > now())  -- retention: not expired
         and (p_include_superseded or m.invalidated_at is null)
         and (v_any_scope or m.scope @> p_scope_filter)
         and d.distance <> 'NaN'::double precision
       order by d.distance, m.id;
    return;
  end if;

  perform set_config('enable_indexscan', 'off', true);
  return query
    select t.id, t.distance
      from (select m.id, m.embedding <=> p_query as distance
              from pymem.memories m
             where m.tenant_id = v_tenant
               and (v_any_scope or m.scope @> p_scope_filter)
               and m.erased_at is null
               and (m.expires_at is null or m.expires_at > now())  -- retention: not expired
               and (p_include_superseded or m.invalidated_at is null)
               and m.embedding is not null
             order by 2, 1
             limit p_top_k) t
     where t.distance <> 'NaN'::double precision
     order by t.distance, t.id;
end
$$;
comment on function pymem._vector_ranking(vector, integer, jsonb, boolean, text, bigint, integer, integer) is 'pymem.search''s vector ranking as (id, distance) pairs, for the hybrid search to fuse; same plans, under the caller''s RLS';

create function pymem._text_candidates(
  p_text text,
  p_limit integer,
  p_scope_filter jsonb,
  p_include_superseded boolean
) returns table (id text, score double precision)
language plpgsql stable security definer
set search_path = pg_catalog, pg_temp
as $$
-- The p_limit rows of the context that rank best for p_text by BM25 (k1 1.2, b 0.75), best
-- first: the words of p_text in the store's configuration, ORed; a row matches if it holds any.
-- Document frequencies and lengths are counted over the rows the context may read, in scope, so
-- the ranking of what a caller sees says nothing about rows it cannot see.
--
-- Definer, because the text match (@@) is not leakproof: under the caller's row-level security
-- it could never be an index condition and every row of the tenant would be read. It therefore
-- applies the read policy (pymem.memories_read) itself, as pymem._search_in_scope does, and
-- pymem._search_hybrid reads the rows back under the caller's row-level security.
declare
  v_tenant text := pymem._ctx_tenant();
  v_scope jsonb := pymem._ctx_scope();
  v_read text[] := pymem._ctx_read_adapters();
  v_config regconfig := (select s.text_search_config from pymem.store_info s);
  v_key jsonb;
  v_terms text[];
  v_match tsquery;
  v_rows double precision;
begin
  if p_scope_filter is null or (p_scope_filter <> '{}'::jsonb and not pymem._scope_is_flat(p_scope_filter)) then
    raise exception 'pymem: the scope filter must be a flat object of non-empty string values' using errcode = '22023';
  end if;
  v_key := v_scope || p_scope_filter;
  if v_tenant is null or v_scope ? '' or not v_key @> v_scope or p_text is null or p_limit is null or p_limit < 1 then
    return;
  end if;
  v_key := v_key || jsonb_object(array['', v_tenant]);
  -- at most 64 distinct words (a longer query adds little and costs a posting list each)
  select array_agg(w.lexeme) into v_terms
    from (select u.lexeme from unnest(to_tsvector(v_config, left(p_text, 10000))) u limit 64) w;
  if v_terms is null then
    return;
  end if;
  -- each word quoted as a tsquery lexeme (quotes doubled, backslashes escaped), ORed, and ANDed
  -- with the tenant's lexeme so the GIN index returns this tenant's rows only
  select (string_agg('''' || replace(replace(t, '\', '\\'), '''', '''''') || '''', ' | '))::tsquery
    into v_match from unnest(v_terms) t;
  v_match := ('''' || pymem._tenant_lexeme(v_tenant) || '''')::tsquery && v_match;
  -- the number of rows in play, for the inverse document frequencies
  if v_key = jsonb_object(array['', v_tenant]) and v_read is null then
    select h.live_rows into v_rows from pymem.chain_heads h where h.tenant_id = v_tenant;
  else
    select coalesce(sum(s.live_rows), 0) into v_rows from pymem.scope_rows s
     where (s.scope || jsonb_object(array['', s.tenant_id])) @> v_key
       and (v_read is null or s.source_adapter = any (v_read));
  end if;
  return query
    with matched as (
      -- each row's length, and of its postings only those of the query's words: setweight marks
      -- them (to_tsvector gives every position weight D) and ts_filter keeps what is marked, so
      -- no row's whole tsvector is unnested
      select m.id, length(m.search_text) as dl, ts_filter(setweight(m.search_text, 'A', v_terms), '{a}') as words
        from pymem.memories m
       where m.search_text @@ v_match
         and m.tenant_id = v_tenant
         -- the key without its tenant: the same test as the scope index's expression, but one no
         -- index answers, so the rows come from the text index, the ones holding a word
         and m.scope @> (v_key - '')
         and m.erased_at is null
         and (m.expires_at is null or m.expires_at > now())  -- retention: not expired
         and (p_include_superseded or m.invalidated_at is null)
         and m.embedding is not null
         and (v_read is null or m.source_adapter = any (v_read))),
    lengths as (
      select avg(x.dl)::double precision as avgdl from matched x),
    hits as (
      select x.id, u.lexeme, coalesce(cardinality(u.positions), 1) as tf, x.dl
        from matched x cross join lateral unnest(x.words) u),
    df as (
      select h.lexeme, count(*)::double precision as n from hits h group by h.lexeme)
    select h.id,
           sum(ln(1 + (greatest(v_rows, d.n) - d.n + 0.5) / (d.n + 0.5))
               * h.tf * 2.2 / (h.tf + 1.2 * (0.25 + 0.75 * h.dl / greatest(l.avgdl, 1))))::double precision
      from hits h join df d on d.lexeme = h.lexeme cross join lengths l
     group by h.id
     order by 2 desc, 1
     limit p_limit;
end
$$;
comment on function pymem._text_candidates(text, integer, jsonb, boolean) is 'BM25 full-text candidates of a hybrid search, applying the read policy itself (definer); best first';

create function pymem._search_hybrid(
  p_query vector,
  p_text text,
  p_top_k integer,
  p_scope_filter jsonb,
  p_include_superseded boolean,
  p_with_vectors boolean,
  p_plan text,
  p_exact_below bigint,
  p_ef_search integer,
  p_max_scan_tuples integer,
  p_text_weight double precision,
  p_rrf_k double precision
) returns setof pymem.search_hit
language plpgsql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
-- pymem.search with a query text: the vector ranking (pymem._vector_ranking: pymem.search's own,
-- so the same plans, scope handling and complete top_k) and the BM25 ranking
-- (pymem._text_candidates) of the same context, each cut at v_pool rows, fused in one of two ways:
-- * by score (p_rrf_k NULL): a row scores its cosine similarity + p_text_weight x its BM25 score
--   over the best BM25 score of the query (so the best word match gains p_text_weight, a row
--   matching no word nothing); that fused score is the row's score. It needs p_text_weight on the
--   embedder's cosine scale (the library passes the one calibrated for its embedder).
-- * by reciprocal rank (p_rrf_k given): 1 / (p_rrf_k + its vector rank) + p_text_weight /
--   (p_rrf_k + its text rank) (ranks from 1; a ranking it is absent from adds nothing); the score
--   is the cosine similarity.
-- The p_top_k best come back in fused order, read back under the caller's row-level security. The
-- vector ranking alone returns min(p_top_k, the rows in play) rows, so the fused result is as complete.
--
-- The fused order is known before any row is read: a row of the vector ranking brings its cosine
-- (1 - its distance), and only a row found by its words alone has its vector read, by its key.
-- The candidates are then walked in that order and each row read by its key (a lateral lookup the
-- planner cannot turn into a join of the whole tenant) until p_top_k are found.
declare
  v_tenant text := pymem._ctx_tenant();
  v_pool integer := least(1000, greatest(4 * p_top_k, 50));
  v_any_scope boolean := p_scope_filter = '{}'::jsonb;
begin
  if p_text_weight is null or p_text_weight < 0 or p_text_weight = 'Infinity'::double precision
     or p_rrf_k < 0 or p_rrf_k = 'Infinity'::double precision then
    raise exception 'pymem: the text weight and the fusion constant must be finite and not negative' using errcode = '22023';
  end if;
  if v_tenant is null then
    return;
  end if;
  return query
    with vec as (
      select h.id, h.distance, row_number() over (order by 1 - h.distance desc, h.id) as r
        from pymem._vector_ranking(p_query, v_pool, p_scope_filter, p_include_superseded, p_plan, p_exact_below,
                                   p_ef_search, p_max_scan_tuples) h),
    txt as (
      select c.id, row_number() over (order by c.score desc, c.id) as r,
             c.score / nullif(max(c.score) over (), 0) as share  -- of the best word match
        from pymem._text_candidates(p_text, v_pool, p_scope_filter, p_include_superseded) c),
    fused as (
      -- the order key; by score, a row the vector ranking missed reads its vector by its key
      select coalesce(v.id, t.id) as id,
             case when p_rrf_k is null
                  then coalesce(1 - v.distance,
                                (select 1 - (m.embedding <=> p_query) from pymem.memories m
                                  where m.tenant_id = v_tenant and m.id = t.id))
                       + p_text_weight * coalesce(t.share, 0)
                  else coalesce(1.0 / (p_rrf_k + v.r), 0) + p_text_weight * coalesce(1.0 / (p_rrf_k + t.r), 0)
             end as fused
        from vec v full join txt t on t.id = v.id)
    select m.id, case when p_with_vectors then m.record else coalesce(m.record_lite, m.record) end,
           m.content, m.kind, m.tags, m.scope, m.origin, m.provenance, m.confidence, m.source_adapter,
           m.injection_source, m.policy_fingerprint, m.created_at, m.revision,
           case when p_rrf_k is null then f.fused else 1 - (m.embedding <=> p_query) end
      from (select f.id, f.fused from fused f order by f.fused desc, f.id) f
           cross join lateral (
             select m.* from pymem.memories m
              where m.tenant_id = v_tenant and m.id = f.id
                and m.erased_at is null
                and (p_include_superseded or m.invalidated_at is null)
                and (v_any_scope or m.scope @> p_scope_filter)
              limit 1) m
     order by f.fused desc, f.id
     limit p_top_k;
end
$$;
comment on function pymem._search_hybrid(vector, text, integer, jsonb, boolean, boolean, text, bigint, integer, integer, double precision, double precision) is 'Hybrid search: pymem.search''s vector ranking and the BM25 ranking fused by score (p_rrf_k NULL) or by reciprocal rank, under the caller''s RLS';

create function pymem.search(
  p_query vector,
  p_top_k integer,
  p_scope_filter jsonb default '{}'::jsonb,
  p_include_superseded boolean default false,
  p_with_vectors boolean default true,
  p_plan text default 'auto',
  p_exact_below bigint default 2000,
  p_ef_search integer default null,
  p_max_scan_tuples integer default 20000,
  p_text text default null,
  p_text_weight double precision default 1.0,
  p_rrf_k double precision default 10
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
-- Plan (p_plan 'auto'), from the number n of rows the search can match: exact (every such row,
-- sorted by distance) when n is small, else HNSW with an iterative scan, re-sorted, falling back
-- to exact whenever the scan ran out of candidates before finding p_top_k rows. An HNSW visit
-- costs about 8 exact row visits and a scan visits about top_k * table_rows / n tuples, so exact
-- wins while n < cap = max(p_exact_below, sqrt(8 * top_k * table_rows)). Without a scope (no
-- filter, whole-tenant context) n is the tenant's live row count and exact reads the tenant's
-- rows by the primary key. With one, in a tenant of p_exact_below rows or more, n is the number
-- of rows in scope, counted up to cap from pymem.scope_rows, and exact reads only those rows,
-- through the scope index (pymem._search_in_scope); a small tenant is read whole, as unscoped.
-- 'exact' and 'hnsw' force a plan (tests, benchmarks); 'hnsw' still falls back.
--
-- Hybrid (p_text given, the query's words): this vector ranking fused with a BM25 ranking of
-- p_text by reciprocal rank (pymem._search_hybrid; p_text_weight weighs the text ranking, p_rrf_k
-- is the fusion constant, tuned on held-out conversations: README, "Recall on LoCoMo"); score is
-- still the cosine similarity, and the rows come in fused order. Without p_text: vectors only.
declare
  v_tenant text := pymem._ctx_tenant();
  v_rows bigint;
  v_table_rows double precision;
  v_cap bigint;
  v_plan text := p_plan;  -- then the plan taken: 'exact', 'hnsw' or 'scope' (exact through the scope index)
  v_scoped boolean;  -- a scope filter or context scope narrows the search
  v_ids text[];  -- what pymem._search_in_scope found
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
  if p_text is not null then
    return query select * from pymem._search_hybrid(p_query, p_text, p_top_k, p_scope_filter, p_include_superseded,
                                                    p_with_vectors, p_plan, p_exact_below, p_ef_search,
                                                    p_max_scan_tuples, p_text_weight, p_rrf_k);
    return;
  end if;
  select h.live_rows into v_rows from pymem.chain_heads h where h.tenant_id = v_tenant;
  if coalesce(v_rows, 0) = 0 then
    return;
  end if;
  v_scoped := (p_plan <> 'auto' or v_rows >= p_exact_below)
              and (not v_any_scope or pymem._ctx_scope() <> '{}'::jsonb);
  if p_plan = 'auto' then
    v_plan := 'exact';
    if v_rows >= p_exact_below then
      select greatest(c.reltuples, v_rows) into v_table_rows
        from pg_catalog.pg_class c where c.oid = 'pymem.memories'::regclass;
      v_cap := greatest(p_exact_below, ceil(sqrt(8.0 * p_top_k * v_table_rows))::bigint);
      if v_scoped then
        v_ids := pymem._search_in_scope(p_query, p_top_k, p_scope_filter, p_include_superseded, v_cap);
        v_plan := case when v_ids is null then 'hnsw' else 'scope' end;
      elsif v_rows >= v_cap then
        v_plan := 'hnsw';
      end if;
    end if;
  end if;

  if v_plan = 'hnsw' then
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
    v_plan := 'exact';
  end if;

  if v_plan = 'exact' and v_scoped then
    v_ids := pymem._search_in_scope(p_query, p_top_k, p_scope_filter, p_include_superseded, null);
    v_plan := 'scope';
  end if;
  if v_plan = 'scope' then
    -- The rows pymem._search_in_scope named, read back under the caller's row-level security.
    return query
      select m.id, case when p_with_vectors then m.record else coalesce(m.record_lite, m.record) end,
             m.content, m.kind, m.tags, m.scope, m.origin, m.provenance, m.confidence, m.source_adapter,
             m.injection_source, m.policy_fingerprint, m.created_at, m.revision, 1 - d.distance
        from pymem.memories m
             cross join lateral (select m.embedding <=> p_query as distance) d
       where m.tenant_id = v_tenant and m.id = any (v_ids)
         and m.erased_at is null
         and (p_include_superseded or m.invalidated_at is null)
         and (v_any_scope or m.scope @> p_scope_filter)
         and d.distance <> 'NaN'::double precision
       order by d.distance, m.id;
    return;
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
comment on function pymem.search(vector, integer, jsonb, boolean, boolean, text, bigint, integer, integer, text, double precision, double precision) is 'Cosine search under RLS (security invoker), fused with a BM25 ranking of p_text when given; top_k counts in-scope rows; exact or iterative HNSW chosen per query from the number of rows it can match (in scope when scoped)';

create function pymem.search_as(
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
-- Plan (p_plan 'auto'), from the number n of rows the search can match: exact (every such row,
-- sorted by distance) when n is small, else HNSW with an iterative scan, re-sorted, falling back
-- to exact whenever the scan ran out of candidates before finding p_top_k rows. An HNSW visit
-- costs about 8 exact row visits and a scan visits about top_k * table_rows / n tuples, so exact
-- wins while n < cap = max(p_exact_below, sqrt(8 * top_k * table_rows)). Without a scope (no
-- filter, whole-tenant context) n is the tenant's live row count and exact reads the tenant's
-- rows by the primary key. With one, in a tenant of p_exact_below rows or more, n is the number
-- of rows in scope, counted up to cap from pymem.scope_rows, and exact reads only those rows,
-- through the scope index (pymem._search_in_scope); a small tenant is read whole, as unscoped.
-- 'exact' and 'hnsw' force a plan (tests, benchmarks); 'hnsw' still falls back.
declare
  v_tenant text := p_tenant;  -- set_context (below) refuses a tenant the login may not act in
  -- what pymem.search takes as arguments
  p_exact_below bigint := 2000;
  p_ef_search integer := null;
  p_max_scan_tuples integer := 20000;
  v_rows bigint;
  v_table_rows double precision;
  v_cap bigint;
  v_plan text := p_plan;  -- then the plan taken: 'exact', 'hnsw' or 'scope' (exact through the scope index)
  v_scoped boolean;  -- a scope filter or context scope narrows the search
  v_ids text[];  -- what pymem._search_in_scope found
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
  v_scoped := (p_plan <> 'auto' or v_rows >= p_exact_below)
              and (not v_any_scope or pymem._ctx_scope() <> '{}'::jsonb);
  if p_plan = 'auto' then
    v_plan := 'exact';
    if v_rows >= p_exact_below then
      select greatest(c.reltuples, v_rows) into v_table_rows
        from pg_catalog.pg_class c where c.oid = 'pymem.memories'::regclass;
      v_cap := greatest(p_exact_below, ceil(sqrt(8.0 * p_top_k * v_table_rows))::bigint);
      if v_scoped then
        v_ids := pymem._search_in_scope(p_query, p_top_k, p_scope_filter, p_include_superseded, v_cap);
        v_plan := case when v_ids is null then 'hnsw' else 'scope' end;
      elsif v_rows >= v_cap then
        v_plan := 'hnsw';
      end if;
    end if;
  end if;

  if v_plan = 'hnsw' then
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
    v_plan := 'exact';
  end if;

  if v_plan = 'exact' and v_scoped then
    v_ids := pymem._search_in_scope(p_query, p_top_k, p_scope_filter, p_include_superseded, null);
    v_plan := 'scope';
  end if;
  if v_plan = 'scope' then
    -- The rows pymem._search_in_scope named, read back under the caller's row-level security.
    return query
      select m.id, case when p_with_vectors then m.record else coalesce(m.record_lite, m.record) end,
             m.content, m.kind, m.tags, m.scope, m.origin, m.provenance, m.confidence, m.source_adapter,
             m.injection_source, m.policy_fingerprint, m.created_at, m.revision, 1 - d.distance
        from pymem.memories m
             cross join lateral (select m.embedding <=> p_query as distance) d
       where m.tenant_id = v_tenant and m.id = any (v_ids)
         and m.erased_at is null
         and (p_include_superseded or m.invalidated_at is null)
         and (v_any_scope or m.scope @> p_scope_filter)
         and d.distance <> 'NaN'::double precision
       order by d.distance, m.id;
    return;
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
comment on function pymem.search_as(text, text, text, jsonb, text[], vector, integer, jsonb, boolean, boolean, text) is 'pymem.set_context + pymem.search in one statement (one round trip for autocommit callers)';

-- Operators resolve through the search_path; pin it to the schema pgvector lives in, whatever
-- the caller's is.
do $$
declare
  v_schema text := (select n.nspname from pg_extension e join pg_namespace n on n.oid = e.extnamespace where e.extname = 'vector');
begin
  execute format('alter function pymem.search(vector, integer, jsonb, boolean, boolean, text, bigint, integer, integer, text, double precision, double precision) set search_path = pg_catalog, %I, pg_temp', v_schema);
  execute format('alter function pymem._search_hybrid(vector, text, integer, jsonb, boolean, boolean, text, bigint, integer, integer, double precision, double precision) set search_path = pg_catalog, %I, pg_temp', v_schema);
  execute format('alter function pymem._vector_ranking(vector, integer, jsonb, boolean, text, bigint, integer, integer) set search_path = pg_catalog, %I, pg_temp', v_schema);
  execute format('alter function pymem.search_as(text, text, text, jsonb, text[], vector, integer, jsonb, boolean, boolean, text) set search_path = pg_catalog, %I, pg_temp', v_schema);
  execute format('alter function pymem._search_in_scope(vector, integer, jsonb, boolean, bigint) set search_path = pg_catalog, %I, pg_temp', v_schema);
end
$$;

-- Admission refusals. The write gate (pymem/admission/gate.py) judges in Python; a refusal is chained into
-- the tenant's ledger through this function, in a transaction of its own, before the caller sees
-- the exception. It stores a digest of the refused arguments and short, shape-checked metadata,
-- never the content: an audit trail that quotes a poisoned note has copied the poison. The app
-- role may call it (that is how refusals get recorded), so it can add refusal events to its own
-- tenant's chain and nothing else; each one is stamped with the caller's actor and adapter. A
-- refusal by the admission classifier also carries its score and the digest of the piece of the
-- note that decided (a line, a field, a sentence), so an auditor can tell which part it was
-- without the text.

create function pymem.record_refusal(
  p_origin text,
  p_source text,
  p_reason text,
  p_signature text,
  p_digest text,
  p_policy_fingerprint text,
  p_score double precision default null,
  p_piece_digest text default null
) returns bigint
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp
as $$
declare
  v_tenant text := pymem._ctx_tenant();
  v_entry pymem.ledger;
begin
  if v_tenant is null then
    raise exception 'pymem: recording a refusal needs a tenant context' using errcode = '22023';
  end if;
  if p_origin is null or not pg_catalog.pg_input_is_valid(p_origin, 'pymem.origin') then
    raise exception 'pymem: a refusal needs a known origin' using errcode = '22023';
  end if;
  if p_source is not null and (p_source = '' or length(p_source) > 200 or not pymem._is_plain_text(p_source)) then
    raise exception 'pymem: a refusal source must be 1-200 characters without control or format characters' using errcode = '22023';
  end if;
  if p_reason is null or p_reason = '' or length(p_reason) > 300 or not pymem._is_plain_text(p_reason) then
    raise exception 'pymem: a refusal reason must be 1-300 characters without control or format characters' using errcode = '22023';
  end if;
  if p_signature is not null and p_signature !~ '^[a-z0-9_.]{1,100}$' then
    raise exception 'pymem: a refusal signature must be a signature name ([a-z0-9_.], at most 100)' using errcode = '22023';
  end if;
  if p_digest is null or p_digest !~ '^sha256:[0-9a-f]{64}$' then
    raise exception 'pymem: a refusal digest must be sha256:<64 hex digits>' using errcode = '22023';
  end if;
  if p_policy_fingerprint is not null and p_policy_fingerprint !~ '^[A-Za-z0-9:_.-]{1,100}$' then
    raise exception 'pymem: a policy fingerprint must be 1-100 characters of [A-Za-z0-9:_.-]' using errcode = '22023';
  end if;
  -- A score is the classifier's probability for the named refusal: NaN and infinities fail the
  -- range test, and a score without the name it belongs to would explain nothing.
  if p_score is not null and (not (p_score >= 0 and p_score <= 1) or p_signature is null) then
    raise exception 'pymem: a refusal score must be a number in [0, 1], given with a signature' using errcode = '22023';
  end if;
  if p_piece_digest is not null and (p_score is null or p_piece_digest !~ '^sha256:[0-9a-f]{64}$') then
    raise exception 'pymem: a refusal piece digest must be sha256:<64 hex digits>, given with a score' using errcode = '22023';
  end if;
  -- scope and source_adapter are the refused write's context: who may read the event (see the
  -- ledger's read policy).
  v_entry := pymem._append_events(
    array[row(v_tenant, 'admission.refused', null, null, null, 0,
              jsonb_build_object(
                'decision', 'refused',
                'action_class', 'memory.persist',
                'tool', 'memory.write:' || coalesce(p_source, 'unknown'),
                'origin', p_origin,
                'adapter', pymem._ctx_adapter(),
                'reason', p_reason,
                'signature', p_signature,
                'args_digest', p_digest,
                'policy_fingerprint', p_policy_fingerprint,
                'score', p_score,
                'piece_digest', p_piece_digest,
                'scope', pymem._ctx_scope(),
                'source_adapter', pymem._ctx_adapter()))::pymem._pending_event]);
  return v_entry.seq;
end
$$;
comment on function pymem.record_refusal(text, text, text, text, text, text, double precision, text) is 'Chains an admission.refused event (digest, reason, classifier score and deciding piece''s digest, never content) into the context tenant''s ledger; returns its seq';

-- Deletes go through definer functions because logins hold no DELETE privilege (and only
-- column-level UPDATE) on the tenant tables: a table-level UPDATE or DELETE privilege is also the
-- right to LOCK the table in ACCESS EXCLUSIVE mode, which would stall every tenant. Row-level
-- security still decides which rows go: FORCE makes the owner subject to it, and the policies
-- read the caller's context and login, never the owner's.

create function pymem.delete_memories(p_ids text[]) returns table (id text, erased boolean)
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp
as $$
begin
  if p_ids is null or cardinality(p_ids) > 10000 then
    raise exception 'pymem: delete_memories takes a list of at most 10000 ids' using errcode = '22023';
  end if;
  return query
    delete from pymem.memories m
     where m.tenant_id = pymem._ctx_tenant() and m.id = any (p_ids)
    returning m.id, m.erased_at is not null;
end
$$;
comment on function pymem.delete_memories(text[]) is 'Deletes the context''s memories with these ids (each a ledger event); returns each deleted id and whether it had been erased; RLS decides which';

create function pymem.purge_idempotency_keys() returns bigint
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp
as $$
declare
  v_count bigint;
begin
  -- the context's own adapter's keys (the owner's erasure policy would reach every adapter's)
  delete from pymem.idempotency_keys k
   where k.tenant_id = pymem._ctx_tenant() and k.adapter = coalesce(pymem._ctx_adapter(), '') and k.expires_at <= now();
  get diagnostics v_count = row_count;
  return v_count;
end
$$;
comment on function pymem.purge_idempotency_keys() is 'Deletes the context tenant''s (and adapter''s) expired idempotency keys; returns how many';

-- The write gate cannot audit a refusal (in a transaction of its own) while the caller's
-- transaction holds the tenant's chain-head lock: the audit would wait for the caller, and the
-- caller for the gate. This probe tells, on the caller's connection: a head-row version that
-- transaction can see whose xmin is still in progress can only be its own (another transaction's
-- uncommitted row is invisible). xmin is a 32-bit xid, widened to xid8 against this
-- transaction's own id (a row it wrote is never older); ids at or past the snapshot's xmax
-- (repeatable read) are its own too. Security invoker: it reads the head under the caller's RLS.
create function pymem.holds_chain_lock(p_tenant text) returns boolean
language sql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
  with me as (
    select pg_catalog.pg_current_xact_id_if_assigned()::text::bigint as top,
           pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot())::text::bigint as next),
  ahead as (
    select me.top, me.next, (h.xmin::text::bigint - (me.top & 4294967295)) & 4294967295 as distance
      from me, pymem.chain_heads h
     where h.tenant_id = p_tenant and me.top is not null)
  select coalesce(bool_or(case when a.top + a.distance >= a.next then true
                               else pg_catalog.pg_xact_status((a.top + a.distance)::text::xid8) = 'in progress' end),
                  false)
    from ahead a
   where a.distance < 2147483648
$$;
comment on function pymem.holds_chain_lock(text) is 'Whether the calling transaction holds (wrote) the tenant''s chain-head row, so an independent transaction could not chain an event for it now';

-- Audit views. audit_refusals runs with the caller's rights (security_invoker): the ledger's own
-- policies already give each role exactly its rows (an auditor every tenant's, the app its
-- context tenant's), so the view can never widen them.
create view pymem.audit_refusals with (security_invoker = true) as
  select l.tenant_id, l.seq, l.occurred_at, pymem._actor_name(l.tenant_id, l.actor) as actor, l.adapter,
         l.details ->> 'origin' as origin,
         l.details ->> 'tool' as tool,
         l.details ->> 'reason' as reason,
         l.details ->> 'signature' as signature,
         l.details ->> 'args_digest' as args_digest,
         l.details ->> 'policy_fingerprint' as policy_fingerprint,
         (l.details ->> 'score')::double precision as score,
         l.details ->> 'piece_digest' as piece_digest
    from pymem.ledger l
   where l.event = 'admission.refused';
comment on view pymem.audit_refusals is 'Every admission refusal: who, which origin and source, why, the classifier score and digests of the arguments and deciding piece (never the content)';

-- memory_history answers "how did this get here?": each memory event of the ledger with the
-- memory's current provenance. The auditor has no rights on memories (content must stay out of
-- its reach), so this view runs with its owner's rights (no security_invoker) and does its own
-- filtering: members of pymem_auditor see every tenant, anyone else (current_user is the
-- invoker inside a view) only the context tenant's events within its scope and read allow-list
-- (the ledger's own rule), with provenance only for rows its scope and allow-list make visible. It selects no content, record or embedding column, and
-- security_barrier keeps a caller's (possibly leaky) WHERE clause from running before that filter.
create view pymem.memory_history with (security_barrier = true) as
  select l.tenant_id, l.memory_id, l.seq, l.event, l.occurred_at, pymem._actor_name(l.tenant_id, l.actor) as actor,
         l.adapter, l.revision,
         l.content_hash,
         m.origin, m.provenance, m.source_adapter, m.policy_fingerprint, m.confidence, m.injection_source,
         m.kind, m.created_at as memory_created_at, m.revision as current_revision,
         m.invalidated_at, m.superseded_by, m.erased_at
    from pymem.ledger l
    left join pymem.memories m
      on m.tenant_id = l.tenant_id and m.id = l.memory_id
     and ((select pg_catalog.pg_has_role(current_user, 'pymem_auditor', 'USAGE'))
          or (m.scope @> (select pymem._ctx_scope())
              and ((select pymem._ctx_read_adapters()) is null
                   or m.source_adapter = any ((select pymem._ctx_read_adapters())::text[]))))
   where l.memory_id is not null
     and ((select pg_catalog.pg_has_role(current_user, 'pymem_auditor', 'USAGE'))
          or (l.tenant_id = (select pymem._ctx_tenant())
              and coalesce(l.details -> 'scope', '{}'::jsonb) @> (select pymem._ctx_scope())
              and ((select pymem._ctx_read_adapters()) is null
                   or (l.details ->> 'source_adapter') = any ((select pymem._ctx_read_adapters())::text[]))));
comment on view pymem.memory_history is 'Each memory''s ledger events with its current origin and provenance (no content); auditors see every tenant, others their scope and allow-list';

-- Sessions and delivery (migration 0004).

-- What a session receives (migration 0010): its own scope's memories and its ancestors'.

create function pymem._session_scopes(
  p_session text,
  out session_scope jsonb,
  out scopes jsonb[],
  out scope_keys bytea[],
  out live_rows bigint
)
language plpgsql stable
set search_path = pg_catalog, pg_temp
as $$
-- What a session of the context receives memories from: its own scope and every ancestor of it
-- (a scope it contains) that holds rows the context's read allow-list admits, their keys (as in
-- pymem.memories_tenant_scope_key) and how many rows they hold (pymem.scope_rows, erased rows
-- included). All NULL when the context cannot see the session (tenant, scope and allow-list, as
-- pymem.sessions_read) or the session is incognito. Only the definer reads below call it: it
-- reads pymem.scope_rows, which no login may.
--
-- A bound login's context scope contains its bound scope and may add axes of the login's own
-- choosing. An ancestor outside the bound scope reaches it only if its rows are ones the context
-- could read anyway (their scope contains the context's): an axis the login adds to its context
-- never opens another branch of the tenant ({"team": "t2"} to a login bound to {"user": "u1"}).
declare
  v_tenant text := pymem._ctx_tenant();
  v_ctx jsonb := pymem._ctx_scope();
  v_read text[] := pymem._ctx_read_adapters();
  v_bound jsonb := (pymem._login_binding()).scope;
  v_axes integer;
  v_subsets jsonb[];
begin
  if v_tenant is null or v_ctx ? '' then
    return;
  end if;
  select s.scope into session_scope
    from pymem.sessions s
   where s.tenant_id = v_tenant and s.id = p_session and not s.incognito
     and s.scope @> v_ctx
     and (v_read is null or s.source_adapter = any (v_read));
  if session_scope is null then
    return;
  end if;
  v_axes := (select count(*) from jsonb_object_keys(session_scope));
  if v_axes <= 8 then
    -- every subset of the session's scope (at most 256), each looked up by its key
    select array_agg(x.sub) into v_subsets
      from generate_series(0, (1 << v_axes) - 1) g(mask)
     cross join lateral (
       select coalesce(jsonb_object_agg(a.key, a.value), '{}'::jsonb) as sub
         from (select e.key, e.value, row_number() over (order by e.key) - 1 as i
                 from jsonb_each(session_scope) e) a
        where (g.mask >> a.i::integer) & 1 = 1) x;
    select array_agg(c.scope), array_agg(sha256(c.scope::text::bytea)), sum(c.n)
      into scopes, scope_keys, live_rows
      from (select r.scope, sum(r.live_rows) as n
              from pymem.scope_rows r
             where r.tenant_id = v_tenant
               and sha256(r.scope::text::bytea) = any (array(select sha256(s::text::bytea) from unnest(v_subsets) s))
               and r.scope = any (v_subsets)
               and (v_read is null or r.source_adapter = any (v_read))
             group by r.scope) c
     where v_bound is null or v_bound = '{}'::jsonb or v_bound @> c.scope or c.scope @> v_ctx;
  else
    -- a scope of many axes: the tenant's scopes it contains
    select array_agg(c.scope), array_agg(sha256(c.scope::text::bytea)), sum(c.n)
      into scopes, scope_keys, live_rows
      from (select r.scope, sum(r.live_rows) as n
              from pymem.scope_rows r
             where r.tenant_id = v_tenant and session_scope @> r.scope
               and (v_read is null or r.source_adapter = any (v_read))
             group by r.scope) c
     where v_bound is null or v_bound = '{}'::jsonb or v_bound @> c.scope or c.scope @> v_ctx;
  end if;
  scopes := coalesce(scopes, '{}');
  scope_keys := coalesce(scope_keys, '{}');
  live_rows := coalesce(live_rows, 0);
end
$$;
comment on function pymem._session_scopes(text) is 'The scopes a session receives memories from (its own and its ancestors, within the allow-list and a bound login''s reach), their keys and row count; NULL when the session is not visible';

create function pymem.session_hot(p_session text, p_limit integer) returns setof pymem.search_hit
language plpgsql stable security definer
set enable_seqscan = off
set search_path = pg_catalog, pg_temp
as $$
-- The live hot memories (tagged hot) that session p_session receives (its scope's and its
-- ancestors', within the read allow-list: pymem._session_scopes), newest first, at most p_limit,
-- shaped as search hits with score 0 and records without vectors.
--
-- Definer: an ancestor's rows are ones the caller's row-level security does not show (a context
-- reads rows whose scope contains its own). The rule is applied here, for a session the caller
-- can see, and nothing outside it is returned. Few rows in those scopes (under 2,000) are read by
-- their scope key; more, through the tenant's newest rows first.
declare
  v_tenant text := pymem._ctx_tenant();
  v_read text[] := pymem._ctx_read_adapters();
  f record;
begin
  if p_limit is null or p_limit < 1 or p_limit > 1000 then
    raise exception 'pymem: the limit must be between 1 and 1000' using errcode = '22023';
  end if;
  select * into f from pymem._session_scopes(p_session);
  if f.session_scope is null or f.live_rows = 0 then
    return;
  end if;
  if f.live_rows < 2000 then
    return query
      select m.id, coalesce(m.record_lite, m.record), m.content, m.kind, m.tags, m.scope, m.origin, m.provenance,
             m.confidence, m.source_adapter, m.injection_source, m.policy_fingerprint, m.created_at, m.revision,
             0::double precision
        from pymem.memories m
       where m.tenant_id = v_tenant
         and sha256(m.scope::text::bytea) = any (f.scope_keys) and m.scope = any (f.scopes)
         and 'hot' = any (m.tags) and m.erased_at is null and m.invalidated_at is null
         and (m.expires_at is null or m.expires_at > now())  -- retention: not expired
         and (v_read is null or m.source_adapter = any (v_read))
       order by m.created_at desc, m.id
       limit p_limit;
  else
    return query
      select m.id, coalesce(m.record_lite, m.record), m.content, m.kind, m.tags, m.scope, m.origin, m.provenance,
             m.confidence, m.source_adapter, m.injection_source, m.policy_fingerprint, m.created_at, m.revision,
             0::double precision
        from pymem.memories m
       where m.tenant_id = v_tenant and m.scope = any (f.scopes)
         and 'hot' = any (m.tags) and m.erased_at is null and m.invalidated_at is null
         and (m.expires_at is null or m.expires_at > now())  -- retention: not expired
         and (v_read is null or m.source_adapter = any (v_read))
       order by m.created_at desc, m.id
       limit p_limit;
  end if;
end
$$;
comment on function pymem.session_hot(text, integer) is 'The live hot memories a session receives (its scope and its ancestors), newest first; definer, applying that rule itself';

create function pymem._session_ranking(
  p_scopes jsonb[],
  p_scope_keys bytea[],
  p_live_rows bigint,
  p_query vector,
  p_top_k integer,
  p_plan text,
  p_exact_below bigint
) returns table (id text, distance double precision)
language plpgsql stable security invoker
-- pymem.session_search's settings, for the same plans (see there)
set plan_cache_mode = force_generic_plan
set enable_seqscan = off
set enable_sort = on
set enable_indexscan = on
set hnsw.iterative_scan = 'relaxed_order'
set hnsw.ef_search = 40
set hnsw.max_scan_tuples = 20000
set search_path = pg_catalog, pg_temp
as $$
-- The ids and cosine distances of the p_top_k live, non-superseded, unexpired memories of the
-- context's tenant in the scopes p_scopes (their keys p_scope_keys, p_live_rows rows in them: what
-- pymem._session_scopes returns for a session) closest to p_query, best first (distance, then
-- id), within the read allow-list: pymem.session_search's ranking, and the one
-- pymem.session_search_hybrid fuses. The plan is pymem.session_search's: exact below cap =
-- max(p_exact_below, sqrt(8 * top_k * table rows)) rows, else HNSW with an iterative scan,
-- re-sorted, the exact plan taking over whenever the scan comes back short. Only those two
-- definer functions call it (no login may: it takes the scopes as given), and stable, so it reads
-- with the snapshot of the statement that calls it.
declare
  v_tenant text := pymem._ctx_tenant();
  v_read text[] := pymem._ctx_read_adapters();
  v_plan text := p_plan;
  v_table_rows double precision;
  v_ids text[];
  v_dist double precision[];
begin
  if v_tenant is null or coalesce(p_live_rows, 0) = 0 then
    return;
  end if;
  if p_plan = 'auto' then
    select greatest(c.reltuples, p_live_rows) into v_table_rows
      from pg_catalog.pg_class c where c.oid = 'pymem.memories'::regclass;
    v_plan := case when p_live_rows < greatest(p_exact_below, ceil(sqrt(8.0 * p_top_k * v_table_rows))::bigint)
                   then 'exact' else 'hnsw' end;
  end if;

  if v_plan = 'hnsw' then
    -- enable_sort off: only the HNSW index orders the candidates (see pymem.search)
    perform set_config('hnsw.ef_search', pymem._search_ef(p_top_k)::text, true),
            set_config('enable_sort', 'off', true);
    with candidates as materialized (
      select m.id, m.embedding <=> p_query as distance
        from pymem.memories m
       where m.tenant_id = v_tenant and m.scope = any (p_scopes)
         and m.erased_at is null and m.invalidated_at is null
         and (m.expires_at is null or m.expires_at > now())  -- retention: not expired
         and (v_read is null or m.source_adapter = any (v_read))
       order by m.embedding <=> p_query
       limit p_top_k)
    select array_agg(c.id order by c.distance + 0, c.id), array_agg(c.distance order by c.distance + 0, c.id)
      into v_ids, v_dist
      from candidates c
     where c.distance <> 'NaN'::double precision;
    perform set_config('enable_sort', 'on', true);
    if coalesce(cardinality(v_ids), 0) >= p_top_k then
      return query select u.id, u.distance from unnest(v_ids, v_dist) u(id, distance);
      return;
    end if;
  end if;

  -- exact: the rows of those scopes by their key, never the HNSW index (enable_indexscan off)
  perform set_config('enable_indexscan', 'off', true);
  return query
    select t.id, t.distance
      from (select m.id, m.embedding <=> p_query as distance
              from pymem.memories m
             where m.tenant_id = v_tenant
               and sha256(m.scope::text::bytea) = any (p_scope_keys) and m.scope = any (p_scopes)
               and m.erased_at is null and m.invalidated_at is null and m.embedding is not null
               and (m.expires_at is null or m.expires_at > now())  -- retention: not expired
               and (v_read is null or m.source_adapter = any (v_read))
             order by 2, 1
             limit p_top_k) t
     where t.distance <> 'NaN'::double precision
     order by t.distance, t.id;
end
$$;
comment on function pymem._session_ranking(jsonb[], bytea[], bigint, vector, integer, text, bigint) is 'The vector ranking of what a session receives, as (id, distance) pairs, given its scopes; called only by the session search functions';

create function pymem.session_search(
  p_session text,
  p_query vector,
  p_top_k integer,
  p_plan text default 'auto',
  p_exact_below bigint default 2000
) returns setof pymem.search_hit
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp
as $$
-- The p_top_k live, non-superseded memories that session p_session receives (its scope's and its
-- ancestors', within the read allow-list: pymem._session_scopes) closest to p_query by cosine,
-- best first (score desc, then id), shaped as pymem.search's hits with records without vectors:
-- what a delivery recalls. Definer for the reason pymem.session_hot is.
--
-- The plan is pymem.search's, decided by n, the rows in those scopes (pymem.scope_rows): below
-- cap = max(p_exact_below, sqrt(8 * top_k * table rows)) every one of them is ranked exactly,
-- read by its scope key; above, HNSW with an iterative scan keeps the candidates in those scopes,
-- re-sorted, and the exact plan takes over whenever the scan comes back short
-- (pymem._session_ranking). 'exact' and 'hnsw' force a plan (tests, benchmarks). The rows are
-- read by their key in that order, in the same statement (one snapshot).
declare
  v_tenant text := pymem._ctx_tenant();
  v_ids text[];
  v_distances double precision[];
  f record;
begin
  if p_query is null or vector_norm(p_query) = 0 then
    raise exception 'pymem: the query vector must be a non-zero vector' using errcode = '22023';
  end if;
  if p_top_k is null or p_top_k < 1 or p_top_k > 1000 then
    raise exception 'pymem: top_k must be between 1 and 1000' using errcode = '22023';
  end if;
  if p_plan is null or p_plan not in ('auto', 'exact', 'hnsw') then
    raise exception 'pymem: plan must be auto, exact or hnsw' using errcode = '22023';
  end if;
  select * into f from pymem._session_scopes(p_session);
  if f.session_scope is null or f.live_rows = 0 then
    return;
  end if;
  -- The ranking first, in a statement of its own: on Citus the statement that reads the rows is
  -- routed to the tenant's shard, where the ranking's own queries would run nested in it (which
  -- Citus refuses); on a single Postgres it is the same work, in order, in the same snapshot.
  select array_agg(h.id order by h.n), array_agg(h.distance order by h.n) into v_ids, v_distances
    from pymem._session_ranking(f.scopes, f.scope_keys, f.live_rows, p_query, p_top_k, p_plan, p_exact_below)
           with ordinality h(id, distance, n);
  return query
    select m.id, coalesce(m.record_lite, m.record), m.content, m.kind, m.tags, m.scope, m.origin, m.provenance,
           m.confidence, m.source_adapter, m.injection_source, m.policy_fingerprint, m.created_at, m.revision,
           1 - r.distance
      from unnest(v_ids, v_distances) with ordinality r(id, distance, n)
           cross join lateral (
             select m.* from pymem.memories m
              where m.tenant_id = v_tenant and m.id = r.id
              limit 1) m
     order by r.n;
end
$$;
comment on function pymem.session_search(text, vector, integer, text, bigint) is 'Cosine search over the memories a session receives (its scope and its ancestors); definer, applying that rule itself; exact or iterative HNSW as pymem.search';

create function pymem.session_lessons(p_session text, p_tags text[], p_limit integer, p_at timestamptz default null)
returns table (id text, record jsonb, content text, kind text, tags text[], scope jsonb, origin pymem.origin,
               provenance jsonb, confidence real, source_adapter text, injection_source text,
               policy_fingerprint text, created_at timestamptz, revision integer, score double precision,
               memory_type text, version integer, source_task text, filed_at timestamptz,
               decayed double precision, age_days double precision)
language plpgsql stable security definer
set search_path = pg_catalog, pg_temp
as $$
-- The live lessons sharing a tag with p_tags that session p_session receives (filed in its
-- scope or an ancestor's, within the read allow-list: pymem._session_scopes), best first by shared
-- tags + confidence decayed to p_at (NULL = now), at most p_limit: the lessons a turn of the
-- session is given (the library's lessons_for_task query, with the session's rule). Definer for
-- the reason pymem.session_hot is.
#variable_conflict use_column
declare
  v_tenant text := pymem._ctx_tenant();
  v_read text[] := pymem._ctx_read_adapters();
  f record;
begin
  if p_tags is null or p_limit is null or p_limit < 1 or p_limit > 1000 then
    raise exception 'pymem: lessons need their tags and a limit between 1 and 1000' using errcode = '22023';
  end if;
  select * into f from pymem._session_scopes(p_session);
  if f.session_scope is null or f.live_rows = 0 then
    return;
  end if;
  return query
    select l.id, l.record, l.content, 'lesson'::text, l.tags, l.scope, l.origin, l.provenance, l.confidence,
           l.source_adapter, l.injection_source, l.policy_fingerprint, l.created_at, l.revision,
           0::double precision, l.memory_type, l.version, l.source_task, l.filed_at, d.decayed, d.age_days
      from (select coalesce(p_at, now()) as t) n
     cross join pymem.lessons l
     cross join lateral (select pymem.lesson_confidence(l.confidence, l.memory_type, n.t - l.filed_at) as decayed,
                                (extract(epoch from n.t - l.filed_at) / 86400)::double precision as age_days) d
     where l.tenant_id = v_tenant and l.scope = any (f.scopes) and l.tags && p_tags
       and (v_read is null or l.source_adapter = any (v_read))
     order by cardinality(array(select unnest(l.tags) intersect select unnest(p_tags))) + coalesce(d.decayed, 0) desc,
              l.id
     limit p_limit;
end
$$;
comment on function pymem.session_lessons(text, text[], integer, timestamptz) is 'The lessons for a task that a session receives (filed in its scope or an ancestor''s), best first; definer, applying that rule itself';

create function pymem.session_receives(p_session text, p_ids text[]) returns text[]
language plpgsql stable security definer
set search_path = pg_catalog, pg_temp
as $$
-- Which of p_ids are live memories that session p_session receives (its scope's and its
-- ancestors', within the read allow-list: pymem._session_scopes), in the order given: what a
-- delivery may name. Ids only, never content.
declare
  v_tenant text := pymem._ctx_tenant();
  v_read text[] := pymem._ctx_read_adapters();
  f record;
begin
  if p_ids is null or cardinality(p_ids) > 10000 then
    raise exception 'pymem: name at most 10000 memory ids' using errcode = '22023';
  end if;
  select * into f from pymem._session_scopes(p_session);
  if f.session_scope is null or f.live_rows = 0 then
    return '{}';
  end if;
  return array(select x.id from unnest(p_ids) with ordinality x(id, i)
                where exists (select from pymem.memories m
                               where m.tenant_id = v_tenant and m.id = x.id and m.scope = any (f.scopes)
                                 and m.erased_at is null
                                 and (m.expires_at is null or m.expires_at > now())  -- retention: not expired
                                 and (v_read is null or m.source_adapter = any (v_read)))
                order by x.i);
end
$$;
comment on function pymem.session_receives(text, text[]) is 'Which of these ids are live memories a session receives (its scope and its ancestors), in order; ids only';

do $$
declare
  v_schema text := (select n.nspname from pg_extension e join pg_namespace n on n.oid = e.extnamespace where e.extname = 'vector');
begin
  execute format('alter function pymem._session_ranking(jsonb[], bytea[], bigint, vector, integer, text, bigint) set search_path = pg_catalog, %I, pg_temp', v_schema);
  execute format('alter function pymem.session_search(text, vector, integer, text, bigint) set search_path = pg_catalog, %I, pg_temp', v_schema);
end
$$;

create function pymem.session_search_hybrid(
  p_session text,
  p_query vector,
  p_text text,
  p_top_k integer,
  p_plan text default 'auto',
  p_exact_below bigint default 2000,
  p_text_weight double precision default 1.0,
  p_rrf_k double precision default 10
) returns setof pymem.search_hit
language plpgsql volatile security definer
-- as pymem.search: the statement's shape does not depend on the values, and planning it afresh on
-- every call cost more than running it on a session's few hundred rows
set plan_cache_mode = force_generic_plan
set search_path = pg_catalog, pg_temp
as $$
-- pymem.session_search with the query's text, fused as pymem._search_hybrid fuses pymem.search:
-- the vector ranking (pymem._session_ranking, pymem.session_search's own, so the same plans and
-- rule) and a BM25 ranking of p_text (k1 1.2, b 0.75, the words ORed, as pymem._text_candidates)
-- over the same rows, each cut at v_pool rows, fused by score when p_rrf_k is NULL (cosine
-- similarity + p_text_weight x BM25 / the query's best BM25; that sum is the score) or else by
-- reciprocal rank (1 / (p_rrf_k + vector rank) + p_text_weight / (p_rrf_k + text rank); the score
-- is the cosine similarity). The p_top_k best come back in that order: what a delivery recalls.
-- What the session receives stays decided by pymem._session_scopes (its scope and its ancestors,
-- within the read allow-list); the text ranking's document frequencies and lengths are counted
-- over those rows only. Definer for the reason pymem.session_hot is (and the text match, not
-- leakproof, uses the GIN index only so). The fused order is known before any row is read (only a
-- row found by its words alone has its vector read, by its key, for its cosine); the candidates
-- are walked in that order, each row read by its key, until p_top_k are found.
declare
  v_tenant text := pymem._ctx_tenant();
  v_read text[] := pymem._ctx_read_adapters();
  v_pool integer;
  v_config regconfig := (select s.text_search_config from pymem.store_info s);
  v_terms text[];
  v_match tsquery;
  v_ids text[];
  v_distances double precision[];
  f record;
begin
  if p_top_k is null or p_top_k < 1 or p_top_k > 1000 then
    raise exception 'pymem: top_k must be between 1 and 1000' using errcode = '22023';
  end if;
  if p_text_weight is null or p_text_weight < 0 or p_text_weight = 'Infinity'::double precision
     or p_rrf_k < 0 or p_rrf_k = 'Infinity'::double precision then
    raise exception 'pymem: the text weight and the fusion constant must be finite and not negative' using errcode = '22023';
  end if;
  if p_query is null or vector_norm(p_query) = 0 then
    raise exception 'pymem: the query vector must be a non-zero vector' using errcode = '22023';
  end if;
  if p_plan is null or p_plan not in ('auto', 'exact', 'hnsw') then
    raise exception 'pymem: plan must be auto, exact or hnsw' using errcode = '22023';
  end if;
  v_pool := least(1000, greatest(4 * p_top_k, 50));
  select * into f from pymem._session_scopes(p_session);
  if f.session_scope is null or f.live_rows = 0 then
    return;
  end if;
  if p_text is not null then
    select array_agg(w.lexeme) into v_terms
      from (select u.lexeme from unnest(to_tsvector(v_config, left(p_text, 10000))) u limit 64) w;
  end if;
  if v_terms is not null then
    select (string_agg('''' || replace(replace(t, '\', '\\'), '''', '''''') || '''', ' | '))::tsquery
      into v_match from unnest(v_terms) t;
    v_match := ('''' || pymem._tenant_lexeme(v_tenant) || '''')::tsquery && v_match;
  end if;
  -- The ranking first, in a statement of its own: on Citus the statement that reads the rows is
  -- routed to the tenant's shard, where the ranking's own queries would run nested in it (which
  -- Citus refuses); on a single Postgres it is the same work, in order, in the same snapshot.
  select array_agg(h.id), array_agg(h.distance) into v_ids, v_distances
    from pymem._session_ranking(f.scopes, f.scope_keys, f.live_rows, p_query, v_pool, p_plan, p_exact_below) h;
  return query
    with vec as (
      select h.id, h.distance, row_number() over (order by 1 - h.distance desc, h.id) as r
        from unnest(v_ids, v_distances) h(id, distance)),
    matched as (
      -- each row's length, and only its postings of the query's words (as pymem._text_candidates)
      select m.id, length(m.search_text) as dl, ts_filter(setweight(m.search_text, 'A', v_terms), '{a}') as words
        from pymem.memories m
       where v_match is not null
         and m.search_text @@ v_match
         and m.tenant_id = v_tenant and m.scope = any (f.scopes)
         and m.erased_at is null and m.invalidated_at is null and m.embedding is not null
         and (m.expires_at is null or m.expires_at > now())  -- retention: not expired
         and (v_read is null or m.source_adapter = any (v_read))),
    lengths as (
      select avg(x.dl)::double precision as avgdl from matched x),
    hits as (
      select x.id, u.lexeme, coalesce(cardinality(u.positions), 1) as tf, x.dl
        from matched x cross join lateral unnest(x.words) u),
    df as (
      select h.lexeme, count(*)::double precision as n from hits h group by h.lexeme),
    bm25 as (
      select h.id,
             sum(ln(1 + (greatest(f.live_rows::double precision, d.n) - d.n + 0.5) / (d.n + 0.5))
                 * h.tf * 2.2 / (h.tf + 1.2 * (0.25 + 0.75 * h.dl / greatest(l.avgdl, 1)))) as score
        from hits h join df d on d.lexeme = h.lexeme cross join lengths l
       group by h.id
       order by 2 desc, 1
       limit v_pool),
    txt as (
      select b.id, row_number() over (order by b.score desc, b.id) as r,
             b.score / nullif(max(b.score) over (), 0) as share  -- of the best word match
        from bm25 b),
    fused as (
      -- the order key; by score, a row the vector ranking missed reads its vector by its key
      select coalesce(v.id, t.id) as id,
             case when p_rrf_k is null
                  then coalesce(1 - v.distance,
                                (select 1 - (m.embedding <=> p_query) from pymem.memories m
                                  where m.tenant_id = v_tenant and m.id = t.id))
                       + p_text_weight * coalesce(t.share, 0)
                  else coalesce(1.0 / (p_rrf_k + v.r), 0) + p_text_weight * coalesce(1.0 / (p_rrf_k + t.r), 0)
             end as fused
        from vec v full join txt t on t.id = v.id)
    select m.id, coalesce(m.record_lite, m.record), m.content, m.kind, m.tags, m.scope, m.origin, m.provenance,
           m.confidence, m.source_adapter, m.injection_source, m.policy_fingerprint, m.created_at, m.revision,
           case when p_rrf_k is null then x.fused else 1 - (m.embedding <=> p_query) end
      from (select x.id, x.fused from fused x order by x.fused desc, x.id) x
           cross join lateral (
             select m.* from pymem.memories m
              where m.tenant_id = v_tenant and m.id = x.id
                and m.scope = any (f.scopes) and m.erased_at is null and m.invalidated_at is null
                and (m.expires_at is null or m.expires_at > now())  -- retention: not expired
                and (v_read is null or m.source_adapter = any (v_read))
              limit 1) m
     order by x.fused desc, x.id
     limit p_top_k;
end
$$;
comment on function pymem.session_search_hybrid(text, vector, text, integer, text, bigint, double precision, double precision) is 'Hybrid search over the memories a session receives: pymem.session_search''s vector ranking and a BM25 ranking of the text over the same rows, fused by score (p_rrf_k NULL) or by reciprocal rank; definer, applying the session''s rule itself';

do $$
begin
  execute format('alter function pymem.session_search_hybrid(text, vector, text, integer, text, bigint, double precision, double precision) set search_path = pg_catalog, %I, pg_temp',
                 (select n.nspname from pg_extension e join pg_namespace n on n.oid = e.extnamespace where e.extname = 'vector'));
end
$$;

create function pymem.record_injection(
  p_session text,
  p_turn integer,
  p_memory_ids text[],
  p_hot_ids text[],
  p_digest_sessions text[],
  p_block_sha256 text,
  p_tokens integer,
  p_budget integer,
  p_truncated integer,
  p_counter text,
  p_policy_fingerprint text,
  p_tiers_fingerprint text,
  p_lesson_ids text[] default '{}'
) returns bigint
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp
as $$
-- What a delivery put into one turn of a session, chained into the tenant's ledger: the ids of
-- every memory (the hot ones and the lessons named again), the other sessions its digest listed,
-- and the sha256 of the delivered text. Never the text: the ids lead to the rows, the hash proves
-- which text. The app role may call it; it checks that every memory named is one the session
-- receives (pymem.session_receives: its scope's and its ancestors', within the read allow-list)
-- and every digest session one of the same scope or a narrower one within the allow-list, so a
-- record cannot name what the caller could not have delivered.
declare
  v_tenant text := pymem._ctx_tenant();
  v_read text[] := pymem._ctx_read_adapters();
  v_incognito boolean;
  v_scope jsonb;
  v_received text[];
  v_missing text;
  v_entry pymem.ledger;
begin
  if v_tenant is null then
    raise exception 'pymem: recording an injection needs a tenant context' using errcode = '22023';
  end if;
  select s.incognito, s.scope into v_incognito, v_scope from pymem.sessions s where s.tenant_id = v_tenant and s.id = p_session;
  if not found then
    raise exception 'pymem: session % was never started in this tenant (or is not visible here)', left(p_session, 100)
      using errcode = '23503', constraint = 'injections_session_started';
  end if;
  if v_incognito then
    raise exception 'pymem: session % is incognito: no injection record is kept', left(p_session, 100)
      using errcode = '42501', constraint = 'injections_not_incognito';
  end if;
  if p_turn is null or p_turn < 0 then
    raise exception 'pymem: a turn is a non-negative integer' using errcode = '22023';
  end if;
  if p_memory_ids is null or p_hot_ids is null or p_digest_sessions is null or p_lesson_ids is null
     or cardinality(p_memory_ids) > 1000 or cardinality(p_digest_sessions) > 1000
     or array_position(p_memory_ids, null) is not null or array_position(p_digest_sessions, null) is not null
     or not (p_hot_ids <@ p_memory_ids) or not (p_lesson_ids <@ p_memory_ids) or p_lesson_ids && p_hot_ids
     or (select count(distinct x) from unnest(p_memory_ids) x) <> cardinality(p_memory_ids) then
    raise exception 'pymem: an injection names at most 1000 distinct memories (the hot ones and the lessons among them, apart) and 1000 sessions'
      using errcode = '22023';
  end if;
  v_received := pymem.session_receives(p_session, p_memory_ids);
  select x into v_missing from unnest(p_memory_ids) x where not (x = any (v_received)) limit 1;
  if found then
    raise exception 'pymem: memory % is not a live memory this session receives', left(v_missing, 100) using errcode = '22023';
  end if;
  select x into v_missing from unnest(p_lesson_ids) x
   where not exists (select from pymem.memories m where m.tenant_id = v_tenant and m.id = x and m.kind = 'lesson')
   limit 1;
  if found then
    raise exception 'pymem: memory % is not a lesson', left(v_missing, 100) using errcode = '22023';
  end if;
  select x into v_missing from unnest(p_digest_sessions) x
   where x = p_session
      or not exists (select from pymem.sessions s
                      where s.tenant_id = v_tenant and s.id = x and not s.incognito and s.erased_at is null
                        and s.scope @> v_scope
                        and (v_read is null or s.source_adapter = any (v_read)))
   limit 1;
  if found then
    raise exception 'pymem: session % cannot be listed in this digest', left(v_missing, 100) using errcode = '22023';
  end if;
  if p_block_sha256 is null or p_block_sha256 !~ '^[0-9a-f]{64}$' then
    raise exception 'pymem: the delivered text''s digest must be 64 lowercase hex digits (sha256)' using errcode = '22023';
  end if;
  if p_tokens is null or p_tokens < 0 or p_budget is null or p_budget < 1 or p_truncated is null or p_truncated < 0 then
    raise exception 'pymem: tokens and truncated are non-negative, the budget positive' using errcode = '22023';
  end if;
  if p_counter is null or p_counter !~ '^[A-Za-z0-9:_.-]{1,100}$'
     or (p_policy_fingerprint is not null and p_policy_fingerprint !~ '^[A-Za-z0-9:_.-]{1,100}$')
     or (p_tiers_fingerprint is not null and p_tiers_fingerprint !~ '^[A-Za-z0-9:_.-]{1,100}$') then
    raise exception 'pymem: counter and fingerprints are 1-100 characters of [A-Za-z0-9:_.-]' using errcode = '22023';
  end if;
  v_entry := pymem._append_events(
    array[row(v_tenant, 'delivery.injected', null, null, decode(p_block_sha256, 'hex'), 0,
              jsonb_build_object(
                'session', p_session,
                'turn', p_turn,
                'memory_ids', to_jsonb(p_memory_ids),
                'hot_ids', to_jsonb(p_hot_ids),
                'lesson_ids', to_jsonb(p_lesson_ids),
                'digest_sessions', to_jsonb(p_digest_sessions),
                'block_sha256', p_block_sha256,
                'tokens', p_tokens,
                'budget', p_budget,
                'truncated', p_truncated,
                'counter', p_counter,
                'policy_fingerprint', p_policy_fingerprint,
                'tiers_fingerprint', p_tiers_fingerprint,
                'scope', v_scope,
                'source_adapter', pymem._ctx_adapter()))::pymem._pending_event]);
  return v_entry.seq;
end
$$;
comment on function pymem.record_injection(text, integer, text[], text[], text[], text, integer, integer, integer, text, text, text, text[]) is 'Chains a delivery.injected event (ids the caller can read, the lessons among them, and the sha256 of the delivered text, never the text) for a session''s turn; returns its seq';

create function pymem._check_erasure_reason(p_reason text) returns void
language plpgsql immutable
set search_path = pg_catalog, pg_temp
as $$
begin
  -- the reason is kept in the ledger and shown to auditors: short, one line, nothing hidden
  if p_reason is null or p_reason = '' or length(p_reason) > 300 or not pymem._is_plain_text(p_reason) then
    raise exception 'pymem: an erasure reason must be 1-300 characters without control or format characters'
      using errcode = '22023';
  end if;
end
$$;
comment on function pymem._check_erasure_reason(text) is 'Refuses an erasure reason that is empty, longer than 300 characters or not plain text';

create function pymem.erase_memory(p_id text, p_reason text) returns bigint
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp
as $$
-- Erasure removes content, record and embedding and keeps content_hash (the chain still
-- verifies); the update is a memory.erase event, and the reason follows it as erasure.recorded.
-- Row-level security decides which rows the caller may erase, as for any update: FORCE makes the
-- owner subject to the caller's context.
declare
  v_row pymem.memories;
  v_entry pymem.ledger;
begin
  perform pymem._check_erasure_reason(p_reason);
  update pymem.memories m
     set content = null, record = null, embedding = null, erased_at = now(), source_adapter = pymem._ctx_adapter()
   where m.tenant_id = pymem._ctx_tenant() and m.id = p_id and m.erased_at is null
  returning m.* into v_row;
  if not found then
    raise exception 'pymem: no live memory % that this context may change', left(p_id, 100) using errcode = 'P0002';
  end if;
  v_entry := pymem._append_events(
    array[row(v_row.tenant_id, 'erasure.recorded', v_row.id, v_row.revision, v_row.content_hash, 0,
              jsonb_build_object('reason', p_reason, 'scope', v_row.scope,
                                 'source_adapter', v_row.source_adapter))::pymem._pending_event]);
  return v_entry.seq;
end
$$;
comment on function pymem.erase_memory(text, text) is 'Erases a memory''s content, record and embedding (content_hash kept) and chains the reason; returns the reason event''s seq';

create function pymem.erase_session(p_id text, p_reason text) returns bigint
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp
as $$
-- The session row stays (its id still explains memories and injection records); its topic and
-- summary go, as a session.erase event followed by the reason.
declare
  v_row pymem.sessions;
  v_entry pymem.ledger;
begin
  perform pymem._check_erasure_reason(p_reason);
  update pymem.sessions s set erased_at = now()
   where s.tenant_id = pymem._ctx_tenant() and s.id = p_id and s.erased_at is null and not s.incognito
  returning s.* into v_row;
  if not found then
    raise exception 'pymem: no session % with a topic or summary that this context may erase', left(p_id, 100)
      using errcode = 'P0002';
  end if;
  v_entry := pymem._append_events(
    array[row(v_row.tenant_id, 'erasure.recorded', null, null, pymem._session_hash(v_row), 0,
              jsonb_build_object('session', v_row.id, 'reason', p_reason, 'scope', v_row.scope,
                                 'source_adapter', v_row.source_adapter))::pymem._pending_event]);
  return v_entry.seq;
end
$$;
comment on function pymem.erase_session(text, text) is 'Erases a session''s topic and summary (the row stays) and chains the reason; returns the reason event''s seq';

create function pymem.search_as_of(
  p_query vector,
  p_top_k integer,
  p_as_of timestamptz,
  p_scope_filter jsonb default '{}'::jsonb
) returns setof pymem.search_hit
language plpgsql stable security invoker
set search_path = pg_catalog, pg_temp
as $$
-- What was believed at p_as_of: rows written by then (created_at), valid by then (valid_from)
-- and not yet superseded (invalidated_at after it, or never), never erased ones. Exact search
-- over the tenant's rows (a question about the past is rare and must be complete); records come
-- back without their vectors.
declare
  v_tenant text := pymem._ctx_tenant();
begin
  if p_query is null or vector_norm(p_query) = 0 then
    raise exception 'pymem: the query vector must be a non-zero vector' using errcode = '22023';
  end if;
  if p_top_k is null or p_top_k < 1 or p_top_k > 1000 then
    raise exception 'pymem: top_k must be between 1 and 1000' using errcode = '22023';
  end if;
  if p_as_of is null or not isfinite(p_as_of) then
    raise exception 'pymem: as_of must be a finite time' using errcode = '22023';
  end if;
  if p_scope_filter is null or not pymem._scope_is_flat(p_scope_filter) then
    raise exception 'pymem: the scope filter must be a flat object of non-empty string values' using errcode = '22023';
  end if;
  if v_tenant is null then
    return;
  end if;
  return query
    select t.id, t.record - 'embedding' - 'vector', t.content, t.kind, t.tags, t.scope, t.origin, t.provenance,
           t.confidence, t.source_adapter, t.injection_source, t.policy_fingerprint, t.created_at, t.revision,
           1 - t.distance
      from (select d.*
              from (select m.id, m.record, m.content, m.kind, m.tags, m.scope, m.origin, m.provenance,
                           m.confidence, m.source_adapter, m.injection_source, m.policy_fingerprint,
                           m.created_at, m.revision, m.embedding <=> p_query as distance
                      from pymem.memories m
                     where m.tenant_id = v_tenant
                       and m.scope @> p_scope_filter
                       and m.erased_at is null
                       and m.embedding is not null
                       and m.created_at <= p_as_of
                       and m.valid_from <= p_as_of
                       and (m.invalidated_at is null or m.invalidated_at > p_as_of)
                    offset 0) d  -- offset 0: exact, every distance computed once
             where d.distance <> 'NaN'::double precision
             order by d.distance, d.id
             limit p_top_k) t
     order by t.distance, t.id;
end
$$;
comment on function pymem.search_as_of(vector, integer, timestamptz, jsonb) is 'Exact cosine search over what was believed at a past time (written, valid and not yet superseded then); RLS applies';

do $$
begin
  execute format('alter function pymem.search_as_of(vector, integer, timestamptz, jsonb) set search_path = pg_catalog, %I, pg_temp',
                 (select n.nspname from pg_extension e join pg_namespace n on n.oid = e.extnamespace where e.extname = 'vector'));
end
$$;

-- Injection records, read back. Both views run with the caller's rights: the ledger's policies
-- give an auditor every tenant's records and the app its context's (scope and allow-list).
create view pymem.audit_injections with (security_invoker = true) as
  select l.tenant_id, l.seq, l.occurred_at, pymem._actor_name(l.tenant_id, l.actor) as actor, l.adapter,
         l.details ->> 'session' as session_id,
         (l.details ->> 'turn')::integer as turn,
         array(select jsonb_array_elements_text(l.details -> 'memory_ids')) as memory_ids,
         array(select jsonb_array_elements_text(l.details -> 'hot_ids')) as hot_ids,
         array(select jsonb_array_elements_text(l.details -> 'digest_sessions')) as digest_sessions,
         l.details ->> 'block_sha256' as block_sha256,
         (l.details ->> 'tokens')::integer as tokens,
         (l.details ->> 'budget')::integer as budget,
         (l.details ->> 'truncated')::integer as truncated,
         l.details ->> 'counter' as counter,
         l.details ->> 'policy_fingerprint' as policy_fingerprint,
         l.details ->> 'tiers_fingerprint' as tiers_fingerprint,
         array(select jsonb_array_elements_text(coalesce(l.details -> 'lesson_ids', '[]'::jsonb))) as lesson_ids
    from pymem.ledger l
   where l.event = 'delivery.injected';
comment on view pymem.audit_injections is 'What each delivered turn contained: session, turn, memory ids (lessons among them), digest sessions and the sha256 of the text (never the text)';

create view pymem.memory_injections with (security_invoker = true) as
  select l.tenant_id, e.memory_id, l.seq, l.occurred_at, l.details ->> 'session' as session_id,
         (l.details ->> 'turn')::integer as turn,
         case when (l.details -> 'hot_ids') ? e.memory_id then 'hot'
              when coalesce(l.details -> 'lesson_ids', '[]'::jsonb) ? e.memory_id then 'lesson'
              else 'recalled' end as section
    from pymem.ledger l
    cross join lateral jsonb_array_elements_text(l.details -> 'memory_ids') as e(memory_id)
   where l.event = 'delivery.injected';
comment on view pymem.memory_injections is 'One row per memory per delivered turn: which turns a memory entered, and in which section (hot, lesson, recalled)';

-- Lessons, convention receipts and shared facts (migration 0005).

create function pymem.lock_for_filing(p_name text, p_timeout_ms integer) returns void
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp
-- The SET clause scopes the set_config below to this call: once the row is locked, the caller's
-- own lock_timeout is back for the rest of its transaction.
set lock_timeout = '5s'
as $$
-- Locks the context tenant's filing row p_name until the transaction ends, waiting at most
-- p_timeout_ms for another filing of the same kind (then 55P03, lock_not_available). Definer, so
-- logins need no privilege on pymem.filing_locks: a row lock needs UPDATE on the table, and a
-- table privilege would let a login lock the whole table against every tenant.
declare
  v_tenant text := pymem._ctx_tenant();
begin
  if v_tenant is null then
    raise exception 'pymem: filing needs a tenant context' using errcode = '22023';
  end if;
  if p_name is null or p_name !~ '^[a-z][a-z0-9_]{0,39}(:[a-z0-9_]{1,40})?$' then
    raise exception 'pymem: a filing lock is named <kind> or <kind>:<type> (lowercase words)' using errcode = '22023';
  end if;
  if p_timeout_ms is null or p_timeout_ms < 1 or p_timeout_ms > 600000 then
    raise exception 'pymem: a filing lock timeout is 1 to 600000 milliseconds' using errcode = '22023';
  end if;
  perform set_config('lock_timeout', p_timeout_ms::text || 'ms', true);
  insert into pymem.filing_locks (tenant_id, name) values (v_tenant, p_name) on conflict do nothing;
  perform from pymem.filing_locks l where l.tenant_id = v_tenant and l.name = p_name for update;
end
$$;
comment on function pymem.lock_for_filing(text, integer) is 'Locks the context tenant''s filing row (lessons:<type>, conventions) until the transaction ends, waiting at most p_timeout_ms';

create function pymem.lesson_half_life(p_type text) returns interval
language sql immutable parallel safe
set search_path = pg_catalog, pg_temp
as $$
  -- How long a lesson of each type keeps half its stored confidence; pymem/vocabulary.py
  -- LESSON_HALF_LIVES states the same table (tests/db/test_sql_contract.py keeps them equal).
  select case p_type
    when 'user' then interval '365 days'
    when 'feedback' then interval '180 days'
    when 'reference' then interval '90 days'
    when 'project' then interval '30 days'
    when 'episode' then interval '7 days'
  end
$$;
comment on function pymem.lesson_half_life(text) is 'Half-life of a lesson type''s confidence (user 365 d, feedback 180 d, reference 90 d, project 30 d, episode 7 d); NULL for any other type';

create function pymem.lesson_confidence(p_confidence real, p_type text, p_age interval) returns double precision
language sql immutable parallel safe
set search_path = pg_catalog, pg_temp
as $$
  -- Decay at read time: the stored confidence halves every half-life of the lesson's type. An
  -- age below zero (a clock behind the filing) counts as zero. Nothing is written.
  select p_confidence * power(0.5::double precision,
                              greatest(extract(epoch from p_age), 0)::double precision
                              / extract(epoch from pymem.lesson_half_life(p_type))::double precision)
$$;
comment on function pymem.lesson_confidence(real, text, interval) is 'A lesson''s confidence after decay: stored x 0.5 ^ (age / half-life of its type); NULL for an unknown type';

-- Lessons with typed columns. A row written around the library with a type that is not a
-- lesson type is left out rather than breaking every reader; a malformed version reads as 1.
create view pymem.lessons with (security_invoker = true) as
  select m.tenant_id, m.id, m.scope, m.record ->> 'memory_type' as memory_type, m.tags, m.content, m.confidence,
         coalesce(case when m.record ->> 'version' ~ '^[1-9][0-9]{0,8}$' then (m.record ->> 'version')::integer end, 1)
           as version,
         case when jsonb_typeof(m.record -> 'source_task') = 'string' then m.record ->> 'source_task' end as source_task,
         m.origin, m.provenance, m.source_adapter, m.injection_source, m.policy_fingerprint, m.revision,
         m.created_at, m.updated_at as filed_at, m.record - 'embedding' - 'vector' as record
    from pymem.memories m
   where m.kind = 'lesson' and m.erased_at is null and m.invalidated_at is null
     and pymem.lesson_half_life(m.record ->> 'memory_type') is not null
     -- retention: not expired (pymem.session_lessons reads this view with the owner's rights)
     and (m.expires_at is null or m.expires_at > now());
comment on view pymem.lessons is 'Live lessons with their type, version and source task; filed_at is the last filing (a near-duplicate filing confirms a lesson again)';

-- The rules: each receipt at its latest version, with its status.
create view pymem.conventions with (security_invoker = true) as
  select r.tenant_id, r.id, r.version, r.scope, r.source_adapter, r.subject, r.subject_symbol, r.rule_text,
         r.rule_sha256, r.base_commit, r.assertion, r.lesson_id, r.public_key, r.signature, r.receipt_sha256,
         r.filed_at, coalesce(e.status, 'active') as status, e.reason as ended_reason, e.head_commit as ended_at_commit,
         e.ended_at
    from pymem.convention_receipts r
    left join pymem.convention_endings e on e.tenant_id = r.tenant_id and e.receipt_id = r.id
   where not exists (select from pymem.convention_receipts x
                      where x.tenant_id = r.tenant_id and x.id = r.id and x.version > r.version);
comment on view pymem.conventions is 'Each convention receipt at its latest version, with its status: active, retired or expired';

-- The installation key is registered once, by the administrative connection (pymem db register-key).
create function pymem.register_signing_key(p_public_key text) returns text
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp
as $$
-- Registers the installation key if none is, confirms it if it is the same, refuses any other.
-- Only the administrative connection may (the app role has no EXECUTE on it, and a login that is
-- not a member of pymem_owner is refused should anyone grant it): first come, first served, any
-- app or agent login could register a key of its own and break every tenant's filing.
-- Replacing the key is an administrator's act on the table.
declare
  v_key text;
begin
  if not pg_catalog.pg_has_role(session_user, 'pymem_owner', 'MEMBER') then
    raise exception 'pymem: only the administrative connection registers the signing key (pymem db register-key)'
      using errcode = '42501';
  end if;
  if p_public_key is null or p_public_key !~ '^[0-9a-f]{64}$' then
    raise exception 'pymem: a signing key is 64 lowercase hex digits (a raw Ed25519 public key)' using errcode = '22023';
  end if;
  insert into pymem.signing_keys (public_key) values (p_public_key) on conflict do nothing;
  select k.public_key into v_key from pymem.signing_keys k;
  if v_key is distinct from p_public_key then
    raise exception 'pymem: this database trusts another signing key (%...); receipts must be signed with it', left(v_key, 16)
      using errcode = '42501';
  end if;
  return v_key;
end
$$;
comment on function pymem.register_signing_key(text) is 'Registers the installation''s public key if none is, confirms it if it is the same, refuses any other; the administrative connection only';

-- Retention (migration 0013): the tenant's policy, and the purge of expired memories.

create function pymem.set_retention(p_default_ttl interval, p_max_ttl interval) returns bigint
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp
as $$
-- An operator's act (an untagged, whole-tenant context: a login bound to an adapter always acts
-- as it, so it is refused): the default and maximum ttl of the context tenant's memories, chained
-- as retention.set. NULL and NULL removes the policy. Rows already written keep their expiry
-- until their next write.
declare
  v_tenant text := pymem._ctx_tenant();
  v_entry pymem.ledger;
begin
  if v_tenant is null then
    raise exception 'pymem: setting a retention policy needs a tenant context' using errcode = '22023';
  end if;
  if pymem._ctx_adapter() is not null then
    raise exception 'pymem: a retention policy is set by the tenant''s operator, not by a context acting as adapter %',
                    pymem._ctx_adapter() using errcode = '42501';
  end if;
  if pymem._ctx_scope() <> '{}'::jsonb or pymem._ctx_read_adapters() is not null then
    raise exception 'pymem: a retention policy is the whole tenant''s: set it from a whole-tenant context (no scope, no read allow-list)'
      using errcode = '42501';
  end if;
  if (p_default_ttl is not null and (p_default_ttl <= interval '0' or p_default_ttl > interval '36500 days'))
     or (p_max_ttl is not null and (p_max_ttl <= interval '0' or p_max_ttl > interval '36500 days')) then
    raise exception 'pymem: a default or maximum ttl must be positive and at most 36500 days' using errcode = '22015';
  end if;
  if p_default_ttl > p_max_ttl then
    raise exception 'pymem: the default ttl must not exceed the maximum' using errcode = '22015';
  end if;
  if p_default_ttl is null and p_max_ttl is null then
    delete from pymem.retention_policies r where r.tenant_id = v_tenant;
  else
    insert into pymem.retention_policies as r (tenant_id, default_ttl, max_ttl)
      values (v_tenant, p_default_ttl, p_max_ttl)
      on conflict (tenant_id) do update
        set default_ttl = excluded.default_ttl, max_ttl = excluded.max_ttl, set_at = now(), set_by = session_user;
  end if;
  v_entry := pymem._append_events(
    array[row(v_tenant, 'retention.set', null, null, null, 0,
              jsonb_build_object('default_ttl_seconds', extract(epoch from p_default_ttl),
                                 'max_ttl_seconds', extract(epoch from p_max_ttl)))::pymem._pending_event]);
  return v_entry.seq;
end
$$;
comment on function pymem.set_retention(interval, interval) is 'Sets (or with NULL, NULL removes) the context tenant''s default and maximum ttl; an operator''s act, chained as retention.set; returns its seq';

create function pymem.reap_expired(p_ids text[]) returns integer
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp
as $$
-- A write naming the id of an expired memory replaces it: the expired row, invisible to every
-- read, is deleted first (a memory.delete event), so the write inserts afresh instead of meeting
-- a row the read policy hides. Row-level security's delete policy decides which rows go (an
-- adapter reaps only its own). One probe of the expiry index answers for a tenant with nothing
-- expired.
declare
  v_tenant text := pymem._ctx_tenant();
  v_count integer;
begin
  if p_ids is null or cardinality(p_ids) > 10000 then
    raise exception 'pymem: reap_expired takes a list of at most 10000 ids' using errcode = '22023';
  end if;
  if v_tenant is null
     or not exists (select from pymem.memories m where m.tenant_id = v_tenant and m.expires_at <= now()) then
    return 0;
  end if;
  delete from pymem.memories m where m.tenant_id = v_tenant and m.id = any (p_ids) and m.expires_at <= now();
  get diagnostics v_count = row_count;
  return v_count;
end
$$;
comment on function pymem.reap_expired(text[]) is 'Deletes the context tenant''s expired memories among these ids (each a ledger event) before a write reuses them; RLS decides which';

create function pymem.purge_expired(p_limit integer default 10000) returns bigint
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp
as $$
-- Deletes up to p_limit of the context tenant's expired memories, soonest expired first: each a
-- memory.delete event (the chain keeps their content hashes, never their content), then one
-- retention.purged event with the count. Row-level security decides which rows the context may
-- delete (an adapter purges only its own); call it again while it returns p_limit.
declare
  v_tenant text := pymem._ctx_tenant();
  v_adapter text := pymem._ctx_adapter();
  v_count bigint;
begin
  if v_tenant is null then
    raise exception 'pymem: purging needs a tenant context' using errcode = '22023';
  end if;
  if p_limit is null or p_limit < 1 or p_limit > 100000 then
    raise exception 'pymem: the purge limit must be between 1 and 100000' using errcode = '22023';
  end if;
  delete from pymem.memories m
   where m.tenant_id = v_tenant
     and m.id in (select x.id from pymem.memories x
                   where x.tenant_id = v_tenant and x.expires_at <= now()
                     and (v_adapter is null or x.source_adapter = v_adapter)
                   order by x.expires_at, x.id
                   limit p_limit);
  get diagnostics v_count = row_count;
  if v_count > 0 then
    perform pymem._append_events(
      array[row(v_tenant, 'retention.purged', null, null, null, 0,
                jsonb_build_object('memories', v_count, 'source_adapter', v_adapter))::pymem._pending_event]);
  end if;
  return v_count;
end
$$;
comment on function pymem.purge_expired(integer) is 'Deletes up to p_limit of the context tenant''s expired memories (chained memory.delete events and one retention.purged); returns how many';

create function pymem.purge_expired_all(p_limit integer default 10000) returns table (tenant_id text, purged bigint)
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp
as $$
-- What a scheduler (pg_cron, say) calls: pymem.purge_expired for every tenant that has expired
-- memories, each in an operator context of that tenant. No role is granted it: the owner and
-- superusers only, and never a login bound to an adapter. The caller's own context is restored.
#variable_conflict use_column
declare
  v_saved text[] := array[current_setting('pymem.tenant', true), current_setting('pymem.actor', true),
                          current_setting('pymem.adapter', true), current_setting('pymem.scope', true),
                          current_setting('pymem.read_adapters', true)];
  v_tenant text;
begin
  if (pymem._login_binding()).role_name is not null or (pymem._login_binding()).tenants is not null then
    raise exception 'pymem: a login bound to an adapter cannot purge every tenant' using errcode = '42501';
  end if;
  for v_tenant in select distinct m.tenant_id from pymem.memories m where m.expires_at <= now() order by 1 loop
    perform set_config('pymem.tenant', v_tenant, true), set_config('pymem.actor', '', true),
            set_config('pymem.adapter', '', true), set_config('pymem.scope', '{}', true),
            set_config('pymem.read_adapters', '', true);
    tenant_id := v_tenant;
    purged := pymem.purge_expired(p_limit);
    return next;
  end loop;
  perform set_config('pymem.tenant', coalesce(v_saved[1], ''), true), set_config('pymem.actor', coalesce(v_saved[2], ''), true),
          set_config('pymem.adapter', coalesce(v_saved[3], ''), true), set_config('pymem.scope', coalesce(v_saved[4], ''), true),
          set_config('pymem.read_adapters', coalesce(v_saved[5], ''), true);
end
$$;
comment on function pymem.purge_expired_all(integer) is 'pymem.purge_expired for every tenant with expired memories, for a scheduler (owner and superusers only); one row per tenant purged';

-- Erasure of a person (migration 0013).

create function pymem.erase_actor(p_actor text, p_reason text)
returns table (memories bigint, idempotency_keys bigint, ledger_entries bigint, legacy_entries bigint, seq bigint)
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp
as $$
-- A data-subject request in the context tenant: every memory the person wrote (the ledger records
-- who inserted or updated each, under their pseudonym) or that is about them (its subject key) is
-- deleted, each a memory.delete event (a note of theirs an operator released from the quarantine
-- among them: its memory.insert names the operator); their notes in the quarantine, held by them or
-- about them, lose what they said (a held one is rejected with the erasure's reason, chained as
-- quarantine.rejected; the row stays, as every decision's does, without its content, record,
-- embedding, tags or provenance details); their idempotency records (which name them in clear and
-- are not chained) are deleted; and their pseudonym's link to their id is destroyed, so the
-- ledger entries that stay name nobody, and the chain still verifies (it covers the pseudonym).
-- Entries written before migration 0013 hash the id itself (e:<token>): they are checked now,
-- while the id is known, and sealed (a digest of each as it stays) in the actor.erased event that
-- closes the erasure; verification checks them against that seal from then on. An operator's act:
-- an untagged, whole-tenant context, never a login bound to an adapter.
#variable_conflict use_column
declare
  v_tenant text := pymem._ctx_tenant();
  v_token text;
  v_ids text[];
  v_bad bigint;
  v_quarantined bigint := 0;
  v_seal bytea;
  v_entry pymem.ledger;
begin
  perform pymem._check_erasure_reason(p_reason);
  if v_tenant is null then
    raise exception 'pymem: erasing a person needs a tenant context' using errcode = '22023';
  end if;
  if pymem._ctx_adapter() is not null then
    raise exception 'pymem: erasing a person is the tenant operator''s act, not that of a context acting as adapter %',
                    pymem._ctx_adapter() using errcode = '42501';
  end if;
  if pymem._ctx_scope() <> '{}'::jsonb or pymem._ctx_read_adapters() is not null then
    raise exception 'pymem: erasing a person needs a whole-tenant context (no scope, no read allow-list)'
      using errcode = '42501';
  end if;
  if p_actor is null or p_actor = '' or length(p_actor) > 256 or not pymem._is_plain_text(p_actor) then
    raise exception 'pymem: the person to erase must be an id of 1-256 characters without control or format characters'
      using errcode = '22023';
  end if;
  if p_actor = pymem._ctx_actor() then
    raise exception 'pymem: a context cannot erase its own actor (the erasure event would name them again)'
      using errcode = '22023';
  end if;
  if strpos(lower(p_reason), lower(p_actor)) > 0 then
    raise exception 'pymem: the erasure reason must not name the person (it stays in the ledger)' using errcode = '22023';
  end if;

  delete from pymem.idempotency_keys k where k.tenant_id = v_tenant and k.actor = p_actor;
  get diagnostics idempotency_keys = row_count;
  memories := 0; ledger_entries := 0; legacy_entries := 0;

  select a.token into v_token from pymem.actor_pseudonyms a where a.tenant_id = v_tenant and a.actor = p_actor;
  if v_token is not null then
    select array_agg(distinct l.memory_id) into v_ids
      from pymem.ledger l
     where l.tenant_id = v_tenant and l.actor in ('p:' || v_token, 'e:' || v_token)
       and l.memory_id is not null and l.event in ('memory.insert', 'memory.update');
    -- notes they wrote that an operator released: the release wrote the memory, at its own time
    select coalesce(v_ids, '{}') || coalesce(array_agg(q.id), '{}') into v_ids
      from pymem.quarantine q
      join pymem.memories m on m.tenant_id = q.tenant_id and m.id = q.id and m.created_at = q.decided_at
     where q.tenant_id = v_tenant and q.held_by = 'p:' || v_token and q.status = 'released';
    delete from pymem.memories m
     where m.tenant_id = v_tenant and (m.id = any (coalesce(v_ids, '{}')) or m.subject = 'p:' || v_token);
    get diagnostics memories = row_count;
    -- their notes in the quarantine (who held them and their subject are pseudonyms, as in the ledger)
    update pymem.quarantine q set erased_at = now(), decision_reason = p_reason
     where q.tenant_id = v_tenant and q.erased_at is null
       and (q.held_by = 'p:' || v_token or q.subject = 'p:' || v_token);
    get diagnostics v_quarantined = row_count;
    select count(*) into ledger_entries
      from pymem.ledger l where l.tenant_id = v_tenant and l.actor in ('p:' || v_token, 'e:' || v_token);

    -- entries from before migration 0013: verified with the id while it is still known, then sealed
    select l.seq into v_bad from pymem.ledger l
     where l.tenant_id = v_tenant and l.actor = 'e:' || v_token
       and l.chain_hash is distinct from sha256(l.prev_hash || pymem._event_bytes_as(l, p_actor))
     order by l.seq limit 1;
    if found then
      raise exception 'pymem: ledger entry % of this person does not verify; run pymem verify before erasing', v_bad
        using errcode = 'XX001';
    end if;
    select count(*), sha256(string_agg(int8send(l.seq) || sha256(l.prev_hash || pymem._event_bytes(l)), ''::bytea
                                       order by l.seq))
      into legacy_entries, v_seal
      from pymem.ledger l where l.tenant_id = v_tenant and l.actor = 'e:' || v_token;

    delete from pymem.actor_pseudonyms a where a.tenant_id = v_tenant and a.token = v_token;
  end if;

  v_entry := pymem._append_events(
    array[row(v_tenant, 'actor.erased', null, null, null, 0,
              jsonb_build_object('reason', p_reason, 'pseudonym', v_token, 'memories', memories,
                                 'quarantined', v_quarantined,
                                 'idempotency_keys', idempotency_keys, 'ledger_entries', ledger_entries,
                                 'legacy_entries', legacy_entries,
                                 'legacy_seal', encode(v_seal, 'hex')))::pymem._pending_event]);
  seq := v_entry.seq;
  return next;
end
$$;
comment on function pymem.erase_actor(text, text) is 'Erases a person from the context tenant: their memories (written by or about them) and idempotency records deleted, their quarantined notes emptied (held ones rejected), their pseudonym unlinked; chained as actor.erased; the chain still verifies';

-- The quarantine's decisions (migration 0014).

-- Deciding a held note is the operator's: a context acting as an adapter (every bound agent
-- login is one) is refused, so the agent that wrote a note, or any other agent, cannot release
-- it into what prompts see. The note must be visible to the operator's context (scope, allow-list).
create function pymem._quarantined_for_decision(p_id text, p_reason text) returns pymem.quarantine
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp
as $$
declare
  v_row pymem.quarantine;
begin
  if pymem._ctx_tenant() is null then
    raise exception 'pymem: deciding a quarantined note needs a tenant context' using errcode = '22023';
  end if;
  if pymem._ctx_adapter() is not null then
    raise exception 'pymem: only an operator context (no adapter) may release or reject a quarantined note; adapter % may not',
                    pymem._ctx_adapter()
      using errcode = '42501';
  end if;
  if p_reason is null or p_reason = '' or length(p_reason) > 300 or not pymem._is_plain_text(p_reason) then
    raise exception 'pymem: a decision reason must be 1-300 characters without control or format characters'
      using errcode = '22023';
  end if;
  -- the latest hold of the id (an earlier one was decided before it could be held again)
  select q.* into v_row from pymem.quarantine q
   where q.tenant_id = pymem._ctx_tenant() and q.id = p_id
     and (pymem._ctx_scope() = '{}'::jsonb or q.scope @> pymem._ctx_scope())
     and (pymem._ctx_read_adapters() is null or q.source_adapter = any (pymem._ctx_read_adapters()))
   order by q.hold_id desc limit 1
   for update;
  if not found then
    raise exception 'pymem: no quarantined note % that this context may see', left(p_id, 100) using errcode = 'P0002';
  end if;
  if v_row.status <> 'held' then
    raise exception 'pymem: quarantined note % was already %', left(p_id, 100), v_row.status using errcode = '55000';
  end if;
  return v_row;
end
$$;
comment on function pymem._quarantined_for_decision(text, text) is 'The held note an operator context may decide, locked; refuses an adapter context, a bad reason, an unknown or decided note';

create function pymem.release_quarantined(p_id text, p_reason text) returns bigint
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp
as $$
-- The note becomes the memory its writer asked for (same id, scope, adapter, origin, provenance,
-- confidence, ttl, subject): memory.insert by the memories chain, then quarantine.released. The
-- memory's valid_from and created_at are the release's: it is believed from now on, and it expires
-- ttl after the release. The ttl was within the tenant's maximum when the note was held; a maximum
-- lowered since is honoured (as a memory's next write honours it).
declare
  q pymem.quarantine := pymem._quarantined_for_decision(p_id, p_reason);
  v_seq bigint;
  v_max interval;
begin
  if exists (select from pymem.memories m where m.tenant_id = q.tenant_id and m.id = q.id) then
    raise exception 'pymem: id % is already a memory of this tenant; the held note cannot be released under it',
                    left(q.id, 100)
      using errcode = '23505', constraint = 'quarantine_id_free';
  end if;
  -- a NULL ttl stays NULL: the memory gets the tenant's default, as any write naming none
  select r.max_ttl into v_max from pymem.retention_policies r where r.tenant_id = q.tenant_id;
  insert into pymem.memories (tenant_id, id, scope, kind, content, record, embedding, tags, importance, confidence,
                              origin, source_adapter, provenance, injection_source, policy_fingerprint, embedder,
                              ttl, subject)
  values (q.tenant_id, q.id, q.scope, q.kind, q.content, q.record, q.embedding, q.tags, q.importance, q.confidence,
          q.origin, q.source_adapter, q.provenance, q.injection_source, q.policy_fingerprint, q.embedder,
          case when q.ttl > v_max then v_max else q.ttl end,
          q.subject);
  update pymem.quarantine x set status = 'released', decision_reason = p_reason
   where x.tenant_id = q.tenant_id and x.hold_id = q.hold_id;
  select max(l.seq) into v_seq from pymem.ledger l
   where l.tenant_id = q.tenant_id and l.memory_id = q.id and l.event = 'quarantine.released';
  return v_seq;
end
$$;
comment on function pymem.release_quarantined(text, text) is 'An operator releases a held note: it becomes the memory its writer asked for (memory.insert; expiring ttl after the release) and quarantine.released is chained; returns that event''s seq';

create function pymem.reject_quarantined(p_id text, p_reason text) returns bigint
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp
as $$
declare
  q pymem.quarantine := pymem._quarantined_for_decision(p_id, p_reason);
  v_seq bigint;
begin
  update pymem.quarantine x set status = 'rejected', decision_reason = p_reason
   where x.tenant_id = q.tenant_id and x.hold_id = q.hold_id;
  select max(l.seq) into v_seq from pymem.ledger l
   where l.tenant_id = q.tenant_id and l.memory_id = q.id and l.event = 'quarantine.rejected';
  return v_seq;
end
$$;
comment on function pymem.reject_quarantined(text, text) is 'An operator rejects a held note: its content, record and embedding go (the hash stays) and quarantine.rejected is chained; returns that event''s seq';

reset role;

-- ============================================================================================
-- 8. privileges
-- ============================================================================================
-- The app role gets exactly the DML it needs; nothing on the ledger but SELECT (appends go through
-- the definer trigger function); no TRUNCATE, no ownership, so no ALTER or DISABLE of anything.

reset role;
revoke all on schema pymem from public;
grant usage on schema pymem to pymem_app, pymem_auditor;
revoke all on all tables in schema pymem from public;
revoke all on all functions in schema pymem from public;

-- Column-level INSERT and UPDATE, and no DELETE: a login can write only the columns a caller
-- may choose (revision, created_at, updated_at and content_hash are the database's), and without
-- a table-level UPDATE, DELETE or TRUNCATE privilege it cannot LOCK a table in ACCESS EXCLUSIVE
-- (or any mode stronger than ROW EXCLUSIVE) and stall every tenant. Deletes go through
-- pymem.delete_memories and pymem.purge_idempotency_keys.
grant select on pymem.memories to pymem_app;
grant insert (tenant_id, id, scope, kind, content, record, embedding, tags, importance, confidence, origin,
              source_adapter, provenance, injection_source, policy_fingerprint, valid_from, invalidated_at,
              superseded_by)
  on pymem.memories to pymem_app;
grant update (scope, kind, content, record, embedding, tags, importance, confidence, origin, source_adapter,
              provenance, injection_source, policy_fingerprint, valid_from, invalidated_at, superseded_by,
              erased_at)
  on pymem.memories to pymem_app;
grant insert (embedder), update (embedder) on pymem.memories to pymem_app;
-- retention and erasure of a person (migration 0013): the writer names a ttl and a subject key
-- (the database computes expires_at and keeps the subject's pseudonym); operators set the
-- tenant's policy, purge and erase a person through definer functions that check the context
grant insert (ttl, subject), update (ttl, subject) on pymem.memories to pymem_app;
grant select on pymem.retention_policies to pymem_app;
grant select on pymem.actor_pseudonyms to pymem_app, pymem_auditor;
grant execute on function pymem.set_retention(interval, interval), pymem.reap_expired(text[]),
  pymem.purge_expired(integer), pymem.erase_actor(text, text) to pymem_app;
grant execute on function pymem._actor_name(text, text), pymem._event_bytes_as(pymem.ledger, text)
  to pymem_app, pymem_auditor;
grant select on pymem.idempotency_keys to pymem_app;
grant insert (tenant_id, verb, actor, key, digest, result, expires_at) on pymem.idempotency_keys to pymem_app;
grant update (digest, result, created_at, expires_at) on pymem.idempotency_keys to pymem_app;
grant select on pymem.ledger, pymem.chain_heads, pymem.store_info to pymem_app;
grant select on pymem.ledger, pymem.chain_heads, pymem.store_info, pymem.login_bindings, pymem.binding_log
  to pymem_auditor;

grant execute on function pymem._ctx_tenant(), pymem._ctx_actor(), pymem._ctx_adapter(), pymem._ctx_scope(),
  pymem._ctx_read_adapters(), pymem._scope_is_flat(jsonb), pymem._is_plain_text(text), pymem._login_binding(),
  pymem._on_citus()
  to pymem_app, pymem_auditor;
grant execute on function pymem.set_context(text, text, text, jsonb, text[]) to pymem_app, pymem_auditor;
grant execute on function pymem._b(text), pymem._b(bytea), pymem._b(bigint), pymem._b(timestamptz), pymem._b(jsonb), pymem._bv(jsonb),
  pymem._b(text[]), pymem._b(real), pymem._genesis_hash(text), pymem._content_hash_v1(pymem.memories),
  pymem._event_bytes_v1(pymem.ledger) to pymem_app, pymem_auditor;
grant execute on function pymem._content_bytes_v2(pymem.memories), pymem._content_hash_v2(pymem.memories),
  pymem._content_hash(pymem.memories), pymem._event_bytes_v2(pymem.ledger), pymem._event_bytes(pymem.ledger)
  to pymem_app, pymem_auditor;
grant execute on function pymem.verify_chain(text) to pymem_app, pymem_auditor;
-- search runs with the caller's rights, so only the app role (which can read memories) gets it
grant execute on function pymem.search(vector, integer, jsonb, boolean, boolean, text, bigint, integer, integer, text, double precision, double precision) to pymem_app;
grant execute on function pymem._search_hybrid(vector, text, integer, jsonb, boolean, boolean, text, bigint, integer, integer, double precision, double precision),
  pymem._text_candidates(text, integer, jsonb, boolean), pymem.claim_embedder(text, integer),
  pymem.record_reembedded(text), pymem._tenant_lexeme(text), pymem._search_text(text, text) to pymem_app;
grant execute on function pymem._search_ef(integer) to pymem_app, pymem_auditor;
-- the hybrid search runs as the caller, so the caller runs its vector ranking (the session
-- ranking is run only by the session search functions, as their owner: no grant)
grant execute on function pymem._vector_ranking(vector, integer, jsonb, boolean, text, bigint, integer, integer)
  to pymem_app;
grant execute on function pymem.search_as(text, text, text, jsonb, text[], vector, integer, jsonb, boolean, boolean, text) to pymem_app;
-- a definer that applies the read policy itself and returns ids only (see its comment)
grant execute on function pymem._search_in_scope(vector, integer, jsonb, boolean, bigint) to pymem_app;
-- admission: the app records refusals; both roles read the audit views (each sees its own rows)
grant execute on function pymem.record_refusal(text, text, text, text, text, text, double precision, text) to pymem_app;
grant execute on function pymem.delete_memories(text[]), pymem.purge_idempotency_keys() to pymem_app;
grant execute on function pymem.holds_chain_lock(text) to pymem_app;
grant select on pymem.audit_refusals, pymem.memory_history to pymem_app, pymem_auditor;
-- sessions and delivery: start, end and summarise sessions; record injections; erase with a reason
grant select on pymem.sessions to pymem_app;
grant insert (tenant_id, id, scope, surface, incognito, topic) on pymem.sessions to pymem_app;
grant update (ended_at, summary) on pymem.sessions to pymem_app;
grant execute on function pymem.record_injection(text, integer, text[], text[], text[], text, integer, integer, integer, text, text, text, text[]),
  pymem.erase_memory(text, text), pymem.erase_session(text, text) to pymem_app;
grant execute on function pymem.search_as_of(vector, integer, timestamptz, jsonb) to pymem_app;
-- what a session receives: definer reads that apply the session's scope rule themselves (the helper
-- they share reads pymem.scope_rows and is the owner's only)
grant execute on function pymem.session_hot(text, integer), pymem.session_search(text, vector, integer, text, bigint),
  pymem.session_search_hybrid(text, vector, text, integer, text, bigint, double precision, double precision),
  pymem.session_lessons(text, text[], integer, timestamptz), pymem.session_receives(text, text[]) to pymem_app;
grant select on pymem.audit_injections, pymem.memory_injections to pymem_app, pymem_auditor;
-- lessons, convention receipts and shared facts: lessons and facts are memories (the grants above);
-- receipts and their endings are inserted by column, never updated or deleted; the installation
-- key is registered by the administrative connection alone (pymem.register_signing_key)
grant select on pymem.lessons, pymem.conventions, pymem.convention_receipts, pymem.convention_endings,
  pymem.signing_keys to pymem_app;
grant insert (tenant_id, id, version, scope, subject, subject_symbol, rule_text, rule_sha256, base_commit, assertion,
              lesson_id, public_key, signature, receipt_sha256)
  on pymem.convention_receipts to pymem_app;
grant insert (tenant_id, receipt_id, status, reason, head_commit) on pymem.convention_endings to pymem_app;
grant select on pymem.signing_keys to pymem_auditor;
-- (the signing key is registered by the administrative connection only: no grant)
grant execute on function pymem.lock_for_filing(text, integer) to pymem_app;
grant execute on function pymem.lesson_half_life(text), pymem.lesson_confidence(real, text, interval)
  to pymem_app, pymem_auditor;
-- a definer that names the context tenant's own channel: the app's, not the auditor's
grant execute on function pymem.fact_channel(text) to pymem_app;
-- the quarantine (migration 0014): the gate holds notes by column (the bookkeeping columns are the
-- database's); reading them is the explicit listing; deciding them goes through the two definer verbs
grant select on pymem.quarantine to pymem_app;
grant insert (tenant_id, id, scope, kind, content, record, embedding, tags, importance, confidence, origin,
              source_adapter, provenance, injection_source, policy_fingerprint, embedder, ttl, subject, reason,
              signature, score, piece_digest)
  on pymem.quarantine to pymem_app;
grant execute on function pymem.release_quarantined(text, text), pymem.reject_quarantined(text, text) to pymem_app;
