-- pymem migration 0005: lessons, signed convention receipts, and facts shared between the tasks
-- of a run.
--
-- * Lessons are memories of kind 'lesson' (written through the write gate like any memory); their
--   type, version and source task live in the record. pymem.lesson_half_life and
--   pymem.lesson_confidence decay a lesson's stored confidence at read time (the stored value is
--   never rewritten by age); the view pymem.lessons reads them with typed columns.
-- * Convention receipts: pymem.convention_receipts keeps every signed version of a review rule
--   (append-only; each version chained as convention.filed / convention.confirmed), and
--   pymem.convention_endings its retirement or expiry (append-only; convention.retired /
--   convention.expired). pymem.signing_keys holds the installation's public key, which every
--   receipt must name; pymem.register_signing_key registers it once.
-- * Shared facts are memories of kind 'shared_fact'; inserting one sends a notification (its id,
--   never its value) on its tenant's channel, pymem.fact_channel(tenant).
-- * Injection records name the lessons a delivery contained (pymem.record_injection gains
--   p_lesson_ids; pymem.audit_injections gains lesson_ids; pymem.memory_injections shows them
--   as section 'lesson').

set role pymem_owner;

-- ============================================================================================
-- tables
-- ============================================================================================

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

-- ============================================================================================
-- row-level security
-- ============================================================================================

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

-- ============================================================================================
-- triggers
-- ============================================================================================

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

create function pymem.fact_channel(p_tenant text) returns text
language sql immutable parallel safe
set search_path = pg_catalog, pg_temp
as $$
  -- A digest, not the tenant's name: any login may LISTEN on any channel, and a channel name is
  -- an identifier (at most 63 bytes).
  select 'pymem_facts_' || left(encode(sha256(convert_to(p_tenant, 'UTF8')), 'hex'), 32)
$$;
comment on function pymem.fact_channel(text) is 'The NOTIFY channel a tenant''s shared facts are announced on (derived from a digest of the tenant)';

create function pymem._memories_fact_notify() returns trigger
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
-- The payload is the fact's id and nothing else: a listener learns what to read, and reads it
-- under its own context, so tenant, scope and the read allow-list still decide what it gets.
-- Postgres delivers it only if the transaction commits.
begin
  perform pg_notify(pymem.fact_channel(new.tenant_id), new.id);
  return null;
end
$$;
comment on function pymem._memories_fact_notify() is 'Announces a new shared fact by id on its tenant''s channel (never its content)';

create trigger memories_fact_notify
  after insert on pymem.memories
  for each row when (new.kind = 'shared_fact')
  execute function pymem._memories_fact_notify();
comment on trigger memories_fact_notify on pymem.memories is 'Followers of shared facts learn of each new one when its transaction commits';

-- ============================================================================================
-- verbs and views
-- ============================================================================================

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
     and pymem.lesson_half_life(m.record ->> 'memory_type') is not null;
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

-- pymem.record_injection names the lessons a delivery contained (a new last argument).
drop function pymem.record_injection(text, integer, text[], text[], text[], text, integer, integer, integer, text, text, text);

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
-- which text. The app role may call it; it checks that everything named exists and is visible in
-- the caller's context, so a record cannot name what the caller could not have delivered.
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
                        and m.scope @> pymem._ctx_scope())
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
                'lesson_ids', to_jsonb(p_lesson_ids),
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
comment on function pymem.record_injection(text, integer, text[], text[], text[], text, integer, integer, integer, text, text, text, text[]) is 'Chains a delivery.injected event (ids, the lessons among them, and the sha256 of the delivered text, never the text) for a session''s turn; returns its seq';

create or replace view pymem.audit_injections with (security_invoker = true) as
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
         l.details ->> 'tiers_fingerprint' as tiers_fingerprint,
         array(select jsonb_array_elements_text(coalesce(l.details -> 'lesson_ids', '[]'::jsonb))) as lesson_ids
    from pymem.ledger l
   where l.event = 'delivery.injected';
comment on view pymem.audit_injections is 'What each delivered turn contained: session, turn, memory ids (lessons among them), digest sessions and the sha256 of the text (never the text)';

create or replace view pymem.memory_injections with (security_invoker = true) as
  select l.tenant_id, e.memory_id, l.seq, l.occurred_at, l.details ->> 'session' as session_id,
         (l.details ->> 'turn')::integer as turn,
         case when (l.details -> 'hot_ids') ? e.memory_id then 'hot'
              when coalesce(l.details -> 'lesson_ids', '[]'::jsonb) ? e.memory_id then 'lesson'
              else 'recalled' end as section
    from pymem.ledger l
    cross join lateral jsonb_array_elements_text(l.details -> 'memory_ids') as e(memory_id)
   where l.event = 'delivery.injected';
comment on view pymem.memory_injections is 'One row per memory per delivered turn: which turns a memory entered, and in which section (hot, lesson, recalled)';

-- The installation key is registered once, by whichever filing comes first.
create function pymem.register_signing_key(p_public_key text) returns text
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp
as $$
-- Definer, so logins need no INSERT on pymem.signing_keys: they can register the first key and
-- confirm it, never replace it (replacing it is an administrator's act on the table).
declare
  v_key text;
begin
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
comment on function pymem.register_signing_key(text) is 'Registers the installation''s public key if none is, confirms it if it is the same; refuses any other';

reset role;

-- ============================================================================================
-- privileges (see sql/schema.sql, section 8)
-- ============================================================================================

revoke all on all functions in schema pymem from public;
revoke all on pymem.signing_keys, pymem.convention_receipts, pymem.convention_endings, pymem.lessons,
  pymem.conventions from public;
grant select on pymem.lessons, pymem.conventions, pymem.convention_receipts, pymem.convention_endings,
  pymem.signing_keys to pymem_app;
grant insert (tenant_id, id, version, scope, subject, subject_symbol, rule_text, rule_sha256, base_commit, assertion,
              lesson_id, public_key, signature, receipt_sha256)
  on pymem.convention_receipts to pymem_app;
grant insert (tenant_id, receipt_id, status, reason, head_commit) on pymem.convention_endings to pymem_app;
grant select on pymem.signing_keys to pymem_auditor;
grant execute on function pymem.record_injection(text, integer, text[], text[], text[], text, integer, integer, integer, text, text, text, text[]),
  pymem.register_signing_key(text) to pymem_app;
grant execute on function pymem.lesson_half_life(text), pymem.lesson_confidence(real, text, interval),
  pymem.fact_channel(text) to pymem_app, pymem_auditor;
