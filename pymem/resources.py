"""Locate the SQL and the Alembic environment, installed (inside the wheel) or in a checkout."""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def _find(installed: str, checkout: str) -> Path:
    for candidate in (_PKG / installed, _PKG.parent / checkout):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"pymem is installed without its {checkout}/ directory")


def sql_dir() -> Path:
    return _find("_sql", "sql")


def migrations_dir() -> Path:
    return _find("_migrations", "migrations")


def render_sql(name: str, *, embedding_dim: int) -> str:
    """The text of sql/NAME with its placeholders filled in."""
    text = (sql_dir() / name).read_text(encoding="utf-8")
    return text.replace("{{embedding_dim}}", str(int(embedding_dim)))
