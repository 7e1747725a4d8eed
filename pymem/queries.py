"""The named queries: every statement the library runs, read once from sql/queries.sql.

`query(name)` is a statement's text, ready for `execute`. Two kinds are templates (see the
header of sql/queries.sql): `template(name, **parts)` fills `{part}` placeholders with psycopg
`sql` objects (an Identifier for a role or a database), and `repeated(name, rows)` repeats a
multi-row INSERT's VALUES row once per row of a batch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from psycopg import sql

from .resources import sql_dir

__all__ = ["NamedQuery", "load", "query", "template", "repeated", "values_row", "insert_columns", "column_lists"]

_HEADER = re.compile(r"^-- name: ([a-z][a-z0-9_]*) --[ \t]*$", re.M)
_VALUES = re.compile(r"^values (\(.*\))$", re.M)
_INSERT = re.compile(r"^insert into [\w.]+(?: as \w+)? \(([^)]*)\)")
_LISTS = re.compile(r"(?:^insert into [\w.]+(?: as \w+)?|^copy [\w.]+) \(([^)]*)\)|^select (.*?)\s+from\b", re.M | re.S)
_NOW = re.compile(r"coalesce\((\w+\.)?(\w+), now\(\)\)")


@dataclass(frozen=True)
class NamedQuery:
    name: str
    description: str
    text: str


def parse(text: str) -> dict[str, NamedQuery]:
    """Named queries from a queries.sql text: each header, its one-line description, its body."""
    out: dict[str, NamedQuery] = {}
    heads = list(_HEADER.finditer(text))
    for head, nxt in zip(heads, [*heads[1:], None], strict=True):
        body = text[head.end():nxt.start() if nxt else len(text)].strip("\n").splitlines()
        if not body or not body[0].startswith("-- "):
            raise ValueError(f"query {head.group(1)} has no one-line description")
        statement = "\n".join(line for line in body[1:] if not line.startswith("-- ")).strip()
        if not statement or head.group(1) in out:
            raise ValueError(f"query {head.group(1)} is empty or defined twice")
        out[head.group(1)] = NamedQuery(head.group(1), body[0][3:].strip(), statement)
    return out


@cache
def load() -> dict[str, NamedQuery]:
    """Every named query, read once per process."""
    return parse((sql_dir() / "queries.sql").read_text(encoding="utf-8"))


def query(name: str) -> str:
    """The text of a named query."""
    return load()[name].text


def template(name: str, **parts: sql.Composable) -> sql.Composed:
    """A template query with its `{part}` placeholders filled (identifiers stay quoted)."""
    return sql.SQL(query(name)).format(**parts)


def values_row(name: str) -> str:
    """The VALUES row of a multi-row INSERT template."""
    match = _VALUES.search(query(name))
    if match is None:
        raise ValueError(f"query {name} has no VALUES row")
    return match.group(1)


def insert_columns(name: str) -> tuple[str, ...]:
    """The column list of an INSERT query, in order."""
    match = _INSERT.match(query(name))
    if match is None:
        raise ValueError(f"query {name} is not an INSERT with a column list")
    return tuple(c.strip() for c in match.group(1).split(","))


def column_lists(text: str) -> list[tuple[str, ...]]:
    """Every column list of a statement's text, in order: an INSERT's or a COPY's column list, and
    each SELECT list (a table alias and a `coalesce(x, now())` default are read as the column
    `x`). For checking that statements filled by position name the same columns."""
    out = []
    for match in _LISTS.finditer(text):
        body = _NOW.sub(lambda m: m.group(2), match.group(1) if match.group(1) is not None else match.group(2))
        out.append(tuple(re.sub(r"^\w+\.", "", c.strip()) for c in body.split(",")))
    return out


@cache
def repeated(name: str, rows: int) -> str:
    """A multi-row INSERT template with its VALUES row repeated `rows` times."""
    text, row = query(name), values_row(name)
    return text.replace(f"values {row}", "values " + ", ".join([row] * rows), 1)
