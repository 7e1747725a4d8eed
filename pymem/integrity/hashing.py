"""The chain's hashes, recomputed in Python: the same bytes sql/schema.sql defines.

Hash version 1 (section 3 of the schema): every field is length-prefixed or fixed-width behind
a 0x01 marker, SQL NULL is 0x00, timestamps are integer microseconds since the epoch, text is
UTF-8, a text[] is Postgres's binary array format, a vector is its float4 array in that format,
and jsonb is walked into tagged bytes with keys sorted by their UTF-8 bytes and numbers as
Postgres prints them (so jsonb arrives here as its text form and numbers are kept as their
digits, never floats).

Hash version 2 (pymem._content_hash_v2, pymem._event_bytes_v2): the same framing over built-in
renderings: jsonb (and the tags, as a JSON array) as Postgres's jsonb text output, timestamps as
int8 microseconds since 2000-01-01 UTC, reals as float4, the vector as vector_send's bytes.
`render_jsonb` is that text output written again in Python (key order, separators, number and
string spelling), so a record read from anywhere (an export, say) can be hashed without a server.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import struct
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_PG_EPOCH = _dt.datetime(2000, 1, 1, tzinfo=_dt.UTC)
_MICRO = _dt.timedelta(microseconds=1)
_NULL = b"\x00"
_TEXT_OID = 25
_FLOAT4_OID = 700


class Number(str):
    """A JSON number as the digits Postgres printed (its numeric text), never a float."""


def parse_jsonb(text: str | None) -> Any:
    """jsonb's text form, numbers kept as `Number` digits."""
    if text is None:
        return None
    return json.loads(text, parse_float=Number, parse_int=Number, parse_constant=Number)


def b_text(value: str | None) -> bytes:
    if value is None:
        return _NULL
    raw = value.encode("utf-8")
    return b"\x01" + struct.pack(">i", len(raw)) + raw


def b_bytes(value: bytes | None) -> bytes:
    if value is None:
        return _NULL
    return b"\x01" + struct.pack(">i", len(value)) + bytes(value)


def b_int(value: int | None) -> bytes:
    return _NULL if value is None else b"\x01" + struct.pack(">q", value)


def b_real(value: float | None) -> bytes:
    return _NULL if value is None else b"\x01" + struct.pack(">f", value)


def b_time(value: _dt.datetime | None) -> bytes:
    if value is None:
        return _NULL
    if value.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware")
    return b"\x01" + struct.pack(">q", (value - _EPOCH) // _MICRO)


def array_send(elements: Sequence[bytes | None], element_oid: int) -> bytes:
    """Postgres's binary format of a one-dimensional array (empty: zero dimensions)."""
    if not elements:
        return struct.pack(">iii", 0, 0, element_oid)
    has_null = any(e is None for e in elements)
    out = [struct.pack(">iiiii", 1, int(has_null), element_oid, len(elements), 1)]
    for e in elements:
        out.append(struct.pack(">i", -1) if e is None else struct.pack(">i", len(e)) + e)
    return b"".join(out)


def b_text_array(values: Sequence[str | None] | None) -> bytes:
    if values is None:
        return _NULL
    return b_bytes(array_send([None if v is None else v.encode("utf-8") for v in values], _TEXT_OID))


def b_vector(values: Iterable[float] | None) -> bytes:
    if values is None:
        return _NULL
    return b_bytes(array_send([struct.pack(">f", float(v)) for v in values], _FLOAT4_OID))


def _scalar(value: Any) -> bytes | None:
    if isinstance(value, str) and not isinstance(value, Number):
        return b"\x73" + b_text(value)
    if isinstance(value, Number):
        return b"\x6e" + b_text(str(value))
    if value is True:
        return b"\x74"
    if value is False:
        return b"\x66"
    if value is None:
        return b"\x7a"
    return None


def _value(value: Any) -> bytes:
    """A jsonb value inside a container (pymem._bv)."""
    out = _scalar(value)
    return out if out is not None else b_json(value)


def b_json(value: Any, *, sql_null: bool = False) -> bytes:
    """pymem._b(jsonb) of a value from `parse_jsonb`. `sql_null` marks a SQL NULL (not JSON null)."""
    if sql_null:
        return _NULL
    if isinstance(value, dict):
        if not value:
            return b"\x6f\x00\x00\x00\x00"
        keys = sorted(value, key=lambda k: k.encode("utf-8"))
        return (b"\x6f" + struct.pack(">i", len(keys))
                + b"".join(b_text(k) + _value(value[k]) for k in keys))
    if isinstance(value, list):
        if all(isinstance(v, Number) for v in value):
            # numbers-only arrays (an embedding kept in a record): their digits joined by commas;
            # an empty array's join is SQL NULL
            joined = ",".join(str(v) for v in value) if value else None
            return b"\x4e" + struct.pack(">i", len(value)) + b_text(joined)
        return b"\x61" + struct.pack(">i", len(value)) + b"".join(_value(v) for v in value)
    out = _scalar(value)
    if out is None:
        raise TypeError(f"not a JSON value: {type(value).__name__}")
    return out


def _json_field(text: str | None) -> bytes:
    return b_json(parse_jsonb(text), sql_null=text is None)


def genesis_hash(tenant: str) -> bytes:
    """prev_hash of a tenant's first ledger entry."""
    return hashlib.sha256(b"pymem-chain-v1" + b_text(tenant)).digest()


def event_bytes(entry: dict[str, Any]) -> bytes:
    """The hashed field list of a ledger entry (hash version 1); jsonb `details` as text."""
    return (b_int(entry["hash_version"]) + b_text(entry["tenant_id"]) + b_int(entry["seq"])
            + b_text(entry["event"]) + b_text(entry["memory_id"]) + b_int(entry["revision"])
            + b_bytes(entry["content_hash"]) + b_text(entry["actor"]) + b_text(entry["adapter"])
            + _json_field(entry["details"]) + b_time(entry["occurred_at"]))


def chain_hash(prev_hash: bytes, entry: dict[str, Any]) -> bytes:
    return hashlib.sha256(bytes(prev_hash) + event_bytes(entry)).digest()


def content_hash(row: dict[str, Any]) -> bytes:
    """A memory's content_hash (field list version 1); jsonb columns as text, the embedding as
    a list of floats (or None)."""
    return hashlib.sha256(
        b"\x00\x01"
        + b_text(row["tenant_id"]) + b_text(row["id"]) + _json_field(row["scope"]) + b_text(row["kind"])
        + b_text(row["content"]) + _json_field(row["record"])
        + b_vector(row["embedding"])
        + b_text_array(row["tags"]) + b_real(row["importance"]) + b_real(row["confidence"])
        + b_text(row["origin"]) + b_text(row["source_adapter"]) + _json_field(row["provenance"])
        + b_text(row["injection_source"]) + b_text(row["policy_fingerprint"])
        + b_int(row["revision"]) + b_time(row["created_at"]) + b_time(row["valid_from"])
        + b_time(row["invalidated_at"]) + b_text(row["superseded_by"])
    ).digest()


# -- hash version 2 ------------------------------------------------------------------------------

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _json_string(value: str) -> str:
    """A string as jsonb's text output spells it: the short escapes, other controls as \\u00xx,
    everything else as it is (UTF-8, no \\u escapes)."""
    out = ['"']
    for ch in value:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch < " ":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _numeric_text(digits: str) -> str:
    """A JSON number as Postgres's numeric prints it: plain notation, the input's scale, no -0."""
    number = Decimal(digits)
    if number.is_zero():
        number = number.copy_abs()
    return format(number, "f")


def render_jsonb(value: Any) -> str:
    """Postgres's jsonb text output for a JSON value (numbers as `Number`, int, float or Decimal):
    object keys by UTF-8 length and then bytes, ", " and ": " separators."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _numeric_text(value) if isinstance(value, Number) else _json_string(value)
    if isinstance(value, (int, float, Decimal)):
        return _numeric_text(repr(value) if isinstance(value, float) else str(value))
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(render_jsonb(v) for v in value) + "]"
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: (len(k.encode("utf-8")), k.encode("utf-8")))
        return "{" + ", ".join(_json_string(k) + ": " + render_jsonb(value[k]) for k in keys) + "}"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def _v2_text(value: str | None) -> bytes:
    return b_text(value)


def _v2_time(value: _dt.datetime | None) -> bytes:
    if value is None:
        return _NULL
    if value.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware")
    return b"\x01" + struct.pack(">q", (value - _PG_EPOCH) // _MICRO)


def _v2_json(text: str | None) -> bytes:
    """A jsonb field given as its text output."""
    return _NULL if text is None else b_text(text)


def vector_send(values: Sequence[float] | None) -> bytes | None:
    """pgvector's binary form: int2 dimensions, int2 0, then each float4, big-endian."""
    if values is None:
        return None
    return struct.pack(f">hh{len(values)}f", len(values), 0, *values)


def content_hash_v2(row: dict[str, Any]) -> bytes:
    """A memory's content_hash, hash version 2. scope, provenance and record are jsonb text
    output (as `::text` returns them, or `render_jsonb` of the value); tags a list of strings;
    the embedding a list of floats or vector_send's bytes (or None)."""
    embedding = row["embedding"]
    vector = embedding if isinstance(embedding, (bytes, bytearray, memoryview)) or embedding is None \
        else vector_send(embedding)
    return hashlib.sha256(b"".join((
        b"\x00\x02",
        _v2_text(row["tenant_id"]), _v2_text(row["id"]), _v2_text(row["kind"]), _v2_text(row["content"]),
        _v2_text(row["origin"]), _v2_text(row["source_adapter"]), _v2_text(row["injection_source"]),
        _v2_text(row["policy_fingerprint"]), _v2_text(row["superseded_by"]),
        _v2_json(row["scope"]), _v2_json(row["provenance"]),
        _v2_json(None if row["tags"] is None else render_jsonb(row["tags"])),
        b_real(row["importance"]), b_real(row["confidence"]), b_int(row["revision"]),
        _v2_time(row["created_at"]), _v2_time(row["valid_from"]), _v2_time(row["invalidated_at"]),
        _v2_json(row["record"]), b_bytes(None if vector is None else bytes(vector)),
    ))).digest()


def event_bytes_v2(entry: dict[str, Any]) -> bytes:
    """The hashed field list of a ledger entry, hash version 2 (`details` as jsonb text output)."""
    return b"".join((
        b"\x00\x02", _v2_text(entry["tenant_id"]), b_int(entry["seq"]), _v2_text(entry["event"]),
        _v2_text(entry["memory_id"]), b_int(entry["revision"]), b_bytes(entry["content_hash"]),
        _v2_text(entry["actor"]), _v2_text(entry["adapter"]), _v2_json(entry["details"]),
        _v2_time(entry["occurred_at"]),
    ))


#: The hash versions this module (and pymem.verify_chain) can check.
VERSIONS = (1, 2)


def chain_hash_of(prev_hash: bytes, entry: dict[str, Any]) -> bytes | None:
    """chain_hash of an entry with the version it was written with; None for an unknown version."""
    version = entry["hash_version"]
    if version == 2:
        return hashlib.sha256(bytes(prev_hash) + event_bytes_v2(entry)).digest()
    if version == 1:
        return chain_hash(prev_hash, entry)
    return None


def event_bytes_of(entry: dict[str, Any]) -> bytes | None:
    """The bytes an entry's chain_hash covers, with the version it was written with; None for an
    unknown version."""
    version = entry["hash_version"]
    if version == 2:
        return event_bytes_v2(entry)
    if version == 1:
        return event_bytes(entry)
    return None


def seal(entries: Iterable[tuple[int, bytes]]) -> bytes:
    """The seal of an erased person's pre-0013 entries (pymem.erase_actor): sha256 over, in seq
    order, each entry's seq (int8, big-endian) and the sha256 of its prev_hash and its bytes as
    they stay (`leaf`)."""
    return hashlib.sha256(b"".join(struct.pack(">q", seq) + leaf for seq, leaf in sorted(entries))).digest()


def leaf(prev_hash: bytes, data: bytes) -> bytes:
    """One sealed entry's digest: sha256(prev_hash || its bytes as they stay)."""
    return hashlib.sha256(bytes(prev_hash) + bytes(data)).digest()


def content_hash_of(version: int, row: dict[str, Any]) -> bytes:
    """content_hash of a row with hash version `version` (1, else the current 2)."""
    return content_hash(row) if version == 1 else content_hash_v2(row)


__all__ = ["Number", "parse_jsonb", "genesis_hash", "event_bytes", "chain_hash", "content_hash", "render_jsonb",
           "vector_send", "content_hash_v2", "event_bytes_v2", "VERSIONS", "chain_hash_of", "content_hash_of",
           "event_bytes_of", "seal", "leaf"]
