"""LangGraph search filters as a list of conditions the database evaluates (pure).

A LangGraph filter maps top-level fields of an item's value to what they must match:

- a plain value: equal to it; a nested object matches an object holding at least those fields
  (recursively), a list matches a list of the same length whose elements match in order, and
  None matches a missing field or null;
- an operator object {"$eq" | "$ne" | "$gt" | "$gte" | "$lt" | "$lte": operand, ...}: every
  operator must hold. $eq / $ne compare whole JSON values; the range operators compare a number
  with a number and a string with a string (by code point), and never match across types.

Values compare by JSON type, as Postgres compares jsonb: a number is never compared as text
("10" > "9" is not how 10 and 9 compare), true is not 1, and 1 equals 1.0. A missing field reads
as null. The result is a list of {"path", "op", "value"} conditions that all must hold; the named
query `langgraph_items` (sql/queries.sql) evaluates them, so every search keeps one statement.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..errors import InvalidArguments

__all__ = ["compile_filter", "OPERATORS"]

OPERATORS = {"$eq": "eq", "$ne": "ne", "$gt": "gt", "$gte": "gte", "$lt": "lt", "$lte": "lte"}
_RANGE = ("gt", "gte", "lt", "lte")


def _json(value: Any, where: str) -> Any:
    """The operand as plain JSON (tuples as lists); refuses what JSON cannot hold."""
    if value is None or isinstance(value, (bool, str)):
        if isinstance(value, str) and "\x00" in value:
            raise InvalidArguments(f"filter {where} contains a NUL byte")
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidArguments(f"filter {where} is not a finite number")
        return value
    if isinstance(value, (list, tuple)):
        return [_json(v, where) for v in value]
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise InvalidArguments(f"filter {where} has a key that is not a string")
            out[k] = _json(v, where)
        return out
    raise InvalidArguments(f"filter {where} holds a {type(value).__name__}, which is not JSON")


def _matching(path: list[str], expected: Any, out: list[dict[str, Any]]) -> None:
    where = ".".join(path)
    if isinstance(expected, Mapping) and any(isinstance(k, str) and k.startswith("$") for k in expected):
        for operator, operand in expected.items():
            op = OPERATORS.get(operator)
            if op is None:
                raise InvalidArguments(f"filter {where}: unsupported operator {str(operator)[:20]!r}; "
                                       f"expected one of {', '.join(OPERATORS)}")
            operand = _json(operand, where)
            if op in _RANGE and (isinstance(operand, bool) or not isinstance(operand, (int, float, str))):
                raise InvalidArguments(f"filter {where}: {operator} needs a number or a string")
            out.append({"path": path, "op": op, "value": operand})
    elif isinstance(expected, Mapping):
        out.append({"path": path, "op": "object", "value": None})
        for key, value in expected.items():
            if not isinstance(key, str):
                raise InvalidArguments(f"filter {where} has a key that is not a string")
            _matching([*path, key], value, out)
    elif isinstance(expected, (list, tuple)):
        out.append({"path": path, "op": "array", "value": len(expected)})
        for i, value in enumerate(expected):
            _matching([*path, str(i)], value, out)
    else:
        out.append({"path": path, "op": "eq", "value": _json(expected, where)})


def compile_filter(filter: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The conditions a LangGraph filter stands for ([] matches everything)."""
    if filter is None:
        return []
    if not isinstance(filter, Mapping):
        raise InvalidArguments(f"filter must be an object of field -> value, got {type(filter).__name__}")
    out: list[dict[str, Any]] = []
    for field, expected in filter.items():
        if not isinstance(field, str) or not field:
            raise InvalidArguments("filter fields must be non-empty strings")
        _matching([field], expected, out)
    return out
