"""`pymem serve`: the app on uvicorn, with pymem's own access log (uvicorn's is off: it would be a
second, unfiltered one)."""

from __future__ import annotations

import logging

from ..config import Settings
from .app import build_app
from .requests import DEFAULT_MAX_BODY

__all__ = ["serve"]


def serve(host: str = "127.0.0.1", port: int = 8080, *, settings: Settings | None = None,
          pool_size: int = 10, max_body: int = DEFAULT_MAX_BODY, log_level: str = "info",
          per_tenant: int | None = None, heavy_calls: int | None = None) -> None:
    """Serve until interrupted. Refuses to start without PYMEM_JWT_KEY (or PYMEM_JWT_PUBLIC_KEY).
    `per_tenant`: the most concurrent calls of one tenant (default a quarter of the pool, 0: none);
    `heavy_calls`: the most heavy calls at once among all tenants (default half the cores, 0: none)."""
    import uvicorn

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = build_app(settings=settings, host=host, pool_size=pool_size, max_body=max_body, per_tenant=per_tenant,
                    heavy_calls=heavy_calls)
    uvicorn.run(app, host=host, port=port, log_config=None, log_level=log_level, access_log=False,
                server_header=False, proxy_headers=False)
