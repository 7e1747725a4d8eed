-- pymem migration 0008: scope-aware search plans.
--
-- * pymem.search chose between its exact plan and an iterative HNSW scan from the tenant's row
--   count alone, so a search narrowed by a scope filter (or a scoped context) in a big tenant
--   always went through HNSW, even with a hundred rows in scope: the scan visited up to
--   max_scan_tuples candidates, was slow, and its relaxed-order results missed many of the true
--   top_k. It now decides from the number of rows in scope, summed from pymem.scope_rows (live
--   counts per tenant, scope and source adapter, kept by the chain trigger), and when few are in
--   scope its exact plan reads only those, through a GIN index on the scope keyed by tenant
--   (pymem._search_in_scope, a definer function: jsonb @> is not leakproof, so under row-level
--   security the scope test could never use an index). Searches without a scope are unchanged.
-- * pymem.scope_rows is filled from the existing memories here.
-- * Embeddings stay in the row (storage main): rows written from now on no longer send every
--   exact search through the TOAST table. Rows already written keep their out-of-line vectors
--   until rewritten (VACUUM FULL pymem.memories moves them, under an exclusive lock).

set role pymem_owner;

-- The vector stays in the row (storage main) rather than going out of line (pgvector's default,
-- external): a 384-dimension row is just over the 2 kB toast threshold, and an exact search then
-- read the TOAST index and heap for every row it ranked (10,000 rows: 16 ms instead of 3 ms).
-- Vectors too big for a page still go out of line.
alter table pymem.memories alter column embedding set storage main;

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

alter table pymem.scope_rows enable row level security;
alter table pymem.scope_rows force row level security;

-- scope_rows: only the owner's definer functions touch it (no role is granted anything on it), and
-- they name the tenant themselves. A policy with a condition would keep their scope containment
-- test from using the index (jsonb @> is not leakproof), hence true.
create policy scope_rows_owner on pymem.scope_rows for all to pymem_owner using (true) with check (true);
comment on policy scope_rows_owner on pymem.scope_rows is 'The chain trigger keeps, and pymem._search_in_scope reads, the counts; nobody else';

insert into pymem.scope_rows (tenant_id, scope, source_adapter, live_rows)
  select m.tenant_id, m.scope, m.source_adapter, count(*) from pymem.memories m group by 1, 2, 3;

create or replace function pymem._memories_chain() returns trigger
language plpgsql security definer
set search_path = pg_catalog, pg_temp
as $$
-- Each event carries the row's scope and source adapter (the old row's for a delete): the ledger's
-- read policy shows an event only to contexts that could read the memory it concerns.
declare
  v_events pymem._pending_event[];
  v_deltas pymem.scope_rows[];
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
  if v_deltas is not null then
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
             and (p_include_superseded or m.invalidated_at is null)
             and m.embedding is not null
             and (v_read is null or m.source_adapter = any (v_read))
           order by 2, 1
           limit p_top_k) t;
  return coalesce(v_ids, '{}');
end
$$;
comment on function pymem._search_in_scope(vector, integer, jsonb, boolean, bigint) is 'Scoped exact search through the scope index, applying the read policy itself (definer); NULL when the scope holds p_cap rows or more';

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
comment on function pymem.search(vector, integer, jsonb, boolean, boolean, text, bigint, integer, integer) is 'Cosine search under RLS (security invoker); top_k counts in-scope rows; exact or iterative HNSW chosen per query from the number of rows it can match (in scope when scoped)';

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

do $$
declare
  v_schema text := (select n.nspname from pg_extension e join pg_namespace n on n.oid = e.extnamespace where e.extname = 'vector');
begin
  execute format('alter function pymem.search(vector, integer, jsonb, boolean, boolean, text, bigint, integer, integer) set search_path = pg_catalog, %I, pg_temp', v_schema);
  execute format('alter function pymem.search_as(text, text, text, jsonb, text[], vector, integer, jsonb, boolean, boolean, text) set search_path = pg_catalog, %I, pg_temp', v_schema);
  execute format('alter function pymem._search_in_scope(vector, integer, jsonb, boolean, bigint) set search_path = pg_catalog, %I, pg_temp', v_schema);
end
$$;

reset role;

-- privileges: see sql/schema.sql, section 8 (nobody but the owner touches pymem.scope_rows)
revoke all on pymem.scope_rows from public;
revoke all on function pymem._search_in_scope(vector, integer, jsonb, boolean, bigint) from public;
grant execute on function pymem._search_in_scope(vector, integer, jsonb, boolean, bigint) to pymem_app;
