"""Logging an unexpected failure without what it was about.

An exception's message, its arguments and the locals of its frames may hold a caller's content
(a psycopg error quoting a value, a TypeError naming one). What is logged is its type and the
stack frames as file, line and code: enough to find the fault, nothing of the data.
"""

from __future__ import annotations

import logging
import traceback

__all__ = ["log_unexpected"]


def log_unexpected(log: logging.Logger, exc: BaseException, request_id: str, where: str) -> None:
    frames = "".join(traceback.format_tb(exc.__traceback__)).rstrip()
    cause = exc.__cause__ or exc.__context__
    caused = f" (while handling {type(cause).__name__})" if cause is not None else ""
    log.error("request %s: unexpected %s%s in %s\n%s", request_id, type(exc).__name__, caused, where, frames)
