"""The memory service, whatever carries it: signed tokens (auth), the verb table (verbs) and the
wire's error codes (wire). The HTTP app (pymem.server) and the MCP server (pymem.mcp) sit on it.

Needs the `server` extra (PyJWT); nothing here imports the HTTP or MCP libraries.
"""
