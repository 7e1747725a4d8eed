"""Checks on caller input, done before anything reaches the database.

Each raises InvalidArguments with a message that names the field and never echoes content or
vector values back.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any, Literal, overload

from ..context import check_scope
from ..errors import InvalidArguments
from ..vocabulary import MAX_ID, MAX_SUBJECT, MAX_TAG, MAX_TAGS, MAX_TTL_SECONDS, is_plain_text


def check_vector(vector: Any, dim: int, what: str = "embedding") -> list[float]:
    """A list of `dim` finite floats."""
    if isinstance(vector, (str, bytes, dict)) or not hasattr(vector, "__len__") or not hasattr(vector, "__iter__"):
        raise InvalidArguments(f"{what} must be a list of {dim} numbers, got {type(vector).__name__}")
    if hasattr(vector, "tolist"):
        vector = vector.tolist()
    if len(vector) != dim:
        raise InvalidArguments(f"{what} has {len(vector)} dimensions, the store expects {dim}")
    out: list[float] = []
    for x in vector:
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise InvalidArguments(f"{what} must contain only numbers, found {type(x).__name__}")
        f = float(x)
        if not math.isfinite(f):
            raise InvalidArguments(f"{what} must contain only finite numbers (no NaN or infinity)")
        if abs(f) > 3.4e38:
            raise InvalidArguments(f"{what} has a value outside the float4 range")
        out.append(f)
    return out


def check_id(value: Any, what: str = "id") -> str:
    if not isinstance(value, str):
        raise InvalidArguments(f"{what} must be a string, got {type(value).__name__}")
    if not value or len(value) > MAX_ID or "\x00" in value:
        raise InvalidArguments(f"{what} must be 1 to {MAX_ID} characters without NUL bytes")
    return value


def check_ids(values: Any, what: str = "ids") -> list[str]:
    if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple)):
        raise InvalidArguments(f"{what} must be a list of strings")
    return [check_id(v, what[:-1] if what.endswith("s") else what) for v in values]


@overload
def check_text(value: Any, what: str, *, max_bytes: int, required: Literal[True]) -> str: ...
@overload
def check_text(value: Any, what: str, *, max_bytes: int, required: bool = False) -> str | None: ...
def check_text(value: Any, what: str, *, max_bytes: int, required: bool = False) -> str | None:
    if value is None:
        if required:
            raise InvalidArguments(f"{what} is required")
        return None
    if not isinstance(value, str):
        raise InvalidArguments(f"{what} must be a string, got {type(value).__name__}")
    if "\x00" in value:
        raise InvalidArguments(f"{what} contains a NUL byte")
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise InvalidArguments(f"{what} is {size} bytes, the limit is {max_bytes}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArguments(f"{what} is not valid Unicode (lone surrogate)") from None
    return value


def check_json(value: Any, what: str) -> Any:
    """JSON-able data without NUL bytes anywhere (Postgres jsonb cannot hold \\u0000)."""
    if isinstance(value, str):
        if "\x00" in value:
            raise InvalidArguments(f"{what} contains a NUL byte")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidArguments(f"{what} is not valid Unicode (lone surrogate)") from None
    elif isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise InvalidArguments(f"{what} keys must be strings")
            check_json(k, what)
            check_json(v, what)
    elif isinstance(value, (list, tuple)):
        for v in value:
            check_json(v, what)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidArguments(f"{what} contains NaN or infinity, which JSON cannot hold")
    elif value is not None and not isinstance(value, (bool, int)):
        raise InvalidArguments(f"{what} contains a {type(value).__name__}, which JSON cannot hold")
    return value


def check_tags(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise InvalidArguments("tags must be a list of strings")
    if len(value) > MAX_TAGS:
        raise InvalidArguments(f"at most {MAX_TAGS} tags")
    for t in value:
        if not isinstance(t, str) or not t or len(t) > MAX_TAG or "\x00" in t:
            raise InvalidArguments(f"each tag must be a string of 1 to {MAX_TAG} characters")
    return list(value)


def check_unit(value: Any, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidArguments(f"{what} must be a number between 0 and 1")
    if not 0 <= value <= 1:
        raise InvalidArguments(f"{what} must be between 0 and 1")
    return float(value)


def check_ttl(value: Any, what: str = "ttl") -> timedelta | None:
    """A time-to-live: seconds (a positive, finite number) or a timedelta, at most MAX_TTL_SECONDS;
    None = the tenant's default. The database turns it into an expiry with its own clock."""
    if value is None:
        return None
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidArguments(f"{what} must be a number of seconds (or a timedelta)")
    else:
        seconds = float(value)
    if not 0 < seconds <= MAX_TTL_SECONDS:
        raise InvalidArguments(f"{what} must be more than 0 seconds and at most {MAX_TTL_SECONDS} (36,500 days)")
    return value if isinstance(value, timedelta) else timedelta(seconds=seconds)


def check_subject(value: Any, what: str = "subject") -> str | None:
    """A subject key: the id of the person a memory is about (the row keeps only its pseudonym)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_SUBJECT or not is_plain_text(value):
        raise InvalidArguments(f"{what} must be a string of 1 to {MAX_SUBJECT} characters without control "
                               "or format characters")
    return value


def check_nonzero(vector: list[float], what: str) -> list[float]:
    """Cosine similarity is undefined for a zero vector, so none is stored or searched for."""
    if not any(vector):
        raise InvalidArguments(f"{what} is a zero vector, which has no direction for cosine similarity")
    return vector


_FLOATS = {float}
#: The smallest normal float4. pgvector sums squares in float4: a vector whose squared norm is
#: below it (every component sub-normal, or so small that float4 rounds it to zero) is stored or
#: searched as a zero vector, whose cosine is undefined.
FLOAT4_MIN_NORMAL = 1.1754943508222875e-38


def check_embedding(value: Any, dim: int, what: str = "embedding") -> list[float]:
    """A list of `dim` finite numbers whose squared norm lies in float4's normal range: not zero
    nor sub-normal (it would be stored as, or computed like, a zero vector), not past float4's
    largest value (pgvector sums squares in float4: the norm would overflow, scores become NaN)."""
    if type(value) is list and len(value) == dim and set(map(type, value)) == _FLOATS:
        # the common case, checked in C: NaN and inf make the norm NaN or inf; near either float4
        # limit the exact check below decides
        norm = math.hypot(*value)
        if 2 * FLOAT4_MIN_NORMAL < norm * norm < 3.3e38:
            return value
    vector = check_vector(value, dim, what)
    squared = math.fsum(x * x for x in vector)
    if squared >= 3.4e38:
        raise InvalidArguments(f"{what} is too large: its squared norm overflows float4")
    check_nonzero(vector, what)
    if squared < FLOAT4_MIN_NORMAL:
        raise InvalidArguments(f"{what} is too small: its squared norm is below float4's smallest normal value, so "
                               "it would be stored and compared as a zero vector, which has no direction")
    return vector


__all__ = ["check_vector", "check_embedding", "check_nonzero", "check_id", "check_ids", "check_text", "check_json",
           "check_tags", "check_unit", "check_scope"]
