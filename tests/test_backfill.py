"""Backfill and verify: idempotent, resumable, tombstone-safe, batched by key ranges; repairs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from deuz_transcripts import ChatRecord, prepared
from deuz_transcripts.backfill import Backfill
from deuz_transcripts.models import Chat, ChatScope, LegacyChat, Message, Tombstone
from deuz_transcripts.sql import ChatWriter
from deuz_transcripts.stores import (
    DjangoChatStore,
    DjangoConditionalChatStore,
    DjangoTranscriptIndex,
)
from deuz_transcripts.verify import Verifier

pytestmark = pytest.mark.django_db

BASE = datetime(2025, 2, 1, 8, 0, tzinfo=UTC)


def record(chat_id: str, text: str, user: str = "ada", n: int = 0, **kwargs: Any) -> ChatRecord:
    return ChatRecord(
        chat_id=chat_id,
        scope={"userId": user},
        messages=[
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": text},
            {"role": "assistant", "content": [{"type": "text", "text": f"noted: {text}"}]},
        ],
        updated_at=BASE + timedelta(minutes=n),
        **kwargs,
    )


def legacy(*records: ChatRecord) -> None:
    for item in records:
        DjangoChatStore().save_chat(item)


def stored(*records: ChatRecord) -> None:
    for item in records:
        DjangoConditionalChatStore().write_chat(item, expected_revision=0)


def found(query: str, scope: dict[str, str] | None = None) -> list[tuple[str, str]]:
    hits = DjangoTranscriptIndex().search(scope or {}, query, limit=100)
    return sorted((hit.chat_id, hit.message_id) for hit in hits)


def snapshot() -> tuple[list[Any], list[Any], list[Any]]:
    """Every row search depends on, primary keys included (a rewrite changes them)."""
    chats = list(Chat.objects.order_by("pk").values_list())
    messages = list(Message.objects.order_by("pk").values_list())
    scopes = list(ChatScope.objects.order_by("pk").values_list())
    return chats, messages, scopes


def problems(**kwargs: Any) -> list[str]:
    return sorted(str(problem) for problem in Verifier(**kwargs).problems())


# backfill


def test_legacy_rows_are_indexed_with_filled_ids_then_unchanged() -> None:
    legacy(
        record("a", "deploy alpha", message_ids=[None, "", "a:1"]),
        record("b", "deploy beta", n=1),
    )
    stats = Backfill().run()
    assert (stats.indexed, stats.unchanged, stats.failed) == (2, 0, 0)
    # index_chat's rule: "a:1" is taken by message 2, so message 1 becomes "a:1:1"
    assert found("deploy") == [("a", "a:1"), ("a", "a:1:1"), ("b", "b:1"), ("b", "b:2")]
    before = snapshot()
    again = Backfill().run()
    assert (again.indexed, again.unchanged) == (0, 2)
    assert snapshot() == before
    assert problems() == []


def test_tombstoned_chats_are_never_indexed() -> None:
    stored(record("gone", "secret plan"))
    legacy(record("gone", "secret plan"), record("kept", "public plan"))
    DjangoConditionalChatStore().delete_chat("gone")  # also drops the legacy copy
    LegacyChat.objects.create(chat_id="gone", scope={}, payload='{"messages": []}', updated_at=BASE)
    stats = Backfill().run()
    assert (stats.indexed, stats.tombstoned) == (1, 1)
    assert found("secret") == [] and found("plan") == [("kept", "kept:1"), ("kept", "kept:2")]


def test_a_store_owned_chat_is_not_overwritten_by_its_legacy_copy() -> None:
    stored(record("x", "new words"))
    legacy(record("x", "old words"))
    stats = Backfill().run("legacy")
    assert (stats.indexed, stats.skipped) == (0, 1)
    assert found("old") == [] and found("new") == [("x", "x:1"), ("x", "x:2")]


def test_stored_chats_are_reindexed_when_the_stored_form_changes(monkeypatch: Any) -> None:
    stored(*(record(f"s{n}", f"word{n} common", n=n) for n in range(4)))
    assert Backfill().run("stored").unchanged == 4
    monkeypatch.setattr(prepared, "STORED_FORM_VERSION", prepared.STORED_FORM_VERSION + 1)
    assert {problem.kind for problem in Verifier().problems()} == {"stale"}
    stats = Backfill().run("stored")
    assert (stats.indexed, stats.unchanged) == (4, 0)
    assert Backfill().run("stored").unchanged == 4
    assert len(found("common")) == 8 and problems() == []
    assert Chat.objects.filter(revision=1).count() == 4  # revisions belong to the store


def test_removed_chats_stay_out_of_search() -> None:
    stored(record("r", "hidden words"))
    DjangoTranscriptIndex().remove("r")
    stats = Backfill().run()
    assert (stats.indexed, stats.skipped) == (0, 1)
    assert found("hidden") == []


def test_chat_id_selects_chats() -> None:
    legacy(record("one", "alpha"), record("two", "alpha"))
    stats = Backfill(chat_ids=["two"]).run()
    assert stats.indexed == 1
    assert {chat_id for chat_id, _ in found("alpha")} == {"two"}


def test_dry_run_writes_nothing() -> None:
    legacy(record("one", "alpha"))
    stored(record("two", "beta"))
    before = snapshot()
    stats = Backfill(dry_run=True).run()
    assert (stats.indexed, stats.unchanged) == (1, 1)
    assert snapshot() == before


def test_rows_are_read_by_key_ranges_never_offset() -> None:
    legacy(*(record(f"c{n}", "alpha", n=n) for n in range(5)))
    with CaptureQueriesContext(connection) as queries:
        stats = Backfill(batch_size=2).run("legacy")
    assert stats.indexed == 5
    batches = [q["sql"] for q in queries if "deuz_chats" in q["sql"] and "LIMIT 2" in q["sql"]]
    assert len(batches) == 4  # 2 + 2 + 1 + the empty batch that ends the walk
    assert all("OFFSET" not in sql.upper() for sql in batches)
    assert sum('"id" >' in sql for sql in batches) == 3


def test_a_failing_chat_is_reported_and_the_run_goes_on() -> None:
    legacy(record("good", "alpha"), record("bad", "alpha", n=1), record("late", "alpha", n=2))
    LegacyChat.objects.filter(chat_id="bad").update(payload="{not json")
    failures: list[str] = []
    stats = Backfill(on_failure=lambda chat_id, exc: failures.append(chat_id)).run()
    assert (stats.indexed, stats.failed, stats.failed_ids) == (2, 1, ["bad"])
    assert failures == ["bad"]
    assert {chat_id for chat_id, _ in found("alpha")} == {"good", "late"}


def test_new_chats_are_written_with_a_constant_number_of_statements() -> None:
    """The first backfill's fast path: statements per group of chats, not per chat."""
    legacy(*(record(f"c{n}", f"alpha w{n}", user=f"u{n % 3}", n=n) for n in range(40)))
    with CaptureQueriesContext(connection) as queries:
        stats = Backfill(batch_size=500, chats_per_transaction=50).run("legacy")
    assert (stats.indexed, stats.failed) == (40, 0)
    assert len(queries) < 20  # one chat by chat: over 8 statements each
    assert len(found("alpha")) == 80 and problems() == []
    assert len(found("alpha", {"userId": "u1"})) == 26  # 13 chats, user and assistant each


def test_one_group_mixes_new_indexed_tombstoned_stored_and_broken_chats() -> None:
    legacy(*(record(f"c{n}", f"alpha w{n}", n=n) for n in range(6)))
    Backfill(chat_ids=["c1"]).run()  # indexed already, unchanged
    legacy(record("c2", "beta changed", n=2))
    Backfill(chat_ids=["c2"]).run()
    legacy(record("c2", "gamma changed again", n=2))  # indexed, now stale
    stored(record("c3", "stored delta", n=3))  # a store owns it: its copy wins
    Tombstone.objects.create(chat_id="c4")
    LegacyChat.objects.filter(chat_id="c5").update(payload="{not json")
    failures: list[str] = []
    stats = Backfill(on_failure=lambda chat_id, exc: failures.append(chat_id)).run("legacy")
    assert (stats.indexed, stats.unchanged, stats.tombstoned, stats.skipped, stats.failed) == (
        2,
        1,
        1,
        1,
        1,
    )
    assert failures == ["c5"]
    assert found("alpha") == [("c0", "c0:1"), ("c0", "c0:2"), ("c1", "c1:1"), ("c1", "c1:2")]
    assert len(found("gamma")) == 2 and found("beta") == [] and len(found("delta")) == 2


def test_a_failing_group_write_falls_back_to_chat_by_chat(monkeypatch: Any) -> None:
    from django.db import DatabaseError

    legacy(*(record(f"c{n}", f"alpha w{n}", n=n) for n in range(4)))

    def broken(self: Any, chats: Any) -> None:
        Chat.objects.create(chat_id="half-written", scope={}, updated_at=BASE)
        raise DatabaseError("the group statement failed")

    monkeypatch.setattr(ChatWriter, "insert_new", broken)
    stats = Backfill().run("legacy")
    assert (stats.indexed, stats.failed) == (4, 0)
    assert not Chat.objects.filter(chat_id="half-written").exists()  # rolled back
    assert len(found("alpha")) == 8 and problems() == []


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's one write lock")
@pytest.mark.django_db(transaction=True)
def test_new_legacy_chats_are_folded_before_their_transaction(monkeypatch: Any) -> None:
    """SQLite's one write lock is held for a group's transaction: the text is folded
    before it, so a second worker folds while the first one writes."""
    legacy(*(record(f"c{n}", f"alpha w{n}", n=n) for n in range(4)))
    inside: list[bool] = []
    fold = prepared.message_terms

    def recording(message: Any) -> Any:
        inside.append(connection.in_atomic_block)
        return fold(message)

    monkeypatch.setattr(prepared, "message_terms", recording)
    stats = Backfill().run("legacy")
    assert (stats.indexed, stats.failed) == (4, 0)
    assert len(inside) == 12 and not any(inside)  # the 3 messages of 4 chats, once each
    monkeypatch.setattr(prepared, "message_terms", fold)
    assert len(found("alpha")) == 8 and problems() == []


def test_a_legacy_row_changed_before_the_lock_is_written_as_the_lock_reads_it(
    monkeypatch: Any,
) -> None:
    legacy(record("a", "deploy alpha"), record("b", "deploy beta", n=1))
    read_early = Backfill._prepare_new_legacy

    def then_changed(self: Backfill, group: Any) -> Any:
        ready = read_early(self, group)
        legacy(record("a", "deploy gamma"))  # a legacy write between the read and the lock
        return ready

    monkeypatch.setattr(Backfill, "_prepare_new_legacy", then_changed)
    stats = Backfill().run("legacy")
    assert (stats.indexed, stats.failed) == (2, 0)
    assert found("alpha") == [] and len(found("gamma")) == 2 and len(found("beta")) == 2
    assert problems() == []


@pytest.mark.skipif(connection.vendor != "sqlite", reason="read before the lock on SQLite")
def test_a_failing_read_before_the_transaction_leaves_the_work_to_it(monkeypatch: Any) -> None:
    from django.db import OperationalError

    legacy(*(record(f"c{n}", f"alpha w{n}", n=n) for n in range(3)))
    read = Backfill._legacy_rows
    calls: list[bool] = []

    def busy_first(self: Backfill, chat_ids: list[str]) -> Any:
        calls.append(True)
        if len(calls) == 1:  # the read before the transaction
            raise OperationalError("database is locked")
        return read(self, chat_ids)

    monkeypatch.setattr(Backfill, "_legacy_rows", busy_first)
    stats = Backfill().run("legacy")
    assert (stats.indexed, stats.failed) == (3, 0) and len(calls) == 2
    assert len(found("alpha")) == 6 and problems() == []


class Killed(BaseException):
    """Stands for the process dying: not an ``Exception``, so the run does not catch it."""


def test_an_interrupted_run_resumes_to_the_same_state(monkeypatch: Any) -> None:
    legacy(*(record(f"c{n}", f"alpha w{n}", n=n) for n in range(6)))
    calls = {"n": 0}

    def dying_insert(self: Any, cursor: Any, batches: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 2:  # dies in the second group, after its chat rows were written
            raise Killed
        return original_insert(self, cursor, batches)

    backend = DjangoTranscriptIndex().backend
    original_insert = type(backend.rows).insert_new_chats  # a group's rows, every engine
    monkeypatch.setattr(type(backend.rows), "insert_new_chats", dying_insert)
    with pytest.raises(Killed):
        Backfill(batch_size=2).run()
    monkeypatch.setattr(type(backend.rows), "insert_new_chats", original_insert)
    # the transaction in flight (c2 and c3: one per batch of 2 here) is lost whole
    assert set(Chat.objects.values_list("chat_id", flat=True)) == {"c0", "c1"}
    assert not Message.objects.filter(chat__chat_id__in=["c2", "c3"]).exists()
    stats = Backfill(batch_size=2).run()
    assert (stats.indexed, stats.unchanged, stats.failed) == (4, 2, 0)
    assert len(found("alpha")) == 12 and problems() == []
    assert Backfill().run().unchanged == 6


# verify and fix


def fix_all() -> None:
    result = Verifier().run(fix=True)
    assert result.found > 0 and result.remaining == []


def test_verify_finds_missing_legacy_chats_and_fix_indexes_them() -> None:
    legacy(record("l", "alpha"))
    assert problems() == ["missing: l: legacy chat not indexed"]
    fix_all()
    assert found("alpha") == [("l", "l:1"), ("l", "l:2")] and problems() == []


def test_verify_finds_a_changed_legacy_row() -> None:
    legacy(record("l", "alpha"))
    Backfill().run()
    legacy(record("l", "beta"))
    assert problems() == ["stale: l: legacy chat differs from its indexed copy"]
    fix_all()
    assert found("alpha") == [] and len(found("beta")) == 2


def test_verify_finds_wrong_counts_and_scope_rows() -> None:
    stored(record("s", "alpha"), record("t", "beta", n=1))
    Chat.objects.filter(chat_id="s").update(indexed_count=9)
    ChatScope.objects.filter(chat__chat_id="t").delete()
    found_problems = problems()
    assert len(found_problems) == 2
    assert "indexed_count 9 != 2" in found_problems[0]
    assert "scope lookup rows" in found_problems[1]
    fix_all()
    assert problems() == [] and len(found("beta", {"userId": "ada"})) == 2


def test_verify_finds_rows_of_a_tombstoned_chat() -> None:
    DjangoTranscriptIndex().index(record("z", "zombie words"))
    Tombstone.objects.create(chat_id="z")  # as if the index ran before this check existed
    assert problems() == ["orphaned: z: rows of a deleted (tombstoned) chat"]
    fix_all()
    assert not Chat.objects.filter(chat_id="z").exists() and problems() == []


def _verify_statements() -> int:
    with CaptureQueriesContext(connection) as queries:
        assert Verifier().run().found == 0
    return len(queries)


def test_verify_checks_many_chats_per_statement() -> None:
    """No statement per chat or per message: 30 chats (legacy and stored) cost what 3 do."""
    legacy(*(record(f"l{n}", f"alpha{n} words", n=n) for n in range(3)))
    stored(*(record(f"s{n}", f"beta{n} words", n=n) for n in range(3)))
    Backfill().run()
    few = _verify_statements()
    legacy(*(record(f"l{n}", f"alpha{n} words", n=n) for n in range(3, 30)))
    stored(*(record(f"s{n}", f"beta{n} words", n=n) for n in range(3, 30)))
    Backfill().run()
    assert _verify_statements() == few


def test_verify_changes_nothing() -> None:
    stored(record("s", "alpha"))
    Message.objects.update(digest="0" * 32)
    before = snapshot()
    assert problems()
    assert snapshot() == before


@pytest.mark.skipif(connection.vendor != "sqlite", reason="the LIKE fallback is SQLite's")
def test_like_fallback_search_text_is_verified_and_fixed(settings: Any) -> None:
    settings.DEUZ_TRANSCRIPTS = {**settings.DEUZ_TRANSCRIPTS, "SQLITE_BACKEND": "like"}
    stored(record("s", "alpha"))
    Message.objects.filter(message_id="s:1").update(search_text="zzz")
    assert found("zz") == [("s", "s:1")]
    assert problems() == ["stale: s: 1 message row(s) out of date (first index 1)"]
    fix_all()
    assert found("zz") == [] and len(found("alph")) == 2 and problems() == []


def _backend() -> str:
    return DjangoTranscriptIndex().backend_name


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL vectors")
def test_verify_finds_missing_and_wrong_vectors_on_postgresql() -> None:
    stored(record("s", "alpha beta"), record("t", "gamma", n=1))
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE deuz_transcripts_message SET search_vector = NULL WHERE message_id = 's:1'"
        )
        cursor.execute(
            "UPDATE deuz_transcripts_message SET search_vector = 'wrong'::tsvector "
            "WHERE message_id = 't:1'"
        )
    assert problems() == [
        "missing: s: 1 row(s) without a vector",
        "stale: t: 1 row(s) with a wrong vector",
    ]
    assert found("alpha") == [("s", "s:2")]
    fix_all()
    assert found("alpha") == [("s", "s:1"), ("s", "s:2")] and problems() == []


fts5_only = pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite FTS5 table checks")


def _fts(sql: str, params: list[Any]) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def _body(message_id: str) -> tuple[int, str]:
    from deuz_transcripts.backends.sqlite.fts5_expressions import fts_body

    row = Message.objects.select_related("chat").get(message_id=message_id)
    return row.pk, fts_body(row.search_text, row.chat.scope, row.chat.chat_id, row.role)


@fts5_only
def test_verify_and_fix_fts_rows() -> None:
    if _backend() != "sqlite-fts5":
        pytest.skip("FTS5 not in use")
    stored(record("s", "alpha beta"), record("t", "gamma", n=1), record("u", "delta", n=2))
    table = "deuz_transcripts_fts"
    pk, body = _body("s:1")  # a missing row
    _fts(f"INSERT INTO {table} ({table}, rowid, body) VALUES ('delete', %s, %s)", [pk, body])
    pk, body = _body("t:1")  # a row with a leftover token
    _fts(f"INSERT INTO {table} ({table}, rowid, body) VALUES ('delete', %s, %s)", [pk, body])
    _fts(f"INSERT INTO {table} (rowid, body) VALUES (%s, %s)", [pk, body + " leftover"])
    _fts(f"INSERT INTO {table} (rowid, body) VALUES (%s, %s)", [987654, "orphan words"])
    pk, body = _body("u:1")  # a row missing a term
    _fts(f"INSERT INTO {table} ({table}, rowid, body) VALUES ('delete', %s, %s)", [pk, body])
    _fts(f"INSERT INTO {table} (rowid, body) VALUES (%s, %s)", [pk, body.replace("delta", "")])
    assert found("leftover") == [("t", "t:1")] and found("delta") == [("u", "u:2")]
    assert problems() == [
        f"missing: s: 1 FTS row(s) missing (rowid {_body('s:1')[0]})",
        "orphaned: (unknown chat): 1 FTS row(s) with no message (rowid 987654)",
        f"stale: t: 1 FTS row(s) hold extra tokens (rowid {_body('t:1')[0]})",
        f"stale: u: 1 FTS row(s) lack tokens (rowid {_body('u:1')[0]})",
    ]
    # the same chats asked for by id: checked row by row, same verdicts
    assert problems(chat_ids=["s", "u"]) == [
        "missing: s: 1 FTS row(s) missing",
        "stale: u: 1 FTS row(s) lack tokens",
    ]
    fix_all()
    assert problems() == []
    assert found("leftover") == [] and found("orphan") == []
    assert found("alpha") == [("s", "s:1"), ("s", "s:2")]
    assert found("delta") == [("u", "u:1"), ("u", "u:2")]


@fts5_only
def test_fix_finds_and_counts_what_verify_finds() -> None:
    """A chat with a stale row count and an FTS row holding a leftover token: fixing the
    chat first used to hide the second problem from --fix's own count."""
    if _backend() != "sqlite-fts5":
        pytest.skip("FTS5 not in use")
    stored(record("t", "gamma"))
    Chat.objects.filter(chat_id="t").update(message_count=9)
    pk, body = _body("t:1")
    _fts(
        "INSERT INTO deuz_transcripts_fts (deuz_transcripts_fts, rowid, body) VALUES ('delete', %s, %s)",
        [pk, body],
    )
    _fts("INSERT INTO deuz_transcripts_fts (rowid, body) VALUES (%s, %s)", [pk, body + " leftover"])
    verified = Verifier().run()
    fixed = Verifier().run(fix=True)
    assert (verified.found, verified.chats) == (fixed.found, fixed.chats) == (2, {"t"})
    assert fixed.remaining == [] and problems() == [] and found("leftover") == []


@fts5_only
def test_fts_rows_left_by_a_deleted_chat_are_named_by_their_chat_id() -> None:
    if _backend() != "sqlite-fts5":
        pytest.skip("FTS5 not in use")
    stored(record("kept", "alpha"), record("gone", "omega words", n=1))
    pk, body = _body("gone:1")
    DjangoConditionalChatStore().delete_chat("gone")
    _fts("INSERT INTO deuz_transcripts_fts (rowid, body) VALUES (%s, %s)", [pk, body])
    assert found("omega") == []  # the chat row is gone, so search cannot reach it
    assert problems() == [f"orphaned: gone: 1 FTS row(s) with no message (rowid {pk})"]
    result = Verifier().run(fix=True)
    assert (result.found, result.chats, result.remaining) == (1, {"gone"}, [])
    assert problems() == []


@fts5_only
def test_fix_rewrites_rows_whose_terms_changed_without_a_version_bump() -> None:
    if _backend() != "sqlite-fts5":
        pytest.skip("FTS5 not in use")
    stored(record("s", "alpha"))
    pk, body = _body("s:1")
    _fts(
        "INSERT INTO deuz_transcripts_fts (deuz_transcripts_fts, rowid, body) "
        "VALUES ('delete', %s, %s)",
        [pk, body],
    )
    _fts(
        "INSERT INTO deuz_transcripts_fts (rowid, body) VALUES (%s, %s)",
        [pk, body.replace("alpha", "old")],
    )
    Message.objects.filter(pk=pk).update(search_text="old")
    assert problems() == ["stale: s: 1 message row(s) out of date (first index 1)"]
    fix_all()
    assert problems() == [] and found("old") == [] and len(found("alpha")) == 2
