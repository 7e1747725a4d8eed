"""The LangGraph how-to's example (docs/howto/langgraph.md) runs as written, on a real Postgres: a preference told in one
thread is recalled in another, through PymemStore."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = (Path(__file__).resolve().parents[2] / "docs" / "howto" / "langgraph.md").read_text(encoding="utf-8")


def _example() -> str:
    section = README.split("## Example: one preference, two threads", 1)[1]
    return re.search(r"```python\n(.*?)```", section, flags=re.S).group(1)


def test_the_readme_example_recalls_a_preference_across_threads(database, monkeypatch):
    monkeypatch.setenv("PYMEM_DSN", database.app_dsn)
    monkeypatch.setenv("PYMEM_ADMIN_DSN", database.admin_dsn)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(_example(), "docs/howto/langgraph.md", "exec"), {"__name__": "readme_example"})
    assert out.getvalue().strip() == "prefers dark mode"
    with database.admin() as conn:  # stored as a gated, provenanced memory of tenant acme
        row = conn.execute("select tenant_id, scope, origin, confidence from pymem.memories where kind = 'langgraph'"
                           ).fetchone()
    assert row == ("acme", {"lg_store": "default", "ns0": "users", "ns1": "u1", "ns2": "preferences",
                            "ns_depth": "3"}, "model_inferred", 0.6)
