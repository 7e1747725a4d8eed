-- pymem migration 0012: hybrid search and a delivery's recall cheaper, with the same results.
--
-- Measured (EXPLAIN ANALYZE as the app login, and the backends' CPU time per call) on the
-- benchmark stores: what a hybrid search cost beyond its two rankings was neither ranking.
--
-- * memories.search_text is kept in the row (storage main): with a 384-dimension vector a row
--   passes the 2 kB TOAST threshold, so the tsvector was moved out of line and every text
--   candidate read it back from the TOAST table, twice (its length, its postings).
-- * pymem._search_hybrid and pymem.session_search_hybrid joined every fused candidate (up to
--   twice the pool) to pymem.memories before sorting, so the planner hashed the whole tenant;
--   they now walk the candidates in fused order and read a row by its key until p_top_k are
--   found (the same rows, the same order, the same row-level security).
-- * The vector ranking a hybrid search fuses is narrow (id and distance: pymem._vector_ranking
--   and pymem._session_ranking) instead of whole rows that were thrown away.
-- * BM25 reads only each candidate's postings of the query's words (ts_filter of setweight)
--   instead of unnesting its whole tsvector, and tests its scope with an expression no index
--   answers, so the rows come from the text index (the ones holding a word), never from the scope
--   index (every row of the tenant).
-- * pymem.session_search reads the session's scopes once and ranks through pymem._session_ranking;
--   pymem.session_search_hybrid keeps its generic plan, as pymem.search does.
-- * Hot memories have an index of their own (pymem.session_hot read every row of the session's
--   scopes to find them).
--
-- Signatures, results and row-level security are unchanged.

set role pymem_owner;

-- ---------------------------------------------------------------------------------------------
-- search_text in the row
-- ---------------------------------------------------------------------------------------------

alter table pymem.memories alter column search_text set storage main;

-- Rows written before keep their out-of-line value until rewritten (as 0008 left vectors):
-- VACUUM FULL pymem.memories moves them into their rows.

-- ---------------------------------------------------------------------------------------------
-- hot memories by an index of their own
-- ---------------------------------------------------------------------------------------------

-- Every delivery reads a session's hot memories first (pymem.session_hot); without an index it
-- read every row of the session's scopes to find the few tagged hot.
create index memories_hot on pymem.memories (tenant_id, created_at)
  where 'hot' = any (tags) and erased_at is null and invalidated_at is null;
comment on index pymem.memories_hot is 'Live hot memories of a tenant by time: what every delivery reads first (pymem.session_hot)';

-- ---------------------------------------------------------------------------------------------
-- the narrow vector ranking of a hybrid search
-- ---------------------------------------------------------------------------------------------

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
-- complete top_k, under the caller's row-level security; keep the two in step. Stable, so it
-- reads with the snapshot of the statement that calls it.
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
               and (p_include_superseded or m.invalidated_at is null)
               and m.embedding is not null
             order by 2, 1
             limit p_top_k) t
     where t.distance <> 'NaN'::double precision
     order by t.distance, t.id;
end
$$;
comment on function pymem._vector_ranking(vector, integer, jsonb, boolean, text, bigint, integer, integer) is 'pymem.search''s vector ranking as (id, distance) pairs, for the hybrid search to fuse; same plans, under the caller''s RLS';

-- ---------------------------------------------------------------------------------------------
-- BM25 over the query's postings only
-- ---------------------------------------------------------------------------------------------

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

-- ---------------------------------------------------------------------------------------------
-- hybrid search: the narrow vector ranking, and rows read in fused order
-- ---------------------------------------------------------------------------------------------

create or replace function pymem._search_hybrid(
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
-- (pymem._text_candidates) of the same context, each cut at v_pool rows, fused by reciprocal
-- rank: a row scores 1 / (p_rrf_k + its vector rank) + p_text_weight / (p_rrf_k + its text rank)
-- (ranks from 1; a ranking it is absent from adds nothing). The p_top_k best come back in that
-- order, each with its cosine similarity as score, read back under the caller's row-level
-- security. The vector ranking alone returns min(p_top_k, the rows in play) rows, so the fused
-- result is as complete.
--
-- The candidates are walked in fused order and each row read by its key (a lateral lookup the
-- planner cannot turn into a join of the whole tenant) until p_top_k are found.
declare
  v_tenant text := pymem._ctx_tenant();
  v_pool integer := least(1000, greatest(4 * p_top_k, 50));
  v_any_scope boolean := p_scope_filter = '{}'::jsonb;
begin
  if p_text_weight is null or p_text_weight < 0 or p_text_weight = 'Infinity'::double precision
     or p_rrf_k is null or p_rrf_k < 0 or p_rrf_k = 'Infinity'::double precision then
    raise exception 'pymem: the text weight and the fusion constant must be finite and not negative' using errcode = '22023';
  end if;
  if v_tenant is null then
    return;
  end if;
  return query
    with vec as (
      select h.id, row_number() over (order by 1 - h.distance desc, h.id) as r
        from pymem._vector_ranking(p_query, v_pool, p_scope_filter, p_include_superseded, p_plan, p_exact_below,
                                   p_ef_search, p_max_scan_tuples) h),
    txt as (
      select c.id, row_number() over (order by c.score desc, c.id) as r
        from pymem._text_candidates(p_text, v_pool, p_scope_filter, p_include_superseded) c),
    fused as (
      select coalesce(v.id, t.id) as id,
             coalesce(1.0 / (p_rrf_k + v.r), 0) + p_text_weight * coalesce(1.0 / (p_rrf_k + t.r), 0) as fused
        from vec v full join txt t on t.id = v.id)
    select m.id, case when p_with_vectors then m.record else coalesce(m.record_lite, m.record) end,
           m.content, m.kind, m.tags, m.scope, m.origin, m.provenance, m.confidence, m.source_adapter,
           m.injection_source, m.policy_fingerprint, m.created_at, m.revision, 1 - (m.embedding <=> p_query)
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

-- ---------------------------------------------------------------------------------------------
-- what a session receives: one reading of its scopes, a narrow ranking
-- ---------------------------------------------------------------------------------------------

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
-- The ids and cosine distances of the p_top_k live, non-superseded memories of the context's
-- tenant in the scopes p_scopes (their keys p_scope_keys, p_live_rows rows in them: what
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
               and (v_read is null or m.source_adapter = any (v_read))
             order by 2, 1
             limit p_top_k) t
     where t.distance <> 'NaN'::double precision
     order by t.distance, t.id;
end
$$;
comment on function pymem._session_ranking(jsonb[], bytea[], bigint, vector, integer, text, bigint) is 'The vector ranking of what a session receives, as (id, distance) pairs, given its scopes; called only by the session search functions';

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
  return query
    select m.id, coalesce(m.record_lite, m.record), m.content, m.kind, m.tags, m.scope, m.origin, m.provenance,
           m.confidence, m.source_adapter, m.injection_source, m.policy_fingerprint, m.created_at, m.revision,
           1 - r.distance
      from pymem._session_ranking(f.scopes, f.scope_keys, f.live_rows, p_query, p_top_k, p_plan, p_exact_below)
             with ordinality r(id, distance, n)
           cross join lateral (
             select m.* from pymem.memories m
              where m.tenant_id = v_tenant and m.id = r.id
              limit 1) m
     order by r.n;
end
$$;

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
                and (v_read is null or m.source_adapter = any (v_read))
              limit 1) m
     order by x.fused desc, x.id
     limit p_top_k;
end
$$;

-- Operators resolve through the search_path; pin it to the schema pgvector lives in.
do $$
declare
  v_schema text := (select n.nspname from pg_extension e join pg_namespace n on n.oid = e.extnamespace where e.extname = 'vector');
begin
  execute format('alter function pymem._vector_ranking(vector, integer, jsonb, boolean, text, bigint, integer, integer) set search_path = pg_catalog, %I, pg_temp', v_schema);
  execute format('alter function pymem._search_hybrid(vector, text, integer, jsonb, boolean, boolean, text, bigint, integer, integer, double precision, double precision) set search_path = pg_catalog, %I, pg_temp', v_schema);
  execute format('alter function pymem._session_ranking(jsonb[], bytea[], bigint, vector, integer, text, bigint) set search_path = pg_catalog, %I, pg_temp', v_schema);
  execute format('alter function pymem.session_search(text, vector, integer, text, bigint) set search_path = pg_catalog, %I, pg_temp', v_schema);
  execute format('alter function pymem.session_search_hybrid(text, vector, text, integer, text, bigint, double precision, double precision) set search_path = pg_catalog, %I, pg_temp', v_schema);
end
$$;

-- ---------------------------------------------------------------------------------------------
-- privileges
-- ---------------------------------------------------------------------------------------------

revoke all on function pymem._vector_ranking(vector, integer, jsonb, boolean, text, bigint, integer, integer),
  pymem._session_ranking(jsonb[], bytea[], bigint, vector, integer, text, bigint)
  from public;
-- the hybrid search runs as the caller, so the caller runs its vector ranking; the session
-- ranking is run only by the session search functions, as their owner
grant execute on function pymem._vector_ranking(vector, integer, jsonb, boolean, text, bigint, integer, integer)
  to pymem_app;

reset role;
