"""`pymem serve`: the app on uvicorn, with pymem's own access log (uvicorn's is off: it would be a
second, unfiltered one), as text lines or JSON lines."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

from ..config import Settings
from ..errors import InvalidArguments
from ..telemetry import JsonFormatter
from .app import build_app
from .requests import DEFAULT_MAX_BODY

__all__ = ["serve", "serve_inspector", "configure_logging", "LOG_FORMATS"]

#: What `--log-format` takes.
LOG_FORMATS = ("text", "json")


def configure_logging(log_format: str = "text", log_level: str = "info") -> None:
    """The root logger's one handler, on standard error: text lines, or one JSON object per line
    (pymem.telemetry.logs) for a log pipeline."""
    if log_format not in LOG_FORMATS:
        raise InvalidArguments(f"the log format is one of {', '.join(LOG_FORMATS)}, not {log_format[:20]!r}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else
                         logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(log_level.upper())


def serve(host: str = "127.0.0.1", port: int = 8080, *, settings: Settings | None = None,
          pool_size: int = 10, max_body: int = DEFAULT_MAX_BODY, log_level: str = "info",
          per_tenant: int | None = None, heavy_calls: int | None = None, metrics: bool = False,
          log_format: str = "text") -> None:
    """Serve until interrupted. Refuses to start without PYMEM_JWT_KEY (or PYMEM_JWT_PUBLIC_KEY).
    `per_tenant`: the most concurrent calls of one tenant (default a quarter of the pool, 0: none);
    `heavy_calls`: the most heavy calls at once among all tenants (default half the cores, 0: none);
    `metrics`: serve GET /metrics; `log_format`: text or json lines."""
    import uvicorn

    configure_logging(log_format, log_level)
    app = build_app(settings=settings, host=host, pool_size=pool_size, max_body=max_body, per_tenant=per_tenant,
                    heavy_calls=heavy_calls, metrics=metrics)
    uvicorn.run(app, host=host, port=port, log_config=None, log_level=log_level, access_log=False,
                server_header=False, proxy_headers=False)


def serve_inspector(tenant: str, actor: str, host: str = "127.0.0.1", port: int = 8090, *,
                    settings: Settings | None = None, checkpoints: str | None = None, log_level: str = "info",
                    ttl: int = 8 * 3600, announce: Callable[[str], None] | None = None) -> None:
    """The memory inspector alone (`pymem inspect --web`), for a local trial: on the store the
    settings name (the embedded server without PYMEM_DSN), at http://host:port/inspector.

    Tokens are verified with PYMEM_JWT_KEY or PYMEM_JWT_PUBLIC_KEY when set; without either, with
    a key made for this process only. With a secret key (either), an operator's and an auditor's
    token for `tenant` and `actor` are announced, to paste into the sign-in form."""
    import secrets

    import uvicorn

    from ..inspector import inspector_app
    from ..service.auth import TokenVerifier, mint_token
    from ..storage.store import Store
    from .access import AccessLog

    configure_logging("text", log_level)
    say = announce or (lambda line: print(line, flush=True))
    settings = settings or Settings.from_env()
    env = settings.environ
    if env.get("PYMEM_JWT_KEY") or env.get("PYMEM_JWT_PUBLIC_KEY"):
        tokens = TokenVerifier.from_env(env)
        secret = env.get("PYMEM_JWT_KEY") or None
    else:
        secret = secrets.token_urlsafe(48)
        tokens = TokenVerifier.hs256(secret)
    store = Store.open(settings, pool_size=4)
    try:
        app = inspector_app(store, tokens, checkpoints=checkpoints)
        app.add_middleware(AccessLog)
        say(f"the inspector: http://{host}:{port}/inspector/")
        if secret is not None:
            for role in ("operator", "auditor"):
                token = mint_token(secret, tenant=tenant, actor=actor, role=role, ttl=ttl,
                                   audience=tokens.audience, issuer=tokens.issuer)
                say(f"{role} token for {tenant}: {token}")
        else:
            say("sign in with a token your identity provider issued (PYMEM_JWT_PUBLIC_KEY verifies it)")
        uvicorn.run(app, host=host, port=port, log_config=None, log_level=log_level, access_log=False,
                    server_header=False, proxy_headers=False)
    finally:
        store.close()
