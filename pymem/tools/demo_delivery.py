"""The delivery part of `pymem demo`: sessions, a superseded fact, an erased one, an incognito
session that left nothing, the block an agent receives and the injection record of its turn, each
step checking what it shows (run by pymem.tools.demo.run_demo)."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable
from typing import Any

from .. import db
from ..admission.gate import admit
from ..admission.policy import AdmissionPolicy
from ..admission.provenance import Origin, Provenance
from ..admission.trust import AdapterTrustPolicy
from ..delivery.deliver import deliver
from ..delivery.injections import session_injections
from ..delivery.sessions import end_session, list_sessions, start_session
from ..delivery.supersession import erase, supersede
from ..delivery.tiers import TrustTiers
from ..embedder import LexicalEmbedder
from ..errors import IncognitoSession
from ..integrity.verify import verify_chain
from ..recall import recall
from ..storage.transfer import export_records

__all__ = ["delivery_demo"]


def _incognito_refused(fn: Callable[[], object]) -> bool:
    try:
        fn()
    except IncognitoSession:
        return True
    return False


def delivery_demo(demo) -> None:
    """The delivery steps, on the running pymem.tools.demo.Demo (its store, echo and checks)."""
    embedder = LexicalEmbedder(demo.dim)
    options: dict[str, Any] = dict(policy=AdmissionPolicy(), trust=AdapterTrustPolicy(), embedder=embedder)
    mem = demo.store.bind(demo.ctx("northwind", actor="ops"))

    def said(text: str, session: str, tags: list[str] | None = None) -> str:
        record = {"content": text, **({"tags": tags} if tags else {})}
        return admit(mem, record, Provenance(Origin.USER_ASSERTED, session_id=session), policy=options["policy"],
                     embedder=embedder)["id"]

    demo.step("Sessions: every memory names the session it came from; there is no default session")
    start_session(mem, "chat-1", "chat", first_message="Can you sort out Northwind's invoicing?")
    currency = said("Northwind wants invoices in EUR.", "chat-1")
    contact = said("Northwind's billing contact is Mara Lind.", "chat-1", tags=["hot"])
    address = said("Mara Lind's home address is 9 Birch Road.", "chat-1")
    end_session(mem, "chat-1", summary="Set up invoicing for Northwind: EUR, contact Mara Lind.")
    start_session(mem, "nightly-sync", "background")
    demo.ok("chat-1 (chat) wrote three memories, one of them hot (delivered every turn), then ended with a summary")

    demo.step("Supersession: a changed fact replaces the old one without overwriting it")
    with demo.store.pool.connection() as conn, db.transaction(conn, mem.ctx):
        before = conn.execute("select clock_timestamp()").fetchone()[0]
    start_session(mem, "chat-2", "chat", first_message="Northwind switched currency")
    usd = supersede(mem, currency, "Northwind now wants invoices in USD.",
                    Provenance(Origin.USER_ASSERTED, session_id="chat-2"),
                    **{k: options[k] for k in ("policy", "embedder")})["id"]
    query = "Which currency does Northwind want its invoices in?"
    now = [k.id for k in recall(mem, query, top_k=3, **options).kept]
    then = [k.id for k in recall(mem, query, top_k=3, as_of=before, **options).kept]
    demo.check(now[:1] == [usd] and currency not in now, "the superseded fact is not current")
    demo.check(then[:1] == [currency] and usd not in then, "as_of a time before the change finds the old fact")
    old = mem.get_row(currency)
    demo.check(old["superseded_by"] == usd and old["content"] is not None, "the old row is kept and linked")
    demo.ok(f"EUR fact superseded by the USD one (superseded_by {usd[:8]}...); recall --as-of before the change "
            "still answers EUR")

    demo.step("Erasure: content gone, hash kept, the chain still verifies")
    seq = erase(mem, address, "the user asked us to forget their address")
    out = io.StringIO()
    export_records(mem, out)
    demo.check(mem.get_row(address)["content"] is None and "Birch Road" not in out.getvalue(), "erased everywhere")
    with demo.store.pool.connection() as conn:
        demo.check(verify_chain(conn, mem.ctx.tenant).clean, "the chain verifies after the erasure")
    demo.ok(f"address erased (reason at ledger seq {seq}); not in rows, exports or recall; pymem verify: clean")

    demo.step("Incognito: a session that leaves nothing behind")
    start_session(mem, "private-1", "chat", incognito=True, first_message="Plan a surprise party for Mara")
    demo.check(_incognito_refused(lambda: said("Mara's surprise party is on the 14th.", "private-1")),
               "the library stores nothing from an incognito session")

    def raw_insert() -> None:
        with demo.store.pool.connection() as conn, db.transaction(conn, mem.ctx):
            conn.execute("insert into pymem.memories (tenant_id, id, content, provenance) values (%s, 'raw', %s,"
                         " jsonb_build_object('origin', 'user_asserted', 'session_id', 'private-1'))",
                         (mem.ctx.tenant, "Mara's surprise party is on the 14th."))

    demo.check(_incognito_refused(raw_insert), "Postgres refuses raw SQL naming an incognito session")
    ended = end_session(mem, "private-1", summary="Party planning.")
    demo.check(not ended.has_summary, "an incognito session's summary is dropped")
    demo.check("private-1" not in [s.id for s in list_sessions(mem)], "an incognito session is never listed")
    demo.ok("the library refuses to store its memory, Postgres refuses raw SQL as the app role, its summary is "
            "dropped, and it is never listed")

    demo.step("Delivery: the block an agent receives on chat-3's first turn")
    start_session(mem, "chat-3", "chat", first_message="Invoice Northwind for March")
    delivered = deliver(mem, "chat-3", query, budget=800, tiers=TrustTiers(), **options)
    demo.echo("")
    for line in delivered.text.splitlines():
        demo.echo("   " + line)
    demo.echo("")
    ids = [i.id for i in delivered.items]
    demo.check(ids[:1] == [contact] and usd in ids and currency not in ids and address not in ids,
               "hot first, the current fact, never the superseded or erased one")
    demo.check("private-1" not in delivered.text and "chat-3" not in [d.session_id for d in delivered.digest],
               "the digest lists other sessions only, never an incognito one")
    demo.ok(f"{delivered.tokens} of {delivered.budget} tokens ({delivered.counter}); the digest lists "
            f"{', '.join(d.session_id for d in delivered.digest)} by id, time, surface and topic only")

    demo.step("The injection record: what did chat-3's turn see?")
    [record] = session_injections(mem, "chat-3")
    demo.check(record.memory_ids == ids and record.hot_ids == [contact]
               and record.block_sha256 == hashlib.sha256(delivered.text.encode()).hexdigest(),
               "the record names exactly the block's items and its sha256")
    demo.ok(f"ledger seq {record.seq}: session {record.session_id} turn {record.turn}, memories "
            f"{', '.join(i[:8] + '...' for i in record.memory_ids)}, digest sessions "
            f"{', '.join(record.digest_sessions)}, block sha256 {record.block_sha256[:16]}...")
    with demo.store.pool.connection() as conn:
        demo.check(verify_chain(conn, mem.ctx.tenant).clean, "the chain verifies with the record in it")
    demo.ok("pymem audit injections --session chat-3 shows the same; the record holds ids and a digest, never text")

