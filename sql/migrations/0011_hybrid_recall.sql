-- pymem migration 0011: the store's embedder, and hybrid (full-text + vector) search.
--
-- * pymem.store_info.embedder records which embedder wrote the store's vectors (its name; the
--   dimension is embedding_dim). The first writer claims it (pymem.claim_embedder) and the Python
--   layer refuses an embedder of another name. A store that already holds vectors written from
--   text by the gate is recorded as the old default, lexical-hash-v1: `pymem reembed` moves it
--   to another embedder. memories.embedder says which embedder computed each row's vector (NULL:
--   the caller gave it, or it was written before this migration).
-- * memories.search_text is a tsvector of the content kept by the database (a trigger), in the
--   store's text-search configuration (store_info.text_search_config, English by default), with
--   a GIN index. pymem.search takes the query's text (p_text) and fuses a BM25 ranking of it
--   (pymem._text_candidates) with its vector ranking by reciprocal rank (pymem._search_hybrid),
--   under the caller's row-level security, with the same complete top_k. Without p_text it is
--   the vector search it was. Rows written before this migration get their search_text here.
-- * pymem.session_search_hybrid is pymem.session_search (migration 0010: what a session receives)
--   with the query's text, fused the same way, so a delivery's recall ranks as recall does.

set role pymem_owner;

-- ---------------------------------------------------------------------------------------------
-- the store's embedder and text-search configuration
-- ---------------------------------------------------------------------------------------------

alter table pymem.store_info add column embedder text check (embedder <> '' and length(embedder) <= 100);
comment on column pymem.store_info.embedder is 'Name of the embedder whose vectors the store holds (NULL until the first write claims it); another embedder is refused';
alter table pymem.store_info add column text_search_config regconfig not null default 'pg_catalog.english';
comment on column pymem.store_info.text_search_config is 'Text-search configuration of memories.search_text and of search queries; changed only while the store holds no memory';

alter table pymem.memories add column embedder text check (embedder <> '' and length(embedder) <= 100);
comment on column pymem.memories.embedder is 'The embedder that computed this row''s vector from its content; NULL when the caller supplied the vector (or before migration 0011)';
alter table pymem.memories add column search_text tsvector;
comment on column pymem.memories.search_text is 'The content as a tsvector in the store''s text-search configuration, plus one position-less lexeme naming the tenant (see pymem._tenant_lexeme); kept by the database';

-- Stores written before 0011 by the write gate hold lexical-hash-v1 vectors (the default then):
-- rows with content and a vector whose record carries no vector of its own.
update pymem.store_info set embedder = 'lexical-hash-v1'
 where embedder is null
   and exists (select from pymem.memories m
                where m.content is not null and m.embedding is not null and m.record_lite is null
                  and m.erased_at is null);

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

-- ---------------------------------------------------------------------------------------------
-- search_text, kept by the database
-- ---------------------------------------------------------------------------------------------

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

-- Existing rows: the column is bookkeeping, not content (it is not hashed), so filling it must not
-- append ledger events or bump revisions. Under ALTER TABLE's lock, for this statement only, the
-- row triggers are off and row-level security is not forced on the owner (as in migration 0007).
alter table pymem.memories disable trigger user;
alter table pymem.memories no force row level security;
update pymem.memories set search_text = pymem._search_text(tenant_id, content) where content is not null;
alter table pymem.memories force row level security;
alter table pymem.memories enable trigger user;

-- fastupdate off, as for the scope index: with GIN's pending list every search would rescan the
-- recent entries.
create index memories_search_text on pymem.memories using gin (search_text) with (fastupdate = off);
comment on index pymem.memories_search_text is 'Full-text candidates of a hybrid search (one tenant at a time, through its tenant lexeme)';

-- ---------------------------------------------------------------------------------------------
-- hybrid search
-- ---------------------------------------------------------------------------------------------

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
      select m.id, m.search_text
        from pymem.memories m
       where m.search_text @@ v_match
         and m.tenant_id = v_tenant
         and (m.scope || jsonb_object(array['', m.tenant_id])) @> v_key
         and m.erased_at is null
         and (p_include_superseded or m.invalidated_at is null)
         and m.embedding is not null
         and (v_read is null or m.source_adapter = any (v_read))),
    lengths as (
      select avg(length(x.search_text))::double precision as avgdl from matched x),
    hits as (
      select x.id, u.lexeme, coalesce(cardinality(u.positions), 1) as tf, length(x.search_text) as dl
        from matched x cross join lateral unnest(x.search_text) u
       where u.lexeme = any (v_terms)),
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
-- pymem.search with a query text: the vector ranking (pymem.search itself, so the same plans,
-- scope handling and complete top_k) and the BM25 ranking (pymem._text_candidates) of the same
-- context, each cut at v_pool rows, fused by reciprocal rank: a row scores
-- 1 / (p_rrf_k + its vector rank) + p_text_weight / (p_rrf_k + its text rank) (ranks from 1; a
-- ranking it is absent from adds nothing). The p_top_k best come back in that order, each with its
-- cosine similarity as score, read back under the caller's row-level security. The vector ranking
-- alone returns min(p_top_k, the rows in play) rows, so the fused result is as complete.
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
      select h.id, row_number() over (order by h.score desc, h.id) as r
        from pymem.search(p_query, v_pool, p_scope_filter, p_include_superseded, false, p_plan,
                          p_exact_below, p_ef_search, p_max_scan_tuples) h),
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
      from fused f
      join pymem.memories m on m.tenant_id = v_tenant and m.id = f.id
     where m.erased_at is null
       and (p_include_superseded or m.invalidated_at is null)
       and (v_any_scope or m.scope @> p_scope_filter)
     order by f.fused desc, m.id
     limit p_top_k;
end
$$;
comment on function pymem._search_hybrid(vector, text, integer, jsonb, boolean, boolean, text, bigint, integer, integer, double precision, double precision) is 'Hybrid search: pymem.search''s vector ranking and the BM25 ranking fused by reciprocal rank, under the caller''s RLS';

-- pymem.search takes the query text (and the fusion's two constants) as three more arguments.
drop function pymem.search(vector, integer, jsonb, boolean, boolean, text, bigint, integer, integer);

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

-- Operators resolve through the search_path; pin it to the schema pgvector lives in, whatever
-- the caller's is.
do $$
declare
  v_schema text := (select n.nspname from pg_extension e join pg_namespace n on n.oid = e.extnamespace where e.extname = 'vector');
begin
  execute format('alter function pymem.search(vector, integer, jsonb, boolean, boolean, text, bigint, integer, integer, text, double precision, double precision) set search_path = pg_catalog, %I, pg_temp', v_schema);
  execute format('alter function pymem._search_hybrid(vector, text, integer, jsonb, boolean, boolean, text, bigint, integer, integer, double precision, double precision) set search_path = pg_catalog, %I, pg_temp', v_schema);
end
$$;

-- ---------------------------------------------------------------------------------------------
-- what a session receives, hybrid (pymem.session_search with the query's text)
-- ---------------------------------------------------------------------------------------------

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
set search_path = pg_catalog, pg_temp
as $$
-- pymem.session_search with the query's text, fused as pymem._search_hybrid fuses pymem.search:
-- the vector ranking (pymem.session_search itself, so the same plans and rule) and a BM25
-- ranking of p_text (k1 1.2, b 0.75, the words ORed, as pymem._text_candidates) over the same
-- rows, each cut at v_pool rows, fused by reciprocal rank: 1 / (p_rrf_k + vector rank) +
-- p_text_weight / (p_rrf_k + text rank). The p_top_k best come back in that order, each with its
-- cosine similarity as score: what a delivery recalls. What the session receives stays decided by
-- pymem._session_scopes (its scope and its ancestors, within the read allow-list); the text
-- ranking's document frequencies and lengths are counted over those rows only. Definer for the
-- reason pymem.session_hot is (and the text match, not leakproof, uses the GIN index only so).
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
  v_pool := least(1000, greatest(4 * p_top_k, 50));
  select * into f from pymem._session_scopes(p_session);
  if f.session_scope is null or f.live_rows = 0 then
    -- still validates the query and the plan, as pymem.session_search does
    return query select * from pymem.session_search(p_session, p_query, p_top_k, p_plan, p_exact_below);
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
      select h.id, row_number() over (order by h.score desc, h.id) as r
        from pymem.session_search(p_session, p_query, v_pool, p_plan, p_exact_below) h),
    matched as (
      select m.id, m.search_text
        from pymem.memories m
       where v_match is not null
         and m.search_text @@ v_match
         and m.tenant_id = v_tenant and m.scope = any (f.scopes)
         and m.erased_at is null and m.invalidated_at is null and m.embedding is not null
         and (v_read is null or m.source_adapter = any (v_read))),
    lengths as (
      select avg(length(x.search_text))::double precision as avgdl from matched x),
    hits as (
      select x.id, u.lexeme, coalesce(cardinality(u.positions), 1) as tf, length(x.search_text) as dl
        from matched x cross join lateral unnest(x.search_text) u
       where u.lexeme = any (v_terms)),
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
      from fused x
      join pymem.memories m on m.tenant_id = v_tenant and m.id = x.id
     where m.scope = any (f.scopes) and m.erased_at is null and m.invalidated_at is null
       and (v_read is null or m.source_adapter = any (v_read))
     order by x.fused desc, m.id
     limit p_top_k;
end
$$;
comment on function pymem.session_search_hybrid(text, vector, text, integer, text, bigint, double precision, double precision) is 'Hybrid search over the memories a session receives: pymem.session_search''s vector ranking and a BM25 ranking of the text over the same rows, fused by reciprocal rank; definer, applying the session''s rule itself';

do $$
begin
  execute format('alter function pymem.session_search_hybrid(text, vector, text, integer, text, bigint, double precision, double precision) set search_path = pg_catalog, %I, pg_temp',
                 (select n.nspname from pg_extension e join pg_namespace n on n.oid = e.extnamespace where e.extname = 'vector'));
end
$$;

-- ---------------------------------------------------------------------------------------------
-- privileges
-- ---------------------------------------------------------------------------------------------

revoke all on function pymem.claim_embedder(text, integer), pymem.record_reembedded(text),
  pymem.set_text_search_config(regconfig), pymem._tenant_lexeme(text), pymem._search_text(text, text),
  pymem._memories_search_text(), pymem._text_candidates(text, integer, jsonb, boolean),
  pymem._search_hybrid(vector, text, integer, jsonb, boolean, boolean, text, bigint, integer, integer, double precision, double precision),
  pymem.search(vector, integer, jsonb, boolean, boolean, text, bigint, integer, integer, text, double precision, double precision),
  pymem.session_search_hybrid(text, vector, text, integer, text, bigint, double precision, double precision)
  from public;
grant insert (embedder), update (embedder) on pymem.memories to pymem_app;
grant execute on function pymem.search(vector, integer, jsonb, boolean, boolean, text, bigint, integer, integer, text, double precision, double precision) to pymem_app;
grant execute on function pymem._search_hybrid(vector, text, integer, jsonb, boolean, boolean, text, bigint, integer, integer, double precision, double precision),
  pymem._text_candidates(text, integer, jsonb, boolean), pymem.claim_embedder(text, integer),
  pymem.record_reembedded(text), pymem._tenant_lexeme(text), pymem._search_text(text, text),
  pymem.session_search_hybrid(text, vector, text, integer, text, bigint, double precision, double precision) to pymem_app;

reset role;
