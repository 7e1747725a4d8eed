-- pymem migration 0006: the admission classifier's refusals carry its score.
--
-- The write gate now runs a learned classifier beside its named signatures. A refusal it decides
-- is audited under the classifier's stable name (or a structural signal's name) with the model's
-- score and the digest of the piece of the note that decided, never the piece itself:
--
-- * pymem.record_refusal takes two more arguments, p_score (a number in [0, 1], only with a
--   signature) and p_piece_digest (sha256:<hex>, only with a score), checked like the others and
--   chained into the event's details. Its argument list changes, so the old function is dropped.
-- * pymem.audit_refusals shows them as two more columns, score and piece_digest.

set role pymem_owner;

drop function pymem.record_refusal(text, text, text, text, text, text);

create function pymem.record_refusal(
  p_origin text,
  p_source text,
  p_reason text,
  p_signature text,
  p_digest text,
  p_policy_fingerprint text,
  p_score double precision default null,
  p_piece_digest text default null
) returns bigint
language plpgsql volatile security definer
set search_path = pg_catalog, pg_temp
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
  if p_source is not null and (p_source = '' or length(p_source) > 200 or not pymem._is_plain_text(p_source)) then
    raise exception 'pymem: a refusal source must be 1-200 characters without control or format characters' using errcode = '22023';
  end if;
  if p_reason is null or p_reason = '' or length(p_reason) > 300 or not pymem._is_plain_text(p_reason) then
    raise exception 'pymem: a refusal reason must be 1-300 characters without control or format characters' using errcode = '22023';
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
  -- A score is the classifier's probability for the named refusal: NaN and infinities fail the
  -- range test, and a score without the name it belongs to would explain nothing.
  if p_score is not null and (not (p_score >= 0 and p_score <= 1) or p_signature is null) then
    raise exception 'pymem: a refusal score must be a number in [0, 1], given with a signature' using errcode = '22023';
  end if;
  if p_piece_digest is not null and (p_score is null or p_piece_digest !~ '^sha256:[0-9a-f]{64}$') then
    raise exception 'pymem: a refusal piece digest must be sha256:<64 hex digits>, given with a score' using errcode = '22023';
  end if;
  -- scope and source_adapter are the refused write's context: who may read the event (see the
  -- ledger's read policy).
  v_entry := pymem._append_events(
    array[row(v_tenant, 'admission.refused', null, null, null, 0,
              jsonb_build_object(
                'decision', 'refused',
                'action_class', 'memory.persist',
                'tool', 'memory.write:' || coalesce(p_source, 'unknown'),
                'origin', p_origin,
                'adapter', pymem._ctx_adapter(),
                'reason', p_reason,
                'signature', p_signature,
                'args_digest', p_digest,
                'policy_fingerprint', p_policy_fingerprint,
                'score', p_score,
                'piece_digest', p_piece_digest,
                'scope', pymem._ctx_scope(),
                'source_adapter', pymem._ctx_adapter()))::pymem._pending_event]);
  return v_entry.seq;
end
$$;
comment on function pymem.record_refusal(text, text, text, text, text, text, double precision, text) is 'Chains an admission.refused event (digest, reason, classifier score and deciding piece''s digest, never content) into the context tenant''s ledger; returns its seq';

-- New columns go last: create or replace keeps the view's existing columns and their order.
create or replace view pymem.audit_refusals with (security_invoker = true) as
  select l.tenant_id, l.seq, l.occurred_at, l.actor, l.adapter,
         l.details ->> 'origin' as origin,
         l.details ->> 'tool' as tool,
         l.details ->> 'reason' as reason,
         l.details ->> 'signature' as signature,
         l.details ->> 'args_digest' as args_digest,
         l.details ->> 'policy_fingerprint' as policy_fingerprint,
         (l.details ->> 'score')::double precision as score,
         l.details ->> 'piece_digest' as piece_digest
    from pymem.ledger l
   where l.event = 'admission.refused';
comment on view pymem.audit_refusals is 'Every admission refusal: who, which origin and source, why, the classifier score and digests of the arguments and deciding piece (never the content)';

reset role;

-- ============================================================================================
-- privileges (see sql/schema.sql, section 8)
-- ============================================================================================

revoke all on all functions in schema pymem from public;
grant execute on function pymem.record_refusal(text, text, text, text, text, text, double precision, text) to pymem_app;
