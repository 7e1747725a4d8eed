"""`pymem serve`: the app on uvicorn, with pymem's own access log (uvicorn's is off: it would be a
second, unfiltered one), as text lines or JSON lines."""

from __future__ import annotations

import logging
import sys

from ..config import Settings
from ..errors import InvalidArguments
from ..telemetry import JsonFormatter
from .app import build_app
from .requests import DEFAULT_MAX_BODY

__all__ = ["serve", "configure_logging", "LOG_FORMATS"]

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
