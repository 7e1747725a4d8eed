-- pymem migration 0009: no lock a stranger can hold, and no trust a writer asserts about itself.
--
-- * Lesson and convention filing serialised on pg_advisory_xact_lock(hashtextextended(<json of
--   tenant and type>)): a key any login (even one without a pymem role) can compute and hold for
--   ever, so one stranger stalled every tenant's filing, and through the service the whole pool.
--   Filing now locks a row of pymem.filing_locks (under row-level security: only the tenant's own
--   context can lock it) through pymem.lock_for_filing, with a lock_timeout that ends the wait
--   with an error (55P03, pymem.errors.LockTimeout) instead of hanging.
-- * The installation signing key was registered by whichever app or agent login filed first: a
--   login that registered a key of its own broke every tenant's file_review_correction. Only
--   the administrative connection registers it now (pymem db register-key, or the embedded
--   server's migration).
-- * Origin operator (the highest trust tier) was the writer's own claim: an agent could admit a
--   memory with Provenance('operator'). The database now refuses origin operator on any row that
--   is not written untagged, by an operator context.
-- * An UPDATE of erased_at by hand kept the content (or rewrote it under the old hash, which
--   verification does not re-check for erased rows) and could un-erase a row. Erasure is now
--   completed by the trigger, and an erased row never changes again.
-- * record_injection accepted ids the caller's read allow-list hides.
-- * A tenant's fact channel was named after a digest of the tenant alone, so any login could
--   LISTEN to it (learning fact ids and their timing) and NOTIFY old ids into a follower. The
--   channel is now keyed by an installation secret no login can read, named only for the
--   context's own tenant, and its notifications carry nothing: a follower reads what is new in
--   its tenant's chain under its own context.

set role pymem_owner;

-- --------------------------------------------------------------------------------------------
-- filing locks
-- --------------------------------------------------------------------------------------------

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

alter table pymem.filing_locks enable row level security;
alter table pymem.filing_locks force row level security;
create policy filing_locks_owner on pymem.filing_locks for all to pymem_owner
  using (tenant_id = (select pymem._ctx_tenant()))
  with check (tenant_id = (select pymem._ctx_tenant()));
comment on policy filing_locks_owner on pymem.filing_locks is 'Only pymem.lock_for_filing (owner) creates and locks rows, and only the context tenant''s';

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

-- --------------------------------------------------------------------------------------------
-- the installation signing key: the administrative connection's alone
-- --------------------------------------------------------------------------------------------

create or replace function pymem.register_signing_key(p_public_key text) returns text
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

-- --------------------------------------------------------------------------------------------
-- origin operator: only from an untagged operator context
-- --------------------------------------------------------------------------------------------

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

-- --------------------------------------------------------------------------------------------
-- erasure, completed by the trigger
-- --------------------------------------------------------------------------------------------

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
    new.content_hash := pymem._content_hash_v2(new);
  end if;
  return new;
end
$$;
comment on function pymem._memories_before_write() is 'Sets revision (1, then +1), created_at/updated_at and content_hash; completes an erasure and freezes an erased row; callers cannot forge them';

-- --------------------------------------------------------------------------------------------
-- injection records name only what the caller could read
-- --------------------------------------------------------------------------------------------

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
-- which text. The app role may call it; it checks that everything named exists and is visible in
-- the caller's context (tenant, scope and read allow-list: the definer reads past row-level
-- security, so it applies the read policy itself), so a record cannot name what the caller could
-- not have delivered.
declare
  v_tenant text := pymem._ctx_tenant();
  v_scope jsonb := pymem._ctx_scope();
  v_read text[] := pymem._ctx_read_adapters();
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
  if p_memory_ids is null or p_hot_ids is null or p_digest_sessions is null or p_lesson_ids is null
     or cardinality(p_memory_ids) > 1000 or cardinality(p_digest_sessions) > 1000
     or array_position(p_memory_ids, null) is not null or array_position(p_digest_sessions, null) is not null
     or not (p_hot_ids <@ p_memory_ids) or not (p_lesson_ids <@ p_memory_ids) or p_lesson_ids && p_hot_ids
     or (select count(distinct x) from unnest(p_memory_ids) x) <> cardinality(p_memory_ids) then
    raise exception 'pymem: an injection names at most 1000 distinct memories (the hot ones and the lessons among them, apart) and 1000 sessions'
      using errcode = '22023';
  end if;
  select x into v_missing from unnest(p_memory_ids) x
   where not exists (select from pymem.memories m
                      where m.tenant_id = v_tenant and m.id = x and m.erased_at is null
                        and m.scope @> v_scope
                        and (v_read is null or m.source_adapter = any (v_read)))
   limit 1;
  if found then
    raise exception 'pymem: memory % is not a live memory of this context', left(v_missing, 100) using errcode = '22023';
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

-- --------------------------------------------------------------------------------------------
-- fact channels keyed by an installation secret, announcing nothing
-- --------------------------------------------------------------------------------------------

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

create or replace function pymem.fact_channel(p_tenant text) returns text
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

create or replace function pymem._memories_fact_notify() returns trigger
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

reset role;

revoke execute on function pymem.register_signing_key(text) from pymem_app;
revoke execute on function pymem.fact_channel(text) from pymem_auditor;
revoke all on pymem.filing_locks, pymem.installation_secrets from public;
revoke all on function pymem.lock_for_filing(text, integer), pymem._memories_operator_origin(),
  pymem._fact_channel(text) from public;
grant execute on function pymem.lock_for_filing(text, integer) to pymem_app;
