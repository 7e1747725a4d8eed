"""`pymem demo` runs every step against a real server (here the test database, through PYMEM_DSN's
path: fresh, suffixed tenants) and every check it makes holds."""

from __future__ import annotations

from pymem.tools.demo import run_demo


def test_the_demo_passes_against_a_server(database):
    lines: list[str] = []
    assert run_demo(lines.append, database.settings()) is True, "\n".join(lines)
    text = "\n".join(lines)
    for step in ("Tenant isolation", "Admission", "Supersession", "Erasure", "Incognito", "Delivery",
                 "The injection record"):
        assert f"== {step}" in text
    assert "<<<pymem reference data " in text and "All demo checks passed." in text
