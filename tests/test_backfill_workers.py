"""``backfill_transcripts --workers N``: disjoint shares, one end state, clear refusals."""

from __future__ import annotations

from collections.abc import Callable
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from deuz_transcripts.backfill import Backfill, BackfillStats
from deuz_transcripts.backfill_workers import WorkerFailed, run_in_workers
from deuz_transcripts.management.commands.backfill_transcripts import Command
from deuz_transcripts.models import Chat, Message, Tombstone
from deuz_transcripts.stores import (
    DjangoChatStore,
    DjangoConditionalChatStore,
    DjangoTranscriptIndex,
)
from deuz_transcripts.verify import Verifier
from tests.sql_support import sqlite_file_database
from tests.test_backfill import legacy, record, stored

CHATS = 23


@pytest.fixture
def postgres() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("the PostgreSQL run tests workers on PostgreSQL")


@pytest.fixture
def sqlite_run() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("SQLite file tests run in the SQLite run of the suite")


def fill(using: str = "default") -> None:
    """Legacy chats to index, one chat a store owns, one tombstoned legacy chat."""
    for n in range(CHATS):
        DjangoChatStore(using).save_chat(record(f"c{n:02d}", f"word{n} shared", n=n))
    DjangoConditionalChatStore(using).write_chat(record("owned", "store copy"), expected_revision=0)
    Tombstone.objects.using(using).create(chat_id="c00")


def backfill(*args: str, using: str = "default") -> str:
    out = StringIO()
    call_command("backfill_transcripts", *args, "--database", using, stdout=out, stderr=StringIO())
    return out.getvalue()


@pytest.mark.django_db
def test_shares_are_disjoint_and_cover_every_chat() -> None:
    legacy(*(record(f"c{n:02d}", f"word{n} shared", n=n) for n in range(CHATS)))
    stored(record("owned", "store copy"))
    runs = [Backfill(share=(index, 4)).run("all") for index in range(4)]
    assert sum(run.indexed for run in runs) == CHATS
    assert sum(run.total for run in runs) == CHATS + 1  # the store-owned chat: unchanged
    assert all(run.indexed for run in runs) and not any(run.failed for run in runs)
    assert Backfill().run("all").unchanged == CHATS + 1
    assert Verifier().run().found == 0


def test_a_share_names_one_of_its_count() -> None:
    for share in ((2, 2), (-1, 2), (0, 0)):
        with pytest.raises(ValueError, match="share"):
            Backfill(share=share)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--workers", "0"], "--workers must be between 1 and 16"),
        (["--workers", "17"], "--workers must be between 1 and 16"),
        (["--workers", "2", "--verify"], "not --verify or --fix"),
        (["--workers", "2", "--fix"], "not --verify or --fix"),
    ],
)
def test_bad_worker_arguments_are_one_line_errors(args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        backfill(*args)


@pytest.mark.django_db
def test_workers_need_committed_data_on_a_database_they_can_reach() -> None:
    """The suite's SQLite database lives in memory; on PostgreSQL the test's transaction
    holds what the workers could not see."""
    reason = "in memory" if connection.vendor == "sqlite" else "inside a transaction"
    with pytest.raises(CommandError, match=reason):
        backfill("--workers", "2")


def in_workers(workers: int, using: str) -> BackfillStats:
    """What the command runs for ``--workers``, on a database ``--database`` cannot name
    (the SQLite file's alias exists for this test only)."""
    return run_in_workers(workers, "all", lambda share: Backfill(using, share=share), using)


def run_and_check(using: str, run: Callable[[int], str]) -> None:
    fill(using)
    assert run(3) == (
        f"Backfill: {CHATS - 1} indexed, 1 unchanged, 1 skipped (tombstoned), "
        "0 skipped (other), 0 failed."
    )
    assert Chat.objects.using(using).count() == CHATS  # the tombstoned chat has none
    assert Message.objects.using(using).filter(chat__chat_id="c05").count() == 3
    hits = DjangoTranscriptIndex(using).search({"userId": "ada"}, "shared", limit=50)
    assert sorted({hit.chat_id for hit in hits}) == [f"c{n:02d}" for n in range(1, CHATS)]
    assert Verifier(using).run().found == 0
    assert run(2).startswith(f"Backfill: 0 indexed, {CHATS} unchanged, 1 skipped (tombstoned)")


@pytest.mark.django_db
def test_workers_on_a_sqlite_file(tmp_path: Any, sqlite_run: Any) -> None:
    with sqlite_file_database(tmp_path) as database:
        run_and_check(
            database.alias,
            lambda workers: Command._summary(in_workers(workers, database.alias), False),
        )


@pytest.mark.django_db(transaction=True)
def test_workers_on_postgresql(postgres: Any) -> None:
    run_and_check("default", lambda workers: backfill("--workers", str(workers)).strip())


@pytest.mark.django_db
def test_a_worker_that_fails_stops_the_command_with_its_error(
    tmp_path: Any, sqlite_run: Any, monkeypatch: Any
) -> None:
    def broken(self: Backfill, source: str = "all") -> None:
        if self.share[0] == 1:
            raise RuntimeError("disk on fire")
        return original(self, source)

    original = Backfill.run
    monkeypatch.setattr(Backfill, "run", broken)
    with sqlite_file_database(tmp_path) as database:
        fill(database.alias)
        with pytest.raises(WorkerFailed, match=r"^worker 2/2: RuntimeError: disk on fire$"):
            in_workers(2, database.alias)
        assert Chat.objects.using(database.alias).count() > 1  # worker 1 did its share
