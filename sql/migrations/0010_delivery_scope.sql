-- pymem migration 0010: delivery stays inside a session's scope.
--
-- * A delivery took every memory its context could read, so an app that delivers with a
--   whole-tenant context put every user's memories into every user's prompt (a LangGraph item
--   under ("users", "u1") reached an unrelated session of the tenant). A session now receives the
--   memories of its own scope (the scope it was started in, which never changes) and of its
--   ancestors (the scopes its own contains): tenant-wide memories reach every session, a user's
--   only that user's sessions, a sibling's never. Row-level security reads the other way (a
--   context sees the rows whose scope contains its own) and stays as it is for search, get and
--   list; the delivery reads below are definer functions that apply the rule themselves, for one
--   session the context can see.
-- * pymem.record_injection names only memories the session receives, and in its digest only
--   sessions of the same scope or a narrower one.
-- * Two indexes read rows and scope counts by their exact scope.

set role pymem_owner;

-- A session's memories are read by their exact scope (pymem._session_scopes names the scopes):
-- the sha256 of the scope's text (jsonb's text output is canonical), as pymem.scope_rows_key has it.
create index memories_tenant_scope_key on pymem.memories (tenant_id, sha256(scope::text::bytea));
comment on index pymem.memories_tenant_scope_key is 'A tenant''s rows of exactly one scope: what a session receives from its own scope and each ancestor';
create index scope_rows_scope_key on pymem.scope_rows (tenant_id, sha256(scope::text::bytea));
comment on index pymem.scope_rows_scope_key is 'Whether a tenant holds rows of one exact scope, whatever their adapter (the ancestors of a session''s scope)';

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
         and (v_read is null or m.source_adapter = any (v_read))
       order by m.created_at desc, m.id
       limit p_limit;
  end if;
end
$$;
comment on function pymem.session_hot(text, integer) is 'The live hot memories a session receives (its scope and its ancestors), newest first; definer, applying that rule itself';

create function pymem.session_search(
  p_session text,
  p_query vector,
  p_top_k integer,
  p_plan text default 'auto',
  p_exact_below bigint default 2000
) returns setof pymem.search_hit
language plpgsql volatile security definer
-- As in pymem.search: the plan is chosen below from a count and each branch pins its shape.
set plan_cache_mode = force_generic_plan
set enable_seqscan = off
set enable_sort = on
set enable_indexscan = on
set hnsw.iterative_scan = 'relaxed_order'
set hnsw.ef_search = 40
set hnsw.max_scan_tuples = 20000
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
-- re-sorted, and the exact plan takes over whenever the scan comes back short. 'exact' and
-- 'hnsw' force a plan (tests, benchmarks). A ranking with more signals (full text) changes the
-- two statements below; what the session receives stays decided by pymem._session_scopes.
declare
  v_tenant text := pymem._ctx_tenant();
  v_read text[] := pymem._ctx_read_adapters();
  v_plan text := p_plan;
  v_table_rows double precision;
  v_hits pymem.search_hit[];
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
  if p_plan = 'auto' then
    select greatest(c.reltuples, f.live_rows) into v_table_rows
      from pg_catalog.pg_class c where c.oid = 'pymem.memories'::regclass;
    v_plan := case when f.live_rows < greatest(p_exact_below, ceil(sqrt(8.0 * p_top_k * v_table_rows))::bigint)
                   then 'exact' else 'hnsw' end;
  end if;

  if v_plan = 'hnsw' then
    -- enable_sort off: only the HNSW index orders the candidates (see pymem.search)
    perform set_config('hnsw.ef_search', pymem._search_ef(p_top_k)::text, true),
            set_config('enable_sort', 'off', true);
    with candidates as materialized (
      select m.id, coalesce(m.record_lite, m.record) as record, m.content, m.kind, m.tags, m.scope, m.origin,
             m.provenance, m.confidence, m.source_adapter, m.injection_source, m.policy_fingerprint, m.created_at,
             m.revision, m.embedding <=> p_query as distance
        from pymem.memories m
       where m.tenant_id = v_tenant and m.scope = any (f.scopes)
         and m.erased_at is null and m.invalidated_at is null
         and (v_read is null or m.source_adapter = any (v_read))
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

  -- exact: the rows of those scopes by their key, narrow (id, distance) pairs ranked first, the
  -- top_k read back by the primary key (never the HNSW index: enable_indexscan off)
  perform set_config('enable_indexscan', 'off', true);
  return query
    select m.id, coalesce(m.record_lite, m.record), m.content, m.kind, m.tags, m.scope, m.origin, m.provenance,
           m.confidence, m.source_adapter, m.injection_source, m.policy_fingerprint, m.created_at, m.revision,
           1 - t.distance
      from (select m.id, m.embedding <=> p_query as distance
              from pymem.memories m
             where m.tenant_id = v_tenant
               and sha256(m.scope::text::bytea) = any (f.scope_keys) and m.scope = any (f.scopes)
               and m.erased_at is null and m.invalidated_at is null and m.embedding is not null
               and (v_read is null or m.source_adapter = any (v_read))
             order by 2, 1
             limit p_top_k) t
      join pymem.memories m on m.tenant_id = v_tenant and m.id = t.id
     where t.distance <> 'NaN'::double precision
     order by t.distance, t.id;
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
                                 and (v_read is null or m.source_adapter = any (v_read)))
                order by x.i);
end
$$;
comment on function pymem.session_receives(text, text[]) is 'Which of these ids are live memories a session receives (its scope and its ancestors), in order; ids only';

do $$
begin
  execute format('alter function pymem.session_search(text, vector, integer, text, bigint) set search_path = pg_catalog, %I, pg_temp',
                 (select n.nspname from pg_extension e join pg_namespace n on n.oid = e.extnamespace where e.extname = 'vector'));
end
$$;

create or replace function pymem.record_injection(
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

reset role;

-- privileges: see sql/schema.sql, section 8 (the helper reads pymem.scope_rows: owner only)
revoke all on function pymem._session_scopes(text), pymem.session_hot(text, integer),
  pymem.session_search(text, vector, integer, text, bigint), pymem.session_lessons(text, text[], integer, timestamptz),
  pymem.session_receives(text, text[]) from public;
grant execute on function pymem.session_hot(text, integer), pymem.session_search(text, vector, integer, text, bigint),
  pymem.session_lessons(text, text[], integer, timestamptz), pymem.session_receives(text, text[]) to pymem_app;
