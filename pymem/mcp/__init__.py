"""pymem's MCP server: the memory verbs as Model Context Protocol tools (the `mcp` SDK, major version 2).

Served over stdio by `pymem mcp` (identity from the command's context options and environment)
and over streamable HTTP at /mcp by `pymem serve` (identity from each request's verified token).
Tool arguments never carry identity. Needs the `server` extra.
"""
