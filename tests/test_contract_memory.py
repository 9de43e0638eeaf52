"""The contract on the in-memory backend, plus what only the memory classes do."""

from __future__ import annotations

import sys
import threading
from datetime import timedelta

import pytest

# tests/contract/ is not a test package: ask pytest to rewrite its asserts (detailed
# failure messages) before its first import; the package name covers every module in it.
# Other modules subclassing the contract should do the same (or tests/conftest.py could,
# once, for all of them).
if "tests.contract" not in sys.modules:
    pytest.register_assert_rewrite("tests.contract")

from deuz_transcripts import (
    InMemoryChatStore,
    InMemoryConditionalChatStore,
    InMemoryTranscriptIndex,
    InvalidRecord,
    RevisionConflict,
    aindex_chat,
    index_chat,
)
from tests.contract import ADA, BOB, T0, TranscriptContract, chat, ids
from tests.factories import ChatRecordFactory


class TestMemoryContract(TranscriptContract):
    backend_name = "memory"
    substring_matching = False

    def make_store(self) -> InMemoryConditionalChatStore:
        return InMemoryConditionalChatStore(InMemoryTranscriptIndex())


# ---------------------------------------------------------------------- the legacy store


def test_legacy_store_save_and_load_keeps_the_record_as_given():
    legacy = InMemoryChatStore()
    record = chat("c1", "hello", "world", message_ids=[None, ""])
    legacy.save_chat(record)
    loaded = legacy.load_chat("c1")
    assert loaded == record
    assert loaded.message_ids == [None, ""]  # the legacy store fills nothing


def test_legacy_store_last_write_wins():
    legacy = InMemoryChatStore()
    legacy.save_chat(chat("c1", "first"))
    legacy.save_chat(chat("c1", "second"))
    assert legacy.load_chat("c1").messages[0]["content"] == "second"


def test_legacy_store_lists_by_scope_newest_first():
    legacy = InMemoryChatStore()
    legacy.save_chat(chat("old", "x", updated_at=T0))
    legacy.save_chat(chat("new", "x", updated_at=T0 + timedelta(minutes=5)))
    legacy.save_chat(chat("bobs", "x", scope=BOB))
    assert [r.chat_id for r in legacy.list_chats(ADA)] == ["new", "old"]
    assert [r.chat_id for r in legacy.list_chats(BOB)] == ["bobs"]
    assert len(legacy.list_chats({})) == 3


def test_legacy_store_delete_then_save_again():
    legacy = InMemoryChatStore()
    legacy.save_chat(chat("c1", "x"))
    legacy.delete_chat("c1")
    assert legacy.load_chat("c1") is None
    legacy.delete_chat("c1")  # deleting twice is fine
    legacy.save_chat(chat("c1", "again"))  # no tombstones in the legacy store
    assert legacy.load_chat("c1").messages[0]["content"] == "again"


def test_legacy_store_unknown_chat_is_none():
    assert InMemoryChatStore().load_chat("nope") is None


def test_legacy_store_rejects_invalid_records():
    legacy = InMemoryChatStore()
    record = chat("c1", "x")
    record.messages = [{"role": "user", "content": {1, 2}}]
    with pytest.raises(InvalidRecord, match=r"messages\[0\]"):
        legacy.save_chat(record)
    assert legacy.load_chat("c1") is None


def test_legacy_store_async_twins():
    import asyncio

    legacy = InMemoryChatStore()

    async def scenario():
        await legacy.asave_chat(chat("c1", "x"))
        loaded = await legacy.aload_chat("c1")
        listed = await legacy.alist_chats(ADA)
        await legacy.adelete_chat("c1")
        return loaded, listed, await legacy.aload_chat("c1")

    loaded, listed, after = asyncio.run(scenario())
    assert loaded.chat_id == "c1"
    assert [r.chat_id for r in listed] == ["c1"]
    assert after is None


@pytest.mark.parametrize("store_class", [InMemoryChatStore, InMemoryConditionalChatStore])
def test_stores_keep_their_own_copies(store_class):
    store = store_class()
    record = chat("c1", "original")
    if isinstance(store, InMemoryChatStore):
        store.save_chat(record)
        load = store.load_chat
    else:
        store.write_chat(record, expected_revision=0)

        def load(chat_id):
            return store.load_chat(chat_id)[0]

    record.messages[0]["content"] = "changed by the caller"
    loaded = load("c1")
    assert loaded.messages[0]["content"] == "original"
    loaded.messages[0]["content"] = "changed by the reader"
    assert load("c1").messages[0]["content"] == "original"


# ---------------------------------------------------------------------- index_chat


def test_index_chat_fills_missing_empty_and_repeated_ids():
    index = InMemoryTranscriptIndex()
    record = chat("c1", "w", "w", "w", "w", message_ids=[None, "", "m", "m"])
    indexed = index_chat(index, record)
    assert indexed.message_ids == ["c1:0", "c1:1", "m", "c1:3"]
    assert ids(index.search(ADA, "w")) == ["c1:0", "c1:1", "m", "c1:3"]
    assert record.message_ids == [None, "", "m", "m"]  # the caller's record is untouched


def test_index_chat_of_a_legacy_chat():
    legacy = InMemoryChatStore()
    legacy.save_chat(chat("chat-2", "Cancel the hotel."))
    index = InMemoryTranscriptIndex()
    index_chat(index, legacy.load_chat("chat-2"))
    assert ids(index.search(ADA, "hotel")) == ["chat-2:0"]


def test_index_chat_accepts_the_sdk_json_form():
    index = InMemoryTranscriptIndex()
    index_chat(
        index,
        {
            "chatId": "c1",
            "scope": {"userId": "ada"},
            "messages": [{"role": "user", "content": "jsonform"}],
            "messageIds": ["m-1"],
            "updatedAt": 1_714_554_000_000,
        },
    )
    assert ids(index.search(ADA, "jsonform")) == ["m-1"]


def test_aindex_chat():
    import asyncio

    index = InMemoryTranscriptIndex()
    indexed = asyncio.run(aindex_chat(index, chat("c1", "asyncword")))
    assert indexed.message_ids == ["c1:0"]
    assert ids(index.search(ADA, "asyncword")) == ["c1:0"]


def test_index_chat_rejects_a_non_record():
    with pytest.raises(InvalidRecord, match="record"):
        index_chat(InMemoryTranscriptIndex(), ["not", "a", "record"])


# ---------------------------------------------------------------------- memory specifics


def test_conditional_store_without_an_index():
    store = InMemoryConditionalChatStore()
    assert store.transcript is None
    assert store.write_chat(chat("c1", "x"), expected_revision=0) == 1
    store.delete_chat("c1")
    assert store.load_chat("c1") is None


def test_is_deleted():
    store = InMemoryConditionalChatStore(InMemoryTranscriptIndex())
    store.write_chat(chat("c1", "x"), expected_revision=0)
    assert not store.is_deleted("c1")
    store.delete_chat("c1")
    assert store.is_deleted("c1")


def test_expected_revision_must_be_an_integer():
    store = InMemoryConditionalChatStore(InMemoryTranscriptIndex())
    for bad in ("0", None, True, 0.0):
        with pytest.raises(InvalidRecord, match="expected_revision"):
            store.write_chat(chat("c1", "x"), expected_revision=bad)
    assert store.load_chat("c1") is None


def test_write_chat_accepts_the_sdk_json_form():
    store = InMemoryConditionalChatStore(InMemoryTranscriptIndex())
    record = chat("c1", "jsonform", message_ids=["m-1"])
    assert store.write_chat(record.to_json(), expected_revision=0) == 1
    assert store.load_chat("c1")[0] == record
    assert ids(store.transcript.search(ADA, "jsonform")) == ["m-1"]


def test_len_counts_indexed_messages():
    index = InMemoryTranscriptIndex()
    index.index(chat("c1", "one", {"role": "system", "content": "sys"}, {"role": "user"}, "two"))
    index.index(chat("c2", "three"))
    assert len(index) == 3
    index.remove("c1")
    assert len(index) == 1


def test_awkward_characters_round_trip():
    store = InMemoryConditionalChatStore(InMemoryTranscriptIndex())
    message = {"role": "user", "content": "nul\x00 and lone \ud800 surrogate, word"}
    store.write_chat(chat("c1", message), expected_revision=0)
    assert store.load_chat("c1")[0].messages == [message]
    assert store.transcript.search(ADA, "surrogate")[0].message == message


def test_a_ten_megabyte_message_folds_only_its_indexed_part(monkeypatch):
    from deuz_transcripts import text as text_module

    folded: list[int] = []
    real_fold = text_module.fold

    def counted(piece: str) -> str:
        folded.append(len(piece))
        return real_fold(piece)

    monkeypatch.setattr(text_module, "fold", counted)
    index = InMemoryTranscriptIndex()
    text = "début " + "é" * 10_000_000 + " fin"
    index.index(chat("c1", text))
    assert 0 < sum(folded) <= 262_144 + text_module._FOLD_CHUNK_CHARS, sum(folded)
    assert ids(index.search(ADA, "debut")) == ["c1:0"]
    assert index.search(ADA, "fin") == []


# ---------------------------------------------------------------------- threads


def test_concurrent_writes_and_searches():
    store = InMemoryConditionalChatStore(InMemoryTranscriptIndex())
    index = store.transcript
    errors: list[BaseException] = []
    rounds = 30
    start = threading.Barrier(8)

    def writer(worker: int) -> None:
        try:
            start.wait()
            chat_id = f"w{worker}"
            for revision in range(rounds):
                record = ChatRecordFactory(
                    chat_id=chat_id, texts=[f"shared round{revision}", f"worker{worker}"]
                )
                assert store.write_chat(record, expected_revision=revision) == revision + 1
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def reader() -> None:
        try:
            start.wait()
            for _ in range(rounds * 3):
                hits = index.search(ADA, "shared worker0 worker1", around=1, limit=50)
                assert all(0 < h.score <= 1 for h in hits)
                assert len({(h.chat_id, h.index) for h in hits}) == len(hits)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(5)]
    threads += [threading.Thread(target=reader) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert not any(thread.is_alive() for thread in threads)

    last = f"round{rounds - 1}"
    assert {h.chat_id for h in index.search(ADA, last)} == {f"w{i}" for i in range(5)}
    assert index.search(ADA, "round0") == []
    for worker in range(5):
        record, revision = store.load_chat(f"w{worker}")
        assert revision == rounds
        assert record.messages[0]["content"] == f"shared {last}"
    assert len(index) == 10


def test_concurrent_writers_of_one_chat_conflict_cleanly():
    store = InMemoryConditionalChatStore(InMemoryTranscriptIndex())
    outcomes: list[object] = []
    lock = threading.Lock()
    start = threading.Barrier(6)

    def writer(worker: int) -> None:
        start.wait()
        try:
            result: object = store.write_chat(chat("c1", f"writer{worker}"), expected_revision=0)
        except RevisionConflict as exc:
            result = exc
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert outcomes.count(1) == 1
    assert sum(isinstance(o, RevisionConflict) for o in outcomes) == 5
    record, revision = store.load_chat("c1")
    assert revision == 1
    winner = record.messages[0]["content"]
    assert ids(store.transcript.search(ADA, winner)) == ["c1:0"]
    assert len(store.transcript) == 1


def test_a_failing_remove_leaves_no_tombstone():
    """``delete_chat`` commits its tombstone only after the index took the chat out."""
    index = InMemoryTranscriptIndex()
    store = InMemoryConditionalChatStore(index)
    store.write_chat(chat("c1", "keepword"), expected_revision=0)

    class RemoveFailure(Exception):
        pass

    def failing_remove(chat_id: str) -> None:
        raise RemoveFailure(chat_id)

    index.remove = failing_remove  # type: ignore[method-assign]
    with pytest.raises(RemoveFailure):
        store.delete_chat("c1")
    assert not store.is_deleted("c1")
    assert store.load_chat("c1") is not None
    assert ids(index.search(ADA, "keepword")) == ["c1:0"]
    del index.remove
    store.delete_chat("c1")
    assert store.is_deleted("c1") and index.search(ADA, "keepword") == []
