"""The ``search_transcripts`` agent tool: schemas in the OpenAI and Anthropic shapes, and
``run_search_tool`` answering any call with valid JSON within its budget, in the caller's
scope only."""

from __future__ import annotations

import asyncio
import json
import os
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deuz_transcripts import ChatRecord, InMemoryTranscriptIndex, InvalidRecord
from deuz_transcripts.agent_tool import (
    MIN_BUDGET_CHARS,
    SEARCH_TOOL,
    anthropic_tool,
    arun_search_tool,
    openai_responses_tool,
    openai_tool,
    run_search_tool,
)
from deuz_transcripts.errors import SearchTimeout
from deuz_transcripts.search_input import MAX_ROLES
from tests.answer_shape import ANSWER_KEYS, HIT_KEYS
from tests.cursor_forgery import forged_cursors

EXAMPLES = int(os.environ.get("DEUZ_FUZZ_EXAMPLES", "40"))
T0 = datetime(2026, 1, 10, 12, 0, tzinfo=UTC)
ADA = {"userId": "ada"}


def _records() -> list[ChatRecord]:
    records = [
        ChatRecord(
            chat_id=f"ada-{number}",
            scope=ADA,
            messages=[
                {"role": "system", "content": "izmir system prompt"},
                {"role": "user", "content": f"flight to izmir number {number} " + "x " * 300},
                {"role": "assistant", "content": "booked izmir"},
            ],
            updated_at=T0 + timedelta(days=number),
        )
        for number in range(6)
    ]
    records.append(
        ChatRecord(
            chat_id="bob-1",
            scope={"userId": "bob"},
            messages=[{"role": "user", "content": "izmir secret of bob"}],
            updated_at=T0,
        )
    )
    return records


@pytest.fixture
def index() -> InMemoryTranscriptIndex:
    index = InMemoryTranscriptIndex()
    for record in _records():
        index.index(record)
    return index


def _run(index: Any, arguments: Any, budget: int = 4_000, scope: Any = ADA) -> dict[str, Any]:
    text = run_search_tool(index, scope, arguments, budget_chars=budget)
    assert len(text) <= budget
    answer: dict[str, Any] = json.loads(text)
    return answer


def test_the_schemas_take_each_api_shape() -> None:
    parameters = SEARCH_TOOL["parameters"]
    assert parameters["required"] == ["query"] and parameters["additionalProperties"] is False
    chat = openai_tool()
    assert chat["type"] == "function" and chat["function"]["name"] == "search_transcripts"
    assert chat["function"]["parameters"] == parameters
    responses = openai_responses_tool()
    assert responses["name"] == "search_transcripts" and responses["parameters"] == parameters
    claude = anthropic_tool()
    assert set(claude) == {"name", "description", "input_schema"}
    assert claude["input_schema"] == parameters
    claude["input_schema"]["properties"].clear()  # each call returns its own copy
    assert anthropic_tool()["input_schema"] == parameters
    json.dumps([chat, responses, claude])  # plain JSON, as the APIs take it


def test_a_call_returns_compact_hits_of_the_bound_scope_only(index: Any) -> None:
    answer = _run(index, '{"query": "izmir", "limit": 3}')
    assert answer["count"] == 12 and answer["count_exact"] is True
    assert [hit["chat_id"] for hit in answer["hits"]] == ["ada-5", "ada-5", "ada-4"]
    assert answer["hits"][0]["score"] == 1.0
    assert answer["next_cursor"] and "truncated" not in answer
    bob = _run(index, {"query": "izmir secret"}, scope={"userId": "bob"})
    assert [hit["chat_id"] for hit in bob["hits"]] == ["bob-1"]
    # the model cannot choose the scope: an argument naming one is refused
    refused = _run(index, {"query": "izmir", "scope": {"userId": "bob"}})
    assert refused == {"error": "unknown arguments: scope"}
    assert "secret" not in json.dumps(_run(index, {"query": "secret"}))


def test_next_cursor_continues_and_filters_apply(index: Any) -> None:
    first = _run(index, {"query": "izmir", "limit": 10})
    second = _run(index, {"query": "izmir", "limit": 10, "cursor": first["next_cursor"]})
    ids = [hit["message_id"] for hit in first["hits"] + second["hits"]]
    assert len(ids) == len(set(ids)) == 12 and second["next_cursor"] is None
    users = _run(index, {"query": "izmir", "roles": ["assistant"], "limit": 20})
    assert {hit["role"] for hit in users["hits"]} == {"assistant"} and users["count"] == 6
    recent = _run(index, {"query": "izmir", "start_date": "2026-01-14T00:00:00Z", "limit": 20})
    assert {hit["chat_id"] for hit in recent["hits"]} == {"ada-4", "ada-5"}
    old = _run(index, {"query": "izmir", "end_date": "2026-01-11T00:00:00+00:00", "limit": 20})
    assert {hit["chat_id"] for hit in old["hits"]} == {"ada-0"}


def test_a_forged_cursor_is_a_tool_error(index: Any) -> None:
    """A prompt-injected cursor whose counts were rewritten (every idf 0.0) is answered
    with an error the model can read, never an exception ending the agent loop."""
    cursor = _run(index, {"query": "izmir", "limit": 1})["next_cursor"]
    for forged in forged_cursors(cursor):
        answer = _run(index, {"query": "izmir", "limit": 1, "cursor": forged})
        assert answer == {"error": "cursor: is not a cursor of this index"}


def test_over_budget_hits_are_dropped_and_the_cursor_stays_exact(index: Any) -> None:
    full = _run(index, {"query": "flight", "limit": 6}, budget=100_000)
    assert len(full["hits"]) == 6
    small = _run(index, {"query": "flight", "limit": 6}, budget=900)
    kept = len(small["hits"])
    assert 0 < kept < 6 and "truncated" not in small  # fewer hits, and an exact cursor
    ids = [hit["message_id"] for hit in full["hits"]]
    assert [hit["message_id"] for hit in small["hits"]] == ids[:kept]
    # the cursor continues right after the last hit shown: nothing is skipped
    rest = _run(index, {"query": "flight", "limit": 6, "cursor": small["next_cursor"]}, 100_000)
    assert [hit["message_id"] for hit in small["hits"] + rest["hits"]] == ids
    tiny = _run(index, {"query": "flight", "limit": 6}, budget=300)
    assert len(tiny["hits"]) == 1 and tiny["truncated"] is True
    assert len(tiny["hits"][0]["snippet"]) < len(full["hits"][0]["snippet"])
    least = _run(index, {"query": "flight", "limit": 6}, budget=MIN_BUDGET_CHARS)
    assert (least["count"], least["hits"], least["truncated"]) == (6, [], True)


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ("not json", "arguments must be a JSON object"),
        ("[1, 2]", "arguments must be a JSON object"),
        ("[" * 100_000, "arguments must be a JSON object"),
        ({}, "query: must be a string, not NoneType"),
        ({"query": 3}, "query: must be a string, not int"),
        ({"query": " "}, "query: is required"),
        ({"query": "!?"}, "query: has no words to search for (letters or digits)"),
        ({"query": "izmir", "limit": 0}, "limit must be an integer from 1 to 20"),
        ({"query": "izmir", "limit": True}, "limit must be an integer from 1 to 20"),
        ({"query": "izmir", "limit": "5"}, "limit must be an integer from 1 to 20"),
        (
            {"query": "izmir", "roles": "user"},
            'roles must be a list of role names, e.g. ["user", "assistant"]',
        ),
        (
            {"query": "izmir", "roles": ["a\x00"]},
            "roles: a role cannot hold control or invisible characters",
        ),
        ({"query": "izmir", "cursor": "nope"}, "cursor: is not a cursor of this index"),
        (
            {"query": "izmir", "start_date": "2026-01-01"},
            "start_date: needs a time as well as a date, e.g. 2026-01-01T00:00:00+00:00",
        ),
        (
            {"query": "izmir", "start_date": "someday"},
            "start_date: must be an ISO 8601 date and time, e.g. 2026-01-31T09:00:00+00:00",
        ),
    ],
)
def test_bad_calls_are_answered_with_a_readable_error(
    index: Any, arguments: Any, error: str
) -> None:
    assert _run(index, arguments) == {"error": error}


def test_a_stopped_search_is_an_error_the_model_can_act_on(
    index: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def stopped(*args: Any, **kwargs: Any) -> Any:
        raise SearchTimeout(5)

    monkeypatch.setattr(index, "search_page", stopped)
    assert "took too long" in _run(index, {"query": "izmir"})["error"]


def test_the_caller_must_bind_a_scope_and_a_usable_budget(index: Any) -> None:
    with pytest.raises(InvalidRecord):
        run_search_tool(index, {}, {"query": "izmir"})  # would search every chat
    with pytest.raises(InvalidRecord):
        run_search_tool(index, "userId=ada", {"query": "izmir"})  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        run_search_tool(index, ADA, {"query": "izmir"}, budget_chars=MIN_BUDGET_CHARS - 1)


def test_the_async_twin_answers_the_same(index: Any) -> None:
    arguments = {"query": "izmir", "limit": 4}
    assert asyncio.run(arun_search_tool(index, ADA, arguments)) == run_search_tool(
        index, ADA, arguments
    )


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=8,
)
_CALLS = st.one_of(
    st.text(max_size=40),
    st.fixed_dictionaries(
        {"query": st.one_of(st.text(max_size=30), st.sampled_from(["izmir", "flight x"]))},
        optional={
            "limit": st.one_of(st.integers(-3, 30), _JSON),
            "roles": st.one_of(st.lists(st.text(max_size=5), max_size=3), _JSON),
            "start_date": st.one_of(st.text(max_size=30), _JSON),
            "cursor": st.one_of(st.text(max_size=30), _JSON),
        },
    ),
    st.dictionaries(st.text(max_size=8), _JSON, max_size=3),
)


@settings(max_examples=EXAMPLES * 3, deadline=None)
@given(_CALLS, st.integers(MIN_BUDGET_CHARS, 3_000), st.booleans())
def test_any_call_is_valid_json_within_the_budget(
    arguments: Any, budget: int, as_text: bool
) -> None:
    index = InMemoryTranscriptIndex()
    index.index(
        ChatRecord(
            chat_id="c" * 255,
            scope=ADA,
            messages=[{"role": "user", "content": "izmir flight " * 100}] * 4,
            updated_at=T0,
        )
    )
    call = json.dumps(arguments) if as_text and not isinstance(arguments, str) else arguments
    answer = _run(index, call, budget)
    assert set(answer) <= {*ANSWER_KEYS, "truncated"} or set(answer) == {"error"}


@pytest.mark.django_db
def test_the_sql_index_answers_as_memory_does(index: Any) -> None:
    from deuz_transcripts.sql import DjangoTranscriptIndex

    sql = DjangoTranscriptIndex()
    for record in _records():
        sql.index(record)
    for arguments in (
        {"query": "izmir", "limit": 7},
        {"query": "flight booked", "roles": ["user"], "end_date": "2026-01-13T00:00:00Z"},
    ):
        for budget in (MIN_BUDGET_CHARS, 900, 4_000):
            assert run_search_tool(sql, ADA, arguments, budget_chars=budget) == run_search_tool(
                index, ADA, arguments, budget_chars=budget
            )


def test_a_count_past_search_total_cap_says_it_is_not_exact(index: Any, settings: Any) -> None:
    settings.DEUZ_TRANSCRIPTS = {**settings.DEUZ_TRANSCRIPTS, "SEARCH_TOTAL_CAP": 5}
    answer = _run(index, '{"query": "izmir", "limit": 3}')
    assert (answer["count"], answer["count_exact"], len(answer["hits"])) == (5, False, 3)


def test_the_answer_has_the_endpoints_shape_with_every_field(index: Any) -> None:
    answer = _run(index, {"query": "booked", "limit": 1})
    assert set(answer) == ANSWER_KEYS and answer["ignored_terms"] == []
    (hit,) = answer["hits"]
    assert set(hit) == HIT_KEYS
    assert (hit["chat_id"], hit["index"], hit["role"], hit["around"]) == (
        "ada-5",
        2,
        "assistant",
        [],
    )
    assert hit["updated_at"] == "2026-01-15T12:00:00+00:00"  # the chat's, in UTC
    start, end = hit["spans"][0]
    assert hit["snippet"][start:end] == "booked"


def test_an_empty_role_list_finds_nothing_as_search_does(index: Any) -> None:
    assert index.search(ADA, "izmir", roles=[]) == []
    answer = _run(index, {"query": "izmir", "roles": []})
    assert (answer["count"], answer["hits"], answer["next_cursor"]) == (0, [], None)
    described = SEARCH_TOOL["parameters"]["properties"]["roles"]
    assert "empty list matches no message" in described["description"]


def test_the_schema_states_the_most_roles_the_tool_takes(index: Any) -> None:
    assert SEARCH_TOOL["parameters"]["properties"]["roles"]["maxItems"] == MAX_ROLES
    most = [f"r{n}" for n in range(MAX_ROLES)]
    assert _run(index, {"query": "izmir", "roles": most})["count"] == 0
    refused = _run(index, {"query": "izmir", "roles": [*most, "user"]})
    assert refused == {"error": f"roles: names more than {MAX_ROLES} roles"}


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        (
            {"start_date": "2026-01-14T00:00:00Z", "end_date": "2026-01-12T00:00:00Z"},
            "end_date: must be later than start_date",
        ),
        (
            {"start_date": "2026-01-14T00:00:00Z", "end_date": "2026-01-14T00:00:00Z"},
            "end_date: must be later than start_date",
        ),
        (
            {"roles": ["system"]},
            "roles: system messages are never indexed: no search can find them",
        ),
        ({"roles": [""]}, "roles: each role must be a non-empty string"),
    ],
)
def test_calls_no_message_can_answer_are_refused(
    index: Any, arguments: dict[str, Any], error: str
) -> None:
    assert _run(index, {"query": "izmir", **arguments}) == {"error": error}


def test_a_time_without_an_offset_is_read_in_the_current_time_zone(
    index: Any, settings: Any
) -> None:
    settings.TIME_ZONE = "Europe/Istanbul"  # UTC+3
    local = _run(index, {"query": "izmir", "start_date": "2026-01-14T03:00", "limit": 20})
    utc = _run(index, {"query": "izmir", "start_date": "2026-01-14T00:00Z", "limit": 20})
    assert local["hits"] == utc["hits"] and {hit["chat_id"] for hit in utc["hits"]} == {
        "ada-4",
        "ada-5",
    }


def test_words_past_the_32nd_are_named(index: Any) -> None:
    query = " ".join(f"filler{n}" for n in range(40)) + " izmir"
    answer = _run(index, {"query": query})
    assert answer["count"] == 0
    assert answer["ignored_terms"] == [*(f"filler{n}" for n in range(32, 40)), "izmir"]


def test_ignored_terms_too_long_for_the_budget_are_cut_and_said_so(index: Any) -> None:
    query = " ".join(f"w{n:03}" for n in range(200))  # 168 ignored terms
    answer = _run(index, {"query": query}, budget=MIN_BUDGET_CHARS)
    assert answer["truncated"] is True and answer["next_cursor"] is None
    assert 0 < len(answer["ignored_terms"]) < 168
    assert answer["ignored_terms"][0] == "w032"


def test_a_date_range_filters_hits_and_keeps_their_scores(index: Any) -> None:
    """start_date and end_date filter hits only: each scores as without them (its best
    hit, ada-0's, is outside the range), in the same order."""
    every = _run(index, {"query": "flight 0", "limit": 20})
    recent = _run(index, {"query": "flight 0", "start_date": "2026-01-11T00:00:00Z", "limit": 20})
    assert every["hits"][0]["chat_id"] == "ada-0" and every["hits"][0]["score"] == 1.0
    kept = [(hit["message_id"], hit["score"]) for hit in every["hits"][1:]]
    assert [(hit["message_id"], hit["score"]) for hit in recent["hits"]] == kept
    assert recent["count"] == len(kept) == 5 and all(score < 1.0 for _, score in kept)
