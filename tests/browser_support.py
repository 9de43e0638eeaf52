"""What the Playwright browser tests share: Debian's Chromium (``apt-get install chromium``)
driven by the ``playwright`` package, never a browser Playwright downloads.

Without Chromium a test is skipped on a workstation and fails in CI (``CI=true``).
Playwright's sync API runs an event loop in the test's thread while the browser is open,
and Django refuses database calls from such a thread: a test uses the database before
``chromium()`` opens and after it closes, never inside.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Page

CHROMIUM = os.environ.get("DEUZ_CHROMIUM", "/usr/bin/chromium")
WAIT_MS = 20_000
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


def require_chromium() -> None:
    if shutil.which(CHROMIUM):
        return
    why = f"{CHROMIUM} not found (apt-get install chromium)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"browser test cannot run in CI: {why}")
    pytest.skip(why)


@contextmanager
def chromium(viewport: dict[str, int] = DESKTOP) -> Iterator[Page]:
    """A page of a fresh headless Chromium of ``viewport`` size."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        try:
            context = browser.new_context(viewport=viewport, accept_downloads=True)
            context.set_default_timeout(WAIT_MS)
            yield context.new_page()
        finally:
            browser.close()


def admin_sign_in(page: Page, base_url: str, username: str, password: str, path: str) -> None:
    """Sign in through the admin's login form, then open ``path``."""
    page.goto(f"{base_url}/admin/login/?next=/admin/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("input[type=submit]")
    page.wait_for_selector("#user-tools")
    page.goto(f"{base_url}{path}")
