"""pymem's public surface: the core at `pymem`, and the public subpackages beside it."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from types import ModuleType
from typing import Any

#: The modules whose `__all__` is public API (each documented, each with a docstring).
PUBLIC_MODULES = ("pymem", "pymem.errors", "pymem.admission", "pymem.delivery", "pymem.lessons",
                  "pymem.conventions", "pymem.facts", "pymem.integrity", "pymem.embedder", "pymem.vocabulary",
                  "pymem.context", "pymem.admin", "pymem.telemetry", "pymem.aio")


def public_modules() -> Iterator[ModuleType]:
    for name in PUBLIC_MODULES:
        yield importlib.import_module(name)


def public_names() -> Iterator[tuple[str, str, Any]]:
    """(module, name, object) for every name a public module exports."""
    for module in public_modules():
        for name in module.__all__:
            yield module.__name__, name, getattr(module, name)
