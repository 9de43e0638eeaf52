"""The admin's transcript search view: the form, highlighted hits with context, errors, pages."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection
from django.test import override_settings
from django.urls import reverse

from deuz_transcripts.models import Chat
from tests.admin_support import SEARCH, izmir_chat, record, search, write
from tests.cursor_forgery import forged_cursors
from tests.span_work import count_span_work

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]


# the form


def test_form_without_parameters_shows_backend_and_scope_rule(support_client: Any) -> None:
    response = search(support_client)
    assert response.status_code == 200
    html = response.content.decode()
    assert f'<code id="search-backend">{response.context["backend_name"]}</code>' in html
    assert "Only superusers may search every chat" in html
    assert response.context["rows"] == []


def test_a_link_may_fill_in_the_scope(support_client: Any) -> None:
    response = search(support_client, scope="userId=ada")
    assert response.context["form"].is_bound is False
    assert 'value="userId=ada"' in response.content.decode()
    assert response.context["notice"] == ""


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"q": "izmir", "scope": "userId"}, "scope"),
        ({"q": "izmir", "scope": "=ada"}, "scope"),
        ({"q": "izmir", "scope": "userId=ada,,x=y"}, "scope"),
        ({"q": "izmir", "scope": "userId=a,userId=b"}, "scope"),
        ({"q": "izmir", "scope": "k=" + "v" * 300}, "scope"),
        ({"q": "izmir", "scope": "userId=ada", "around": "x"}, "around"),
        ({"q": "izmir", "scope": "userId=ada", "around": "11"}, "around"),
        ({"q": "izmir", "scope": "userId=ada", "around": "-1"}, "around"),
        ({"q": "izmir", "scope": "userId=ada", "page": "0"}, "page"),
        ({"q": "izmir", "scope": "userId=ada", "page": "abc"}, "page"),
        ({"q": "izmir", "scope": "userId=ada", "page": "9" * 30}, "page"),
        ({"q": "izmir " * 20_000, "scope": "userId=ada"}, "q"),
        ({"q": "izmir\x00", "scope": "userId=ada"}, "q"),
        ({"q": "izmir", "scope": "userId=a\x00da"}, "scope"),
    ],
)
def test_bad_parameters_are_form_errors(support_client: Any, params: dict, field: str) -> None:
    write(izmir_chat())
    response = search(support_client, **params)
    assert response.status_code == 200
    assert field in response.context["form"].errors
    assert response.context["rows"] == []


def test_empty_query_and_query_without_terms_say_so(support_client: Any) -> None:
    write(izmir_chat())
    assert "Enter a query" in search(support_client, q="  ", scope="userId=ada").content.decode()
    response = search(support_client, q="!!! ...", scope="userId=ada")
    assert "no words to search for" in response.content.decode()
    response = search(support_client, q="zanzibar", scope="userId=ada")
    assert "No message matches" in response.content.decode()


# results


def test_hit_is_highlighted_with_around_context_and_chat_link(support_client: Any) -> None:
    write(izmir_chat(), izmir_chat("other-user", user="bob"))
    response = search(support_client, q="IZMIR", scope="userId=ada", around=1)
    assert response.status_code == 200
    rows = response.context["rows"]
    assert [(row.hit.chat_id, row.hit.index) for row in rows] == [("trip", 3)]
    html = response.content.decode()
    assert "Book the flight to <mark>İzmir</mark>." in html
    assert "Try the Aegean coast." in html  # around, before
    assert "Booked." in html  # around, after (its reasoning is not indexed text)
    assert "izmir airport" not in html and "travel agent" not in html
    chat = Chat.objects.get(chat_id="trip")
    link = (
        reverse("admin:deuz_transcripts_chat_change", args=[chat.pk])
        + "?q=IZMIR&amp;scope=userId%3Dada&amp;around=1#message-3"
    )
    assert f'href="{link}"' in html
    assert "score 1.000" in html


def test_empty_scope_is_for_superusers_only(support_client: Any, admin_client: Any) -> None:
    write(izmir_chat(), izmir_chat("other-user", user="bob"))
    response = search(support_client, q="izmir", scope="")
    assert response.context["form"].errors["scope"]
    assert response.context["rows"] == []
    response = search(admin_client, q="izmir", scope="")
    assert {row.hit.chat_id for row in response.context["rows"]} == {"trip", "other-user"}
    assert "Leave empty to search every chat (superusers only)" in response.content.decode()


def test_pages(support_client: Any, settings: Any) -> None:
    settings.DEUZ_TRANSCRIPTS = {**settings.DEUZ_TRANSCRIPTS, "ADMIN_PAGE_SIZE": 2}
    write(
        *(
            record(f"c{n}", [{"role": "user", "content": f"deploy number {n}"}], n=n)
            for n in range(5)
        )
    )
    first = search(support_client, q="deploy", scope="userId=ada")
    assert [row.hit.chat_id for row in first.context["rows"]] == ["c4", "c3"]
    assert first.context["previous_url"] is None
    assert "page=2" in first.context["next_url"] and "cursor=" in first.context["next_url"]
    second = support_client.get(first.context["next_url"])
    assert [row.hit.chat_id for row in second.context["rows"]] == ["c2", "c1"]
    assert second.context["first_number"] == 3
    last = support_client.get(second.context["next_url"])
    assert [row.hit.chat_id for row in last.context["rows"]] == ["c0"]
    assert last.context["next_url"] is None and "page=2" in last.context["previous_url"]
    # a page number alone (an old link, or "previous") is read by offset
    back = support_client.get(last.context["previous_url"])
    assert [row.hit.chat_id for row in back.context["rows"]] == ["c2", "c1"]
    assert "cursor=" not in last.context["previous_url"]
    beyond = search(support_client, q="deploy", scope="userId=ada", page=40)
    assert "past the last one" in beyond.content.decode()


def test_a_forged_cursor_is_a_page_error(support_client: Any, settings: Any) -> None:
    """A page link whose cursor was rewritten (every idf 0.0) and resealed: the page says
    the link is not this search's, never a 500."""
    settings.DEUZ_TRANSCRIPTS = {**settings.DEUZ_TRANSCRIPTS, "ADMIN_PAGE_SIZE": 2}
    write(*(record(f"c{n}", [{"role": "user", "content": f"deploy {n}"}], n=n) for n in range(5)))
    first = search(support_client, q="deploy", scope="userId=ada")
    cursor = first.context["next_url"].split("cursor=")[1].split("&")[0].split("#")[0]
    for forged in forged_cursors(cursor):
        response = search(support_client, q="deploy", scope="userId=ada", page=2, cursor=forged)
        assert response.status_code == 200
        assert response.context["page_errors"] == [
            "This page link is not one of this search's: start again."
        ]
        assert response.context["rows"] == []


def test_the_pager_says_of_how_many_pages_and_leads_to_no_empty_page(
    support_client: Any, settings: Any
) -> None:
    settings.DEUZ_TRANSCRIPTS = {**settings.DEUZ_TRANSCRIPTS, "ADMIN_PAGE_SIZE": 2}
    write(
        *(
            record(f"c{n}", [{"role": "user", "content": f"deploy number {n}"}], n=n)
            for n in range(6)
        )
    )
    first = search(support_client, q="deploy", scope="userId=ada")
    assert "page 1 of 3" in first.content.decode()
    last = support_client.get(support_client.get(first.context["next_url"]).context["next_url"])
    assert "page 3 of 3" in last.content.decode() and last.context["next_url"] is None
    beyond = search(support_client, q="deploy", scope="userId=ada", page=4)
    html = beyond.content.decode()
    assert beyond.context["previous_url"] is None and beyond.context["next_url"] is None
    assert 'rel="prev"' not in html and 'rel="next"' not in html
    back = support_client.get(beyond.context["last_url"])
    assert [row.hit.chat_id for row in back.context["rows"]] == ["c1", "c0"]
    assert "its last page (3)" in html


def test_a_pager_past_the_counted_total_says_more_than(support_client: Any, settings: Any) -> None:
    settings.DEUZ_TRANSCRIPTS = {
        **settings.DEUZ_TRANSCRIPTS,
        "ADMIN_PAGE_SIZE": 2,
        "SEARCH_TOTAL_CAP": 3,
    }
    write(
        *(
            record(f"c{n}", [{"role": "user", "content": f"deploy number {n}"}], n=n)
            for n in range(6)
        )
    )
    first = search(support_client, q="deploy", scope="userId=ada")
    assert "page 1 of more than 2" in first.content.decode()


def test_date_placeholders_do_not_look_like_values(support_client: Any) -> None:
    form = search(support_client).context["form"]
    for name in ("updated_after", "updated_before"):
        placeholder = str(form.fields[name].widget.attrs["placeholder"])
        assert placeholder == "YYYY-MM-DD hh:mm" and not any(c.isdigit() for c in placeholder)


def test_no_hit_names_the_active_filters(support_client: Any) -> None:
    write(izmir_chat())
    plain = search(support_client, q="nothingmatches", scope="userId=ada")
    assert plain.context["notice"] == "No message matches this query in this scope."
    filtered = search(
        support_client,
        q="izmir",
        scope="userId=ada",
        role="assistant",
        other_roles="function",
        updated_after="2025-03-01 11:00",
        updated_before="2025-03-02 00:00",  # a date alone is refused (one rule, every surface)
    )
    assert filtered.context["notice"] == (
        "No message matches this query in this scope with these filters: roles assistant, "
        "function; updated after 2025-03-01 11:00 UTC; updated before 2025-03-02 00:00 UTC. "
        "Clear a filter to widen the search."
    )
    assert "(3 active)" in filtered.content.decode()  # roles, after, before


@pytest.mark.skipif(connection.vendor != "sqlite", reason="the LIKE fallback is SQLite's")
def test_like_fallback_highlights_whole_words_holding_the_substring(
    support_client: Any, settings: Any
) -> None:
    write(izmir_chat())
    settings.DEUZ_TRANSCRIPTS = {**settings.DEUZ_TRANSCRIPTS, "SQLITE_BACKEND": "like"}
    response = search(support_client, q="zmi", scope="userId=ada")
    html = response.content.decode()
    assert response.context["backend_name"] == "sqlite-like"
    assert "Book the flight to <mark>İzmir</mark>." in html
    assert "matches parts of words" in html


def test_long_tool_log_is_shown_as_excerpts(support_client: Any) -> None:
    log = "\n".join(f"line {n} ok" for n in range(15_000)) + "\nline final readiness failed"
    write(
        record(
            "logs",
            [
                {
                    "role": "tool",
                    "content": [
                        {"type": "tool-result", "toolCallId": "c", "toolName": "t", "output": log}
                    ],
                }
            ],
        )
    )
    response = search(support_client, q="readiness", scope="userId=ada")
    html = response.content.decode()
    assert "<mark>readiness</mark>" in html
    assert len(html) < 20_000


@pytest.mark.parametrize("page", ["admin:index", "admin:app_list"])
def test_the_admin_home_has_a_search_transcripts_entry(
    support_client: Any, admin_client: Any, page: str
) -> None:
    args = ["deuz_transcripts"] if page == "admin:app_list" else []
    entry = reverse("admin:deuz_transcripts_transcriptsearch_changelist")
    for client in (support_client, admin_client):
        home = client.get(reverse(page, args=args)).content.decode()
        assert f'<a href="{entry}">Search transcripts</a>' in home
        landed = client.get(entry, follow=True)
        assert landed.redirect_chain == [(reverse(SEARCH), 302)]


def test_the_entry_is_not_shown_to_staff_who_may_not_search(
    client: Any, django_user_model: Any
) -> None:
    from django.contrib.auth.models import Permission

    clerk = django_user_model.objects.create_user("clerk", password="pw", is_staff=True)
    clerk.user_permissions.add(Permission.objects.get(codename="view_chat"))
    client.force_login(clerk)
    entry = reverse("admin:deuz_transcripts_transcriptsearch_changelist")
    assert entry not in client.get(reverse("admin:index")).content.decode()
    assert client.get(entry).status_code == 403


@pytest.mark.parametrize("page", ["abc", "0", "-3", "10001", "9" * 30])
def test_a_bad_page_says_so_and_leads_to_the_first_page(support_client: Any, page: str) -> None:
    write(izmir_chat())
    response = search(support_client, q="izmir", scope="userId=ada", page=page)
    html = response.content.decode()
    assert response.context["rows"] == []
    assert 'id="page-errors"' in html and "page" in html.split('id="page-errors"')[1][:200]
    first = support_client.get(response.context["first_url"])
    assert [row.hit.chat_id for row in first.context["rows"]] == ["trip"]


def test_a_page_past_the_end_leads_to_the_first_page(support_client: Any) -> None:
    write(izmir_chat())
    beyond = search(support_client, q="izmir", scope="userId=ada", around=2, page=5)
    assert "past the last one" in beyond.content.decode()
    first = support_client.get(beyond.context["first_url"])
    assert [row.hit.chat_id for row in first.context["rows"]] == ["trip"]
    assert first.context["form"].cleaned_data["around"] == 2


def test_a_10_mb_tool_log_costs_a_page_what_its_excerpt_costs(support_client: Any) -> None:
    """Highlighting used to fold the whole log character by character: ~20 s a page, and
    ~13 s more for each ``around`` line holding the log."""
    # one match near the start: nothing stopped the old scan before the end of the log
    log = "readiness probe started\n" + "step ok: probe passed\n" * 480_000  # 10.5 MB
    tool = {
        "role": "tool",
        "content": [{"type": "tool-result", "toolCallId": "c", "toolName": "t", "output": log}],
    }
    messages = [tool, {"role": "user", "content": "readiness?"}, tool]
    write(record("logs", messages))
    with pytest.MonkeyPatch.context() as patch:
        work = count_span_work(patch)
        response = search(support_client, q="readiness", scope="userId=ada", around=2)
    rows = response.context["rows"]
    assert len(rows) == 3 and all(row.hit.spans for row in rows)
    assert len(response.content) < 60_000
    assert "<mark>readiness</mark>" in response.content.decode()
    # the rule reads each message's indexed 256 KiB at most: 3 hits, 4 around lines
    assert work.characters <= 7 * 262_144, work.characters


def test_a_lone_surrogate_in_content_does_not_break_the_search_page(support_client: Any) -> None:
    planted = [
        {"role": "user", "content": "izmir \ud800 trip"},
        {"role": "assistant", "content": [{"type": "text", "text": "\udfff izmir"}]},
        {"role": "user", "content": [{"type": "weird\ud800", "x": "\ud800"}]},
    ]
    write(record("planted", planted))
    response = search(support_client, q="izmir", scope="userId=ada", around=1)
    assert response.status_code == 200
    html = response.content.decode()
    assert "<mark>izmir</mark> \ufffd trip" in html and "\ufffd <mark>izmir</mark>" in html


def test_search_only_staffs_admin_home_leads_to_the_search(support_client: Any) -> None:
    """The home's Chats link led to a chat list that is always empty for them."""
    write(izmir_chat())
    home = support_client.get(reverse("admin:index")).content.decode()
    changelist = reverse("admin:deuz_transcripts_chat_changelist")
    assert f'href="{changelist}"' in home
    landed = support_client.get(changelist, follow=True)
    assert landed.redirect_chain == [(reverse(SEARCH), 302)]
    assert landed.context["title"] == "Search transcripts"


def test_an_index_in_another_stored_form_is_a_visible_notice(support_client: Any) -> None:
    """Check W004 where the operator looks: "No message matches" alone hid it."""
    write(record("c1", [{"role": "user", "content": "ご注文の確認"}]))
    assert 'id="stale-index"' not in search(support_client).content.decode()
    given = getattr(settings, "DEUZ_TRANSCRIPTS", {})
    with override_settings(DEUZ_TRANSCRIPTS={**given, "CJK_BIGRAMS": True}):
        response = search(support_client, q="注文", scope="userId=ada")
        html = response.content.decode()
        assert response.context["rows"] == []
        assert 'id="stale-index"' in html
        assert "indexed under CJK_BIGRAMS=False" in html
        assert "backfill_transcripts" in html
        call_command("backfill_transcripts", stdout=io.StringIO(), stderr=io.StringIO())
        response = search(support_client, q="注文", scope="userId=ada")
        assert 'id="stale-index"' not in response.content.decode()
        assert len(response.context["rows"]) == 1
