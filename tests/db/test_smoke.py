from pymem.context import Context


def test_insert_get_and_verify(store, database):
    mem = store.bind(Context(tenant="acme", actor="u1"))
    ids = mem.add([{"content": "hello", "embedding": [0.1] * 384}])
    row = mem.get_row(ids[0])
    assert row["revision"] == 1 and row["content"] == "hello"
    with database.admin() as conn:
        rows = conn.execute("select tenant_id, entries, problem from pymem.verify_chain()").fetchall()
    assert rows == [("acme", 1, None)]
