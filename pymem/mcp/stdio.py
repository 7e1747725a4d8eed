"""`pymem mcp`: the MCP server over stdio, for an agent host that starts pymem as a subprocess.

The identity is the process's: the context the command was given (--tenant/--actor/--adapter/
--scope or PYMEM_*), fixed for the life of the process; there is no token on a pipe, and tool
arguments never carry identity. Logs go to stderr; stdout carries only the protocol.
"""

from __future__ import annotations

import logging
import sys

from ..config import Settings
from ..context import Context
from ..service.verbs import Service
from ..storage.store import Store
from .server import build_mcp_server, fixed_identity

__all__ = ["serve_mcp_stdio"]


def serve_mcp_stdio(ctx: Context, settings: Settings | None = None) -> None:
    """Serve the MCP tools on stdin/stdout in `ctx` until the client closes the pipe."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    with Store.open(settings or Settings.from_env()) as store:
        service = Service(store)
        build_mcp_server(lambda: service, fixed_identity(ctx)).run("stdio")
