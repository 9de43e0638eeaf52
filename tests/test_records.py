"""Records, their validation at the boundary, ids as index_chat fills them, and errors."""

from __future__ import annotations

import dataclasses
import time
from datetime import UTC, datetime, timedelta, timezone

import pytest

from deuz_transcripts import (
    ChatDeleted,
    ChatRecord,
    InvalidRecord,
    MemorySourceRef,
    RevisionConflict,
    TranscriptError,
    TranscriptHit,
    TranscriptMessage,
)
from deuz_transcripts.prepared import PreparedChat, message_digest
from deuz_transcripts.records import fill_message_ids, scope_matches, validate_scope
from deuz_transcripts.search_request import SearchRequest
from tests.factories import BASE_TIME, ChatRecordFactory, MessageFactory

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)


def record(**kwargs) -> ChatRecord:
    fields = {"chat_id": "c1", "scope": {"userId": "ada"}, "messages": [], "updated_at": T0}
    fields.update(kwargs)
    return ChatRecord(**fields)


# ---------------------------------------------------------------------- factories


def test_factory_builds_valid_records_newer_with_the_sequence():
    first, second = ChatRecordFactory(), ChatRecordFactory()
    assert isinstance(first, ChatRecord)
    assert first.chat_id != second.chat_id
    assert first.scope == {"userId": "ada"}
    assert first.updated_at.tzinfo is not None
    assert first.updated_at >= BASE_TIME
    assert second.updated_at > first.updated_at
    assert [m["role"] for m in first.messages] == ["user", "assistant"]


def test_factory_texts_and_traits():
    built = ChatRecordFactory(texts=["a", "b", "c"], user_id="bob")
    assert built.scope == {"userId": "bob"}
    assert [m["role"] for m in built.messages] == ["user", "assistant", "user"]
    assert MessageFactory(text="x", system=True) == {"role": "system", "content": "x"}
    assert MessageFactory(text="x", parts=True)["content"] == [{"type": "text", "text": "x"}]


# ---------------------------------------------------------------------- ChatRecord


def test_valid_record_keeps_its_fields():
    built = record(messages=[{"role": "user", "content": "hi"}], message_ids=["m-1"])
    assert built.chat_id == "c1"
    assert built.scope == {"userId": "ada"}
    assert built.messages == [{"role": "user", "content": "hi"}]
    assert built.message_ids == ["m-1"]
    assert built.updated_at == T0


def test_scope_is_copied():
    scope = {"userId": "ada"}
    built = record(scope=scope)
    scope["userId"] = "bob"
    assert built.scope == {"userId": "ada"}


def test_messages_and_ids_become_lists():
    built = record(messages=({"role": "user"},), message_ids=("m",))
    assert built.messages == [{"role": "user"}]
    assert built.message_ids == ["m"]


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [
        ("chat_id", {"chat_id": ""}),
        ("chat_id", {"chat_id": 42}),
        ("chat_id", {"chat_id": None}),
        ("chat_id", {"chat_id": b"c1"}),
        ("chat_id", {"chat_id": "x" * 256}),
        ("chat_id", {"chat_id": "a\x00b"}),
        ("chat_id", {"chat_id": "a\ud800"}),
        ("scope", {"scope": None}),
        ("scope", {"scope": [("userId", "ada")]}),
        ("scope['userId']", {"scope": {"userId": 1}}),
        ("scope['userId']", {"scope": {"userId": None}}),
        ("scope key", {"scope": {1: "ada"}}),
        ("scope key", {"scope": {"": "ada"}}),
        ("messages", {"messages": "hello"}),
        ("messages", {"messages": b"hello"}),
        ("messages", {"messages": None}),
        ("messages[0]", {"messages": ["hello"]}),
        ("messages[1].role", {"messages": [{"role": "user"}, {"content": "x"}]}),
        ("messages[0].role", {"messages": [{"role": None}]}),
        ("messages[0].role", {"messages": [{"role": ""}]}),
        ("message_ids", {"messages": [{"role": "user"}], "message_ids": []}),
        ("message_ids", {"messages": [{"role": "user"}], "message_ids": ["a", "b"]}),
        ("message_ids", {"messages": [{"role": "user"}], "message_ids": "a"}),
        ("message_ids[0]", {"messages": [{"role": "user"}], "message_ids": [5]}),
        ("updated_at", {"updated_at": datetime(2024, 1, 1)}),
        ("updated_at", {"updated_at": "2024-01-01"}),
        ("updated_at", {"updated_at": True}),
        ("updated_at", {"updated_at": float("nan")}),
        ("updated_at", {"updated_at": float("inf")}),
        ("updated_at", {"updated_at": 10**20}),
        ("updated_at", {"updated_at": 0}),
        ("updated_at", {"updated_at": -1}),
        ("updated_at", {"updated_at": 1_714_554_000}),  # int(time.time()): seconds
        ("updated_at", {"updated_at": 1_714_554_000.25}),  # time.time(): seconds
        ("updated_at", {"updated_at": 946_684_799_999}),  # 1999-12-31T23:59:59.999Z
    ],
)
def test_invalid_record_names_the_field(field, kwargs):
    with pytest.raises(InvalidRecord) as excinfo:
        record(**kwargs)
    assert excinfo.value.field == field
    assert str(excinfo.value).startswith(f"{field}: ")


def test_empty_scope_value_is_allowed():
    assert record(scope={"agentId": ""}).scope == {"agentId": ""}


def test_none_and_empty_message_ids_are_allowed():
    built = record(messages=[{"role": "user"}, {"role": "user"}], message_ids=[None, ""])
    assert built.message_ids == [None, ""]


def test_updated_at_none_means_now():
    before = datetime.now(UTC)
    built = record(updated_at=None)
    assert before <= built.updated_at <= datetime.now(UTC)


def test_updated_at_number_is_epoch_milliseconds():
    assert record(updated_at=946_684_800_000).updated_at == datetime(2000, 1, 1, tzinfo=UTC)
    assert record(updated_at=1_714_554_000_123).updated_at == datetime(
        2024, 5, 1, 9, 0, 0, 123_000, tzinfo=UTC
    )
    assert record(updated_at=1_714_554_000_000.5).updated_at == datetime(
        2024, 5, 1, 9, 0, 0, 500, tzinfo=UTC
    )


def test_seconds_given_as_updated_at_are_refused_with_a_message_that_says_milliseconds():
    """``time.time()`` read as milliseconds is January 1970: refused, never stored."""
    now = time.time()
    with pytest.raises(InvalidRecord, match="milliseconds") as excinfo:
        record(updated_at=now)
    assert "time.time() * 1000" in str(excinfo.value)
    assert abs(record(updated_at=now * 1000).updated_at.timestamp() - now) < 0.001
    with pytest.raises(InvalidRecord, match="milliseconds"):
        ChatRecord.from_json({"chatId": "c", "updatedAt": int(now)})
    # dates before 2000 are still possible, as a datetime
    assert record(updated_at=datetime(1970, 1, 1, tzinfo=UTC)).updated_at.year == 1970


def test_updated_at_is_normalised_to_utc():
    plus_two = timezone(timedelta(hours=2))
    built = record(updated_at=datetime(2024, 5, 1, 11, 0, tzinfo=plus_two))
    assert built.updated_at == T0
    assert built.updated_at.utcoffset() == timedelta(0)


def test_from_json_reads_camel_case():
    built = ChatRecord.from_json(
        {
            "chatId": "chat-1",
            "scope": {"userId": "ada"},
            "messages": [{"role": "user", "content": "hi"}],
            "messageIds": ["m-1"],
            "updatedAt": 1_714_554_000_000,
        }
    )
    assert (built.chat_id, built.message_ids, built.updated_at) == ("chat-1", ["m-1"], T0)


def test_from_json_reads_snake_case():
    built = ChatRecord.from_json(
        {"chat_id": "chat-1", "scope": {}, "messages": [], "message_ids": [], "updated_at": T0}
    )
    assert (built.chat_id, built.message_ids, built.updated_at) == ("chat-1", [], T0)


def test_from_json_defaults():
    built = ChatRecord.from_json({"chatId": "chat-1"})
    assert (built.scope, built.messages, built.message_ids) == ({}, [], None)


def test_from_json_without_chat_id():
    with pytest.raises(InvalidRecord) as excinfo:
        ChatRecord.from_json({"scope": {}})
    assert excinfo.value.field == "chat_id"
    with pytest.raises(InvalidRecord):
        ChatRecord.from_json(["chatId", "x"])


def test_to_json_round_trips():
    built = ChatRecordFactory(message_ids=["a", "b"])
    data = built.to_json()
    assert set(data) == {"chatId", "scope", "messages", "messageIds", "updatedAt"}
    assert isinstance(data["updatedAt"], int)
    assert ChatRecord.from_json(data) == built


@pytest.mark.parametrize(
    "millis",
    [946_684_800_000, 946_684_800_999, 1_714_554_000_123, 1_700_000_000_001, 253_402_300_799_999],
)
def test_epoch_milliseconds_round_trip_exactly(millis):
    assert (
        ChatRecord.from_json({"chatId": "c", "updatedAt": millis}).to_json()["updatedAt"] == millis
    )


def test_to_json_truncates_microseconds_to_milliseconds():
    built = record(updated_at=T0 + timedelta(microseconds=1_999))
    assert built.to_json()["updatedAt"] == 1_714_554_000_001


# ---------------------------------------------------------------------- fill_message_ids


def test_fill_missing_ids():
    built = record(messages=[{"role": "user"}] * 3)
    assert fill_message_ids(built) == ["c1:0", "c1:1", "c1:2"]


def test_fill_none_and_empty_ids():
    built = record(messages=[{"role": "user"}] * 3, message_ids=[None, "", "keep"])
    assert fill_message_ids(built) == ["c1:0", "c1:1", "keep"]


def test_fill_repeated_ids_after_the_first():
    built = record(messages=[{"role": "user"}] * 4, message_ids=["x", "y", "x", "y"])
    assert fill_message_ids(built) == ["x", "y", "c1:2", "c1:3"]


def test_fill_avoids_a_filled_id_taken_by_a_given_one():
    built = record(messages=[{"role": "user"}] * 3, message_ids=[None, "c1:0", "c1:0"])
    filled = fill_message_ids(built)
    assert filled[1] == "c1:0"
    assert len(set(filled)) == 3
    assert filled[0].startswith("c1:0") and filled[0] != "c1:0"


def test_fill_keeps_given_ids_unchanged():
    ids = ["run-1:0", "RUN-1:0", "ünï", " spaced ", "c1:9"]
    built = record(messages=[{"role": "user"}] * 5, message_ids=ids)
    assert fill_message_ids(built) == ids


def test_fill_does_not_touch_the_record():
    built = record(messages=[{"role": "user"}] * 2, message_ids=[None, "x"])
    fill_message_ids(built)
    assert built.message_ids == [None, "x"]


def test_fill_of_empty_chat():
    assert fill_message_ids(record()) == []


# ---------------------------------------------------------------------- scopes


def test_scope_matches():
    chat_scope = {"userId": "ada", "agentId": "x"}
    assert scope_matches(chat_scope, {})
    assert scope_matches(chat_scope, {"userId": "ada"})
    assert scope_matches(chat_scope, chat_scope)
    assert not scope_matches(chat_scope, {"userId": "Ada"})
    assert not scope_matches(chat_scope, {"userId": "ada", "tenant": "t"})
    assert not scope_matches({"userId": "ada"}, {"agentId": ""})


def test_validate_scope_returns_a_copy():
    scope = {"userId": "ada"}
    copied = validate_scope(scope)
    assert copied == scope and copied is not scope


# ---------------------------------------------------------------------- search requests


def test_search_request_reduces_the_query_to_terms():
    request = SearchRequest.build({"userId": "ada"}, "İzmir izmir FLIGHT")
    assert request.terms == ["izmir", "flight"]
    assert (request.around, request.limit, request.offset, request.chat_ids) == (None, 20, 0, None)
    assert not request.empty


@pytest.mark.parametrize(
    "kwargs",
    [
        {"query": ""},
        {"query": None},
        {"query": "!!"},
        {"limit": 0},
        {"chat_ids": []},
        {"roles": []},
        {"roles": ()},
    ],
)
def test_search_request_empty(kwargs):
    fields = {"scope": {}, "query": "word"} | kwargs
    assert SearchRequest.build(fields.pop("scope"), fields.pop("query"), **fields).empty


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [
        ("query", {"query": 5}),
        ("query", {"query": b"bytes"}),
        ("limit", {"limit": -1}),
        ("limit", {"limit": 1.5}),
        ("limit", {"limit": True}),
        ("offset", {"offset": -3}),
        ("around", {"around": -1}),
        ("around", {"around": "1"}),
        ("chat_ids", {"chat_ids": "c1"}),
        ("chat_ids", {"chat_ids": 5}),
        ("chat_ids", {"chat_ids": [""]}),
        ("chat_ids", {"chat_ids": [5]}),
        ("scope", {"scope": None}),
        ("roles", {"roles": "user"}),
        ("roles", {"roles": b"user"}),
        ("roles", {"roles": 3}),
        ("roles", {"roles": ["user", None]}),
        ("roles", {"roles": {"user": 1, 2: 3}}),
        ("updated_after", {"updated_after": datetime(2024, 1, 1)}),
        ("updated_after", {"updated_after": "2024-01-01T00:00:00+00:00"}),
        ("updated_after", {"updated_after": 1_700_000_000_000}),
        ("updated_before", {"updated_before": datetime(2024, 1, 1).date()}),
        ("updated_before", {"updated_before": datetime(2024, 1, 1)}),
    ],
)
def test_search_request_rejects_bad_arguments(field, kwargs):
    fields = {"scope": {}, "query": "word"} | kwargs
    with pytest.raises(InvalidRecord) as excinfo:
        SearchRequest.build(fields.pop("scope"), fields.pop("query"), **fields)
    assert excinfo.value.field == field


def test_search_request_keeps_filters_as_given():
    after = datetime(2024, 1, 1, tzinfo=timezone(timedelta(hours=2)))
    request = SearchRequest.build(
        {}, "w", roles=(r for r in ["user", "tool", "user"]), updated_after=after
    )
    assert request.roles == frozenset({"user", "tool"})
    assert (request.updated_after, request.updated_before) == (after, None)
    assert request.filters_messages and not request.empty


def test_search_request_chat_ids_become_a_frozenset():
    request = SearchRequest.build({}, "w", chat_ids=(c for c in ["a", "b", "a"]))
    assert request.chat_ids == frozenset({"a", "b"})


# ---------------------------------------------------------------------- result records


def test_result_records_are_frozen():
    message = TranscriptMessage(chat_id="c", message_id="m", index=0, message={"role": "user"})
    hit = TranscriptHit(chat_id="c", message_id="m", index=0, message={}, score=1.0, around=None)
    source = MemorySourceRef(kind="user", chat_id="c", message_id="m", digest="sha256:00")
    for value, name in ((message, "index"), (hit, "score"), (source, "digest")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, name, 1)


def test_hit_around_defaults_to_none():
    hit = TranscriptHit(chat_id="c", message_id="m", index=0, message={}, score=1.0)
    assert hit.around is None


def test_memory_source_ref_coerces_the_sdk_json_form():
    source = MemorySourceRef.coerce(
        {"kind": "user", "chatId": "chat-1", "messageId": "m-1", "digest": "sha256:00"}
    )
    assert source == MemorySourceRef("user", "chat-1", "m-1", "sha256:00")
    assert MemorySourceRef.coerce({"chat_id": "c", "message_id": "m"}) == MemorySourceRef(
        "", "c", "m", ""
    )
    assert MemorySourceRef.coerce(source) is source
    with pytest.raises(InvalidRecord):
        MemorySourceRef.coerce("chat-1/m-1")


# ---------------------------------------------------------------------- errors


def test_error_hierarchy():
    for error in (InvalidRecord, RevisionConflict, ChatDeleted):
        assert issubclass(error, TranscriptError)
    assert issubclass(InvalidRecord, ValueError)


def test_revision_conflict_carries_the_revisions():
    error = RevisionConflict("c1", expected_revision=1, current_revision=3)
    assert (error.chat_id, error.expected_revision, error.current_revision) == ("c1", 1, 3)
    assert "3" in str(error) and "c1" in str(error)


def test_chat_deleted_names_the_chat():
    error = ChatDeleted("c1")
    assert error.chat_id == "c1"
    assert "c1" in str(error)


@pytest.mark.parametrize(
    "content", ["plain words", "çok güzel ß", "lone \ud800 surrogate", "nul\x00inside", "東京都"]
)
def test_a_prepared_messages_digest_is_the_digest_of_its_payload(content):
    """The digest hashes the bytes the payload's encoding produced: the same digest as
    ``message_digest`` of the stored payload (which ``verify`` and the checks compute),
    lone surrogates' escaped form included."""
    messages = [{"role": "system", "content": content}, {"role": "user", "content": [content]}]
    prepared = PreparedChat.of(record(messages=messages)).prepared
    assert [m.visible_position for m in prepared] == [None, 0]
    for message in prepared:
        assert message.digest == message_digest(
            message.message_id, message.visible_position, message.payload
        )
    assert len({message.digest for message in prepared}) == 2
