"""The admin search's filters (roles, updated window), exact total, each hit's chat scope and
date, the every-scope banner, snippets, cursor pages, and the chat page's way back."""

from __future__ import annotations

import html as html_lib
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.urls import reverse

from deuz_transcripts.models import Chat
from deuz_transcripts.spans import snippet
from deuz_transcripts.text import indexed_text
from tests.admin_support import record, search, write

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]

ADA = "userId=ada"


def roles_chat(chat_id: str = "roles", n: int = 0) -> Any:
    return record(
        chat_id,
        [
            {"role": "user", "content": "deploy the api"},
            {"role": "assistant", "content": "deploy started"},
            {"role": "tool", "content": "deploy log ok"},
            {"role": "function", "content": "deploy hook"},
        ],
        n=n,
    )


def hits(response: Any) -> list[tuple[str, int]]:
    assert response.status_code == 200
    return [(row.hit.chat_id, row.hit.index) for row in response.context["rows"]]


# roles


def test_role_checkboxes_and_other_roles_filter_hits_and_total(support_client: Any) -> None:
    write(roles_chat())
    every = search(support_client, q="deploy", scope=ADA)
    assert sorted(hits(every)) == [("roles", 0), ("roles", 1), ("roles", 2), ("roles", 3)]
    assert every.context["total"] == 4
    users = search(support_client, q="deploy", scope=ADA, role="user")
    assert hits(users) == [("roles", 0)] and users.context["total"] == 1
    two = search(support_client, q="deploy", scope=ADA, role=["user", "tool"])
    assert sorted(hits(two)) == [("roles", 0), ("roles", 2)] and two.context["total"] == 2
    other = search(support_client, q="deploy", scope=ADA, other_roles=" function , ,missing")
    assert hits(other) == [("roles", 3)]
    both = search(support_client, q="deploy", scope=ADA, role="assistant", other_roles="function")
    assert sorted(hits(both)) == [("roles", 1), ("roles", 3)]
    html = users.content.decode()
    assert 'type="checkbox" name="role" value="user"' in html and "checked" in html


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"role": "system"}, "role"),
        ({"role": "admin"}, "role"),
        ({"role": "user\x1b[31m"}, "role"),
        ({"role": ["user", "user\r\nX-Injected: 1"]}, "role"),
        ({"other_roles": "bad\x07role"}, "other_roles"),
        ({"other_roles": "tool\u202eloot"}, "other_roles"),  # a bidi override hides text
        ({"other_roles": "zero\u200bwidth"}, "other_roles"),
        ({"other_roles": "r" * 256}, "other_roles"),
        ({"other_roles": ",".join(f"r{n}" for n in range(21))}, "other_roles"),
        ({"other_roles": "x" * 5_000}, "other_roles"),
        ({"other_roles": "nul\x00"}, "other_roles"),
        ({"other_roles": "system"}, "other_roles"),  # never indexed: nothing could match
        ({"other_roles": "developer"}, "other_roles"),
        # 20 roles at most in all, as the endpoint, the tool and the command take
        ({"role": "user", "other_roles": ",".join(f"r{n}" for n in range(20))}, "other_roles"),
    ],
)
def test_hostile_roles_are_form_errors(support_client: Any, params: dict, field: str) -> None:
    write(roles_chat())
    response = search(support_client, q="deploy", scope=ADA, **params)
    assert response.status_code == 200
    assert field in response.context["form"].errors
    assert response.context["rows"] == []


# the updated_at window


def window_chats() -> None:
    write(*(record(f"c{n}", [{"role": "user", "content": f"deploy {n}"}], n=n) for n in range(5)))


def test_dates_are_strict_and_read_in_the_admins_time_zone(
    support_client: Any, settings: Any
) -> None:
    window_chats()  # c0..c4 updated 2025-03-01 12:00..12:04 UTC
    after = search(support_client, q="deploy", scope=ADA, updated_after="2025-03-01 12:02")
    assert sorted(chat for chat, _ in hits(after)) == ["c3", "c4"]
    assert after.context["total"] == 2
    before = search(support_client, q="deploy", scope=ADA, updated_before="2025-03-01T12:02")
    assert sorted(chat for chat, _ in hits(before)) == ["c0", "c1"]
    both = search(
        support_client,
        q="deploy",
        scope=ADA,
        updated_after="2025-03-01 12:00",
        updated_before="2025-03-01 12:03:00",
    )
    assert sorted(chat for chat, _ in hits(both)) == ["c1", "c2"]
    # an offset is kept; a naive time is read in the current time zone (Istanbul: UTC+3)
    settings.TIME_ZONE = "Europe/Istanbul"
    local = search(support_client, q="deploy", scope=ADA, updated_after="2025-03-01 15:02")
    assert sorted(chat for chat, _ in hits(local)) == ["c3", "c4"]
    offset = search(support_client, q="deploy", scope=ADA, updated_after="2025-03-01T12:02Z")
    assert sorted(chat for chat, _ in hits(offset)) == ["c3", "c4"]
    day = search(support_client, q="deploy", scope=ADA, updated_before="2025-03-02 00:00")
    assert len(hits(day)) == 5
    assert "Europe/Istanbul" in local.content.decode()  # the help text names the zone


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"updated_after": "yesterday"}, "updated_after"),
        ({"updated_after": "2025-13-01"}, "updated_after"),
        ({"updated_after": "2025-02-30 10:00"}, "updated_after"),
        ({"updated_before": "10000-01-01"}, "updated_before"),
        ({"updated_before": "9" * 5_000}, "updated_before"),
        ({"updated_before": "9999-12-31T23:59:59-12:00"}, "updated_before"),  # past UTC's end
        ({"updated_after": "0001-01-01T00:00+05:00"}, "updated_after"),  # before UTC's start
        ({"updated_after": "2025-03-01\x00"}, "updated_after"),
        ({"updated_after": "2025-03-01T12:00+25:00"}, "updated_after"),
        (
            {"updated_after": "2025-03-02 00:00", "updated_before": "2025-03-01 00:00"},
            "updated_before",
        ),
        (
            {"updated_after": "2025-03-01 10:00", "updated_before": "2025-03-01 10:00"},
            "updated_before",
        ),
        ({"updated_before": "2025-03-02"}, "updated_before"),  # a date alone: which moment?
        ({"updated_after": "03/01/2025 10:00"}, "updated_after"),  # ISO 8601 only
    ],
)
def test_bad_dates_are_form_errors(support_client: Any, params: dict, field: str) -> None:
    window_chats()
    response = search(support_client, q="deploy", scope=ADA, **params)
    assert response.status_code == 200
    assert field in response.context["form"].errors
    assert response.context["rows"] == []


def test_a_time_the_clocks_skip_is_a_form_error(support_client: Any, settings: Any) -> None:
    window_chats()
    settings.TIME_ZONE = "Europe/Berlin"  # 2025-03-30 02:00-03:00 does not exist there
    response = search(support_client, q="deploy", scope=ADA, updated_after="2025-03-30 02:30")
    assert response.status_code == 200
    assert "updated_after" in response.context["form"].errors


def test_the_largest_dates_the_form_accepts_search(support_client: Any) -> None:
    window_chats()
    response = search(
        support_client,
        q="deploy",
        scope=ADA,
        updated_after="0001-01-01 00:00",
        updated_before="9999-12-31 23:59:59",
    )
    assert len(hits(response)) == 5


# the total, each hit's chat, the banner, the snippet


def test_total_is_exact_pluralised_and_grouped(support_client: Any, settings: Any) -> None:
    settings.DEUZ_TRANSCRIPTS = {**settings.DEUZ_TRANSCRIPTS, "ADMIN_PAGE_SIZE": 5}
    write(record("big", [{"role": "user", "content": f"deploy {n}"} for n in range(1_001)]))
    write(record("one", [{"role": "user", "content": "rollback"}], n=1))
    many = search(support_client, q="deploy", scope=ADA)
    assert len(many.context["rows"]) == 5
    assert '<p class="deuz-total" id="search-total">1,001 messages match this search.</p>' in (
        many.content.decode()
    )
    one = search(support_client, q="rollback", scope=ADA)
    assert "1 message matches this search." in one.content.decode()
    none = search(support_client, q="zanzibar", scope=ADA)
    assert "0 messages match this search." in none.content.decode()


def test_a_total_past_search_total_cap_says_more_than(support_client: Any, settings: Any) -> None:
    settings.DEUZ_TRANSCRIPTS = {
        **settings.DEUZ_TRANSCRIPTS,
        "ADMIN_PAGE_SIZE": 5,
        "SEARCH_TOTAL_CAP": 1_000,
    }
    write(record("big", [{"role": "user", "content": f"deploy {n}"} for n in range(1_001)]))
    many = search(support_client, q="deploy", scope=ADA)
    assert len(many.context["rows"]) == 5
    assert (
        '<p class="deuz-total" id="search-total">More than 1,000 messages match this search.'
        in (many.content.decode())
    )
    onward = search(
        support_client,
        q="deploy",
        scope=ADA,
        page=2,
        cursor=many.context["next_url"].split("cursor=")[1].split("&")[0],
    )
    assert (
        len(onward.context["rows"]) == 5 and "More than 1,000 messages" in onward.content.decode()
    )
    settings.DEUZ_TRANSCRIPTS = {**settings.DEUZ_TRANSCRIPTS, "SEARCH_TOTAL_CAP": 1_001}
    exact = search(support_client, q="deploy", scope=ADA)
    assert "1,001 messages match this search." in exact.content.decode()


def test_each_hit_shows_its_chats_scope_and_update_time(admin_client: Any, settings: Any) -> None:
    write(record("a", [{"role": "user", "content": "deploy"}], user="ada", n=0))
    write(record("b", [{"role": "user", "content": "deploy <now>"}], user="b<o>b", n=90))
    settings.TIME_ZONE = "Europe/Istanbul"
    response = admin_client.get(reverse("admin:deuz_transcripts_search"), {"q": "deploy"})
    rows = {row.hit.chat_id: row for row in response.context["rows"]}
    assert rows["a"].scope == "userId=ada" and rows["b"].scope == "userId=b<o>b"
    html = response.content.decode()
    assert '<span class="deuz-scope" title="scope">userId=b&lt;o&gt;b</span>' in html
    # b: 12:00 UTC + 90 minutes, shown in the admin's time zone
    assert 'datetime="2025-03-01T16:30:00+03:00"' in html and "4:30 p.m." in html
    assert 'datetime="2025-03-01T15:00:00+03:00"' in html


def test_a_banner_says_when_every_scope_is_searched(admin_client: Any, support_client: Any) -> None:
    write(record("a", [{"role": "user", "content": "deploy"}]))
    every = admin_client.get(reverse("admin:deuz_transcripts_search"), {"q": "deploy"})
    assert 'id="all-scopes-banner"' in every.content.decode()
    nothing = admin_client.get(reverse("admin:deuz_transcripts_search"), {"q": "zanzibar"})
    assert 'id="all-scopes-banner"' in nothing.content.decode()  # no hits, same reach
    scoped = search(admin_client, q="deploy", scope=ADA)
    assert 'id="all-scopes-banner"' not in scoped.content.decode()
    assert 'id="all-scopes-banner"' not in search(support_client, q="deploy").content.decode()


def test_a_long_hit_is_shown_as_its_marked_snippet(support_client: Any) -> None:
    text = "intro line\n" + "filler words here " * 100 + "the <readiness> probe failed\n" * 2
    write(record("log", [{"role": "tool", "content": text}, {"role": "user", "content": "ok"}]))
    response = search(support_client, q="readiness", scope=ADA)
    (row,) = response.context["rows"]
    shown = str(row.snippet)
    assert shown.startswith("…") and "<mark>readiness</mark>" in shown and "\n" not in shown
    plain = html_lib.unescape(shown.replace("<mark>", "").replace("</mark>", ""))
    assert plain == snippet(indexed_text(row.hit.message) or "", row.hit.spans)
    assert "&lt;<mark>readiness</mark>&gt;" in response.content.decode()
    assert row.html is not None and 'class="deuz-whole"' in response.content.decode()
    short = search(support_client, q="ok", scope=ADA)
    assert short.context["rows"][0].html is None  # the snippet is the whole message


# cursor pages


def test_next_pages_follow_the_cursor_while_chats_are_written(
    support_client: Any, settings: Any
) -> None:
    settings.DEUZ_TRANSCRIPTS = {**settings.DEUZ_TRANSCRIPTS, "ADMIN_PAGE_SIZE": 2}
    window_chats()
    first = search(support_client, q="deploy", scope=ADA, role="user")
    seen = [chat for chat, _ in hits(first)]
    # a newer chat now ranks first: an offset page 2 would show a page-1 hit again
    write(record("new", [{"role": "user", "content": "deploy"}], n=60))
    url = first.context["next_url"]
    while url:
        page = support_client.get(url)
        seen += [chat for chat, _ in hits(page)]
        assert page.context["total"] == 6  # counted now: the new chat is there
        url = page.context["next_url"]
    assert sorted(seen) == ["c0", "c1", "c2", "c3", "c4"]


@pytest.mark.parametrize("cursor", ["garbage", "A" * 9_000, "\x00", "eyJ2IjoxfQ"])
def test_a_bad_cursor_says_so_and_leads_to_the_first_page(
    support_client: Any, settings: Any, cursor: str
) -> None:
    window_chats()
    response = search(support_client, q="deploy", scope=ADA, page=2, cursor=cursor)
    assert response.status_code == 200
    assert response.context["rows"] == []
    assert 'id="page-errors"' in response.content.decode()
    first = support_client.get(response.context["first_url"])
    assert len(hits(first)) == 5


def test_a_cursor_of_another_search_is_refused(support_client: Any, settings: Any) -> None:
    settings.DEUZ_TRANSCRIPTS = {**settings.DEUZ_TRANSCRIPTS, "ADMIN_PAGE_SIZE": 2}
    window_chats()
    first = search(support_client, q="deploy", scope=ADA)
    cursor = parse_qs(urlsplit(first.context["next_url"]).query)["cursor"][0]
    other = search(support_client, q="deploy", scope=ADA, role="tool", page=2, cursor=cursor)
    assert other.context["rows"] == [] and other.context["page_errors"]
    assert "role=tool" in other.context["first_url"]


# the chat page's way back


def test_filters_flow_into_the_chat_page_and_back(support_client: Any, settings: Any) -> None:
    settings.DEUZ_TRANSCRIPTS = {**settings.DEUZ_TRANSCRIPTS, "ADMIN_PAGE_SIZE": 1}
    write(roles_chat("r1", n=1), roles_chat("r2", n=2))
    params = {
        "q": "deploy",
        "scope": ADA,
        "role": ["user", "tool"],
        "other_roles": "function",
        "updated_after": "2025-03-01 12:00:30",
        "updated_before": "2025-03-02 00:00",
    }
    first = search(support_client, **params)
    second = support_client.get(first.context["next_url"])
    (row,) = second.context["rows"]
    chat_page = support_client.get(row.chat_url)
    assert chat_page.status_code == 200
    back_url = chat_page.context["search_back_url"]
    back = parse_qs(urlsplit(back_url).query)
    assert back["role"] == ["user", "tool"] and back["other_roles"] == ["function"]
    assert back["updated_after"] == ["2025-03-01 12:00:30"] and "cursor" in back
    assert back["page"] == ["2"]
    again = support_client.get(back_url)
    assert hits(again) == hits(second)
    assert again.context["total"] == first.context["total"] == 6
    assert Chat.objects.count() == 2


def test_a_date_alone_says_a_time_is_needed(support_client: Any) -> None:
    window_chats()
    response = search(support_client, q="deploy", scope=ADA, updated_before="2025-03-02")
    (error,) = response.context["form"].errors["updated_before"]
    assert error == "Needs a time as well as a date, e.g. 2025-03-02T00:00:00+00:00."


def test_words_past_the_32nd_are_named(support_client: Any) -> None:
    window_chats()
    query = " ".join(f"filler{n}" for n in range(40)) + " deploy"
    response = search(support_client, q=query, scope=ADA)
    assert hits(response) == []
    notice = response.context["ignored_notice"]
    assert notice.endswith(
        "these were ignored: filler32, filler33, filler34, filler35, "
        "filler36, filler37, filler38, filler39, deploy."
    )
    assert html_lib.escape(notice) in response.content.decode()
    assert search(support_client, q="deploy", scope=ADA).context["ignored_notice"] == ""


def test_a_window_filters_hits_and_keeps_their_scores(support_client: Any) -> None:
    """A window filters hits only: each row scores as in the search without it."""
    write(
        record("best", [{"role": "user", "content": "deploy staging"}], n=0),
        *(record(f"c{n}", [{"role": "user", "content": f"deploy {n}"}], n=n) for n in (1, 2)),
    )

    def scored(response: Any) -> list[tuple[str, float]]:
        return [(row.hit.chat_id, row.hit.score) for row in response.context["rows"]]

    every = dict(scored(search(support_client, q="deploy staging", scope=ADA)))
    assert every["best"] == 1.0
    recent = search(support_client, q="deploy staging", scope=ADA, updated_after="2025-03-01 12:00")
    assert scored(recent) == [("c2", every["c2"]), ("c1", every["c1"])]
    assert recent.context["total"] == 2 and every["c2"] < 1.0
