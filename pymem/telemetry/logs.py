"""Log records as JSON lines, for a log pipeline (`pymem serve --log-format json`).

Each line is one object: time (UTC, ISO 8601), level, logger, message, and the fields a record was
given with `extra=` that are plain values (the access log's method, path, status, duration,
request id, tenant and verb). The message is what pymem's own code logged, and it never logs
content: an unexpected error is logged by type and code lines (pymem.service.failures), and the
MCP SDK, which would log whole messages at DEBUG, is held at INFO (pymem.mcp.server). A record's
exception becomes its type and stack frames, never its message or arguments.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import traceback
from typing import Any

__all__ = ["JsonFormatter", "STANDARD_ATTRIBUTES"]

#: What every LogRecord carries; anything else on a record came from `extra=`.
STANDARD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": _dt.datetime.fromtimestamp(record.created, _dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in STANDARD_ATTRIBUTES and not key.startswith("_") and \
                    isinstance(value, (str, int, float, bool, type(None))):
                out.setdefault(key, value)
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            # the type and the code lines only: an exception's message may quote a caller's value
            out["error"] = {"type": type(exc).__name__,
                            "frames": "".join(traceback.format_tb(exc.__traceback__)).rstrip()}
        return json.dumps(out, ensure_ascii=False, separators=(",", ":"), default=str)
