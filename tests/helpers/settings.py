"""Changing the policies a test's store holds, the way a running process does: `Store.reload`."""

from __future__ import annotations

import dataclasses


def reload_with(monkeypatch, store, **values: str | None) -> None:
    """The store reloads settings that differ from its own in these PYMEM_* values (None unsets
    one); restored when the test ends, as the store fixtures are shared."""
    monkeypatch.setattr(store, "settings", store.settings)
    monkeypatch.setattr(store.embedder, "environ", store.embedder.environ)
    environ = {**store.settings.environ, **values}
    environ = {k: v for k, v in environ.items() if v is not None}
    store.reload(dataclasses.replace(store.settings, environ=environ))
