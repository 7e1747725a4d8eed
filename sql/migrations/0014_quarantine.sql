-- pymem migration 0014: the quarantine, the write gate's third decision.
--
-- * pymem.quarantine holds the notes the write gate was unsure of (a classifier score in the
--   quarantine band below the refusal threshold, or a doubt the detector names): durable,
--   chained (quarantine.held), with their provenance and the reason, name and score that held
--   them. They are a table of their own, not a flag on pymem.memories, so that no read path that
--   exists or is added later (search, recall, a session's delivery, the LangGraph store, export)
--   can return one by forgetting a filter: nothing that reads memories reads this table.
-- * pymem.release_quarantined and pymem.reject_quarantined decide a held note, in an operator
--   context only (no adapter: a bound agent login, or any context acting as an adapter, cannot,
--   so the agent that wrote a note never releases it). A release writes the note into
--   pymem.memories as its writer wrote it (memory.insert) and chains quarantine.released; a
--   rejection chains quarantine.rejected. Either way the held copy loses its content, record and
--   embedding (the hash stays), so the note lives in one place at most.
-- * A held note keeps its writer's ttl (checked against the tenant's maximum when held; the
--   released memory expires ttl after the release) and subject key (as the person's pseudonym, like
--   memories.subject); who held and who decided it are kept as pseudonyms, as the ledger keeps
--   actors. pymem.erase_actor (migration 0013) reaches the quarantine: the notes the person wrote or
--   that are about them lose what they said (erased_at; a held one is rejected), and a memory
--   released from a note they wrote is deleted with the rest of what they wrote.

set role pymem_owner;

-- ---------------------------------------------------------------------------------------------
-- the table
-- ---------------------------------------------------------------------------------------------

create table pymem.quarantine (
  tenant_id text not null check (tenant_id <> '' and length(tenant_id) <= 200),
  hold_id bigint generated always as identity,
  id text not null check (id <> '' and length(id) <= 256),
  scope jsonb not null default '{}'::jsonb check (pymem._scope_is_flat(scope)),
  kind text not null default 'fact' check (kind ~ '^[a-z][a-z0-9_]{0,39}$'),
  content text check (octet_length(content) <= 1048576),
  record jsonb,
  embedding vector({{embedding_dim}}),
  tags text[] not null default '{}',
  importance real check (importance between 0 and 1),
  confidence real check (confidence between 0 and 1),
  origin pymem.origin not null,
  source_adapter text check (source_adapter <> ''),
  provenance jsonb not null check (jsonb_typeof(provenance) = 'object'),
  injection_source text,
  policy_fingerprint text,
  embedder text check (embedder <> '' and length(embedder) <= 100),
  ttl interval check (ttl > interval '0' and ttl <= interval '36500 days'),
  subject text check (subject ~ '^p:[0-9a-f]{32}$'),
  reason text not null check (reason <> '' and length(reason) <= 300 and pymem._is_plain_text(reason)),
  signature text check (signature ~ '^[a-z0-9_.]{1,100}$'),
  score double precision check (score >= 0 and score <= 1),
  piece_digest text check (piece_digest ~ '^sha256:[0-9a-f]{64}$'),
  held_at timestamptz not null default now(),
  held_by text,
  status text not null default 'held' check (status in ('held', 'released', 'rejected')),
  decided_at timestamptz,
  decided_by text,
  decision_reason text check (decision_reason <> '' and length(decision_reason) <= 300
                              and pymem._is_plain_text(decision_reason)),
  erased_at timestamptz,
  content_hash bytea not null,
  primary key (tenant_id, hold_id),
  constraint quarantine_injection_source_rule
    check ((origin = 'injected_context') = (injection_source is not null)),
  constraint quarantine_decided
    check ((status = 'held') = (decided_at is null)),
  constraint quarantine_erased
    check (erased_at is null or status <> 'held')
);
comment on table pymem.quarantine is 'Notes the write gate held (neither admitted nor refused): never read by search, recall or delivery; released or rejected by an operator';
comment on column pymem.quarantine.tenant_id is 'Isolation boundary, as in pymem.memories (RLS)';
comment on column pymem.quarantine.hold_id is 'Which hold this is: an id may be held again once its earlier hold was decided';
comment on column pymem.quarantine.id is 'The memory id the note will have if released; at most one held note per id of the tenant';
comment on column pymem.quarantine.scope is 'Flat {axis: value} map; a held note is visible only to contexts whose scope it contains';
comment on column pymem.quarantine.kind is 'fact, preference, summary, ... (as the writer asked)';
comment on column pymem.quarantine.content is 'The held text; NULL once released (it then lives in pymem.memories), rejected or erased';
comment on column pymem.quarantine.record is 'The record as the gate would have stored it; NULL once released, rejected or erased';
comment on column pymem.quarantine.embedding is 'The vector the memory would carry; NULL once released, rejected or erased';
comment on column pymem.quarantine.tags is 'Tags as the writer gave them; emptied when the note''s person is erased';
comment on column pymem.quarantine.importance is 'Caller-assigned importance in [0, 1]';
comment on column pymem.quarantine.confidence is 'The confidence the admission policy would believe the note at';
comment on column pymem.quarantine.origin is 'How the note came to be (the provenance''s origin)';
comment on column pymem.quarantine.source_adapter is 'Adapter that wrote the note; NULL = operator; always the context adapter (RLS)';
comment on column pymem.quarantine.provenance is 'Who and what produced it, as the gate stamped it; only its origin and adapter stay when the note''s person is erased';
comment on column pymem.quarantine.injection_source is 'Where injected context came from; required iff origin = injected_context';
comment on column pymem.quarantine.policy_fingerprint is 'Fingerprint of the admission policy that held the note';
comment on column pymem.quarantine.embedder is 'The embedder that computed the vector from the content; NULL when the caller gave it';
comment on column pymem.quarantine.ttl is 'The time-to-live its writer named (NULL: the tenant''s default); a released memory expires this long after the release';
comment on column pymem.quarantine.subject is 'Pseudonym (p:<token>) of the person the note is about, from the writer''s subject key, never the id itself; the released memory keeps it';
comment on column pymem.quarantine.reason is 'Why the gate held it (names and scores, never content)';
comment on column pymem.quarantine.signature is 'The name of what held it: classifier.v1 (the score band) or a detector doubt';
comment on column pymem.quarantine.score is 'The classifier''s score of the note, in [0, 1]';
comment on column pymem.quarantine.piece_digest is 'sha256 of the normalised piece that scored highest (never the piece)';
comment on column pymem.quarantine.held_at is 'When the gate held it (the database''s time)';
comment on column pymem.quarantine.held_by is 'Pseudonym (p:<token>) of the context actor of the write that was held, as the ledger records it';
comment on column pymem.quarantine.status is 'held, released (now a memory) or rejected; only an operator context moves it';
comment on column pymem.quarantine.decided_at is 'When it was released or rejected; NULL while held';
comment on column pymem.quarantine.decided_by is 'Pseudonym (p:<token>) of the context actor of the operator who released or rejected it';
comment on column pymem.quarantine.decision_reason is 'The operator''s reason for the release or rejection (chained)';
comment on column pymem.quarantine.erased_at is 'When pymem.erase_actor erased the person who wrote the note or whom it is about (NULL: never)';
comment on column pymem.quarantine.content_hash is 'sha256 of the held fields (pymem._quarantine_hash), chained by quarantine.held; kept when the content goes';
comment on constraint quarantine_injection_source_rule on pymem.quarantine is 'injected_context needs its injection_source; any other origin must not carry one';
comment on constraint quarantine_decided on pymem.quarantine is 'A held note has no decision time; a released or rejected one has one';
comment on constraint quarantine_erased on pymem.quarantine is 'An erasure decides a held note (rejected): no note waits for review once erased';

create index quarantine_tenant_held on pymem.quarantine (tenant_id, held_at) where status = 'held';
comment on index pymem.quarantine_tenant_held is 'The notes a tenant holds, oldest first (what an operator reviews)';
create unique index quarantine_one_held on pymem.quarantine (tenant_id, id) where status = 'held';
comment on index pymem.quarantine_one_held is 'At most one note held per id: a decision names one note';
create index quarantine_tenant_id on pymem.quarantine (tenant_id, id, hold_id);
comment on index pymem.quarantine_tenant_id is 'A note''s holds by id, latest last (what a decision and a lookup read)';

-- ---------------------------------------------------------------------------------------------
-- row-level security
-- ---------------------------------------------------------------------------------------------

alter table pymem.quarantine enable row level security;
alter table pymem.quarantine force row level security;

-- Reading a held note is asking for it explicitly (pymem.quarantine is named by no read path of
-- memories): the same tenant, scope and allow-list rule as memories, so a context never sees a
-- note it could not have read once released.
create policy quarantine_read on pymem.quarantine for select
  using (tenant_id = (select pymem._ctx_tenant())
         and ((select pymem._ctx_scope() = '{}'::jsonb) or scope @> (select pymem._ctx_scope()))
         and ((select pymem._ctx_read_adapters()) is null
              or source_adapter = any ((select pymem._ctx_read_adapters())::text[])));
comment on policy quarantine_read on pymem.quarantine is 'Visible: own tenant, scope containing the context scope, adapter in the allow-list when one is set';

-- The gate writes a held note as its writer, like a memory: the context's tenant, scope, adapter.
create policy quarantine_insert on pymem.quarantine for insert
  with check (tenant_id = (select pymem._ctx_tenant())
              and ((select pymem._ctx_scope() = '{}'::jsonb) or scope @> (select pymem._ctx_scope()))
              and source_adapter is not distinct from (select pymem._ctx_adapter()));
comment on policy quarantine_insert on pymem.quarantine is 'Holds notes only in the context tenant and scope, tagged with the context adapter';

-- No role may update or delete held notes; the owner's definer functions (release, reject)
-- change the status of the context tenant's rows, having checked the context is an operator's.
create policy quarantine_decide on pymem.quarantine for update to pymem_owner
  using (tenant_id = (select pymem._ctx_tenant()))
  with check (tenant_id = (select pymem._ctx_tenant()));
comment on policy quarantine_decide on pymem.quarantine is 'Only pymem.release_quarantined and pymem.reject_quarantined change a held note, in its tenant';
create policy quarantine_owner_verify on pymem.quarantine for select to pymem_owner using (true);
comment on policy quarantine_owner_verify on pymem.quarantine is 'Lets the owner''s definer functions find a note by id within the tenant they name';

-- A released note is written into memories with its writer's adapter tag, by the operator's
-- release: the one insert the context's own adapter (NULL) would not allow. Only the owner's
-- definer code inserts under this policy, and only into the context tenant.
create policy memories_release on pymem.memories for insert to pymem_owner
  with check (tenant_id = (select pymem._ctx_tenant()));
comment on policy memories_release on pymem.memories is 'Lets pymem.release_quarantined write a released note under its writer''s adapter, in the context tenant';

-- ---------------------------------------------------------------------------------------------
-- triggers: bookkeeping, hash, chain
-- ---------------------------------------------------------------------------------------------

create function pymem._quarantine_hash(q pymem.quarantine) returns bytea
language sql immutable parallel safe
set search_path = pg_catalog, pg_temp
as $$
  select sha256('\x0001'::bytea || pymem._b(q.tenant_id) || pymem._b(q.id) || pymem._b(q.scope) || pymem._b(q.kind)
                || pymem._b(q.content) || pymem._b(q.record) || pymem._b(q.embedding::text) || pymem._b(q.tags)
                || pymem._b(q.importance) || pymem._b(q.confidence) || pymem._b(q.origin::text)
                || pymem._b(q.source_adapter) || pymem._b(q.provenance) || pymem._b(q.injection_source)
                || pymem._b(q.policy_fingerprint) || pymem._b(q.reason) || pymem._b(q.signature)
                || pymem._b(q.score::text) || pymem._b(q.piece_digest)
                || pymem._b(extract(epoch from q.ttl)::text) || pymem._b(q.subject))
$$;
comment on function pymem._quarantine_hash(pymem.quarantine) is 'sha256 of a held note''s fields (its ttl and subject pseudonym among them) and the reason it was held (length-prefixed, version 1)';

-- Definer: an id is the tenant's, whichever scope holds it, so the check looks past the writer's
-- RLS (as the primary key of memories does). Bookkeeping is the database's: status, times, actor
-- and hash, whatever the statement said; only the definer functions move a decision. Who held and
-- who decided are kept as pseudonyms (as the ledger keeps them) and so is the subject key, so
-- pymem.erase_actor, which destroys the link, leaves no row naming the person.
create function pymem._quarantine_before_write() returns trigger
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
    new.content_hash := pymem._quarantine_hash(new);
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

create trigger quarantine_before_write
  before insert or update on pymem.quarantine
  for each row execute function pymem._quarantine_before_write();
comment on trigger quarantine_before_write on pymem.quarantine is 'Bookkeeping and hash of every held note; decisions only through the definer functions';

-- The same rules as a memory: origin operator only from an untagged operator context, and a
-- session named in the provenance must be started and not incognito.
create trigger quarantine_operator_origin
  before insert on pymem.quarantine
  for each row when (new.origin = 'operator' or (new.provenance ->> 'origin') = 'operator')
  execute function pymem._memories_operator_origin();
comment on trigger quarantine_operator_origin on pymem.quarantine is 'Origin operator only on untagged notes written by an operator context';
create trigger quarantine_session_insert
  before insert on pymem.quarantine
  for each row when (new.provenance ? 'session_id')
  execute function pymem._memories_session_check();
comment on trigger quarantine_session_insert on pymem.quarantine is 'A held note written on behalf of a session names a started, non-incognito session of its tenant';

-- Definer, like the memories chain: the app role cannot append to the ledger itself.
create function pymem._quarantine_chain() returns trigger
language plpgsql security definer
set search_path = pg_catalog, pg_temp
as $$
-- Each event carries the note's scope and source adapter: the ledger's read policy shows it only
-- to contexts that could read the note. The details hold names, scores and digests, never content.
declare
  v_events pymem._pending_event[];
begin
  if tg_op = 'INSERT' then
    select array_agg(row(n.tenant_id, 'quarantine.held', n.id, null, n.content_hash, 0,
                         jsonb_build_object('decision', 'quarantined', 'origin', n.origin, 'reason', n.reason,
                                            'signature', n.signature, 'score', n.score,
                                            'piece_digest', n.piece_digest,
                                            'policy_fingerprint', n.policy_fingerprint,
                                            'scope', n.scope, 'source_adapter', n.source_adapter))::pymem._pending_event)
      into v_events from pymem_new_rows n;
  else
    select array_agg(row(n.tenant_id, 'quarantine.' || n.status, n.id, null, n.content_hash, 0,
                         jsonb_build_object('reason', n.decision_reason, 'scope', n.scope,
                                            'source_adapter', n.source_adapter))::pymem._pending_event)
      into v_events
      from pymem_new_rows n join pymem_old_rows o on o.tenant_id = n.tenant_id and o.hold_id = n.hold_id
     where o.status <> n.status;
  end if;
  if v_events is not null then
    perform pymem._append_events(v_events);
  end if;
  return null;
end
$$;
comment on function pymem._quarantine_chain() is 'Chains quarantine.held for every held note and quarantine.released / rejected for every decision';

create trigger quarantine_chain_insert
  after insert on pymem.quarantine
  referencing new table as pymem_new_rows
  for each statement execute function pymem._quarantine_chain();
comment on trigger quarantine_chain_insert on pymem.quarantine is 'One quarantine.held event per held note, in the same transaction';
create trigger quarantine_chain_update
  after update on pymem.quarantine
  referencing old table as pymem_old_rows new table as pymem_new_rows
  for each statement execute function pymem._quarantine_chain();
comment on trigger quarantine_chain_update on pymem.quarantine is 'One quarantine.released / quarantine.rejected event per decision';
create trigger quarantine_no_delete
  before delete or truncate on pymem.quarantine
  for each statement execute function pymem._ledger_append_only();
comment on trigger quarantine_no_delete on pymem.quarantine is 'A held note is decided, never deleted: its row is the record of the decision';
alter table pymem.quarantine enable always trigger quarantine_no_delete;

-- ---------------------------------------------------------------------------------------------
-- verbs
-- ---------------------------------------------------------------------------------------------

-- Deciding a held note is the operator's: a context acting as an adapter (every bound agent
-- login is one) is refused, so the agent that wrote a note, or any other agent, cannot release
-- it into what prompts see. The note must be visible to the operator's context (scope, allow-list).
create function pymem._quarantined_for_decision(p_id text, p_reason text) returns pymem.quarantine
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp
as $$
declare
  v_row pymem.quarantine;
begin
  if pymem._ctx_tenant() is null then
    raise exception 'pymem: deciding a quarantined note needs a tenant context' using errcode = '22023';
  end if;
  if pymem._ctx_adapter() is not null then
    raise exception 'pymem: only an operator context (no adapter) may release or reject a quarantined note; adapter % may not',
                    pymem._ctx_adapter()
      using errcode = '42501';
  end if;
  if p_reason is null or p_reason = '' or length(p_reason) > 300 or not pymem._is_plain_text(p_reason) then
    raise exception 'pymem: a decision reason must be 1-300 characters without control or format characters'
      using errcode = '22023';
  end if;
  -- the latest hold of the id (an earlier one was decided before it could be held again)
  select q.* into v_row from pymem.quarantine q
   where q.tenant_id = pymem._ctx_tenant() and q.id = p_id
     and (pymem._ctx_scope() = '{}'::jsonb or q.scope @> pymem._ctx_scope())
     and (pymem._ctx_read_adapters() is null or q.source_adapter = any (pymem._ctx_read_adapters()))
   order by q.hold_id desc limit 1
   for update;
  if not found then
    raise exception 'pymem: no quarantined note % that this context may see', left(p_id, 100) using errcode = 'P0002';
  end if;
  if v_row.status <> 'held' then
    raise exception 'pymem: quarantined note % was already %', left(p_id, 100), v_row.status using errcode = '55000';
  end if;
  return v_row;
end
$$;
comment on function pymem._quarantined_for_decision(text, text) is 'The held note an operator context may decide, locked; refuses an adapter context, a bad reason, an unknown or decided note';

create function pymem.release_quarantined(p_id text, p_reason text) returns bigint
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp
as $$
-- The note becomes the memory its writer asked for (same id, scope, adapter, origin, provenance,
-- confidence, ttl, subject): memory.insert by the memories chain, then quarantine.released. The
-- memory's valid_from and created_at are the release's: it is believed from now on, and it expires
-- ttl after the release. The ttl was within the tenant's maximum when the note was held; a maximum
-- lowered since is honoured (as a memory's next write honours it).
declare
  q pymem.quarantine := pymem._quarantined_for_decision(p_id, p_reason);
  v_seq bigint;
  v_max interval;
begin
  if exists (select from pymem.memories m where m.tenant_id = q.tenant_id and m.id = q.id) then
    raise exception 'pymem: id % is already a memory of this tenant; the held note cannot be released under it',
                    left(q.id, 100)
      using errcode = '23505', constraint = 'quarantine_id_free';
  end if;
  -- a NULL ttl stays NULL: the memory gets the tenant's default, as any write naming none
  select r.max_ttl into v_max from pymem.retention_policies r where r.tenant_id = q.tenant_id;
  insert into pymem.memories (tenant_id, id, scope, kind, content, record, embedding, tags, importance, confidence,
                              origin, source_adapter, provenance, injection_source, policy_fingerprint, embedder,
                              ttl, subject)
  values (q.tenant_id, q.id, q.scope, q.kind, q.content, q.record, q.embedding, q.tags, q.importance, q.confidence,
          q.origin, q.source_adapter, q.provenance, q.injection_source, q.policy_fingerprint, q.embedder,
          case when q.ttl > v_max then v_max else q.ttl end,
          q.subject);
  update pymem.quarantine x set status = 'released', decision_reason = p_reason
   where x.tenant_id = q.tenant_id and x.hold_id = q.hold_id;
  select max(l.seq) into v_seq from pymem.ledger l
   where l.tenant_id = q.tenant_id and l.memory_id = q.id and l.event = 'quarantine.released';
  return v_seq;
end
$$;
comment on function pymem.release_quarantined(text, text) is 'An operator releases a held note: it becomes the memory its writer asked for (memory.insert; expiring ttl after the release) and quarantine.released is chained; returns that event''s seq';

create function pymem.reject_quarantined(p_id text, p_reason text) returns bigint
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp
as $$
declare
  q pymem.quarantine := pymem._quarantined_for_decision(p_id, p_reason);
  v_seq bigint;
begin
  update pymem.quarantine x set status = 'rejected', decision_reason = p_reason
   where x.tenant_id = q.tenant_id and x.hold_id = q.hold_id;
  select max(l.seq) into v_seq from pymem.ledger l
   where l.tenant_id = q.tenant_id and l.memory_id = q.id and l.event = 'quarantine.rejected';
  return v_seq;
end
$$;
comment on function pymem.reject_quarantined(text, text) is 'An operator rejects a held note: its content, record and embedding go (the hash stays) and quarantine.rejected is chained; returns that event''s seq';

-- ---------------------------------------------------------------------------------------------
-- erasure of a person reaches the quarantine (pymem.erase_actor, migration 0013, with the notes
-- they wrote or that are about them)
-- ---------------------------------------------------------------------------------------------

create or replace function pymem.erase_actor(p_actor text, p_reason text)
returns table (memories bigint, idempotency_keys bigint, ledger_entries bigint, legacy_entries bigint, seq bigint)
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp
as $$
-- A data-subject request in the context tenant: every memory the person wrote (the ledger records
-- who inserted or updated each, under their pseudonym) or that is about them (its subject key) is
-- deleted, each a memory.delete event (a note of theirs an operator released from the quarantine
-- among them: its memory.insert names the operator); their notes in the quarantine, held by them or
-- about them, lose what they said (a held one is rejected with the erasure's reason, chained as
-- quarantine.rejected; the row stays, as every decision's does, without its content, record,
-- embedding, tags or provenance details); their idempotency records (which name them in clear and
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
  v_quarantined bigint := 0;
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
    -- notes they wrote that an operator released: the release wrote the memory, at its own time
    select coalesce(v_ids, '{}') || coalesce(array_agg(q.id), '{}') into v_ids
      from pymem.quarantine q
      join pymem.memories m on m.tenant_id = q.tenant_id and m.id = q.id and m.created_at = q.decided_at
     where q.tenant_id = v_tenant and q.held_by = 'p:' || v_token and q.status = 'released';
    delete from pymem.memories m
     where m.tenant_id = v_tenant and (m.id = any (coalesce(v_ids, '{}')) or m.subject = 'p:' || v_token);
    get diagnostics memories = row_count;
    -- their notes in the quarantine (who held them and their subject are pseudonyms, as in the ledger)
    update pymem.quarantine q set erased_at = now(), decision_reason = p_reason
     where q.tenant_id = v_tenant and q.erased_at is null
       and (q.held_by = 'p:' || v_token or q.subject = 'p:' || v_token);
    get diagnostics v_quarantined = row_count;
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
                                 'quarantined', v_quarantined,
                                 'idempotency_keys', idempotency_keys, 'ledger_entries', ledger_entries,
                                 'legacy_entries', legacy_entries,
                                 'legacy_seal', encode(v_seal, 'hex')))::pymem._pending_event]);
  seq := v_entry.seq;
  return next;
end
$$;
comment on function pymem.erase_actor(text, text) is 'Erases a person from the context tenant: their memories (written by or about them) and idempotency records deleted, their quarantined notes emptied (held ones rejected), their pseudonym unlinked; chained as actor.erased; the chain still verifies';


reset role;

-- ---------------------------------------------------------------------------------------------
-- privileges
-- ---------------------------------------------------------------------------------------------

revoke all on pymem.quarantine from public;
revoke all on function pymem._quarantine_hash(pymem.quarantine), pymem._quarantine_before_write(),
  pymem._quarantine_chain(), pymem._quarantined_for_decision(text, text), pymem.release_quarantined(text, text),
  pymem.reject_quarantined(text, text) from public;
-- the gate holds notes by column (the bookkeeping columns are the database's); reading them is
-- the explicit listing; deciding them goes through the two definer verbs
grant select on pymem.quarantine to pymem_app;
grant insert (tenant_id, id, scope, kind, content, record, embedding, tags, importance, confidence, origin,
              source_adapter, provenance, injection_source, policy_fingerprint, embedder, ttl, subject, reason,
              signature, score, piece_digest)
  on pymem.quarantine to pymem_app;
grant execute on function pymem.release_quarantined(text, text), pymem.reject_quarantined(text, text) to pymem_app;
