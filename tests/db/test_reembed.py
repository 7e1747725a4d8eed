"""`reembed`: a store moves to another embedder in place, resumably, each change chained, and
verify stays clean; the store then records the new embedder and refuses the old one."""

from __future__ import annotations

import pytest
from helpers.database import DIM

from pymem import Context, EmbedderMismatch, Provenance, admit, recall, reembed, verify_store
from pymem.embedder import LexicalEmbedder
from pymem.errors import InvalidArguments

PROV = Provenance(origin="user_asserted", source="chat")


class Other(LexicalEmbedder):
    """Another embedder of the same dimension (a different name is a different vector space)."""

    name = "other-test-embedder"

    def embed(self, texts):
        return [list(reversed(v)) for v in super().embed(texts)]


class Interrupted(Other):
    """Fails on its second batch: a run stopped half way."""

    def __init__(self, dim):
        super().__init__(dim)
        self.calls = 0

    def embed(self, texts):
        self.calls += 1
        if self.calls == 2:
            raise RuntimeError("interrupted")
        return super().embed(texts)


def test_reembed_is_resumable_chained_and_leaves_verify_clean(database):
    store = database.store()
    try:
        lexical = LexicalEmbedder(DIM)
        for tenant, adapter in (("acme", None), ("acme", "codex"), ("globex", None)):
            mem = store.bind(Context(tenant=tenant, actor="u", adapter=adapter))
            for i in range(5):
                admit(mem, f"{tenant} note {i} about tea", PROV, embedder=lexical)
        acme = store.bind(Context(tenant="acme", actor="u"))
        # a caller-supplied vector (the storage contract) is left alone
        acme.upsert_many([{"id": "own", "content": "caller vector", "embedding": [1.0] + [0.0] * (DIM - 1)}],
                         idempotency_key="k1")
        with pytest.raises(InvalidArguments):
            reembed(store, Other(DIM), batch=0)
        with pytest.raises(RuntimeError, match="interrupted"):
            reembed(store, Interrupted(DIM), batch=3)
        assert store.embedder.recorded == "lexical-hash-v1"  # not complete: the old record stands
        assert verify_store(store).clean
        seen = []
        report = reembed(store, Other(DIM), batch=3, progress=lambda done, total: seen.append((done, total)))
        assert report.complete and report.recorded == "other-test-embedder"
        assert report.pending_before == 12 and report.rows == 12  # 15 rows, 3 done by the first run
        assert seen[-1] == (12, 12)
        assert verify_store(store).clean
        with database.admin() as conn:
            rows = dict(conn.execute("select id, embedder from pymem.memories where tenant_id = 'acme'").fetchall())
            events = conn.execute("select count(*) from pymem.ledger where event = 'memory.update'").fetchone()[0]
        assert rows.pop("own") is None and set(rows.values()) == {"other-test-embedder"}
        assert events == 15
        again = reembed(store, Other(DIM))
        assert again.rows == 0 and again.complete
        with pytest.raises(EmbedderMismatch):
            recall(acme, "tea", embedder=lexical)
        assert recall(acme, "acme note tea", embedder=Other(DIM), floor=-1.0).kept
    finally:
        store.close()
