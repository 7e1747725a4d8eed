-- pymem migration 0016: one schema for plain Postgres and Citus (sharded by tenant).
--
-- The statements Citus cannot route take a form it can, behind one switch (pymem._on_citus(),
-- true where `pymem db distribute` set citus.propagate_set_commands = 'local' for the database):
-- pymem.set_context sets the context with SET LOCAL (which Citus replays on the worker shards),
-- pymem._append_events appends ledger entries one INSERT each (Citus would run INSERT ... SELECT
-- as a COPY, which forced row-level security refuses), and pymem._memories_chain keeps the
-- per-scope counts one statement per (tenant, scope, adapter). On plain Postgres the switch is
-- off and those three run as before. Whole-row arguments are passed as row(x.*)::<table> (a
-- trigger or a pushed-down query on a shard sees the shard's row type): _memories_before_write,
-- _sessions_chain, _quarantine_before_write and verify_chain. Signatures, privileges and owners of
-- the replaced functions are unchanged; their search_path is pinned again.

set role pymem_owner;

-- Where the SQL differs between plain Postgres and Citus, it asks this switch. `pymem db
-- distribute` sets citus.propagate_set_commands = 'local' for the database on every node; nothing
-- else does. A login that sets it by hand on plain Postgres gets the same results by the slower
-- path (SET LOCAL, single-row appends), and one that clears it on Citus gets a context that does
-- not reach the shards: every shard then reads as empty and refuses writes (fail closed).

create or replace function pymem._on_citus() returns boolean
language sql stable parallel safe
set search_path = pg_catalog, pg_temp
as $$ select coalesce(current_setting('citus.propagate_set_commands', true), '') = 'local' $$;
comment on function pymem._on_citus() is 'True where `pymem db distribute` made this database a Citus store (its statements then take the forms Citus can route)';

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

create or replace function pymem._memories_chain() returns trigger
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

create or replace function pymem._sessions_chain() returns trigger
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

create or replace function pymem._quarantine_before_write() returns trigger
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

-- A session's searches take their vector ranking in a statement of its own before the statement
-- that reads the rows: on Citus that statement is routed to the tenant's shard, where the
-- ranking's own queries would be nested distributed queries (refused). Same results and order.

create or replace function pymem.session_search(
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
declare
  v_schema text := (select n.nspname from pg_extension e join pg_namespace n on n.oid = e.extnamespace where e.extname = 'vector');
begin
  execute format('alter function pymem.session_search(text, vector, integer, text, bigint) set search_path = pg_catalog, %I, pg_temp', v_schema);
  execute format('alter function pymem.session_search_hybrid(text, vector, text, integer, text, bigint, double precision, double precision) set search_path = pg_catalog, %I, pg_temp', v_schema);
end
$$;

reset role;

revoke all on function pymem._on_citus() from public;
grant execute on function pymem._on_citus() to pymem_app, pymem_auditor;
