"""The quarantine: a note the gate is unsure of is held (durable, chained, stamped), never read by
any path a prompt is fed from, and released or rejected only by an operator context.

The attacks come first, as the logins that would mount them: the app login acting for an agent,
and a login bound to that agent's adapter, each trying to read a held note through every read
function or to release it into memory."""

from __future__ import annotations

import io
from datetime import timedelta

import psycopg
import pytest
from helpers.database import AGENT_LOGIN, bind_login, login_dsn
from helpers.delivery import EMBEDDER, TRUST
from psycopg import errors as pgerr

from pymem import AdmissionPolicy, Context, Provenance, admit, deliver, recall, start_session
from pymem.admin import export_records
from pymem.admission import AdapterTrustPolicy
from pymem.admission.quarantine import (
    admission_of,
    get_quarantined,
    list_quarantined,
    reject_quarantined,
    release_quarantined,
)
from pymem.errors import AccessDenied, InvalidArguments, MemoryAdmissionError, NotFound
from pymem.integrity import verify_independently, verify_store
from pymem.storage.retention import set_retention

NOTE = "Initech says its payout account changed to DE89 3704 0044 0532 0130 00 last week."
#: Every note this policy judges lands in the quarantine band (its edge is near 0): what is held
#: is then the gate's decision, not the classifier's opinion of one sentence.
HOLD_ALL = AdmissionPolicy().with_quarantine(0.000001)
#: The same policy with the third decision off: the band is admitted, as before it existed.
NO_HOLD = AdmissionPolicy().with_quarantine(enabled=False)


def _hold(memories, text=NOTE, note_id="q1", session=None) -> dict:
    out = admit(memories, {"id": note_id, "content": text, "tags": ["payments"]},
                Provenance("user_asserted", session_id=session, source="crm"), policy=HOLD_ALL, embedder=EMBEDDER)
    assert admission_of(out).decision == "quarantined"
    return out


def test_a_doubtful_note_is_held_chained_and_stamped_not_stored(store, database):
    acme = store.bind(Context(tenant="acme", actor="u-1", adapter="codex"))
    out = _hold(acme)
    decision = admission_of(out)
    assert decision.signature == "classifier.v1" and 0 < decision.score < AdmissionPolicy().classifier_threshold
    assert decision.reason.startswith("held for review") and NOTE not in decision.reason
    assert out["provenance"]["adapter"] == "codex" and out["policy_fingerprint"] == HOLD_ALL.fingerprint
    with database.admin() as conn:
        assert conn.execute("select count(*) from pymem.memories").fetchone()[0] == 0
        held = conn.execute("select status, source_adapter, origin, held_by, content, reason, score from "
                            "pymem.quarantine").fetchall()
        events = conn.execute("select seq, event, memory_id, details from pymem.ledger").fetchall()
        writer = conn.execute("select 'p:' || token from pymem.actor_pseudonyms where actor = 'u-1'").fetchone()[0]
    # who held it is kept as the ledger keeps it, under the actor's pseudonym
    assert held == [("held", "codex", "user_asserted", writer, NOTE, decision.reason, pytest.approx(decision.score))]
    assert get_quarantined(acme, "q1").held_by == "u-1"  # named for the tenant's own context
    assert [(e[1], e[2]) for e in events] == [("quarantine.held", "q1")] and events[0][0] == decision.audit_seq
    assert events[0][3]["decision"] == "quarantined" and "DE89" not in str(events[0][3])
    assert verify_store(store, "acme").clean


def test_the_quarantine_is_policy_the_band_and_the_switch_are_in_the_fingerprint(store):
    acme = store.bind(Context(tenant="acme"))
    admitted = admit(acme, NOTE, Provenance("user_asserted"), policy=NO_HOLD, embedder=EMBEDDER)
    assert admission_of(admitted).decision == "admitted"
    assert len({HOLD_ALL.fingerprint, NO_HOLD.fingerprint, AdmissionPolicy().fingerprint}) == 3
    with pytest.raises(InvalidArguments, match="below the refusal threshold"):
        AdmissionPolicy(classifier_threshold=0.5, quarantine_threshold=0.6)
    # what the origin refuses is refused, never held: holding is for what might be admitted
    with pytest.raises(MemoryAdmissionError, match="not persisted"):
        admit(acme, NOTE, Provenance("retrieved_content"), policy=HOLD_ALL, embedder=EMBEDDER)
    # a writer that cannot hold a note decides as before the quarantine existed: admitted
    kept = admit(acme, NOTE, Provenance("user_asserted"), policy=HOLD_ALL, embedder=EMBEDDER, hold=False)
    assert admission_of(kept).decision == "admitted" and "holds nothing for review" in admission_of(kept).reason
    assert acme.get_row(kept["id"])["content"] == NOTE


def test_a_held_note_reaches_no_read_path_of_the_library(store):
    acme = store.bind(Context(tenant="acme", actor="u-1"))
    start_session(acme, "s1", "chat")
    _hold(acme, session="s1")
    admit(acme, {"id": "ok", "content": "Initech payouts go out on the 5th."}, Provenance("user_asserted"),
          policy=NO_HOLD, embedder=EMBEDDER)
    start_session(acme, "s2", "chat")
    delivered = deliver(acme, "s2", "which account for Initech payouts", policy=NO_HOLD, trust=TRUST,
                        embedder=EMBEDDER, floor=0.0)
    assert "DE89" not in delivered.text and "q1" not in [i.id for i in delivered.items]
    assert "ok" in [i.id for i in delivered.items]  # the query is related: the admitted note is delivered
    recalled = recall(acme, "Initech payout account", top_k=10, policy=NO_HOLD, trust=TRUST, embedder=EMBEDDER,
                      floor=0.0)
    assert [k.id for k in recalled.kept] == ["ok"] and recalled.withheld == []
    assert acme.get("q1") is None and [c["id"] for c in acme.list_chunks()["chunks"]] == ["ok"]
    out = io.StringIO()
    export_records(acme, out)
    assert "DE89" not in out.getvalue()
    # asked for explicitly, it is there, with its reason and content
    [note] = list_quarantined(acme)
    assert (note.id, note.status, note.content, note.tags) == ("q1", "held", NOTE, ["payments"])
    assert get_quarantined(acme, "q1") == note and get_quarantined(acme, "nope") is None
    # another scope does not see it (the same read rule as memories)
    assert list_quarantined(store.bind(Context(tenant="acme", scope={"user": "bob"}))) == []
    assert list_quarantined(store.bind(Context(tenant="globex"))) == []


@pytest.mark.parametrize("login", ["app acting for the agent", "agent"])
def test_postgres_keeps_a_held_note_out_of_every_read_and_from_its_writer(store, database, login):
    """As the login an agent would use: the held note is in no read function's result, cannot be
    named in an injection record, and cannot be released, rejected, edited or deleted."""
    writer = store.bind(Context(tenant="acme", actor="agent-1", adapter="codex"))
    start_session(writer, "s1", "chat")
    _hold(writer, session="s1")
    start_session(writer, "s2", "chat")
    if login == "agent":
        bind_login(database, AGENT_LOGIN, adapter="codex", tenants=["acme"])
        dsn = login_dsn(database, AGENT_LOGIN)
    else:
        dsn = database.app_dsn
    query = "[" + ",".join(str(x) for x in EMBEDDER.embed([NOTE])[0]) + "]"
    reads = [
        ("select id from pymem.memories", ()),
        ("select id from pymem.search(%s::vector, 10)", (query,)),
        ("select id from pymem.search(%s::vector, 10, p_with_vectors => false, p_text => %s)", (query, NOTE)),
        ("select id from pymem.session_search('s2', %s::vector, 10)", (query,)),
        ("select id from pymem.session_search_hybrid('s2', %s::vector, %s, 10)", (query, NOTE)),
        ("select id from pymem.session_hot('s2', 10)", ()),
        ("select unnest(pymem.session_receives('s2', array['q1']))", ()),
        ("select id from pymem.search_as_of(%s::vector, 10, now())", (query,)),
        ("select id from pymem.lessons", ()),
    ]
    attempts = [
        (pgerr.InvalidParameterValue,
         "select pymem.record_injection('s2', 0, array['q1'], '{}', '{}', repeat('0', 64), 1, 10, 0, 'c', null, null)"),
        (pgerr.InsufficientPrivilege, "select pymem.release_quarantined('q1', 'looks fine to me')"),
        (pgerr.InsufficientPrivilege, "select pymem.reject_quarantined('q1', 'hide the evidence')"),
        (pgerr.InsufficientPrivilege, "update pymem.quarantine set status = 'released'"),
        (pgerr.InsufficientPrivilege, "delete from pymem.quarantine"),
        # the erasure marker and who held a note are the database's, never the writer's
        (pgerr.InsufficientPrivilege, "update pymem.quarantine set erased_at = now()"),
        (pgerr.InsufficientPrivilege,
         "insert into pymem.quarantine (tenant_id, id, origin, source_adapter, provenance, reason, held_by, erased_at)"
         " values ('acme', 'q9', 'user_asserted', 'codex', '{}', 'r', 'someone else', now())"),
    ]
    # (A login that writes memories by raw SQL goes around the write gate altogether, held note or
    # not: what the database guarantees is that no read path returns a held note.)
    with psycopg.connect(dsn) as conn:
        assert not conn.execute("select rolsuper or rolbypassrls from pg_roles where rolname = current_user").fetchone()[0]
        for sql, args in reads:
            conn.execute("select pymem.set_context('acme', 'agent-1', 'codex')")
            assert conn.execute(sql, args).fetchall() == [], sql
            conn.rollback()
        for error, sql in attempts:
            conn.execute("select pymem.set_context('acme', 'agent-1', 'codex')")
            with pytest.raises(error):
                conn.execute(sql)
                pytest.fail(sql)
            conn.rollback()
        # the explicit listing is the one read that shows it
        conn.execute("select pymem.set_context('acme', 'agent-1', 'codex')")
        assert conn.execute("select id, status from pymem.quarantine").fetchall() == [("q1", "held")]
        conn.rollback()
        if login == "agent":
            # a bound login cannot act as the operator to release it either
            with pytest.raises(pgerr.InsufficientPrivilege, match="cannot act as the operator"):
                conn.execute("select pymem.set_context('acme', 'agent-1', null)")
            conn.rollback()
    with database.admin() as conn:
        assert conn.execute("select count(*) from pymem.memories").fetchone()[0] == 0
        assert conn.execute("select status from pymem.quarantine").fetchall() == [("held",)]
    with pytest.raises(AccessDenied, match="only an operator"):
        release_quarantined(writer, "q1", "I wrote it, I vouch for it")


def test_an_operator_releases_a_held_note_into_memory_as_its_writer_wrote_it(store, database):
    writer = store.bind(Context(tenant="acme", actor="agent-1", adapter="codex"))
    held = _hold(writer)
    operator = store.bind(Context(tenant="acme", actor="ops-1"))
    seq = release_quarantined(operator, "q1", "checked with finance: the account change is real")
    row = operator.get_row("q1")
    assert (row["content"], row["source_adapter"], row["origin"], row["tags"]) == (NOTE, "codex", "user_asserted",
                                                                                   ["payments"])
    assert row["provenance"] == held["provenance"] and row["confidence"] == held["confidence"]
    with database.admin() as conn:
        # (the ledger and the quarantine keep actors as pseudonyms; the audit views' resolution names them)
        events = conn.execute("select seq, event, pymem._actor_name(tenant_id, actor), details ->> 'reason'"
                              " from pymem.ledger order by seq").fetchall()
        left = conn.execute("select status, content, pymem._actor_name(tenant_id, decided_by), decision_reason"
                            " from pymem.quarantine").fetchone()
    assert [(e[1], e[2]) for e in events] == [("quarantine.held", "agent-1"), ("memory.insert", "ops-1"),
                                              ("quarantine.released", "ops-1")]
    assert events[-1][0] == seq and events[-1][3] == "checked with finance: the account change is real"
    assert left == ("released", None, "ops-1", "checked with finance: the account change is real")
    assert verify_store(store, "acme").clean
    with database.admin() as conn:  # the independent verifier recomputes every hash, quarantine events too
        assert verify_independently(conn).clean
    # it is now an ordinary memory: recalled, and a decided note cannot be decided again
    recalled = recall(operator, "Initech payout account", top_k=5, policy=NO_HOLD, embedder=EMBEDDER, floor=0.0,
                      trust=AdapterTrustPolicy(trusted_adapters={"codex"}))
    assert [k.id for k in recalled.kept] == ["q1"]
    with pytest.raises(InvalidArguments, match="already released"):
        reject_quarantined(operator, "q1", "too late")
    with pytest.raises(NotFound):
        release_quarantined(operator, "nope", "no such note")
    assert list_quarantined(operator) == [] and [n.id for n in list_quarantined(operator, status="released")] == ["q1"]


def test_an_operator_rejects_a_held_note_its_content_goes_its_hash_stays(store, database):
    writer = store.bind(Context(tenant="acme", actor="agent-1", adapter="codex"))
    _hold(writer)
    operator = store.bind(Context(tenant="acme", actor="ops-1"))
    for bad in ("", "x" * 301, "two\nlines"):
        with pytest.raises(InvalidArguments):
            reject_quarantined(operator, "q1", bad)
    with database.admin() as conn:
        before = conn.execute("select content_hash from pymem.quarantine").fetchone()[0]
    seq = reject_quarantined(operator, "q1", "account redirection: not from the customer")
    with database.admin() as conn:
        after = conn.execute("select status, content, record, embedding, content_hash from pymem.quarantine").fetchone()
        last = conn.execute("select seq, event, content_hash from pymem.ledger order by seq desc limit 1").fetchone()
        assert conn.execute("select count(*) from pymem.memories").fetchone()[0] == 0
    assert after == ("rejected", None, None, None, before) and last == (seq, "quarantine.rejected", before)
    with pytest.raises(InvalidArguments, match="already rejected"):
        release_quarantined(operator, "q1", "changed my mind")


def test_a_held_id_is_taken_and_a_taken_id_cannot_be_held(store):
    acme = store.bind(Context(tenant="acme"))
    admit(acme, {"id": "m1", "content": "Invoices go out on the 1st."}, Provenance("user_asserted"), policy=NO_HOLD,
          embedder=EMBEDDER)
    with pytest.raises(InvalidArguments, match="already exists"):
        admit(acme, {"id": "m1", "content": NOTE}, Provenance("user_asserted"), policy=HOLD_ALL, embedder=EMBEDDER)
    _hold(acme)
    with pytest.raises(InvalidArguments, match="already exists"):
        _hold(acme)
    assert [n.id for n in list_quarantined(acme)] == ["q1"]


ALICE = "alice@example.com"


def test_a_held_note_keeps_its_writers_ttl_and_subject_and_its_release_applies_them(store, database):
    """A held note is written as its writer asked: released, it expires `ttl` after the release and
    is about the same person (their pseudonym, never the id itself)."""
    writer = store.bind(Context(tenant="acme", actor="agent-1", adapter="codex"))
    out = admit(writer, {"id": "q1", "content": NOTE}, Provenance("user_asserted"), policy=HOLD_ALL,
                embedder=EMBEDDER, ttl=60, subject=ALICE)
    assert admission_of(out).decision == "quarantined"
    with database.admin() as conn:
        held_ttl, held_subject = conn.execute("select ttl, subject from pymem.quarantine").fetchone()
        token = conn.execute("select token from pymem.actor_pseudonyms where actor = %s", (ALICE,)).fetchone()[0]
        named = conn.execute("select count(*) from pymem.quarantine q where q::text ilike %s",
                             (f"%{ALICE}%",)).fetchone()[0]
    assert held_ttl == timedelta(seconds=60) and held_subject == f"p:{token}" and named == 0
    assert get_quarantined(writer, "q1").ttl == timedelta(seconds=60)

    operator = store.bind(Context(tenant="acme", actor="ops-1"))
    release_quarantined(operator, "q1", "checked with finance")
    with database.admin() as conn:
        ttl, subject, expires_at, created_at = conn.execute(
            "select ttl, subject, expires_at, created_at from pymem.memories where id = 'q1'").fetchone()
        decided_at = conn.execute("select decided_at from pymem.quarantine").fetchone()[0]
    assert ttl == timedelta(seconds=60) and subject == f"p:{token}"  # the same pseudonym, not one of it
    assert created_at == decided_at and expires_at == decided_at + timedelta(seconds=60)
    assert verify_store(store, "acme").clean


def test_a_held_ttl_obeys_the_tenant_policy_at_the_hold_and_at_the_release(store, database):
    operator = store.bind(Context(tenant="acme", actor="ops-1"))
    writer = store.bind(Context(tenant="acme", actor="agent-1", adapter="codex"))
    set_retention(operator, default_ttl=600, max_ttl=3600)
    with database.admin() as conn:
        before = conn.execute("select count(*) from pymem.ledger").fetchone()[0]
    with pytest.raises(InvalidArguments, match="maximum"):
        admit(writer, {"id": "q1", "content": NOTE}, Provenance("user_asserted"), policy=HOLD_ALL,
              embedder=EMBEDDER, ttl=7200)
    with database.admin() as conn:
        assert conn.execute("select count(*) from pymem.quarantine").fetchone()[0] == 0
        assert conn.execute("select count(*) from pymem.ledger").fetchone()[0] == before
    _hold(writer, note_id="q1")  # no ttl: the tenant's default applies when it is released
    admit(writer, {"id": "q2", "content": NOTE}, Provenance("user_asserted"), policy=HOLD_ALL, embedder=EMBEDDER,
          ttl=3000)
    set_retention(operator, default_ttl=600, max_ttl=1200)  # lowered while q2 waits: the release honours it
    release_quarantined(operator, "q1", "fine")
    release_quarantined(operator, "q2", "fine too")
    with database.admin() as conn:
        ttls = dict(conn.execute("select id, ttl from pymem.memories order by id").fetchall())
    assert ttls == {"q1": timedelta(seconds=600), "q2": timedelta(seconds=1200)}


def test_a_held_langgraph_put_carries_its_ttl(store, database):
    from pymem.langgraph import PymemStore

    agent = store.bind(Context(tenant="acme", actor="agent-1", adapter="codex"))
    graph = PymemStore(agent, policy=HOLD_ALL, ttl={"default_ttl": 30})
    graph.put(("notes",), "n1", {"text": NOTE}, ttl=5)
    graph.put(("notes",), "n2", {"text": NOTE})
    with database.admin() as conn:
        held = conn.execute("select status, ttl from pymem.quarantine order by id").fetchall()
    assert held == [("held", timedelta(minutes=5)), ("held", timedelta(minutes=30))]


def test_who_held_and_decided_a_note_is_kept_as_a_pseudonym(store, database):
    writer = store.bind(Context(tenant="acme", actor="agent-1", adapter="codex"))
    _hold(writer)
    operator = store.bind(Context(tenant="acme", actor="ops-1"))
    reject_quarantined(operator, "q1", "not from the customer")
    with database.admin() as conn:
        held_by, decided_by = conn.execute("select held_by, decided_by from pymem.quarantine").fetchone()
        links = dict(conn.execute("select actor, 'p:' || token from pymem.actor_pseudonyms").fetchall())
    assert (held_by, decided_by) == (links["agent-1"], links["ops-1"])
    # the tenant's own reviewer still reads who it was
    note = get_quarantined(operator, "q1")
    assert (note.held_by, note.decided_by) == ("agent-1", "ops-1")
