"""The memory inspector in a real headless Chromium, on a real uvicorn server and Postgres: sign in
with a token from the keyboard, find a memory, open its page, follow it to the turn it entered and
see that turn's block, supersede it, erase another, release a held note, verify; every action a
ledger event and the chain clean after. A token of another tenant sees none of the pages. The
screenshots the documentation shows are taken here (PYMEM_SCREENSHOTS=1 writes them)."""

from __future__ import annotations

import re

import pytest
from helpers.inspector import CURRENCY, GLOBEX, HELD, NAME, app_for, auditor, events, operator, seed
from helpers.service import running

from pymem.integrity import verify_chain

pytestmark = pytest.mark.browser

SUCCESSOR = "Initech now wants its invoices in USD, paid within 45 days."


@pytest.fixture
def served(database, store):
    seeded = seed(database)
    with running(app_for(store)) as url:
        yield url, seeded


def _sign_in(page, url: str, token: str, screenshot=None) -> None:
    """Sign in from the keyboard alone: Tab to the token field, type, Enter."""
    page.goto(f"{url}/inspector/memories")
    assert page.title().startswith("Sign in")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.name") == "token"
    page.keyboard.type(token)
    if screenshot is not None:
        screenshot(page, "sign-in")
    with page.expect_navigation():
        page.keyboard.press("Enter")


def test_an_operator_finds_follows_supersedes_erases_releases_and_verifies(browser, served, screenshot, database):
    url, s = served
    page = browser.new_page()
    _sign_in(page, url, operator(), screenshot)
    assert page.url.endswith("/inspector/memories") and page.get_by_role("heading", name="Memories").is_visible()
    before = len(events(database))

    # find a memory by its text, from the filter form
    page.get_by_label("Text contains").fill("invoices")
    page.get_by_label("Text contains").press("Enter")
    page.wait_for_url(re.compile(r"/inspector/memories\?.*text=invoices"))
    rows = page.locator("tbody tr")
    assert rows.count() == 1 and s.currency in rows.first.inner_text()
    screenshot(page, "memories")

    # its page: content, provenance, history, and the turn it entered
    page.get_by_role("link", name=s.currency).click()
    page.wait_for_url(f"**/inspector/memories/{s.currency}")
    assert CURRENCY in page.locator("main").inner_text() and "memory.insert" in page.content()
    screenshot(page, "memory")
    page.get_by_role("link", name="turn 0").first.click()
    page.wait_for_url("**/inspector/turn?session=s-1&turn=0")
    block = page.locator("main").inner_text()
    assert CURRENCY in block and NAME in block and re.search(r"[0-9a-f]{64}", block)
    screenshot(page, "turn")

    # supersede it, from its page
    page.goto(f"{url}/inspector/memories/{s.currency}")
    page.get_by_label("New text").fill(SUCCESSOR)
    with page.expect_navigation():
        page.get_by_role("button", name="Supersede").click()
    assert "now supersedes" in page.get_by_role("status").inner_text()
    successor = page.url.rsplit("/", 1)[1]
    assert SUCCESSOR in page.locator("main").inner_text()

    # erase another (the hot one)
    page.goto(f"{url}/inspector/memories/{s.name}")
    page.get_by_label("Reason (kept in the ledger)").fill("the user asked to forget it")
    with page.expect_navigation():
        page.get_by_role("button", name="Erase").click()
    assert "erased" in page.get_by_role("status").inner_text() and NAME not in page.content()

    # the turn still shows what it received, marked where it changed since
    page.goto(f"{url}/inspector/turn?session=s-1&turn=0")
    text = page.locator("main").inner_text()
    assert f"superseded by {successor}" in text and "erased" in text and NAME not in text
    screenshot(page, "turn-after")

    # release the agent's held note
    page.get_by_role("link", name="Quarantine").click()
    page.wait_for_url("**/inspector/quarantine")
    assert HELD in page.locator("main").inner_text()
    screenshot(page, "quarantine")
    page.locator(f"#release-{s.held}").fill("confirmed with Initech's finance team")
    with page.expect_navigation():
        page.get_by_role("form", name=f"release {s.held}").get_by_role("button", name="Release").click()
    assert f"released {s.held}" in page.get_by_role("status").inner_text()

    for name, path in (("sessions", "/inspector/sessions"), ("session", "/inspector/sessions/s-1"),
                       ("refusals", "/inspector/refusals")):
        page.goto(url + path)
        assert page.locator("h1").is_visible()
        screenshot(page, name)

    page.get_by_role("link", name="Integrity").click()
    with page.expect_navigation():
        page.get_by_role("button", name="Verify now").click()
    assert page.get_by_role("status").inner_text() == "the chain verifies"
    assert "clean" in page.locator("table").first.inner_text()
    screenshot(page, "integrity")

    done = [e for e, _ in events(database)][before:]
    assert done == ["memory.insert", "memory.supersede", "memory.erase", "erasure.recorded", "memory.insert",
                    "quarantine.released"], done
    with database.app() as conn:
        assert all(t.problem is None for t in verify_chain(conn, "acme").tenants)


def test_a_token_of_another_tenant_sees_none_of_the_pages(browser, served, database):
    url, s = served
    page = browser.new_page()
    _sign_in(page, url, operator(tenant="globex", actor="gina"))
    assert GLOBEX in page.locator("main").inner_text() and s.currency not in page.content()
    for path in (f"/inspector/memories/{s.currency}", f"/inspector/memories/{s.name}", "/inspector/sessions/s-1",
                 "/inspector/turn?session=s-1&turn=0"):
        response = page.goto(url + path)
        assert response.status == 404, path
        body = page.content()
        assert CURRENCY not in body and NAME.replace("'", "&#x27;") not in body and NAME not in body, path
    for path in ("/inspector/memories", "/inspector/sessions", "/inspector/quarantine", "/inspector/refusals"):
        page.goto(url + path)
        body = page.content()
        assert s.currency not in body and s.name not in body and HELD not in body and "s-1" not in body, path


def test_an_auditor_sees_what_each_turn_received_by_id_and_hash_and_no_content(browser, served, screenshot,
                                                                              database):
    url, s = served
    before = events(database)
    page = browser.new_page()
    _sign_in(page, url, auditor())
    assert page.url.endswith("/inspector/sessions")
    page.get_by_role("link", name="s-1").click()
    page.get_by_role("link", name="turn 0").click()
    page.wait_for_url("**/inspector/turn?session=s-1&turn=0")
    text = page.locator("main").inner_text()
    assert "byte for byte" in text and s.currency in text and s.name in text
    assert CURRENCY not in page.content() and "Sam" not in page.content()
    screenshot(page, "turn-auditor")
    assert page.goto(f"{url}/inspector/memories").status == 403
    assert events(database) == before
