"""``append_messages``: exactly ``write_chat`` of the stored chat with the new messages after
its own, on every store (the SQL store writes the new messages alone)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from deuz_transcripts import ChatDeleted, ChatRecord, InvalidRecord, RevisionConflict
from deuz_transcripts.prepared import PreparedChat
from tests.contract.base import ContractBase
from tests.contract.helpers import ADA, BOB, T0, IndexFailure, assistant, chat, system, user


def _whole(stored: ChatRecord, messages: list[dict[str, Any]], given: list[Any] | None, when):
    """What ``write_chat`` of the whole chat stores: the stored record with ``messages``
    after its messages, ids filled over the whole chat."""
    whole = ChatRecord(
        chat_id=stored.chat_id,
        scope=dict(stored.scope),
        messages=[*stored.messages, *messages],
        message_ids=[*stored.message_ids, *(given or [None] * len(messages))],
        updated_at=when,
    )
    return PreparedChat.of(whole).to_record()


#: Appends after ``chat("c1", system(...), "alpha one", "beta two")``: (messages, ids).
APPENDS: list[tuple[list[dict[str, Any]], list[Any] | None]] = [
    ([user("gamma three")], None),
    ([assistant("delta four"), system("quiet rule"), user("alpha again")], None),
    ([user("epsilon"), assistant("zeta")], ["u-9", None]),
    ([user("eta")], ["u-9"]),  # taken by the append before: filled
    ([user("theta"), user("iota")], ["c1:9", None]),  # the next filled id, given
    ([], None),
    ([user("kappa"), user("lambda")], ["", "dup"]),
    ([user("mu")], ["dup"]),
]


class AppendContract(ContractBase):
    """Appends equal whole writes: the stored record, ids, revisions, searches and errors."""

    def test_appends_equal_writing_the_whole_chat(self, store, index):
        first = chat(
            "c1", system("be brief"), "alpha one", "beta two", message_ids=["s", None, "b"]
        )
        store.write_chat(first, expected_revision=0)
        twin = chat("c1", system("be brief"), "alpha one", "beta two", message_ids=["s", None, "b"])
        store.write_chat(
            ChatRecord("t1", BOB, twin.messages, twin.message_ids, T0), expected_revision=0
        )
        revision = 1
        for step, (messages, given) in enumerate(APPENDS, start=1):
            stored, _ = store.load_chat("c1")
            when = T0 + timedelta(minutes=step)
            expected = _whole(stored, messages, given, when)
            revision = store.append_messages(
                "c1", messages, expected_revision=revision, message_ids=given, updated_at=when
            )
            assert revision == step + 1
            loaded, at = store.load_chat("c1")
            assert at == revision
            assert (loaded.messages, loaded.message_ids) == (
                expected.messages,
                expected.message_ids,
            )
            assert (loaded.scope, loaded.updated_at) == (ADA, when)
            # the same chat written whole under BOB: the same hits, ids and scores
            twin_ids = [i.replace("c1:", "t1:", 1) for i in expected.message_ids]
            whole = ChatRecord("t1", BOB, expected.messages, twin_ids, when)
            store.write_chat(whole, expected_revision=step)
        for query in ("alpha", "alpha gamma", "quiet", "eta mu kappa", "one two three"):
            got = index.search(ADA, query, around=1, limit=50)
            want = index.search(BOB, query, around=1, limit=50)
            assert [(h.index, h.message_id.replace("c1:", "t1:", 1), h.score) for h in got] == [
                (h.index, h.message_id, h.score) for h in want
            ]
            assert [[m.index for m in h.around or []] for h in got] == [
                [m.index for m in h.around or []] for h in want
            ]
        assert [c.chat_id for c in store.list_chats(ADA)] == ["c1"]

    def test_an_append_is_conditional_and_changes_nothing_when_refused(self, store):
        store.write_chat(chat("c1", "alpha"), expected_revision=0)
        with pytest.raises(RevisionConflict) as conflict:
            store.append_messages("c1", [user("late")], expected_revision=0)
        assert conflict.value.current_revision == 1
        with pytest.raises(InvalidRecord) as bad:
            store.append_messages("c1", [{"content": "no role"}], expected_revision=1)
        assert bad.value.field == "messages[0].role"
        with pytest.raises(InvalidRecord) as bad:
            store.append_messages(
                "c1", [user("ok"), {"role": "user", "content": object()}], expected_revision=1
            )
        assert bad.value.field == "messages[1]"
        with pytest.raises(InvalidRecord) as bad:
            store.append_messages("c1", [user("x")], expected_revision=True)
        assert bad.value.field == "expected_revision"
        with pytest.raises(InvalidRecord) as bad:
            store.append_messages("c1", [user("x")], expected_revision=1, message_ids=["a", "b"])
        assert bad.value.field == "message_ids"
        loaded, revision = store.load_chat("c1")
        assert (revision, len(loaded.messages)) == (1, 1)

    def test_an_append_needs_a_stored_chat(self, store):
        with pytest.raises(InvalidRecord) as unknown:
            store.append_messages("nobody", [user("hi")], expected_revision=0)
        assert unknown.value.field == "chat_id"
        assert store.load_chat("nobody") is None
        store.write_chat(chat("c1", "alpha"), expected_revision=0)
        store.delete_chat("c1")
        with pytest.raises(ChatDeleted):
            store.append_messages("c1", [user("again")], expected_revision=1)

    def test_an_append_to_a_chat_taken_out_of_search_indexes_it_whole(self, store, index):
        store.write_chat(chat("c1", "alpha one"), expected_revision=0)
        index.remove("c1")
        assert index.search(ADA, "alpha") == []
        store.append_messages("c1", [user("beta two")], expected_revision=1)
        assert [h.index for h in index.search(ADA, "alpha beta")] == [0, 1]

    def test_a_failed_index_leaves_the_chat_as_it_was(self, store, index, monkeypatch):
        store.write_chat(chat("c1", "alpha"), expected_revision=0)

        def failing_index(record: Any) -> None:
            raise IndexFailure(record.chat_id)

        monkeypatch.setattr(store.transcript, "index", failing_index)
        with pytest.raises(IndexFailure):
            store.append_messages("c1", [user("failword")], expected_revision=1)
        monkeypatch.undo()
        assert store.load_chat("c1")[1] == 1
        assert index.search(ADA, "failword") == []

    def test_async_append_messages(self, store):
        async def scenario() -> tuple[int, Any]:
            await store.awrite_chat(chat("c1", "alpha"), expected_revision=0)
            revision = await store.aappend_messages(
                "c1", [user("async words")], expected_revision=1
            )
            return revision, await store.aload_chat("c1")

        revision, (record, loaded_revision) = asyncio.run(scenario())
        assert revision == loaded_revision == 2
        assert record.messages == [user("alpha"), user("async words")]
        assert record.updated_at > T0
