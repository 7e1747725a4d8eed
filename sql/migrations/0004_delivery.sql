-- pymem migration 0004: delivery.
--
-- * pymem.sessions: one row per session of a tenant (caller-chosen id, a checked surface, a topic
--   taken from the first user message, start and end times, an incognito flag, an optional
--   summary), with row-level security like the memories and every change chained into the ledger.
-- * A memory whose provenance names a session must name a started, non-incognito session of its
--   tenant: the database refuses it otherwise, whoever writes it.
-- * Hot memories (tagged 'hot', delivered every turn): marking or clearing one is a ledger event.
-- * Injection records: pymem.record_injection chains what a delivery put into a session's turn
--   (memory ids, digest sessions, the sha256 of the delivered text, never the text); the views
--   pymem.audit_injections and pymem.memory_injections read them back.
-- * Erasure with a reason (pymem.erase_memory, pymem.erase_session) and search as of a past time
--   (pymem.search_as_of).

set role pymem_owner;

-- ============================================================================================
-- tables
-- ============================================================================================

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

-- ============================================================================================
-- row-level security
-- ============================================================================================

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

-- ============================================================================================
-- triggers
-- ============================================================================================

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
    select array_agg(row(n.tenant_id, 'session.start', null, null, pymem._session_hash(n), 0,
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
             null, null, pymem._session_hash(n), 0,
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

-- ============================================================================================
-- verbs and views
-- ============================================================================================

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
  p_tiers_fingerprint text
) returns bigint
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp
as $$
-- What a delivery put into one turn of a session, chained into the tenant's ledger: the ids of
-- every memory (the hot ones named again), the other sessions its digest listed, and the sha256
-- of the delivered text. Never the text: the ids lead to the rows, the hash proves which text.
-- The app role may call it; it checks that everything named exists and is visible in the
-- caller's context, so a record cannot name what the caller could not have delivered.
declare
  v_tenant text := pymem._ctx_tenant();
  v_incognito boolean;
  v_missing text;
  v_entry pymem.ledger;
begin
  if v_tenant is null then
    raise exception 'pymem: recording an injection needs a tenant context' using errcode = '22023';
  end if;
  select s.incognito into v_incognito from pymem.sessions s where s.tenant_id = v_tenant and s.id = p_session;
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
  if p_memory_ids is null or p_hot_ids is null or p_digest_sessions is null
     or cardinality(p_memory_ids) > 1000 or cardinality(p_digest_sessions) > 1000
     or array_position(p_memory_ids, null) is not null or array_position(p_digest_sessions, null) is not null
     or not (p_hot_ids <@ p_memory_ids)
     or (select count(distinct x) from unnest(p_memory_ids) x) <> cardinality(p_memory_ids) then
    raise exception 'pymem: an injection names at most 1000 distinct memories (the hot ones among them) and 1000 sessions'
      using errcode = '22023';
  end if;
  select x into v_missing from unnest(p_memory_ids) x
   where not exists (select from pymem.memories m
                      where m.tenant_id = v_tenant and m.id = x and m.erased_at is null
                        and m.scope @> pymem._ctx_scope())
   limit 1;
  if found then
    raise exception 'pymem: memory % is not a live memory of this context', left(v_missing, 100) using errcode = '22023';
  end if;
  select x into v_missing from unnest(p_digest_sessions) x
   where x = p_session
      or not exists (select from pymem.sessions s
                      where s.tenant_id = v_tenant and s.id = x and not s.incognito and s.erased_at is null)
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
                'digest_sessions', to_jsonb(p_digest_sessions),
                'block_sha256', p_block_sha256,
                'tokens', p_tokens,
                'budget', p_budget,
                'truncated', p_truncated,
                'counter', p_counter,
                'policy_fingerprint', p_policy_fingerprint,
                'tiers_fingerprint', p_tiers_fingerprint,
                'scope', pymem._ctx_scope(),
                'source_adapter', pymem._ctx_adapter()))::pymem._pending_event]);
  return v_entry.seq;
end
$$;
comment on function pymem.record_injection(text, integer, text[], text[], text[], text, integer, integer, integer, text, text, text) is 'Chains a delivery.injected event (ids and the sha256 of the delivered text, never the text) for a session''s turn; returns its seq';

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
  select l.tenant_id, l.seq, l.occurred_at, l.actor, l.adapter,
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
         l.details ->> 'tiers_fingerprint' as tiers_fingerprint
    from pymem.ledger l
   where l.event = 'delivery.injected';
comment on view pymem.audit_injections is 'What each delivered turn contained: session, turn, memory ids, digest sessions and the sha256 of the text (never the text)';

create view pymem.memory_injections with (security_invoker = true) as
  select l.tenant_id, e.memory_id, l.seq, l.occurred_at, l.details ->> 'session' as session_id,
         (l.details ->> 'turn')::integer as turn,
         case when (l.details -> 'hot_ids') ? e.memory_id then 'hot' else 'recalled' end as section
    from pymem.ledger l
    cross join lateral jsonb_array_elements_text(l.details -> 'memory_ids') as e(memory_id)
   where l.event = 'delivery.injected';
comment on view pymem.memory_injections is 'One row per memory per delivered turn: which turns a memory entered, and in which section';

reset role;

-- ============================================================================================
-- privileges (see sql/schema.sql, section 8)
-- ============================================================================================

revoke all on all functions in schema pymem from public;
revoke all on pymem.sessions, pymem.audit_injections, pymem.memory_injections from public;
grant select on pymem.sessions to pymem_app;
grant insert (tenant_id, id, scope, surface, incognito, topic) on pymem.sessions to pymem_app;
grant update (ended_at, summary) on pymem.sessions to pymem_app;
grant execute on function pymem.record_injection(text, integer, text[], text[], text[], text, integer, integer, integer, text, text, text),
  pymem.erase_memory(text, text), pymem.erase_session(text, text) to pymem_app;
grant execute on function pymem.search_as_of(vector, integer, timestamptz, jsonb) to pymem_app;
grant select on pymem.audit_injections, pymem.memory_injections to pymem_app, pymem_auditor;
