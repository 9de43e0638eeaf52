"""End to end in a real headless Chromium: log in, search ``izmir``, follow the hit to its chat.

Uses Debian's ``chromium`` and ``chromium-driver`` packages, never a downloaded browser.
Without them the test is skipped on a workstation and fails in CI (``CI=true``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission

from deuz_transcripts.demo import izmir_chat
from deuz_transcripts.stores import DjangoConditionalChatStore

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = os.environ.get("DEUZ_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("DEUZ_CHROMEDRIVER", "/usr/bin/chromedriver")
WAIT_SECONDS = 20


def _require_chromium() -> None:
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not shutil.which(path)]
    if not missing:
        return
    why = f"{' and '.join(missing)} not found (apt-get install chromium chromium-driver)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"browser test cannot run in CI: {why}")
    pytest.skip(why)


@pytest.fixture
def browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    _require_chromium()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    monkeypatch.setenv("SE_OFFLINE", "true")  # Selenium Manager must never download anything
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1280,1000",
        f"--user-data-dir={tmp_path / 'profile'}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.implicitly_wait(0)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def support_user(django_user_model: Any, settings: Any) -> Any:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    user = django_user_model.objects.create_user("support", password="support-pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="search_transcripts"))
    return user


def test_admin_search_finds_izmir_and_links_to_the_chat(
    browser: Any, live_server: Any, support_user: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    DjangoConditionalChatStore().write_chat(izmir_chat(), expected_revision=0)
    wait = WebDriverWait(browser, WAIT_SECONDS)

    browser.get(f"{live_server.url}/admin/login/?next=/admin/deuz_transcripts/")
    browser.find_element(By.NAME, "username").send_keys("support")
    browser.find_element(By.NAME, "password").send_keys("support-pw")
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()

    # the app's admin index links the search
    link = wait.until(ec.element_to_be_clickable((By.LINK_TEXT, "Search transcripts")))
    link.click()
    wait.until(ec.presence_of_element_located((By.ID, "transcript-search")))
    browser.find_element(By.NAME, "q").send_keys("izmir")
    browser.find_element(By.NAME, "scope").send_keys("userId=ada")
    around = browser.find_element(By.NAME, "around")
    around.clear()
    around.send_keys("1")
    browser.find_element(By.NAME, "_search").click()

    results = wait.until(ec.visibility_of_element_located((By.ID, "search-results")))
    marks = [mark for mark in results.find_elements(By.TAG_NAME, "mark") if mark.is_displayed()]
    assert [mark.text for mark in marks][:1] == ["İzmir"]
    hit = results.find_element(By.CSS_SELECTOR, ".deuz-hit")
    assert "Book the flight to İzmir." in hit.find_element(By.CSS_SELECTOR, ".deuz-hit-text").text
    before = hit.find_element(By.CSS_SELECTOR, ".deuz-before")
    assert before.is_displayed()
    assert "Which city should I book for you?" in before.text
    assert "travel assistant" not in results.text  # the system prompt is never shown
    browser.save_screenshot(str(tmp_path / "search.png"))

    hit.find_element(By.CSS_SELECTOR, "a.deuz-chat-link").click()
    message = wait.until(ec.visibility_of_element_located((By.ID, "message-3")))
    assert "Book the flight to İzmir." in message.text
    assert "demo-ada-izmir" in browser.find_element(By.ID, "content").text
    assert "not indexed" in browser.find_element(By.ID, "message-0").text  # the system prompt


def _sign_in(browser: Any, live_server: Any, user: Any) -> None:
    """Sign ``user`` in through a session cookie (end users have no admin login)."""
    from django.conf import settings
    from django.test import Client

    client = Client()
    client.force_login(user)
    browser.delete_all_cookies()
    browser.add_cookie(
        {
            "name": settings.SESSION_COOKIE_NAME,
            "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
            "path": "/",
        }
    )


#: The page's own script asks the endpoint, as a project's front end would.
FETCH_SCRIPT = """
const done = arguments[arguments.length - 1];
fetch(arguments[0], {credentials: "same-origin", headers: {Accept: "application/json"}})
  .then(async (response) => done({status: response.status,
                                  cache: response.headers.get("Cache-Control"),
                                  body: await response.json()}))
  .catch((error) => done({status: -1, body: String(error)}));
"""


def test_a_page_fetches_only_the_signed_in_users_hits(
    browser: Any, live_server: Any, django_user_model: Any, settings: Any
) -> None:
    from deuz_transcripts import ChatRecord

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    store = DjangoConditionalChatStore()
    store.write_chat(izmir_chat(), expected_revision=0)
    store.write_chat(
        ChatRecord(
            chat_id="bob-izmir",
            scope={"userId": "bob"},
            messages=[{"role": "user", "content": "Bob's own İzmir plans <b>secret</b>"}],
        ),
        expected_revision=0,
    )
    ada = django_user_model.objects.create_user("ada", password="ada-pw")
    bob = django_user_model.objects.create_user("bob", password="bob-pw")
    browser.set_script_timeout(WAIT_SECONDS)
    url = "/transcripts/search/?q=izmir&around=1"

    browser.get(f"{live_server.url}/admin/login/")  # any page of the site: the same origin
    anonymous = browser.execute_async_script(FETCH_SCRIPT, url)
    assert anonymous["status"] == 403 and "hits" not in anonymous["body"]

    _sign_in(browser, live_server, ada)
    browser.get(f"{live_server.url}/admin/login/")
    answer = browser.execute_async_script(FETCH_SCRIPT, url)
    assert answer["status"] == 200 and answer["cache"] == "private, no-store"
    body = answer["body"]
    assert {hit["chat_id"] for hit in body["hits"]} == {"demo-ada-izmir"}
    assert body["count"] == len(body["hits"]) >= 1
    first = body["hits"][0]
    assert [first["snippet"][a:b] for a, b in first["spans"]] == ["İzmir"]
    assert first["around"] and "travel assistant" not in str(body)  # never the system prompt

    _sign_in(browser, live_server, bob)
    browser.get(f"{live_server.url}/admin/login/")
    body = browser.execute_async_script(FETCH_SCRIPT, url + "&scope=userId%3Dada")["body"]
    assert [hit["chat_id"] for hit in body["hits"]] == ["bob-izmir"]
    assert body["hits"][0]["snippet"] == "Bob's own İzmir plans <b>secret</b>"  # text, not HTML


def test_admin_search_with_a_role_filter_and_back_from_the_chat(
    browser: Any, live_server: Any, support_user: Any, tmp_path: Path
) -> None:
    """Ticking a role narrows hits and total; the chat page leads back to the filtered page."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    DjangoConditionalChatStore().write_chat(izmir_chat(), expected_revision=0)
    wait = WebDriverWait(browser, WAIT_SECONDS)
    browser.get(f"{live_server.url}/admin/login/?next=/admin/deuz_transcripts/chat/search/")
    browser.find_element(By.NAME, "username").send_keys("support")
    browser.find_element(By.NAME, "password").send_keys("support-pw")
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()

    wait.until(ec.presence_of_element_located((By.ID, "transcript-search")))
    browser.find_element(By.NAME, "q").send_keys("izmir")
    browser.find_element(By.NAME, "scope").send_keys("userId=ada")
    browser.find_element(By.NAME, "_search").click()
    total = wait.until(ec.visibility_of_element_located((By.ID, "search-total")))
    assert total.text == "2 messages match this search."

    browser.find_element(By.CSS_SELECTOR, "input[name=role][value=assistant]").click()
    browser.find_element(By.NAME, "updated_after").send_keys("2024-06-01 11:59")
    unfiltered = browser.current_url
    browser.find_element(By.NAME, "_search").click()
    # The filtered page's address: the new page is here. (Not staleness_of(total): asked
    # about an element of a page being replaced, chromedriver 156 may answer "Node with
    # given id does not belong to the document" instead of a stale element.)
    wait.until(ec.url_changes(unfiltered))
    total = wait.until(ec.visibility_of_element_located((By.ID, "search-total")))
    assert total.text == "1 message matches this search."
    hit = browser.find_element(By.CSS_SELECTOR, "#search-results .deuz-hit")
    assert "#6" in hit.text and "assistant" in hit.text
    assert (
        "userId=ada,agentId=travel-agent" in hit.find_element(By.CSS_SELECTOR, ".deuz-scope").text
    )
    snippet = hit.find_element(By.CSS_SELECTOR, ".deuz-snippet")
    assert [mark.text for mark in snippet.find_elements(By.TAG_NAME, "mark")] == ["İzmir"]
    assert not browser.find_elements(By.ID, "all-scopes-banner")
    browser.save_screenshot(str(tmp_path / "filtered.png"))

    hit.find_element(By.CSS_SELECTOR, "a.deuz-chat-link").click()
    wait.until(ec.visibility_of_element_located((By.ID, "message-6")))
    browser.find_element(By.ID, "back-to-results").click()
    total = wait.until(ec.visibility_of_element_located((By.ID, "search-total")))
    assert total.text == "1 message matches this search."
    assert browser.find_element(By.CSS_SELECTOR, "input[name=role][value=assistant]").is_selected()
    assert browser.find_element(By.NAME, "updated_after").get_attribute("value") == (
        "2024-06-01 11:59"
    )
