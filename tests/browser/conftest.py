"""A real headless browser for the inspector's end-to-end tests: Debian's Chromium
(/usr/bin/chromium, which .ci/run installs where it may) driven by Playwright's Python package.
Playwright's own browser downloads are never used: `playwright install` is not run anywhere.

The tests skip, saying why, where the browser or the package is missing. With PYMEM_SCREENSHOTS=1
they also write the screenshots of each page that the documentation shows
(docs/images/inspector/*.png); otherwise the screenshots go to the test's own directory.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = Path(os.environ.get("PYMEM_CHROMIUM", "/usr/bin/chromium"))
ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "docs" / "images" / "inspector"
#: The flags of a quiet, disposable browser: no network of its own, no first-run or sync, no GPU.
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _missing() -> str | None:
    if importlib.util.find_spec("playwright") is None:
        return "the playwright package is not installed (pip install -e '.[test]')"
    if not (CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK)):
        return f"no Chromium at {CHROMIUM} (Debian: apt-get install chromium; .ci/run installs it as root)"
    return None


@pytest.fixture
def browser(tmp_path):
    """A fresh Chromium profile: (a new page factory); closed after the test."""
    reason = _missing()
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(str(tmp_path / "profile"), executable_path=str(CHROMIUM),
                                                       headless=True, args=ARGS,
                                                       viewport={"width": 1280, "height": 860})
        try:
            yield context
        finally:
            context.close()


@pytest.fixture
def screenshot(tmp_path):
    """screenshot(page, name): the whole page as PNG, into docs/images/inspector with PYMEM_SCREENSHOTS=1."""
    out = tmp_path / "shots"
    out.mkdir()
    publish = os.environ.get("PYMEM_SCREENSHOTS") == "1"

    def take(page, name: str) -> Path:
        path = out / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        if publish:
            SHOTS.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, SHOTS / path.name)
        return path

    return take
