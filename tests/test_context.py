"""TranscriptContextSource: cited messages first, then search hits (SPEC section 6)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from deuz_transcripts import (
    InMemoryConditionalChatStore,
    InMemoryTranscriptIndex,
    InvalidRecord,
    MemorySourceRef,
    TranscriptCandidate,
    TranscriptContextSource,
)
from tests.factories import ChatRecordFactory, MessageFactory, image_part, reasoning_part, text_part

ADA = {"userId": "ada"}
BOB = {"userId": "bob"}
T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)


def ref(chat_id: str, message_id: str) -> MemorySourceRef:
    return MemorySourceRef(kind="user", chat_id=chat_id, message_id=message_id, digest="")


@pytest.fixture
def index() -> InMemoryTranscriptIndex:
    store = InMemoryConditionalChatStore(InMemoryTranscriptIndex())
    store.write_chat(
        ChatRecordFactory(
            chat_id="trip",
            messages=[
                MessageFactory(text="You are a travel agent.", system=True),
                MessageFactory(text="Book the flight to İzmir."),
                MessageFactory(text="Booked: Friday, 09:40.", assistant=True),
                MessageFactory(text="And a hotel near the harbour?"),
                {
                    "role": "assistant",
                    "content": [reasoning_part("think"), text_part("Hotel Deniz is booked.")],
                },
            ],
            message_ids=["s", "m-1", "m-2", "m-3", "m-4"],
            updated_at=T0,
        ),
        expected_revision=0,
    )
    store.write_chat(
        ChatRecordFactory(
            chat_id="other",
            messages=[MessageFactory(text="A second flight, to Ankara.")],
            message_ids=["o-1"],
            updated_at=T0 + timedelta(hours=1),  # newer: wins ties with "trip"
        ),
        expected_revision=0,
    )
    store.write_chat(
        ChatRecordFactory(
            chat_id="bobs",
            user_id="bob",
            messages=[MessageFactory(text="Bob's flight to İzmir.")],
            message_ids=["b-1"],
        ),
        expected_revision=0,
    )
    return store.transcript


def test_search_candidates_are_role_text_lines(index):
    [candidate] = TranscriptContextSource(index, ADA).candidates("izmir")
    assert candidate == TranscriptCandidate(
        text="user: Book the flight to İzmir.",
        match="search",
        chat_id="trip",
        message_id="m-1",
        score=1.0,
    )


def test_candidates_follow_search_order_and_scores(index):
    candidates = TranscriptContextSource(index, ADA).candidates("flight izmir")
    assert [(c.message_id, c.match) for c in candidates] == [("m-1", "search"), ("o-1", "search")]
    assert candidates[0].score == 1.0
    assert 0 < candidates[1].score < 1


def test_nothing_matches_nothing_offered(index):
    assert TranscriptContextSource(index, ADA).candidates("submarine") == []
    assert TranscriptContextSource(index, ADA).candidates("") == []


def test_scope_is_applied(index):
    candidates = TranscriptContextSource(index, BOB).candidates("izmir")
    assert [c.message_id for c in candidates] == ["b-1"]
    assert TranscriptContextSource(index, {"userId": "carol"}).candidates("izmir") == []


def test_chat_ids_filter(index):
    source = TranscriptContextSource(index, ADA, chat_ids=["other"])
    assert [c.message_id for c in source.candidates("flight")] == ["o-1"]


@pytest.mark.parametrize("chat_ids", ["base", b"base"])
def test_chat_ids_given_as_one_string_is_invalid(index, chat_ids):
    """A string is not read as a list of one-letter chat ids."""
    with pytest.raises(InvalidRecord) as caught:
        TranscriptContextSource(index, ADA, chat_ids=chat_ids)
    assert caught.value.field == "chat_ids"


def test_around_adds_neighbour_lines_in_chat_order_without_system(index):
    [candidate] = TranscriptContextSource(index, ADA, around=1).candidates("izmir")
    assert candidate.text == "user: Book the flight to İzmir.\nassistant: Booked: Friday, 09:40."
    [candidate] = TranscriptContextSource(index, ADA, around=1).candidates("harbour")
    assert candidate.text == (
        "assistant: Booked: Friday, 09:40.\n"
        "user: And a hotel near the harbour?\n"
        "assistant: Hotel Deniz is booked."
    )


def test_lines_carry_only_indexed_text(index):
    [candidate] = TranscriptContextSource(index, ADA).candidates("deniz")
    assert candidate.text == "assistant: Hotel Deniz is booked."


def test_refs_rank_above_search_hits(index):
    source = TranscriptContextSource(index, ADA, refs=[ref("trip", "m-3")])
    candidates = source.candidates("flight")
    first = candidates[0]
    assert (first.message_id, first.match, first.score) == ("m-3", "source-ref", 1.0)
    assert candidates[0].text == "user: And a hotel near the harbour?"
    assert [c.message_id for c in candidates[1:]] == ["o-1", "m-1"]
    assert {c.match for c in candidates[1:]} == {"search"}


def test_refs_are_offered_even_when_the_query_matches_nothing(index):
    candidates = TranscriptContextSource(index, ADA, refs=[ref("trip", "m-2")]).candidates("zzz")
    assert [(c.message_id, c.match) for c in candidates] == [("m-2", "source-ref")]


def test_a_message_is_offered_once(index):
    source = TranscriptContextSource(
        index, ADA, refs=[ref("trip", "m-1"), ref("trip", "m-1"), ref("trip", "m-1")]
    )
    candidates = source.candidates("izmir")
    assert [(c.message_id, c.match) for c in candidates] == [("m-1", "source-ref")]


def test_refs_resolve_under_the_same_scope(index):
    source = TranscriptContextSource(index, ADA, refs=[ref("bobs", "b-1")])
    assert source.candidates("zzz") == []


def test_unresolvable_refs_are_skipped(index):
    source = TranscriptContextSource(
        index,
        ADA,
        refs=[ref("trip", "s"), ref("trip", "nope"), ref("gone", "m-1"), ref("trip", "m-4")],
    )
    assert [c.message_id for c in source.candidates("zzz")] == ["m-4"]


def test_refs_may_be_a_callable_called_per_request(index):
    calls = []

    def refs():
        calls.append(1)
        return [ref("trip", "m-2")]

    source = TranscriptContextSource(index, ADA, refs=refs)
    assert [c.message_id for c in source.candidates("zzz")] == ["m-2"]
    assert [c.message_id for c in source.candidates("zzz")] == ["m-2"]
    assert len(calls) == 2


def test_refs_accept_the_sdk_json_form(index):
    source = TranscriptContextSource(
        index, ADA, refs=[{"kind": "user", "chatId": "trip", "messageId": "m-2", "digest": ""}]
    )
    assert [c.message_id for c in source.candidates("zzz")] == ["m-2"]


def test_limit_counts_refs_and_hits(index):
    source = TranscriptContextSource(index, ADA, refs=[ref("trip", "m-3"), ref("trip", "m-4")])
    assert [c.message_id for c in source.candidates("flight", limit=1)] == ["m-3"]
    assert [c.message_id for c in source.candidates("flight", limit=3)] == ["m-3", "m-4", "o-1"]


def test_limit_is_filled_despite_duplicates(index):
    source = TranscriptContextSource(index, ADA, refs=[ref("trip", "m-1")])
    candidates = source.candidates("flight izmir", limit=2)  # hits: m-1, then o-1
    assert [(c.message_id, c.match) for c in candidates] == [
        ("m-1", "source-ref"),
        ("o-1", "search"),
    ]


def test_ref_to_a_message_without_text_is_not_offered(index):
    index.index(
        ChatRecordFactory(
            chat_id="pics",
            messages=[{"role": "user", "content": [image_part()]}],
            message_ids=["p"],
        )
    )
    # Nothing to read means nothing to offer: an empty candidate would only use budget.
    assert TranscriptContextSource(index, ADA, refs=[ref("pics", "p")]).candidates("zzz") == []


@pytest.mark.parametrize("around", [-1, True, 1.5, "1"])
def test_bad_around_is_invalid(index, around):
    with pytest.raises(InvalidRecord):
        TranscriptContextSource(index, ADA, around=around)


def test_bad_scope_is_invalid(index):
    with pytest.raises(InvalidRecord):
        TranscriptContextSource(index, {"userId": 1})


def test_async_candidates(index):
    source = TranscriptContextSource(index, ADA, refs=[ref("trip", "m-3")])
    candidates = asyncio.run(source.acandidates("izmir"))
    assert [(c.message_id, c.match) for c in candidates] == [
        ("m-3", "source-ref"),
        ("m-1", "search"),
    ]
