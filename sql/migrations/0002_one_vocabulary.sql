-- pymem migration 0002: one vocabulary.
--
-- The origins become one domain, pymem.origin, that serves both memories.origin and
-- pymem.record_refusal's check (they were two copies of the list); adapter bindings take adapter
-- names as long as a context does (200 characters, pymem/vocabulary.py MAX_NAME); and the write
-- gate's chain-lock probe moves from a Python string into the schema as pymem.holds_chain_lock.
--
-- Changing memories.origin to the domain reads every row once to check it against the same list
-- its CHECK held, and rewrites nothing (see below). pymem.memory_history reads that column, so it
-- is dropped and re-created unchanged around the change, with its comment and grants.

set role pymem_owner;

-- The domain gets its CHECK only after the column has moved to it: a column changed to a domain
-- that has constraints is rewritten (and every index, HNSW included, rebuilt), while adding the
-- CHECK to the domain afterwards only reads the rows once to validate them.
create domain pymem.origin as text;
comment on domain pymem.origin is 'How a memory came to be believed; drives admission and recall re-judging';

drop view pymem.memory_history;
alter table pymem.memories drop constraint memories_origin_check;
alter table pymem.memories alter column origin type pymem.origin;
alter domain pymem.origin add constraint origin_check
  check (value in ('user_asserted', 'operator', 'model_inferred', 'tool_output', 'retrieved_content',
                   'unproven', 'injected_context'));
-- pymem.search returns the column as it is, so its result type follows.
alter type pymem.search_hit alter attribute origin type pymem.origin;

create view pymem.memory_history with (security_barrier = true) as
  select l.tenant_id, l.memory_id, l.seq, l.event, l.occurred_at, l.actor, l.adapter, l.revision,
         l.content_hash,
         m.origin, m.provenance, m.source_adapter, m.policy_fingerprint, m.confidence, m.injection_source,
         m.kind, m.created_at as memory_created_at, m.revision as current_revision,
         m.invalidated_at, m.superseded_by, m.erased_at
    from pymem.ledger l
    left join pymem.memories m
      on m.tenant_id = l.tenant_id and m.id = l.memory_id
     and ((select pg_catalog.pg_has_role(current_user, 'pymem_auditor', 'USAGE'))
          or (m.scope @> (select pymem._ctx_scope())
              and ((select pymem._ctx_read_adapters()) is null
                   or m.source_adapter = any ((select pymem._ctx_read_adapters())::text[]))))
   where l.memory_id is not null
     and ((select pg_catalog.pg_has_role(current_user, 'pymem_auditor', 'USAGE'))
          or l.tenant_id = (select pymem._ctx_tenant()));
comment on view pymem.memory_history is 'Each memory''s ledger events with its current origin and provenance (no content); auditors see every tenant';

create or replace function pymem.record_refusal(
  p_origin text,
  p_source text,
  p_reason text,
  p_signature text,
  p_digest text,
  p_policy_fingerprint text
) returns bigint
language plpgsql volatile security definer
set search_path = ''
as $$
declare
  v_tenant text := pymem._ctx_tenant();
  v_entry pymem.ledger;
begin
  if v_tenant is null then
    raise exception 'pymem: recording a refusal needs a tenant context' using errcode = '22023';
  end if;
  if p_origin is null or not pg_catalog.pg_input_is_valid(p_origin, 'pymem.origin') then
    raise exception 'pymem: a refusal needs a known origin' using errcode = '22023';
  end if;
  if p_source is not null and (p_source = '' or length(p_source) > 200 or p_source ~ '[[:cntrl:]]') then
    raise exception 'pymem: a refusal source must be 1-200 characters without control characters' using errcode = '22023';
  end if;
  if p_reason is null or p_reason = '' or length(p_reason) > 300 or p_reason ~ '[[:cntrl:]]' then
    raise exception 'pymem: a refusal reason must be 1-300 characters without control characters' using errcode = '22023';
  end if;
  if p_signature is not null and p_signature !~ '^[a-z0-9_.]{1,100}$' then
    raise exception 'pymem: a refusal signature must be a signature name ([a-z0-9_.], at most 100)' using errcode = '22023';
  end if;
  if p_digest is null or p_digest !~ '^sha256:[0-9a-f]{64}$' then
    raise exception 'pymem: a refusal digest must be sha256:<64 hex digits>' using errcode = '22023';
  end if;
  if p_policy_fingerprint is not null and p_policy_fingerprint !~ '^[A-Za-z0-9:_.-]{1,100}$' then
    raise exception 'pymem: a policy fingerprint must be 1-100 characters of [A-Za-z0-9:_.-]' using errcode = '22023';
  end if;
  v_entry := pymem._append_events(
    array[row(v_tenant, 'admission.refused', null, null, null, 0)::pymem._pending_event],
    jsonb_build_object(
      'decision', 'refused',
      'action_class', 'memory.persist',
      'tool', 'memory.write:' || coalesce(p_source, 'unknown'),
      'origin', p_origin,
      'adapter', pymem._ctx_adapter(),
      'reason', p_reason,
      'signature', p_signature,
      'args_digest', p_digest,
      'policy_fingerprint', p_policy_fingerprint));
  return v_entry.seq;
end
$$;
comment on function pymem.record_refusal(text, text, text, text, text, text) is 'Chains an admission.refused event (digest and reason, never content) into the context tenant''s ledger; returns its seq';

alter table pymem.adapter_bindings drop constraint adapter_bindings_adapter_check;
alter table pymem.adapter_bindings
  add constraint adapter_bindings_adapter_check check (adapter <> '' and length(adapter) <= 200);

-- The write gate cannot audit a refusal (in a transaction of its own) while the caller's
-- transaction holds the tenant's chain-head lock: the audit would wait for the caller, and the
-- caller for the gate. This probe tells, on the caller's connection: a head-row version that
-- transaction can see whose xmin is still in progress can only be its own (another transaction's
-- uncommitted row is invisible). xmin is a 32-bit xid, widened to xid8 against this
-- transaction's own id (a row it wrote is never older); ids at or past the snapshot's xmax
-- (repeatable read) are its own too. Security invoker: it reads the head under the caller's RLS.
create function pymem.holds_chain_lock(p_tenant text) returns boolean
language sql volatile security invoker
set search_path = pg_catalog, pg_temp
as $$
  with me as (
    select pg_catalog.pg_current_xact_id_if_assigned()::text::bigint as top,
           pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot())::text::bigint as next),
  ahead as (
    select me.top, me.next, (h.xmin::text::bigint - (me.top & 4294967295)) & 4294967295 as distance
      from me, pymem.chain_heads h
     where h.tenant_id = p_tenant and me.top is not null)
  select coalesce(bool_or(case when a.top + a.distance >= a.next then true
                               else pg_catalog.pg_xact_status((a.top + a.distance)::text::xid8) = 'in progress' end),
                  false)
    from ahead a
   where a.distance < 2147483648
$$;
comment on function pymem.holds_chain_lock(text) is 'Whether the calling transaction holds (wrote) the tenant''s chain-head row, so an independent transaction could not chain an event for it now';

reset role;
revoke all on function pymem.holds_chain_lock(text) from public;
grant execute on function pymem.holds_chain_lock(text) to pymem_app;
grant select on pymem.memory_history to pymem_app, pymem_auditor;
