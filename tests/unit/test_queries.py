"""The named queries (sql/queries.sql): well formed, all used, and the only SQL the library sends."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from pymem import queries

PACKAGE = Path(queries.__file__).resolve().parent
# pymem/tools is tooling (a benchmark's raw-pgvector baselines, the demo's tampering), not library.
LIBRARY = sorted(p for p in PACKAGE.rglob("*.py") if "tools" not in p.relative_to(PACKAGE).parts)


def test_every_query_has_a_name_a_description_and_a_statement():
    loaded = queries.load()
    assert len(loaded) >= 30
    for name, q in loaded.items():
        assert re.fullmatch(r"[a-z][a-z0-9_]*", name) and q.description and not q.description.startswith("-")
        assert q.text and not q.text.endswith(";"), name


def test_every_query_is_used_and_every_use_exists():
    source = "\n".join(p.read_text(encoding="utf-8") for p in LIBRARY)
    used = set(re.findall(r"""(?:query|template|repeated|insert_columns|values_row)\(\s*["']([a-z0-9_]+)["']""", source))
    used |= set(re.findall(r'"(insert_memories|upsert_memories|replace_memories)"', source))
    assert used == set(queries.load()), (used ^ set(queries.load()))


def _sql_literals_sent(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "execute"
                and node.args and isinstance(node.args[0], (ast.Constant, ast.JoinedStr, ast.BinOp))):
            found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    return found


def test_the_library_sends_no_sql_written_in_python():
    assert [hit for p in LIBRARY for hit in _sql_literals_sent(p)] == []


def test_the_check_sees_a_literal():
    assert _sql_literals_sent(PACKAGE / "tools" / "demo.py"), "the scan would miss a literal statement"


def test_repeated_values_rows():
    one, three = queries.repeated("insert_memories", 1), queries.repeated("insert_memories", 3)
    row = queries.values_row("insert_memories")
    assert one == queries.query("insert_memories") and three.count(row) == 3
    assert three.count("%s") == 3 * one.count("%s")


def test_a_malformed_file_is_refused():
    with pytest.raises(ValueError):
        queries.parse("-- name: a --\nselect 1\n")  # no description
    with pytest.raises(ValueError):
        queries.parse("-- name: a --\n-- one\nselect 1\n-- name: a --\n-- two\nselect 2\n")  # twice
    assert queries.parse("-- name: a --\n-- one\nselect 1\n\n-- name: b --\n-- two\nselect 2\n")["b"].text == "select 2"


# -- the write columns: one list (the vocabulary's), named by every statement filled by position --

def test_every_write_statement_names_the_vocabularys_write_columns_in_order():
    from pymem.storage.rows import WRITE_STATEMENTS
    from pymem.vocabulary import WRITE_COLUMNS

    seen = 0
    for name in WRITE_STATEMENTS:
        lists = queries.column_lists(queries.query(name))
        assert lists and all(cols == WRITE_COLUMNS for cols in lists), (name, lists)
        seen += len(lists)
    assert seen == len(WRITE_STATEMENTS) + 1  # upsert_from_stage has its INSERT list and its SELECT list
    # every statement of queries.sql naming memories' write columns is one of them
    for name, q in queries.load().items():
        if "policy_fingerprint, valid_from, invalidated_at" in " ".join(q.text.split()):
            assert name in WRITE_STATEMENTS, name


def _drifted(name: str, old: str, new: str) -> dict[str, str]:
    from pymem.storage.rows import WRITE_STATEMENTS

    texts = {n: queries.query(n) for n in WRITE_STATEMENTS}
    assert old in texts[name]
    texts[name] = texts[name].replace(old, new, 1)
    return texts


@pytest.mark.parametrize("name, old, new", [
    ("copy_stage", "importance, confidence", "confidence, importance"),          # two columns swapped
    ("upsert_from_stage", "s.importance, s.confidence", "s.confidence, s.importance"),  # its SELECT list only
    ("create_stage", ", embedder, ttl,\n", ", ttl,\n"),                             # one column dropped
    ("replace_memories", "superseded_by, embedder, ttl, subject)", "superseded_by, ttl, subject)"),
    ("insert_memories", "coalesce(%s, now()), %s, %s, %s, %s, %s)", "%s, coalesce(%s, now()), %s, %s, %s, %s)"),  # default moved
])
def test_a_drifted_write_statement_is_refused(name, old, new):
    from pymem.storage.rows import check_write_statements

    with pytest.raises(RuntimeError, match=name):
        check_write_statements(_drifted(name, old, new))
