"""Real threads: one writer wins each revision, nothing is lost, a delete always wins.

PostgreSQL runs on the test database (row locks, advisory locks, MVCC): one winner per
revision, revision chains, writers on different chats, failed writes that must never be
seen. SQLite runs on a throw-away *file* database: the suite's in-memory shared-cache
database locks per table and fails at once, so only a file shows SQLite's real locking,
its busy timeout and the store's bounded retry. Deletes race writes, index replays and
backfills on both engines.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings

from deuz_transcripts import ChatDeleted, ChatRecord, RevisionConflict, TranscriptError
from deuz_transcripts.backfill import Backfill
from deuz_transcripts.models import Message
from deuz_transcripts.stores import DjangoConditionalChatStore, DjangoTranscriptIndex
from tests.sql_support import (
    FileDatabase,
    assert_consistent,
    rows_holding,
    run_threads,
    sqlite_file_database,
)

ADA = {"userId": "ada"}


def user_chat(chat_id: str, *texts: str) -> ChatRecord:
    return ChatRecord(chat_id, ADA, [{"role": "user", "content": text} for text in texts])


def is_lock_error(exc: BaseException) -> bool:
    return type(exc) is TranscriptError and "locked" in str(exc)


def chat(text: str) -> ChatRecord:
    """The one chat that the single-chat races fight over."""
    return user_chat("race", text)


@pytest.fixture
def postgres():
    if connection.vendor != "postgresql":
        pytest.skip("row-level concurrency is PostgreSQL's; SQLite serializes all writers")


@pytest.fixture
def sqlite_run():
    """SQLite file tests are independent of DATABASE_URL; they run in the SQLite run only."""
    if connection.vendor != "sqlite":
        pytest.skip("SQLite locking runs in the SQLite run of the suite")


# ---------------------------------------------------------------- PostgreSQL


@pytest.mark.django_db(transaction=True)
def test_sixteen_writers_one_winner_per_revision(postgres):
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


@pytest.mark.django_db(transaction=True)
def test_parallel_writers_on_different_chats_with_searches(postgres):
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


@pytest.mark.django_db(transaction=True)
def test_delete_racing_writes_always_ends_deleted(postgres):
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


@pytest.mark.django_db(transaction=True)
def test_revision_chain_each_revision_has_exactly_one_winner(postgres):
    """8 threads each need 3 wins on one chat: revisions 2..25 are acknowledged once each."""
    store = DjangoConditionalChatStore()
    store.write_chat(user_chat("chain", "start"), expected_revision=0)
    acks: list[tuple[int, str]] = []
    lock = threading.Lock()

    def work(number: int) -> int:
        conflicts = 0
        for win in range(3):
            word = f"chainword{number}x{win}"
            while True:
                _, revision = store.load_chat("chain")
                try:
                    new = store.write_chat(user_chat("chain", word), expected_revision=revision)
                except RevisionConflict as exc:
                    assert exc.current_revision > revision
                    conflicts += 1
                    continue
                with lock:
                    acks.append((new, word))
                break
        return conflicts

    results = run_threads(8, work)
    assert [r for r in results if isinstance(r, BaseException)] == []
    assert sorted(revision for revision, _ in acks) == list(range(2, 26))
    final_revision, final_word = max(acks)
    loaded, revision = store.load_chat("chain")
    assert (revision, loaded.messages[0]["content"]) == (final_revision, final_word)
    for _, word in acks:
        found = [hit.message["content"] for hit in store.transcript.search(ADA, word)]
        assert found == ([final_word] if word == final_word else [])
    assert Message.objects.count() == 1
    assert_consistent()


class FailingIndex(DjangoTranscriptIndex):
    """Writes every row of a chat, then fails when the chat says ``failword``."""

    def index(self, record: ChatRecord) -> None:
        super().index(record)
        if any("failword" in str(m.get("content")) for m in record.messages):
            raise RuntimeError("index failed after writing its rows")


@pytest.mark.django_db(transaction=True)
def test_acknowledged_writes_are_searchable_and_nothing_else_ever_is(postgres):
    """Writers (a third of whose writes fail after indexing) race searchers reading it all."""
    store = DjangoConditionalChatStore()
    store.transcript = FailingIndex()
    acknowledged: set[str] = set()
    lock = threading.Lock()
    seen: set[str] = set()
    done = threading.Event()

    def write(number: int) -> None:
        for step in range(9):
            fail = step % 3 == 2
            word = f"w{number}s{step}" + ("failword" if fail else "")
            record = user_chat(f"c{number}-{step}", f"common {word}")
            try:
                store.write_chat(record, expected_revision=0)
            except RuntimeError:
                assert fail
                continue
            with lock:
                acknowledged.add(word)
            # read-your-writes: searchable the moment write_chat returns
            assert [h.chat_id for h in store.transcript.search(ADA, word)] == [record.chat_id]

    def search() -> None:
        while not done.is_set():
            for hit in store.transcript.search(ADA, "common", limit=1000):
                seen.add(hit.message["content"].split()[1])

    def work(number: int) -> Any:
        if number >= 4:
            return search()
        try:
            return write(number)
        finally:
            if number == 0:
                time.sleep(0.05)
                done.set()

    results = run_threads(6, work)
    assert [r for r in results if isinstance(r, BaseException)] == []
    # the searches ran during the writes and saw only writes that were acknowledged:
    # a failed write is never visible, even for a moment
    assert seen and seen <= acknowledged
    assert not any("failword" in word for word in seen)
    final = {
        h.message["content"].split()[1] for h in store.transcript.search(ADA, "common", limit=1000)
    }
    assert final == acknowledged
    assert len(acknowledged) == 4 * 6
    assert_consistent()


# ---------------------------------------------------------------- delete races, both engines


def race_deletes(store: DjangoConditionalChatStore, rounds: int, attach: tuple = ()) -> None:
    """Each round: delete, a store write, an index() replay and a backfill of one chat."""
    using = store.using
    for round_number in range(rounds):
        chat_id = f"race-{round_number}"
        word = f"doomedword{round_number}"
        store.write_chat(user_chat(chat_id, f"{word} one", f"{word} two"), expected_revision=0)

        def work(
            number: int, chat_id: str = chat_id, word: str = word, r: int = round_number
        ) -> Any:
            time.sleep(0.002 * ((number + r) % 4))  # vary who goes first
            if number == 0:
                return store.delete_chat(chat_id)
            if number == 1:
                return store.write_chat(user_chat(chat_id, f"{word} three"), expected_revision=1)
            if number == 2:
                return DjangoTranscriptIndex(using).index(user_chat(chat_id, f"{word} replay"))
            return Backfill(using, chat_ids=[chat_id]).run()

        results = run_threads(4, work, attach=attach)
        unexpected = [
            r
            for r in results
            if isinstance(r, BaseException)
            and not isinstance(r, RevisionConflict | ChatDeleted)
            and not is_lock_error(r)
        ]
        assert unexpected == []
        assert store.load_chat(chat_id) is None
        assert store.transcript.search(ADA, word) == []
        assert rows_holding(word, using) == {}
        with pytest.raises(ChatDeleted):
            store.write_chat(user_chat(chat_id, "again"), expected_revision=0)
    assert_consistent(using)


@pytest.mark.django_db(transaction=True)
def test_delete_always_wins_against_writes_replays_and_backfills_postgres(postgres):
    race_deletes(DjangoConditionalChatStore(), rounds=8)


@pytest.mark.django_db
def test_delete_always_wins_against_writes_replays_and_backfills_sqlite(tmp_path, sqlite_run):
    with sqlite_file_database(tmp_path) as database:
        race_deletes(DjangoConditionalChatStore(database.alias), rounds=8, attach=(database,))


# ---------------------------------------------------------------- SQLite file locking


def hold_lock(database: FileDatabase, mode: str) -> sqlite3.Connection:
    """Another process's view: a plain sqlite3 connection holding a write lock."""
    holder = sqlite3.connect(
        database.path, isolation_level=None, timeout=0, check_same_thread=False
    )
    holder.execute(f"BEGIN {mode}")
    return holder


@pytest.mark.django_db
@pytest.mark.parametrize("retries", [1, 3, 5])
def test_sqlite_write_retries_a_bounded_number_of_times_then_says_locked(
    tmp_path, sqlite_run, sleeps, retries
):
    with (
        override_settings(DEUZ_TRANSCRIPTS={"LOCK_RETRIES": retries}),
        sqlite_file_database(tmp_path, timeout=0.05) as database,
    ):
        store = DjangoConditionalChatStore(database.alias)
        store.write_chat(user_chat("c1", "before"), expected_revision=0)
        holder = hold_lock(database, "IMMEDIATE")
        attempts: list[int] = []
        real_write = store._write

        def counted_write(*args: Any) -> Any:
            attempts.append(1)
            return real_write(*args)

        try:
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(store, "_write", counted_write)
                with pytest.raises(TranscriptError, match="locked") as caught:
                    store.write_chat(user_chat("c1", "lockedword"), expected_revision=1)
            assert type(caught.value) is TranscriptError
            # bounded, no hang: exactly LOCK_RETRIES attempts, a back-off between them
            assert len(attempts) == retries
            assert len(sleeps) == retries - 1
            with pytest.raises(TranscriptError, match="locked"):
                store.delete_chat("c1")
            # readers still work while another connection holds the write lock
            assert store.load_chat("c1")[1] == 1
            assert store.transcript.search(ADA, "lockedword") == []
        finally:
            holder.rollback()
            holder.close()
        assert store.write_chat(user_chat("c1", "lockedword"), expected_revision=1) == 2
        assert [h.index for h in store.transcript.search(ADA, "lockedword")] == [0]
        assert_consistent(database.alias)


@pytest.mark.django_db
def test_sqlite_write_succeeds_when_the_lock_is_released_during_the_retries(
    tmp_path, sqlite_run, sleeps
):
    with (
        override_settings(DEUZ_TRANSCRIPTS={"LOCK_RETRIES": 6}),
        sqlite_file_database(tmp_path, timeout=0.05) as database,
    ):
        store = DjangoConditionalChatStore(database.alias)
        holder = hold_lock(database, "IMMEDIATE")
        releaser = threading.Timer(0.12, holder.rollback)
        releaser.start()
        try:
            assert store.write_chat(user_chat("c1", "patience"), expected_revision=0) == 1
        finally:
            releaser.join()
            holder.close()
        assert 1 <= len(sleeps) < 6
        assert [h.chat_id for h in store.transcript.search(ADA, "patience")] == ["c1"]
        assert_consistent(database.alias)


@pytest.mark.django_db
def test_sqlite_reads_under_an_exclusive_lock_fail_clearly(tmp_path, sqlite_run):
    """Reads are not retried: they wait for the busy timeout, then raise TranscriptError."""
    with sqlite_file_database(tmp_path, timeout=0.05) as database:
        store = DjangoConditionalChatStore(database.alias)
        store.write_chat(user_chat("c1", "visible"), expected_revision=0)
        holder = hold_lock(database, "EXCLUSIVE")
        try:
            for call in (
                lambda: store.transcript.search(ADA, "visible"),
                lambda: store.load_chat("c1"),
                lambda: store.list_chats(ADA),
            ):
                with pytest.raises(TranscriptError, match="locked"):
                    call()
        finally:
            holder.rollback()
            holder.close()
        assert [h.chat_id for h in store.transcript.search(ADA, "visible")] == ["c1"]


SQLITE_MODES = {
    "immediate-rollback-journal": dict(transaction_mode="IMMEDIATE", timeout=5.0),
    "deferred-wal": dict(
        transaction_mode=None, timeout=5.0, init_command="PRAGMA journal_mode=WAL"
    ),
    "tight-timeout": dict(transaction_mode="IMMEDIATE", timeout=0.001),
}


@pytest.mark.django_db
@pytest.mark.parametrize("mode", SQLITE_MODES)
def test_sqlite_threads_never_corrupt_the_index(tmp_path, sqlite_run, mode):
    """Writers, a shared chat, searches and a delete on one file: the index stays exact.

    Every outcome is a success, a revision conflict, a tombstone or the clear lock error;
    afterwards FTS5's integrity check and ``--verify`` pass, every acknowledged write is
    what the chat holds and searches find, and no failed write left a word behind.
    """
    with (
        override_settings(DEUZ_TRANSCRIPTS={"LOCK_RETRIES": 2}),
        sqlite_file_database(tmp_path, **SQLITE_MODES[mode]) as database,
    ):
        alias = database.alias
        setup = DjangoConditionalChatStore(alias)
        setup.write_chat(user_chat("shared", "sharedstart"), expected_revision=0)
        setup.write_chat(user_chat("victim", "victimword"), expected_revision=0)
        last_ack: dict[str, str] = {}
        failed: set[str] = set()
        lock = threading.Lock()
        errors: list[BaseException] = []
        deleted: list[Any] = []

        def attempt(call: Any) -> Any:
            try:
                return call()
            except (RevisionConflict, ChatDeleted):
                return None
            except TranscriptError as exc:
                if not is_lock_error(exc):
                    raise
                with lock:
                    errors.append(exc)
                return exc

        def work(number: int) -> None:
            store = DjangoConditionalChatStore(alias)
            if number == 5:
                for _ in range(15):
                    hits = attempt(lambda: store.transcript.search(ADA, "common"))
                    for hit in hits if isinstance(hits, list) else []:
                        assert hit.chat_id.startswith(("own", "shared"))
                deleted.append(attempt(lambda: store.delete_chat("victim")))
                return
            revision = 0
            for step in range(6):
                word = f"own{number}step{step}"
                outcome = attempt(
                    lambda word=word, revision=revision: store.write_chat(
                        user_chat(f"own{number}", f"common {word}"), expected_revision=revision
                    )
                )
                with lock:
                    if isinstance(outcome, int):
                        revision = outcome
                        last_ack[f"own{number}"] = word
                    else:
                        failed.add(word)
                current = attempt(lambda: store.load_chat("shared"))
                if isinstance(current, tuple):
                    shared_word = f"shared{number}step{step}"
                    outcome = attempt(
                        lambda shared_word=shared_word, current=current: store.write_chat(
                            user_chat("shared", f"common {shared_word}"),
                            expected_revision=current[1],
                        )
                    )
                    with lock:
                        if isinstance(outcome, int):
                            last_ack["shared"] = shared_word
                        else:
                            failed.add(shared_word)

        results = run_threads(6, work, attach=(database,))
        assert [r for r in results if isinstance(r, BaseException)] == []

        store = DjangoConditionalChatStore(alias)
        assert_consistent(alias)
        for chat_id, word in last_ack.items():
            loaded, _ = store.load_chat(chat_id)
            assert loaded.messages[0]["content"] == f"common {word}"
            assert [h.chat_id for h in store.transcript.search(ADA, word)] == [chat_id]
        for word in failed - set(last_ack.values()):
            assert store.transcript.search(ADA, word) == []
        if deleted == [None]:  # acknowledged
            assert store.load_chat("victim") is None
            assert rows_holding("victimword", alias) == {}
        if mode != "tight-timeout":
            assert errors == []  # a 5 s busy timeout absorbs this load
