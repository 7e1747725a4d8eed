-- pymem migration 0015: hybrid search fused by score.
--
-- pymem._search_hybrid (what pymem.search runs with a query text) and pymem.session_search_hybrid
-- (what a delivery's recall runs) gain a second way to fuse the vector and the BM25 rankings:
-- with p_rrf_k NULL, a row scores its cosine similarity plus p_text_weight times its BM25 score
-- over the query's best BM25 score, and that sum is the score it comes back with (so the
-- similarity floor applies to it). Reciprocal-rank fusion (p_rrf_k given) is unchanged and stays
-- the SQL default; the library passes the fusion calibrated for its embedder
-- (pymem.embedder.hybrid_fusion_of). Both keep the shape of migration 0012 (rows read by their
-- key in fused order until p_top_k are found) and the expiry filter of 0013: the fused score is the
-- order key, computed before any row is read, from the vector ranking's distance and, for a row
-- found by its words alone, its vector read by its key. Signatures, privileges and owners are
-- unchanged; the functions are replaced in place, so their search_path is pinned again.

set role pymem_owner;

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
  return query
    with vec as (
      select h.id, h.distance, row_number() over (order by 1 - h.distance desc, h.id) as r
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

-- CREATE OR REPLACE resets the SET clauses: pin the search_path to pgvector's schema again, as
-- migration 0011 did.
do $$
declare
  v_schema text := (select n.nspname from pg_extension e join pg_namespace n on n.oid = e.extnamespace where e.extname = 'vector');
begin
  execute format('alter function pymem._search_hybrid(vector, text, integer, jsonb, boolean, boolean, text, bigint, integer, integer, double precision, double precision) set search_path = pg_catalog, %I, pg_temp', v_schema);
  execute format('alter function pymem.session_search_hybrid(text, vector, text, integer, text, bigint, double precision, double precision) set search_path = pg_catalog, %I, pg_temp', v_schema);
end
$$;

reset role;
