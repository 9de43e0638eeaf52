"""The agent tool in the shapes the model APIs ask for: OpenAI's ``strict`` schema
variant (every property required, the optional ones nullable, no other property) and
Anthropic's ``tool_result`` block with ``is_error`` on a refused call."""

from __future__ import annotations

import json
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from deuz_transcripts import ChatRecord, InMemoryTranscriptIndex
from deuz_transcripts.agent_tool import (
    SEARCH_TOOL,
    anthropic_tool_result,
    is_error_answer,
    openai_responses_tool,
    openai_tool,
    run_search_tool,
)

ADA = {"userId": "ada"}
NULLS = {"roles": None, "limit": None, "start_date": None, "end_date": None, "cursor": None}


@pytest.fixture
def index() -> InMemoryTranscriptIndex:
    index = InMemoryTranscriptIndex()
    for number in range(3):
        index.index(
            ChatRecord(
                f"ada-{number}",
                ADA,
                [
                    {"role": "user", "content": f"flight to izmir {number}"},
                    {"role": "assistant", "content": "booked izmir"},
                ],
            )
        )
    return index


def _strict_schemas() -> list[dict[str, Any]]:
    return [
        openai_tool(strict=True)["function"]["parameters"],
        openai_responses_tool(strict=True)["parameters"],
    ]


def test_strict_variants_say_strict_and_the_default_ones_do_not():
    assert openai_tool(strict=True)["function"]["strict"] is True
    assert openai_responses_tool(strict=True)["strict"] is True
    assert "strict" not in openai_tool()["function"]
    assert "strict" not in openai_responses_tool()
    assert openai_tool()["function"]["parameters"] == SEARCH_TOOL["parameters"]
    assert openai_responses_tool()["parameters"] == SEARCH_TOOL["parameters"]


@pytest.mark.parametrize("schema", _strict_schemas())
def test_strict_schema_requires_every_property_and_allows_no_other(schema):
    Draft202012Validator.check_schema(schema)
    assert schema["additionalProperties"] is False
    assert sorted(schema["required"]) == sorted(schema["properties"])
    assert set(schema["properties"]) == set(SEARCH_TOOL["parameters"]["properties"])
    for name, prop in schema["properties"].items():
        optional = name not in SEARCH_TOOL["parameters"]["required"]
        assert ("null" in prop["type"]) is optional, name


@pytest.mark.parametrize("schema", _strict_schemas())
def test_strict_schema_takes_what_a_strict_model_sends_and_refuses_the_rest(schema):
    validator = Draft202012Validator(schema)
    assert validator.is_valid({"query": "izmir", **NULLS})
    assert validator.is_valid({"query": "izmir", **NULLS, "roles": ["user"], "limit": 3})
    assert not validator.is_valid({"query": "izmir"})  # strict: every key present
    assert not validator.is_valid({"query": None, **NULLS})  # the query is not optional
    assert not validator.is_valid({"query": "izmir", **NULLS, "scope": {"userId": "bob"}})


def test_a_strict_call_with_nulls_answers_as_the_call_without_them(index):
    plain = run_search_tool(index, ADA, {"query": "izmir"})
    strict = run_search_tool(index, ADA, json.dumps({"query": "izmir", **NULLS}))
    assert strict == plain
    assert json.loads(strict)["count"] == 6


def test_a_strict_call_with_values_uses_them(index):
    answer = json.loads(
        run_search_tool(index, ADA, {"query": "izmir", **NULLS, "roles": ["user"], "limit": 2})
    )
    assert [hit["role"] for hit in answer["hits"]] == ["user", "user"]
    assert answer["count"] == 3
    assert answer["next_cursor"]  # the third user message is on the next page


def test_a_null_query_is_still_refused(index):
    answer = run_search_tool(index, ADA, {"query": None, **NULLS})
    assert is_error_answer(answer)
    assert json.loads(answer)["error"].startswith("query")


def test_anthropic_tool_result_of_an_answer(index):
    answer = run_search_tool(index, ADA, {"query": "izmir", "limit": 1})
    block = anthropic_tool_result("toolu_01", answer)
    assert block == {
        "type": "tool_result",
        "tool_use_id": "toolu_01",
        "content": answer,
        "is_error": False,
    }


@pytest.mark.parametrize(
    "arguments",
    ['{"query": "izmir", "scope": {"userId": "bob"}}', "not json", {"query": "izmir", "limit": 0}],
)
def test_anthropic_tool_result_of_a_refused_call_is_an_error(index, arguments):
    answer = run_search_tool(index, ADA, arguments)
    block = anthropic_tool_result("toolu_02", answer)
    assert block["is_error"] is True
    assert json.loads(block["content"])["error"]


def test_a_truncated_answer_is_not_an_error(index):
    answer = run_search_tool(index, ADA, {"query": "izmir"}, budget_chars=200)
    assert "error" not in json.loads(answer)
    assert is_error_answer(answer) is False
    assert is_error_answer('{"error":"invalid arguments"}') is True
