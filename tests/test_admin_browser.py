"""The admin in a real headless Chromium (Playwright): the home's entry to the search, the
chat list at 1280 px, the search on a phone, the pager, dates and filters, the page a
refused chat shows, and the exports."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.test import override_settings

from deuz_transcripts import ChatRecord
from deuz_transcripts.models import Chat
from tests.admin_support import chat, izmir_chat, record, write
from tests.browser_support import DESKTOP, PHONE, admin_sign_in, chromium

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SEARCH_PATH = "/admin/deuz_transcripts/chat/search/"
IZMIR = "?q=izmir&scope=userId%3Dada&around=1"
JAPANESE = "?q=%E6%B3%A8%E6%96%87&scope=userId%3Dada"  # 注文 (order)


@pytest.fixture
def support_user(django_user_model: Any, fast_passwords: None) -> Any:
    user = django_user_model.objects.create_user("support", password="support-pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="search_transcripts"))
    return user


@pytest.fixture
def superuser(django_user_model: Any, fast_passwords: None) -> Any:
    return django_user_model.objects.create_superuser("boss", password="boss-pw")


def test_the_admin_home_has_an_entry_to_the_search(live_server: Any, support_user: Any) -> None:
    with chromium() as page:
        admin_sign_in(page, live_server.url, "support", "support-pw", "/admin/")
        page.locator("#content-main").get_by_role("link", name="Search transcripts").click()
        page.wait_for_selector("#transcript-search")
        assert page.url == f"{live_server.url}{SEARCH_PATH}"


def test_the_chat_list_fits_a_1280_px_window(live_server: Any, superuser: Any) -> None:
    """Its last columns (updated at, searchable) were cut off beside the sidebar and filters."""
    store_scope = {"userId": "camille", "agentId": "devops-assistant", "tenantId": "acme-corp"}
    write(
        izmir_chat(),
        ChatRecord(
            "demo-camille-0291-a-chat-id-of-many-words",
            store_scope,
            [{"role": "user", "content": "hi"}],
        ),
    )
    with chromium(DESKTOP) as page:
        admin_sign_in(page, live_server.url, "boss", "boss-pw", "/admin/deuz_transcripts/chat/")
        widths = page.evaluate(
            "(() => { const r = document.querySelector('#changelist .results');"
            " return [r.scrollWidth, r.clientWidth, document.documentElement.scrollWidth]; })()"
        )
        headers = page.locator("#result_list thead th .text").all_inner_texts()
    scroll_width, client_width, page_width = widths
    assert scroll_width <= client_width and page_width <= DESKTOP["width"]
    assert [h.strip().upper() for h in headers][-2:] == ["UPDATED AT", "SEARCHABLE"]


def test_on_a_phone_the_hits_start_in_the_first_screen(live_server: Any, support_user: Any) -> None:
    """They started about 1,340 px down, under every field and its help."""
    write(izmir_chat())
    with chromium(PHONE) as page:
        admin_sign_in(page, live_server.url, "support", "support-pw", SEARCH_PATH + IZMIR)
        top = page.locator("#search-results").bounding_box()["y"]  # type: ignore[index]
        folded = page.locator("#search-filters").get_attribute("open") is None
        page.locator("#search-filters summary").click()
        assert page.locator("input[name=updated_after]").is_visible()
    assert folded and top < 0.8 * PHONE["height"]
    with chromium(DESKTOP) as page:
        admin_sign_in(page, live_server.url, "support", "support-pw", SEARCH_PATH + IZMIR)
        assert page.locator("input[name=updated_after]").is_visible()  # never folded here


def test_the_pager_counts_pages_and_never_leads_to_an_empty_one(
    live_server: Any, support_user: Any, settings: Any
) -> None:
    settings.DEUZ_TRANSCRIPTS = {**settings.DEUZ_TRANSCRIPTS, "ADMIN_PAGE_SIZE": 2}
    write(*(record(f"c{n}", [{"role": "user", "content": f"deploy {n}"}], n=n) for n in range(5)))
    path = SEARCH_PATH + "?q=deploy&scope=userId%3Dada"
    with chromium() as page:
        admin_sign_in(page, live_server.url, "support", "support-pw", path)
        said = [page.locator("#search-pages").inner_text()]
        for _ in range(2):
            page.click("#search-pages a[rel=next]")
            page.wait_for_load_state()
            said.append(page.locator("#search-pages").inner_text())
        last_has_next = page.locator("a[rel=next]").count()
        page.goto(f"{live_server.url}{path}&page=7")
        past_end = page.locator("#search-pages").count(), page.locator("a[rel=prev]").count()
        page.click("#last-page")
        shown = page.locator("#search-results .deuz-chat-link").all_inner_texts()
    assert [text.split("page ", 1)[1][:6] for text in said] == ["1 of 3", "2 of 3", "3 of 3"]
    assert last_has_next == 0 and past_end == (0, 0) and shown == ["c0"]


def test_dates_look_empty_and_no_hit_names_the_filters(live_server: Any, support_user: Any) -> None:
    write(izmir_chat())
    with chromium() as page:
        admin_sign_in(page, live_server.url, "support", "support-pw", SEARCH_PATH)
        after = page.locator("input[name=updated_after]")
        placeholders = [after.get_attribute("placeholder"), after.input_value()]
        page.fill("input[name=q]", "izmir")
        page.fill("input[name=scope]", "userId=ada")
        page.check("input[name=role][value=assistant]")
        after.fill("2025-03-01 11:00")
        page.click("input[name=_search]")
        notice = page.locator("#search-notice").inner_text()
        summary = page.locator("#search-filters summary").inner_text()
    assert placeholders == ["YYYY-MM-DD hh:mm", ""]
    assert "with these filters: roles assistant; updated after 2025-03-01 11:00 UTC" in notice
    assert summary.endswith("(2 active)")


def test_a_chat_outside_the_searched_scope_says_why(live_server: Any, support_user: Any) -> None:
    write(chat("bob-chat", "bob", "bob's zqprivateword"))
    url = f"{live_server.url}/admin/deuz_transcripts/chat/{Chat.objects.get().pk}/change/"
    with chromium() as page:
        admin_sign_in(page, live_server.url, "support", "support-pw", "/admin/")
        response = page.goto(url + "?scope=userId%3Dada")
        status = response.status if response is not None else None
        said = page.locator("#scope-refused").inner_text()
        text = page.locator("body").inner_text()
        page.click("#search-instead")
        scope = page.locator("input[name=scope]").input_value()
    assert status == 403
    assert "This chat is not in the scope userId=ada that this link names." in said
    assert "zqprivateword" not in text and "bob" not in text
    assert scope == "userId=ada"


def test_a_search_exports_its_hits_as_csv_and_json_lines(
    live_server: Any, support_user: Any, tmp_path: Path
) -> None:
    write(izmir_chat(), chat("bob-izmir", "bob", "Bob flies to Izmir"))
    files = {}
    with chromium() as page:
        admin_sign_in(page, live_server.url, "support", "support-pw", SEARCH_PATH + IZMIR)
        for kind in ("csv", "jsonl"):
            with page.expect_download() as download:
                page.click(f"#export-{kind}")
            files[kind] = tmp_path / download.value.suggested_filename
            download.value.save_as(files[kind])
    rows = list(csv.DictReader(io.StringIO(files["csv"].read_text("utf-8"))))
    assert [(row["chat_id"], row["text"]) for row in rows] == [
        ("trip", "Book the flight to İzmir.")
    ]
    lines = [json.loads(line) for line in files["jsonl"].read_text("utf-8").splitlines()]
    assert [(line["chat_id"], line["index"]) for line in lines] == [("trip", 3)]
    assert files["csv"].suffix == ".csv" and files["jsonl"].suffix == ".jsonl"
    logged = LogEntry.objects.filter(user=support_user).values_list("change_message", flat=True)
    assert sorted(logged) == [
        "Exported 1 hits as CSV: query 'izmir'; scope userId=ada",
        "Exported 1 hits as JSONL: query 'izmir'; scope userId=ada",
    ]


def test_an_index_in_another_stored_form_is_said_above_the_search(
    live_server: Any, support_user: Any
) -> None:
    """``make run CJK_BIGRAMS=1`` over a demo indexed without: the search page says why a
    Japanese word finds nothing and what re-indexes it, and after the backfill finds it."""
    write(record("c1", [{"role": "user", "content": "ご注文の確認をお願いします"}]))
    given = getattr(settings, "DEUZ_TRANSCRIPTS", {})
    with override_settings(DEUZ_TRANSCRIPTS={**given, "CJK_BIGRAMS": True}):
        with chromium() as page:
            admin_sign_in(
                page, live_server.url, "support", "support-pw", f"{SEARCH_PATH}{JAPANESE}"
            )
            notice = page.locator("#stale-index")
            assert notice.is_visible()
            assert "CJK_BIGRAMS=False" in notice.inner_text()
            assert "backfill_transcripts" in notice.inner_text()
            assert page.locator(".deuz-hit").count() == 0
        call_command("backfill_transcripts", stdout=io.StringIO(), stderr=io.StringIO())
        with chromium() as page:
            admin_sign_in(
                page, live_server.url, "support", "support-pw", f"{SEARCH_PATH}{JAPANESE}"
            )
            assert page.locator("#stale-index").count() == 0
            assert page.locator(".deuz-hit").count() == 1
