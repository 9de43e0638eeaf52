"""The end-user JSON search endpoint over HTTP: each user sees only their own hits, whatever
parameters they send; bad parameters are JSON 400s naming the parameter, never a 500."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib.sessions.backends.db import SessionStore
from django.core.checks import run_checks
from django.db import OperationalError
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deuz_transcripts import ChatRecord
from deuz_transcripts.api import MAX_AROUND
from deuz_transcripts.errors import SearchTimeout
from deuz_transcripts.sql import DjangoTranscriptIndex
from deuz_transcripts.stores import DjangoConditionalChatStore
from tests.answer_shape import ANSWER_KEYS, AROUND_KEYS, HIT_KEYS
from tests.cursor_forgery import forged_cursors

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]

URL = "/transcripts/search/"
EXAMPLES = int(os.environ.get("DEUZ_FUZZ_EXAMPLES", "40"))
T0 = datetime(2026, 1, 10, 12, 0, tzinfo=UTC)


def _write(chat_id: str, user: str, texts: list[tuple[str, str]], updated_at: datetime) -> None:
    DjangoConditionalChatStore().write_chat(
        ChatRecord(
            chat_id=chat_id,
            scope={"userId": user},
            messages=[{"role": role, "content": text} for role, text in texts],
            updated_at=updated_at,
        ),
        expected_revision=0,
    )


@pytest.fixture
def chats() -> None:
    _write(
        "ada-1",
        "ada",
        [
            ("system", "You are a travel agent. izmir"),
            ("user", "I fly to Izmir on <b>Monday</b>"),
            ("assistant", "Booked the izmir flight."),
            ("tool", "izmir seat 14C"),
        ],
        T0,
    )
    _write("ada-2", "ada", [("user", "izmir hotel near the sea")], T0 + timedelta(days=2))
    _write("bob-1", "bob", [("user", "izmir secrets of bob"), ("user", "bob only")], T0)
    _write("eve-1", "", [("user", "izmir unscoped")], T0)


def _client(django_user_model: Any, username: str) -> Client:
    client = Client()
    client.force_login(django_user_model.objects.create_user(username, password="pw"))
    return client


@pytest.fixture
def ada(django_user_model: Any) -> Client:
    return _client(django_user_model, "ada")


@pytest.fixture
def bob(django_user_model: Any) -> Client:
    return _client(django_user_model, "bob")


def _get(client: Client, **params: Any) -> tuple[int, dict[str, Any]]:
    response = client.get(f"{URL}?{urlencode(params, doseq=True)}")
    assert response["Content-Type"] == "application/json"
    assert response["Cache-Control"] == "private, no-store"
    return response.status_code, json.loads(response.content)


def test_each_user_sees_only_their_own_hits(chats: None, ada: Client, bob: Client) -> None:
    status, body = _get(ada, q="izmir")
    assert status == 200
    assert {hit["chat_id"] for hit in body["hits"]} == {"ada-1", "ada-2"}
    assert body["count"] == 4 and body["next_cursor"] is None  # never the system message
    assert body["count_exact"] is True
    status, body = _get(bob, q="izmir")
    assert status == 200
    assert [hit["chat_id"] for hit in body["hits"]] == ["bob-1"]
    assert body["count"] == 1
    assert _get(bob, q="flight")[1]["count"] == 0


def test_a_hit_carries_ids_role_snippet_spans_score_and_around(chats: None, ada: Client) -> None:
    status, body = _get(ada, q="monday", around=1)
    assert status == 200
    (hit,) = body["hits"]
    assert hit["chat_id"] == "ada-1" and hit["message_id"] == "ada-1:1" and hit["index"] == 1
    assert hit["role"] == "user" and hit["score"] == 1.0
    assert hit["updated_at"] == "2026-01-10T12:00:00+00:00"  # the chat's, in UTC
    assert set(body) == ANSWER_KEYS and set(hit) == HIT_KEYS
    assert set(hit["around"][0]) == AROUND_KEYS
    assert hit["snippet"] == "I fly to Izmir on <b>Monday</b>"  # JSON text, never HTML
    assert [hit["snippet"][a:b] for a, b in hit["spans"]] == ["Monday"]
    # the system message (index 0) is never shown, not even as context
    assert [(m["index"], m["role"], m["message_id"]) for m in hit["around"]] == [
        (2, "assistant", "ada-1:2")
    ]
    assert hit["around"][0]["snippet"] == "Booked the izmir flight."


def test_scope_parameters_never_widen_the_scope(chats: None, bob: Client) -> None:
    for hostile in (
        {"scope": "userId=ada"},
        {"userId": "ada"},
        {"scope[userId]": "ada"},
        {"chat_ids": "ada-1"},
        {"chat_id": "ada-1"},
    ):
        status, body = _get(bob, q="izmir", **hostile)
        assert status == 200
        assert [hit["chat_id"] for hit in body["hits"]] == ["bob-1"], hostile


def test_anonymous_users_and_refused_scopes_get_403(
    chats: None, client: Client, django_user_model: Any, settings: Any
) -> None:
    status, body = _get(client, q="izmir")
    assert status == 403 and "hits" not in body
    eve = _client(django_user_model, "eve")  # the scope {"userId": "eve"} has no chats
    assert _get(eve, q="izmir")[1]["count"] == 0
    settings.DEUZ_TRANSCRIPTS = {"SEARCH_SCOPE": lambda request: None}
    assert _get(eve, q="izmir")[0] == 403
    settings.DEUZ_TRANSCRIPTS = {"SEARCH_SCOPE": lambda request: {}}  # would be every chat
    assert _get(eve, q="izmir")[0] == 403


def test_a_misconfigured_scope_is_503_not_a_leak(
    chats: None, ada: Client, settings: Any, caplog: Any
) -> None:
    settings.DEUZ_TRANSCRIPTS = {}
    status, body = _get(ada, q="izmir")
    assert status == 503 and body["error"]["message"] == "transcript search is not configured"
    settings.DEUZ_TRANSCRIPTS = {"SEARCH_SCOPE": lambda request: {"userId": 7}}
    assert _get(ada, q="izmir")[0] == 503
    assert "invalid scope" in caplog.text


def test_only_get_is_allowed(chats: None, ada: Client, django_user_model: Any) -> None:
    strict = Client(enforce_csrf_checks=True)  # as a browser posts: no CSRF token
    strict.force_login(django_user_model.objects.get(username="ada"))
    for method in (ada.post, ada.put, ada.delete, ada.patch, strict.post):
        response = method(URL, {"q": "izmir"})
        assert response.status_code == 405
        assert response["Allow"] == "GET"
        assert json.loads(response.content)["error"]["message"] == "only GET is allowed"
    assert ada.head(URL, {"q": "izmir"}).status_code == 405


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "q"),
        ({"q": "   "}, "q"),
        ({"q": "x" * 1_001}, "q"),
        ({"q": "izmir", "limit": "0"}, "limit"),
        ({"q": "izmir", "limit": "101"}, "limit"),
        ({"q": "izmir", "limit": "-1"}, "limit"),
        ({"q": "izmir", "limit": "1e3"}, "limit"),
        ({"q": "izmir", "limit": "٣"}, "limit"),  # an Arabic-Indic digit
        ({"q": "izmir", "limit": "9" * 40}, "limit"),
        ({"q": "izmir", "around": str(MAX_AROUND + 1)}, "around"),
        ({"q": "izmir", "around": "one"}, "around"),
        ({"q": "izmir", "cursor": "garbage"}, "cursor"),
        ({"q": "izmir", "updated_after": "2026-01-01"}, "updated_after"),  # a date alone
        ({"q": "?!"}, "q"),  # no word to search for
        (
            {
                "q": "izmir",
                "updated_after": "2026-01-12T00:00Z",
                "updated_before": "2026-01-11T00:00Z",
            },
            "updated_before",
        ),  # an inverted window
        ({"q": "izmir", "roles": "system"}, "roles"),  # never indexed
        ({"q": "izmir", "updated_before": "yesterday"}, "updated_before"),
        ({"q": "izmir", "updated_before": "9" * 100}, "updated_before"),
        ({"q": "izmir", "roles": "a\x00b"}, "roles"),
        ({"q": "izmir", "roles": ",".join(f"r{i}" for i in range(21))}, "roles"),
        ({"q": "izmir", "roles": "r" * 256}, "roles"),
    ],
)
def test_bad_parameters_are_400_naming_the_parameter(
    chats: None, ada: Client, params: dict[str, str], field: str
) -> None:
    status, body = _get(ada, **params)
    assert status == 400
    assert body["error"]["field"] == field
    assert body["error"]["message"]


def test_cursor_pages_through_every_hit_once(chats: None, ada: Client, bob: Client) -> None:
    seen: list[str] = []
    status, body = _get(ada, q="izmir", limit=1)
    while True:
        assert status == 200 and body["count"] == 4
        seen.extend(hit["message_id"] for hit in body["hits"])
        if body["next_cursor"] is None:
            break
        status, body = _get(ada, q="izmir", limit=1, cursor=body["next_cursor"])
    assert sorted(seen) == ["ada-1:1", "ada-1:2", "ada-1:3", "ada-2:0"]
    # a cursor is bound to its search: another user's scope cannot use it
    first = _get(ada, q="izmir", limit=1)[1]["next_cursor"]
    status, body = _get(bob, q="izmir", limit=1, cursor=first)
    assert status == 400 and body["error"]["field"] == "cursor"


def test_forged_cursors_are_400(chats: None, ada: Client) -> None:
    """A cursor whose counts the client rewrote (every idf 0.0) and resealed: a 400
    naming the cursor, never a 500."""
    cursor = _get(ada, q="izmir", limit=1)[1]["next_cursor"]
    for forged in forged_cursors(cursor):
        status, body = _get(ada, q="izmir", limit=1, cursor=forged)
        assert status == 400 and body["error"]["field"] == "cursor"


def test_roles_and_dates_filter(chats: None, ada: Client) -> None:
    def ids(**params: Any) -> set[str]:
        status, body = _get(ada, q="izmir", **params)
        assert status == 200, body
        return {hit["message_id"] for hit in body["hits"]}

    assert ids(roles=["user", "tool"]) == {"ada-1:1", "ada-1:3", "ada-2:0"}
    assert ids(roles="assistant,tool") == {"ada-1:2", "ada-1:3"}
    assert ids(roles=" ,") == ids()  # blank: every role
    assert ids(updated_after=(T0 + timedelta(days=1)).isoformat()) == {"ada-2:0"}
    assert ids(updated_before="2026-01-11T00:00:00Z") == {"ada-1:1", "ada-1:2", "ada-1:3"}
    assert ids(updated_before="2026-01-10T13:00:00+01:00") == set()  # 12:00 UTC, strict


def test_a_stopped_search_is_503(chats: None, ada: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    def stopped(*args: Any, **kwargs: Any) -> Any:
        raise SearchTimeout(5)

    monkeypatch.setattr(DjangoTranscriptIndex, "search_page", stopped)
    status, body = _get(ada, q="izmir")
    assert status == 503 and "5 ms" in body["error"]["message"]


_ANY_VALUE = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["0", "1", "100", "-5", "2**31", "", "1.5", "null", "2026-01-01T00:00:00Z"]),
    st.integers(min_value=-(2**64), max_value=2**64).map(str),
)
_ANY_PARAMS = st.dictionaries(
    st.sampled_from(
        ["q", "around", "limit", "cursor", "roles", "updated_after", "updated_before", "scope"]
    ),
    st.lists(_ANY_VALUE, min_size=1, max_size=3),
)


@settings(
    max_examples=EXAMPLES * 2,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(params=_ANY_PARAMS)
def test_any_parameters_are_answered_in_json_never_a_500(
    chats: None, bob: Client, params: dict[str, list[str]]
) -> None:
    status, body = _get(bob, **params)
    assert status in (200, 400), body
    if status == 200:
        assert {hit["chat_id"] for hit in body["hits"]} <= {"bob-1"}
    else:
        assert set(body) == {"error"} and body["error"]["message"]


def test_system_check_requires_a_scope_callable_once_the_urls_are_included(
    settings: Any,
) -> None:
    def ids() -> list[str]:
        # errors only: the LIKE fallback's W001 is no concern of the endpoint's
        return [
            message.id
            for message in run_checks()
            if message.id.startswith("deuz_") and message.is_serious()
        ]

    assert ids() == []  # the test project includes the URLs and sets SEARCH_SCOPE
    settings.DEUZ_TRANSCRIPTS = {}
    assert ids() == ["deuz_transcripts.E011"]
    settings.DEUZ_TRANSCRIPTS = {"SEARCH_SCOPE": "testproject.scopes.no_such_function"}
    assert ids() == ["deuz_transcripts.E010"]
    settings.DEUZ_TRANSCRIPTS = {"SEARCH_SCOPE": 42}
    assert ids() == ["deuz_transcripts.E010"]
    settings.DEUZ_TRANSCRIPTS = {"SEARCH_SCOPE": "testproject.scopes.user_scope"}
    settings.DEUZ_TRANSCRIPTS["API_MAX_LIMIT"] = 0
    assert ids() == ["deuz_transcripts.E012"]
    settings.ROOT_URLCONF = "tests.urls_without_api"
    settings.DEUZ_TRANSCRIPTS = {}
    assert ids() == []  # the endpoint is opt-in: no URLs, no scope needed


def test_api_max_limit_bounds_limit(chats: None, ada: Client, settings: Any) -> None:
    settings.DEUZ_TRANSCRIPTS = {
        "SEARCH_SCOPE": "testproject.scopes.user_scope",
        "API_MAX_LIMIT": 2,
    }
    assert _get(ada, q="izmir", limit=2)[0] == 200
    status, body = _get(ada, q="izmir", limit=3)
    assert status == 400 and body["error"]["message"] == "must be an integer from 1 to 2"


def test_a_count_past_search_total_cap_is_not_exact(
    chats: None, ada: Client, settings: Any
) -> None:
    settings.DEUZ_TRANSCRIPTS = {**settings.DEUZ_TRANSCRIPTS, "SEARCH_TOTAL_CAP": 3}
    status, body = _get(ada, q="izmir", limit=1)
    assert status == 200
    assert (body["count"], body["count_exact"], len(body["hits"])) == (3, False, 1)
    status, body = _get(ada, q="izmir", limit=1, cursor=body["next_cursor"])
    assert (status, body["count"], body["count_exact"], len(body["hits"])) == (200, 3, False, 1)


def test_a_scope_callable_that_raises_is_a_logged_json_503(
    chats: None, ada: Client, settings: Any, caplog: Any
) -> None:
    def broken(request: Any) -> dict[str, str]:
        raise RuntimeError("the tenant service is down")

    settings.DEUZ_TRANSCRIPTS = {"SEARCH_SCOPE": broken}
    status, body = _get(ada, q="izmir")  # _get checks the JSON type and Cache-Control
    assert status == 503 and set(body) == {"error"}
    assert "the tenant service is down" not in json.dumps(body)  # logged, not shown
    (record,) = [r for r in caplog.records if r.name == "deuz_transcripts.api"]
    assert record.levelname == "ERROR" and record.exc_info is not None
    assert "SEARCH_SCOPE" in record.getMessage()


def test_every_hit_is_dated_by_its_chat(chats: None, ada: Client) -> None:
    status, body = _get(ada, q="izmir", limit=10)
    assert status == 200
    dated = {hit["chat_id"]: hit["updated_at"] for hit in body["hits"]}
    assert dated == {"ada-1": "2026-01-10T12:00:00+00:00", "ada-2": "2026-01-12T12:00:00+00:00"}


def test_a_time_without_an_offset_is_read_in_the_current_time_zone(
    chats: None, ada: Client, settings: Any
) -> None:
    settings.TIME_ZONE = "Europe/Istanbul"  # UTC+3: 15:00 there is 12:00 UTC
    status, body = _get(ada, q="izmir", updated_before="2026-01-10T15:00:01")
    assert status == 200 and {hit["chat_id"] for hit in body["hits"]} == {"ada-1"}


def test_words_past_the_32nd_are_named(chats: None, ada: Client) -> None:
    status, body = _get(ada, q=" ".join(f"filler{n}" for n in range(40)) + " izmir")
    assert status == 200 and body["count"] == 0
    assert body["ignored_terms"] == [*(f"filler{n}" for n in range(32, 40)), "izmir"]
    assert _get(ada, q="izmir")[1]["ignored_terms"] == []


def test_a_database_that_cannot_say_who_asks_is_503_not_500(
    chats: None, ada: Client, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """While the database restarts, loading the session (or the user, or whatever the
    scope callable reads) raises the driver's error before any search: the endpoint answers
    503 in JSON, as it does for a search the database stopped (found by the soak)."""

    def down(*args: Any, **kwargs: Any) -> Any:
        raise OperationalError("the database system is shutting down")

    with monkeypatch.context() as patched:
        patched.setattr(SessionStore, "load", down)
        status, body = _get(ada, q="izmir")
    assert (
        status == 503 and body["error"]["message"] == "transcript search is unavailable; try again"
    )
    settings.DEUZ_TRANSCRIPTS = {"SEARCH_SCOPE": down}
    assert _get(ada, q="izmir")[0] == 503
    settings.DEUZ_TRANSCRIPTS = {"SEARCH_SCOPE": "testproject.scopes.user_scope"}
    assert _get(ada, q="izmir")[0] == 200


def test_a_window_filters_hits_and_keeps_their_scores(chats: None, ada: Client) -> None:
    """A window filters hits only (SPEC §8): each hit scores as in the search without it,
    so the window's best hit scores below 1 where a better one is outside it."""
    every = _get(ada, q="izmir flight", limit=20)[1]
    scores = {hit["message_id"]: hit["score"] for hit in every["hits"]}
    status, recent = _get(ada, q="izmir flight", updated_after=(T0 + timedelta(days=1)).isoformat())
    assert status == 200, recent
    assert [hit["message_id"] for hit in recent["hits"]] == ["ada-2:0"]
    assert recent["hits"][0]["score"] == scores["ada-2:0"] < 1.0
    assert recent["count"] == 1
