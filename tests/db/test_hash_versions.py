"""Hash version 2: Python and SQL compute the same bytes, and what the canonical form depends on.

Version 2 hashes jsonb through Postgres's text output. `render_jsonb` writes that output again in
Python; these tests pin it against the server, so a server that spells jsonb differently fails
here first (README, "Hash versions"). They also keep the version-1 flaw fixed: a row's hash no
longer depends on the client encoding of the session that wrote it.
"""

from __future__ import annotations

import json

import psycopg
import pytest

from pymem.integrity import hashing

EDGE_JSON = [
    '{}', '[]', '""', 'null', 'true', '0', '-0', '-0.0', '1.0', '2.000000', '1e2', '1E-3', '1.50e1', '-12.5e-3',
    '123456789012345678901234567890.123456789', '1e-7',
    '"tab\\there"', '"quote \\" backslash \\\\ slash /"', '"\\u0001\\u001f\\u007f"', '"\\b\\f\\n\\r"',
    '"caf\\u00e9 \\ud83d\\ude00 \\u2028"', '"é"',
    '{"b": 1, "a": 2, "aa": 3, "é": 4, "z": 5, "": 6}', '{"k": 1, "k": 2}',
    '{"n": [1, 2.5, [], {}, null, "x", {"é": [true, false]}]}',
    '[1.0, 2.50, -0.0, 1e-7, 3]',
]


@pytest.fixture
def admin(database):
    with database.admin() as conn:
        yield conn


@pytest.mark.parametrize("text", EDGE_JSON)
def test_render_jsonb_spells_jsonb_as_the_server_does(admin, text):
    server = admin.execute("select %s::jsonb::text", (text,)).fetchone()[0]
    # from the server's own output, and from the caller's original text (an export, say)
    assert hashing.render_jsonb(hashing.parse_jsonb(server)) == server
    assert hashing.render_jsonb(hashing.parse_jsonb(text)) == server
    # Python values too: what canonical_json would have sent
    assert hashing.render_jsonb(json.loads(text)) == admin.execute(
        "select %s::jsonb::text", (json.dumps(json.loads(text)),)).fetchone()[0]


ROWS = [
    dict(id="plain", content="x"),
    dict(id="full", scope='{"agent": "a1", "é": "ü"}', kind="lesson", content="café\n\ttab \u2028",
         record='{"id": "full", "embedding": [0.5, -1.25, 3e-8], "meta": {"k": [1, "two", null]}}',
         embedding="[0.5,-1.25,3e-08]", tags="{b,é,\"a,b\"}", importance=0.1, confidence=1,
         origin="injected_context", provenance='{"session": "s1", "turn": 3}', injection_source="prompt",
         policy_fingerprint="p:1", valid_from="2001-02-03 04:05:06.789012+00", invalidated_at="2031-01-01 00:00:00+00",
         superseded_by="other"),
    dict(id="négatif", content=None, record='{"x": -0.0, "y": 1e2}', tags="{}", importance=0.3,
         valid_from="1999-12-31 23:59:59.999999+00"),
]


def _insert(conn, tenant: str, row: dict) -> None:
    cols = ["tenant_id", *list(row)]
    casts = {"tags": "::text[]", "valid_from": "::timestamptz", "invalidated_at": "::timestamptz"}
    values = ", ".join(f"%s{casts.get(c, '')}" for c in cols)
    conn.execute(f"insert into pymem.memories ({', '.join(cols)}) values ({values})", [tenant, *list(row.values())])


def test_python_and_sql_compute_the_same_version_2_hashes(database):
    """Rows with every field set, NULLs, unicode, escapes and odd numbers (embeddings padded to
    the store's dimension): the SQL hash equals Python's, from the raw row read back."""
    with psycopg.connect(database.admin_dsn) as conn:
        dim = conn.execute("select embedding_dim from pymem.store_info").fetchone()[0]
        conn.execute("select pymem.set_context('acme')")
        for row in ROWS:
            row = dict(row)
            if "embedding" in row:
                row["embedding"] = row["embedding"][:-1] + "," + ",".join(["0.125"] * (dim - 3)) + "]"
            _insert(conn, "acme", row)
        conn.commit()
        with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
            from pymem import queries

            rows = cur.execute(queries.query("raw_memories"), ("acme", None, None, None, None)).fetchall()
        sql = dict(conn.execute("select id, pymem._content_hash_v2(m) from pymem.memories m").fetchall())
    assert len(rows) == len(ROWS)
    for r in rows:
        emb = None if r["embedding"] is None else [float(x) for x in r["embedding"].strip("[]").split(",")]
        assert bytes(r["content_hash"]) == sql[r["id"]] == hashing.content_hash_v2(dict(r, embedding=emb)), r["id"]


def test_the_client_encoding_of_the_writer_does_not_change_the_hash(database):
    """Version 1 hashed tags with array_send, which converts text to the session's client
    encoding: a LATIN1 writer's row failed verification from a UTF8 session. Version 2 uses no
    conversion that depends on the session."""
    with psycopg.connect(database.admin_dsn) as conn:
        conn.execute("set client_encoding = 'LATIN1'")
        conn.execute("select pymem.set_context('acme')")
        conn.execute("insert into pymem.memories (tenant_id, id, content, tags, record) values"
                      " ('acme', 'latin', 'déjà', '{é}', '{\"k\": \"é\"}')")
        conn.commit()
    with psycopg.connect(database.admin_dsn) as conn:
        assert conn.execute("select problem from pymem.verify_chain('acme')").fetchone()[0] is None
        assert conn.execute("select content_hash = pymem._content_hash(m) from pymem.memories m").fetchone()[0]
