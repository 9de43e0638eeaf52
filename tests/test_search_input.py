"""The one rule for typed search input (``search_input``), and every surface applying it:
the same input is refused, for the same reason, by the JSON endpoint, the agent tool,
``search_transcripts`` and the admin search form."""

from __future__ import annotations

import io
import json
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from hypothesis import given
from hypothesis import strategies as st

from deuz_transcripts.agent_tool import run_search_tool
from deuz_transcripts.errors import InvalidRecord
from deuz_transcripts.search_input import (
    MAX_ROLES,
    check_query,
    check_roles,
    check_window,
    parse_moment,
    split_roles,
)
from deuz_transcripts.sql import DjangoTranscriptIndex
from deuz_transcripts.text import ignored_query_terms, query_terms, terms
from tests.admin_support import izmir_chat, search, write

ISTANBUL = ZoneInfo("Europe/Istanbul")

# the rule, pure


def test_a_date_alone_is_refused_and_a_time_without_offset_is_read_in_the_zone() -> None:
    with pytest.raises(InvalidRecord, match="needs a time as well as a date"):
        parse_moment("2026-01-31", "after", zone=UTC)
    local = parse_moment("2026-01-31T09:00", "after", zone=ISTANBUL)
    assert local == datetime(2026, 1, 31, 6, 0, tzinfo=UTC)
    assert parse_moment("2026-01-31 09:00:00+01:00", "after", zone=ISTANBUL) == datetime(
        2026, 1, 31, 8, 0, tzinfo=UTC
    )
    assert parse_moment("", "after", zone=UTC) is None and parse_moment(None, "a", zone=UTC) is None


@pytest.mark.parametrize(
    ("text", "zone", "problem"),
    [
        ("2026-03-29T02:30", "Europe/Berlin", "does not exist or is ambiguous"),  # skipped
        ("2026-10-25T02:30", "Europe/Berlin", "does not exist or is ambiguous"),  # repeated
        ("yesterday", "UTC", "must be an ISO 8601 date and time"),
        ("9" * 65, "UTC", "must be an ISO 8601 date and time"),
        ("2026-01-31T09:00+25:00", "UTC", "must be an ISO 8601 date and time"),
        ("0001-01-01T00:00", "Europe/Istanbul", "is out of range"),  # before UTC's first day
        ("9999-12-31T23:59:59-12:00", "UTC", "is out of range"),  # past UTC's last
    ],
)
def test_moments_that_cannot_be_compared_are_refused(text: str, zone: str, problem: str) -> None:
    with pytest.raises(InvalidRecord, match=problem):
        parse_moment(text, "after", zone=ZoneInfo(zone))


@given(st.datetimes(timezones=st.just(timezone(timedelta(hours=-5)))))
def test_any_date_and_time_with_an_offset_reads_back_as_itself(moment: datetime) -> None:
    try:
        expected = moment.astimezone(UTC)
    except OverflowError:
        return
    assert parse_moment(moment.isoformat(), "after", zone=ISTANBUL) == expected


@given(st.dates())
def test_any_date_alone_is_refused(day: date) -> None:
    with pytest.raises(InvalidRecord, match="needs a time"):
        parse_moment(day.isoformat(), "after", zone=UTC)


def test_roles_are_any_stored_name_but_never_a_system_one() -> None:
    assert check_roles(None) is None
    assert check_roles([]) == []  # finds nothing, as search(roles=[]) does
    assert check_roles(["tool", "function", "tool", "my-app:agent"]) == [
        "tool",
        "function",
        "my-app:agent",
    ]
    assert check_roles([f"r{n}" for n in range(MAX_ROLES)] * 2) is not None  # distinct count
    for bad, problem in [
        ("user", "must be a list"),
        (["system"], "never indexed"),
        (["developer"], "never indexed"),
        ([" "], "non-empty"),
        ([3], "non-empty string"),
        (["a\u200bb"], "invisible"),
        (["r" * 256], "at most 255"),
        ([f"r{n}" for n in range(MAX_ROLES + 1)], f"more than {MAX_ROLES}"),
    ]:
        with pytest.raises(InvalidRecord, match=problem):
            check_roles(bad)
    assert split_roles(["user, tool", " ", "function,"]) == ["user", "tool", "function"]


def test_a_query_needs_a_word_and_a_window_an_end_after_its_start() -> None:
    assert check_query("İzmir?") == "İzmir?"
    for query, problem in [("", "is required"), ("?!", "no words"), ("x" * 1_001, "longer")]:
        with pytest.raises(InvalidRecord, match=problem):
            check_query(query)
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    check_window(moment, moment + timedelta(microseconds=1), after_field="a", before_field="b")
    with pytest.raises(InvalidRecord, match="must be later than a"):
        check_window(moment, moment, after_field="a", before_field="b")


@given(st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), max_size=6).map(" ".join), st.data())
def test_the_searched_and_the_ignored_terms_are_the_querys_terms(
    short: str, data: st.DataObject
) -> None:
    count = data.draw(st.integers(0, 60))
    query = short + " " + " ".join(f"w{n}" for n in data.draw(st.permutations(range(count))))
    searched, ignored = query_terms(query), ignored_query_terms(query)
    assert searched + ignored == terms(query)
    assert len(searched) == min(32, len(terms(query)))


# every surface applies it

_BAD_INPUT = [
    # (endpoint parameters, tool arguments, command arguments, admin parameters, problem)
    (
        {"updated_before": "2026-01-02"},
        {"end_date": "2026-01-02"},
        ["--updated-before", "2026-01-02"],
        {"updated_before": "2026-01-02"},
        "needs a time as well as a date",
    ),
    (
        {"updated_after": "2026-01-02T00:00Z", "updated_before": "2026-01-01T00:00Z"},
        {"start_date": "2026-01-02T00:00Z", "end_date": "2026-01-01T00:00Z"},
        ["--updated-after", "2026-01-02T00:00Z", "--updated-before", "2026-01-01T00:00Z"],
        {"updated_after": "2026-01-02T00:00Z", "updated_before": "2026-01-01T00:00Z"},
        "later than",
    ),
    (
        {"roles": "system"},
        {"roles": ["system"]},
        ["--role", "system"],
        {"other_roles": "system"},
        "never indexed",
    ),
    (
        {"roles": ",".join(f"r{n}" for n in range(MAX_ROLES + 1))},
        {"roles": [f"r{n}" for n in range(MAX_ROLES + 1)]},
        [arg for n in range(MAX_ROLES + 1) for arg in ("--role", f"r{n}")],
        {"other_roles": ",".join(f"r{n}" for n in range(MAX_ROLES + 1))},
        f"more than {MAX_ROLES} roles",
    ),
    (
        {"roles": "tool\u202eloot"},
        {"roles": ["tool\u202eloot"]},
        ["--role", "tool\u202eloot"],
        {"other_roles": "tool\u202eloot"},
        "control or invisible characters",
    ),
    ({"q": "?!"}, {"query": "?!"}, ["?!"], {"q": "?!"}, "no words to search for"),
]


@pytest.mark.django_db
@pytest.mark.usefixtures("fast_passwords")
@pytest.mark.parametrize(
    ("endpoint", "tool", "command", "admin", "problem"),
    _BAD_INPUT,
    ids=["date-alone", "inverted-window", "system-role", "too-many-roles", "bidi-role", "no-word"],
)
def test_every_surface_refuses_the_same_input_for_the_same_reason(
    endpoint: dict[str, str],
    tool: dict[str, Any],
    command: list[str],
    admin: dict[str, str],
    problem: str,
    django_user_model: Any,
    support_client: Client,
) -> None:
    write(izmir_chat())  # a search that would find something
    user = Client()
    user.force_login(django_user_model.objects.create_user("ada", password="pw"))
    response = user.get(f"/transcripts/search/?{urlencode({'q': 'izmir', **endpoint})}")
    assert (
        response.status_code == 400 and problem in json.loads(response.content)["error"]["message"]
    )

    answer = run_search_tool(DjangoTranscriptIndex(), {"userId": "ada"}, {"query": "izmir", **tool})
    assert problem in json.loads(answer)["error"]

    arguments = command if command == ["?!"] else ["izmir", *command]
    with pytest.raises(CommandError, match=problem):
        call_command(
            "search_transcripts", "--scope", "userId=ada", *arguments, stdout=io.StringIO()
        )

    page = search(support_client, **{"q": "izmir", "scope": "userId=ada", **admin})
    said = [str(error) for errors in page.context["form"].errors.values() for error in errors]
    said.append(page.context.get("notice", ""))
    assert page.context["rows"] == []
    assert any(problem.lower() in text.lower() for text in said), said
