"""What the service tests share: a key, tokens, a real uvicorn server on a loopback port, raw requests."""

from __future__ import annotations

import contextlib
import http.client
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import jwt

KEY = "pymem-test-signing-key-" + "0123456789abcdef" * 3  # 72 bytes (HS512 tokens in the tests want 64)


def token(tenant: str = "acme", actor: str = "alice", *, key: Any = KEY, algorithm: str = "HS256",
          ttl: int = 600, headers: dict | None = None, **claims: Any) -> str:
    now = int(time.time())
    body = {"tenant": tenant, "actor": actor, "iat": now, "exp": now + ttl, **claims}
    body = {k: v for k, v in body.items() if v is not None}
    return jwt.encode(body, key, algorithm=algorithm, headers=headers)


@contextlib.contextmanager
def running(app: Any) -> Iterator[str]:
    """Serve `app` with uvicorn on 127.0.0.1 and an ephemeral port; yields its base URL; stops it."""
    import uvicorn

    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, access_log=False, lifespan="on",
                            timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="pymem-test-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            thread.join(10)
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
        assert not thread.is_alive(), "the test server did not stop"


def request(url: str, method: str, path: str, body: Any = None, *, token: str | None = None,
            raw: bytes | None = None, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], Any]:
    """One request on a fresh connection: (status, headers, JSON body or the raw bytes)."""
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    sent = dict(headers or {})
    if token is not None:
        sent.setdefault("Authorization", f"Bearer {token}")
    payload = raw
    if payload is None and body is not None:
        payload = json.dumps(body).encode()
        sent.setdefault("Content-Type", "application/json")
    try:
        conn.request(method, path, body=payload, headers=sent)
        response = conn.getresponse()
        data = response.read()
        got = {k.lower(): v for k, v in response.getheaders()}
    finally:
        conn.close()
    try:
        return response.status, got, json.loads(data)
    except ValueError:
        return response.status, got, data


def call(url: str, verb: str, args: Any = None, *, token: str, **envelope: Any) -> tuple[int, Any]:
    body = {"verb": verb, **({"args": args} if args is not None else {}), **envelope}
    status, _, data = request(url, "POST", "/v1/call", body, token=token)
    return status, data


@contextlib.contextmanager
def mcp_tools(url: str, tok: str) -> Iterator[Any]:
    """The SDK's MCP client over streamable HTTP, driven from synchronous code: yields
    `call(name, arguments)` -> the tool's CallToolResult."""
    import anyio.from_thread
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    with anyio.from_thread.start_blocking_portal() as portal:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {tok}"})
        with portal.wrap_async_context_manager(http) as client_http:
            session = Client(streamable_http_client(url + "/mcp", http_client=client_http))
            with portal.wrap_async_context_manager(session) as client:
                yield lambda name, arguments: portal.call(client.call_tool, name, arguments)


def tool_text(result: Any) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)
