"""Real threads against PostgreSQL: one writer wins each revision, nothing is lost."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, connections

from deuz_transcripts import ChatDeleted, ChatRecord, RevisionConflict
from deuz_transcripts.models import Message
from deuz_transcripts.stores import DjangoConditionalChatStore

pytestmark = pytest.mark.django_db(transaction=True)
ADA = {"userId": "ada"}


@pytest.fixture(autouse=True)
def _postgres_only():
    if connection.vendor != "postgresql":
        pytest.skip("row-level concurrency is PostgreSQL's; SQLite serializes all writers")


def run_threads(count: int, work: Callable[[int], Any]) -> list[Any]:
    """Start ``count`` threads at once; return each one's result or exception."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count

    def target(number: int) -> None:
        try:
            barrier.wait()
            results[number] = work(number)
        except Exception as exc:
            results[number] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=target, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


def chat(text: str) -> ChatRecord:
    return ChatRecord("race", ADA, [{"role": "user", "content": text}])


def test_sixteen_writers_one_winner_per_revision():
    store = DjangoConditionalChatStore()
    store.write_chat(chat("start"), expected_revision=0)
    results = run_threads(16, lambda n: store.write_chat(chat(f"writer{n}"), expected_revision=1))
    winners = [n for n, r in enumerate(results) if r == 2]
    assert len(winners) == 1
    losers = [r for r in results if r != 2]
    assert all(isinstance(r, RevisionConflict) and r.current_revision == 2 for r in losers)
    loaded, revision = store.load_chat("race")
    assert revision == 2
    assert loaded.messages[0]["content"] == f"writer{winners[0]}"
    assert [h.message["content"] for h in store.transcript.search(ADA, f"writer{winners[0]}")] == [
        f"writer{winners[0]}"
    ]
    assert Message.objects.count() == 1


def test_parallel_writers_on_different_chats_with_searches():
    store = DjangoConditionalChatStore()

    def work(number: int) -> int:
        if number % 2:
            for _ in range(5):
                store.transcript.search(ADA, "parallel")
            return -1
        for step in range(5):
            store.write_chat(
                ChatRecord(f"c{number}", ADA, [{"role": "user", "content": f"parallel {step}"}]),
                expected_revision=step,
            )
            assert [
                h.chat_id for h in store.transcript.search(ADA, "parallel", chat_ids=[f"c{number}"])
            ] == [f"c{number}"]
        return 5

    results = run_threads(8, work)
    assert [r for r in results if isinstance(r, Exception)] == []
    assert len(store.transcript.search(ADA, "parallel")) == 4


def test_delete_racing_writes_always_ends_deleted():
    store = DjangoConditionalChatStore()
    store.write_chat(chat("doomed words"), expected_revision=0)

    def work(number: int) -> Any:
        if number == 0:
            return store.delete_chat("race")
        if number == 1:
            return store.transcript.index(chat("doomed words again"))  # a backfill
        return store.write_chat(chat("doomed rewrite"), expected_revision=1)

    results = run_threads(6, work)
    unexpected = [
        r
        for r in results
        if isinstance(r, Exception) and not isinstance(r, RevisionConflict | ChatDeleted)
    ]
    assert unexpected == []
    assert store.load_chat("race") is None
    assert store.transcript.search(ADA, "doomed") == []
    assert Message.objects.count() == 0
