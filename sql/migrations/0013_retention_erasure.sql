-- pymem migration 0013: retention, and erasure of a person.
--
-- * A memory may expire: memories.ttl is its writer's (or the tenant's default,
--   pymem.retention_policies, set by an operator with pymem.set_retention, within its maximum),
--   and memories.expires_at is computed from it by the database's clock at every write
--   (pymem._memories_expiry). The read policy hides an expired row from every reader, and the
--   definer functions that apply the read policy themselves (scoped and session searches, a
--   session's hot memories and lessons) leave it out too, as do the vector rankings a hybrid
--   search fuses (pymem._vector_ranking, pymem._session_ranking: migration 0012). pymem.purge_expired deletes a tenant's
--   expired rows as chained memory.delete events (pymem.purge_expired_all: every tenant, for a
--   scheduler); a write reusing an expired id reaps it first (pymem.reap_expired).
-- * The ledger records who acted under a pseudonym (p:<random token>, pymem.actor_pseudonyms is
--   the only link to the id), and a memory's subject key is kept the same way. pymem.erase_actor
--   deletes a person's memories (written by or about them) and idempotency records and destroys
--   the link: the chain, which covers the pseudonym, still verifies, and no row names the person.
-- * Existing ledgers are converted: each entry's actor becomes e:<token>, the id moves to
--   pymem.actor_pseudonyms, and verification puts it back into the hashed bytes, so no chain_hash
--   changes (signed checkpoints stay valid). Erasing such a person seals their old entries in the
--   actor.erased event first; verification checks those entries against that seal afterwards.
set role pymem_owner;

-- A function's SET clause may name hnsw.* only once pgvector's library has defined those settings
-- in this session (the searches redefined below do): a cast to vector loads it.
do $$ begin perform '[1]'::vector; end $$;

-- ---------------------------------------------------------------------------------------------
-- tables: the expiry and subject of a memory, retention policies, pseudonyms
-- ---------------------------------------------------------------------------------------------

alter table pymem.memories add column ttl interval;
alter table pymem.memories add column expires_at timestamptz;
alter table pymem.memories add column subject text;
comment on column pymem.memories.ttl is 'The memory''s time-to-live as its writer named it (else the tenant''s default); the clock restarts at every write';
comment on column pymem.memories.expires_at is 'When the memory expires: the database''s now() + ttl at the last write (NULL = never); expired rows are invisible to every read and deleted by pymem.purge_expired';
comment on column pymem.memories.subject is 'Pseudonym (p:<token>) of the person the memory is about, from the subject key its writer set; pymem.erase_actor erases every memory about that person';

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

-- ---------------------------------------------------------------------------------------------
-- row-level security: an expired memory is gone for every reader, and never revived
-- ---------------------------------------------------------------------------------------------

alter policy memories_read on pymem.memories
  using (tenant_id = (select pymem._ctx_tenant())
         and ((select pymem._ctx_scope() = '{}'::jsonb) or scope @> (select pymem._ctx_scope()))
         and ((select pymem._ctx_read_adapters()) is null
              or source_adapter = any ((select pymem._ctx_read_adapters())::text[]))
         -- retention: an expired row is gone for every reader
         and (expires_at is null or expires_at > now()));
comment on policy memories_read on pymem.memories is 'Visible: own tenant, scope containing the context scope, adapter in the allow-list when one is set, not expired';
alter policy memories_update on pymem.memories
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

-- ---------------------------------------------------------------------------------------------
-- pseudonyms: the ledger records who acted under a pseudonym
-- ---------------------------------------------------------------------------------------------

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
    insert into pymem.ledger select x.* from unnest(v_entries) x;
    update pymem.chain_heads h
       set seq = v_head.seq, chain_hash = v_head.chain_hash, live_rows = h.live_rows + v_live, updated_at = v_at
     where h.tenant_id = v_tenant;
  end loop;
  return v_entry;
end
$$;
comment on function pymem._append_events(pymem._pending_event[]) is 'Appends events to their tenants'' chains under the head-row lock (definer: the app cannot write the ledger directly)';

-- ---------------------------------------------------------------------------------------------
-- triggers: the database's expiry, the subject's pseudonym
-- ---------------------------------------------------------------------------------------------

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

-- ---------------------------------------------------------------------------------------------
-- reads: the definer functions that apply the read policy themselves leave expired rows out too
-- ---------------------------------------------------------------------------------------------

create or replace function pymem._search_in_scope(
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

create or replace function pymem._vector_ranking(
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

create or replace function pymem._text_candidates(
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

create or replace function pymem.session_hot(p_session text, p_limit integer) returns setof pymem.search_hit
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

create or replace function pymem._session_ranking(
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

create or replace function pymem.session_receives(p_session text, p_ids text[]) returns text[]
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

create or replace function pymem.session_search_hybrid(
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
-- over the same rows, each cut at v_pool rows, fused by reciprocal rank: 1 / (p_rrf_k + vector
-- rank) + p_text_weight / (p_rrf_k + text rank). The p_top_k best come back in that order, each
-- with its cosine similarity as score: what a delivery recalls. What the session receives stays
-- decided by pymem._session_scopes (its scope and its ancestors, within the read allow-list); the
-- text ranking's document frequencies and lengths are counted over those rows only. Definer for
-- the reason pymem.session_hot is (and the text match, not leakproof, uses the GIN index only so).
-- The candidates are walked in fused order, each row read by its key, until p_top_k are found.
declare
  v_tenant text := pymem._ctx_tenant();
  v_read text[] := pymem._ctx_read_adapters();
  v_pool integer;
  v_config regconfig := (select s.text_search_config from pymem.store_info s);
  v_terms text[];
  v_match tsquery;
  f record;
begin
  if p_top_k is null or p_top_k < 1 or p_top_k > 1000 then
    raise exception 'pymem: top_k must be between 1 and 1000' using errcode = '22023';
  end if;
  if p_text_weight is null or p_text_weight < 0 or p_text_weight = 'Infinity'::double precision
     or p_rrf_k is null or p_rrf_k < 0 or p_rrf_k = 'Infinity'::double precision then
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
  return query
    with vec as (
      select h.id, row_number() over (order by 1 - h.distance desc, h.id) as r
        from pymem._session_ranking(f.scopes, f.scope_keys, f.live_rows, p_query, v_pool, p_plan, p_exact_below) h),
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
      select b.id, row_number() over (order by b.score desc, b.id) as r from bm25 b),
    fused as (
      select coalesce(v.id, t.id) as id,
             coalesce(1.0 / (p_rrf_k + v.r), 0) + p_text_weight * coalesce(1.0 / (p_rrf_k + t.r), 0) as fused
        from vec v full join txt t on t.id = v.id)
    select m.id, coalesce(m.record_lite, m.record), m.content, m.kind, m.tags, m.scope, m.origin, m.provenance,
           m.confidence, m.source_adapter, m.injection_source, m.policy_fingerprint, m.created_at, m.revision,
           1 - (m.embedding <=> p_query)
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
comment on function pymem.session_search_hybrid(text, vector, text, integer, text, bigint, double precision, double precision) is 'Hybrid search over the memories a session receives: pymem.session_search''s vector ranking and a BM25 ranking of the text over the same rows, fused by reciprocal rank; definer, applying the session''s rule itself';

do $$
begin
  execute format('alter function pymem._search_in_scope(vector, integer, jsonb, boolean, bigint) set search_path = pg_catalog, %I, pg_temp',
                 (select n.nspname from pg_extension e join pg_namespace n on n.oid = e.extnamespace where e.extname = 'vector'));
end
$$;

do $$
declare
  v_schema text := (select n.nspname from pg_extension e join pg_namespace n on n.oid = e.extnamespace where e.extname = 'vector');
begin
  execute format('alter function pymem._vector_ranking(vector, integer, jsonb, boolean, text, bigint, integer, integer) set search_path = pg_catalog, %I, pg_temp', v_schema);
  execute format('alter function pymem._session_ranking(jsonb[], bytea[], bigint, vector, integer, text, bigint) set search_path = pg_catalog, %I, pg_temp', v_schema);
end
$$;

do $$
begin
  execute format('alter function pymem.session_search_hybrid(text, vector, text, integer, text, bigint, double precision, double precision) set search_path = pg_catalog, %I, pg_temp',
                 (select n.nspname from pg_extension e join pg_namespace n on n.oid = e.extnamespace where e.extname = 'vector'));
end
$$;

create or replace view pymem.lessons with (security_invoker = true) as
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

-- ---------------------------------------------------------------------------------------------
-- verification of entries from before pseudonyms; audit views name the actor behind a pseudonym
-- ---------------------------------------------------------------------------------------------

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
      from (select l as entry, l.seq, l.memory_id, l.prev_hash, l.chain_hash, l.hash_version,
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
                   sha256(string_agg(int8send(l.seq) || sha256(l.prev_hash || pymem._event_bytes(l)), ''::bytea
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

create or replace view pymem.audit_refusals with (security_invoker = true) as
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

create or replace view pymem.memory_history with (security_barrier = true) as
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

create or replace view pymem.audit_injections with (security_invoker = true) as
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

create or replace function pymem.purge_idempotency_keys() returns bigint
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

-- ---------------------------------------------------------------------------------------------
-- verbs: retention policy, purge, erasure of a person
-- ---------------------------------------------------------------------------------------------

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
-- deleted, each a memory.delete event; their idempotency records (which name them in clear and
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
    delete from pymem.memories m
     where m.tenant_id = v_tenant and (m.id = any (coalesce(v_ids, '{}')) or m.subject = 'p:' || v_token);
    get diagnostics memories = row_count;
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
                                 'idempotency_keys', idempotency_keys, 'ledger_entries', ledger_entries,
                                 'legacy_entries', legacy_entries,
                                 'legacy_seal', encode(v_seal, 'hex')))::pymem._pending_event]);
  seq := v_entry.seq;
  return next;
end
$$;
comment on function pymem.erase_actor(text, text) is 'Erases a person from the context tenant: their memories (written by or about them) and idempotency records deleted, their pseudonym unlinked; chained as actor.erased; the chain still verifies';

-- ---------------------------------------------------------------------------------------------
-- existing ledgers: every actor id becomes a pseudonym, without changing a chain_hash
-- ---------------------------------------------------------------------------------------------
-- The entries written so far hash the actor's id itself. Their actor column now holds e:<token>
-- and the id moves to pymem.actor_pseudonyms, from where verification puts it back into the
-- hashed bytes: no chain_hash changes, so checkpoints signed before stay valid. Each converted
-- tenant's chain records the conversion (ledger.pseudonymised). The append-only trigger is
-- stood down, and an update policy granted to the owner, for this one statement per tenant.

alter table pymem.ledger disable trigger ledger_no_update_delete;
create policy ledger_pseudonymise on pymem.ledger for update to pymem_owner
  using (tenant_id = (select pymem._ctx_tenant())) with check (tenant_id = (select pymem._ctx_tenant()));
do $$
declare
  v_tenant text;
  v_actors bigint;
  v_entries bigint;
begin
  for v_tenant in select distinct l.tenant_id from pymem.ledger l where l.actor is not null order by 1 loop
    perform set_config('pymem.tenant', v_tenant, true), set_config('pymem.actor', '', true),
            set_config('pymem.adapter', '', true), set_config('pymem.scope', '{}', true),
            set_config('pymem.read_adapters', '', true);
    insert into pymem.actor_pseudonyms (tenant_id, actor, token)
      select v_tenant, x.actor, replace(gen_random_uuid()::text, '-', '')
        from (select distinct l.actor from pymem.ledger l where l.tenant_id = v_tenant and l.actor is not null) x;
    get diagnostics v_actors = row_count;
    update pymem.ledger l set actor = 'e:' || a.token
      from pymem.actor_pseudonyms a
     where l.tenant_id = v_tenant and a.tenant_id = v_tenant and a.actor = l.actor;
    get diagnostics v_entries = row_count;
    perform pymem._append_events(
      array[row(v_tenant, 'ledger.pseudonymised', null, null, null, 0,
                jsonb_build_object('entries', v_entries, 'actors', v_actors))::pymem._pending_event]);
  end loop;
  perform set_config('pymem.tenant', '', true), set_config('pymem.scope', '', true);
end
$$;
drop policy ledger_pseudonymise on pymem.ledger;
alter table pymem.ledger enable always trigger ledger_no_update_delete;

reset role;

revoke all on table pymem.retention_policies, pymem.actor_pseudonyms from public;
revoke all on function pymem._pseudonym(text, text), pymem._actor_name(text, text), pymem._event_bytes_as(pymem.ledger, text),
  pymem._memories_expiry(), pymem._memories_subject(), pymem.set_retention(interval, interval),
  pymem.reap_expired(text[]), pymem.purge_expired(integer), pymem.purge_expired_all(integer),
  pymem.erase_actor(text, text) from public;
grant insert (ttl, subject), update (ttl, subject) on pymem.memories to pymem_app;
grant select on pymem.retention_policies to pymem_app;
grant select on pymem.actor_pseudonyms to pymem_app, pymem_auditor;
grant execute on function pymem.set_retention(interval, interval), pymem.reap_expired(text[]),
  pymem.purge_expired(integer), pymem.erase_actor(text, text) to pymem_app;
grant execute on function pymem._actor_name(text, text), pymem._event_bytes_as(pymem.ledger, text)
  to pymem_app, pymem_auditor;
