"""The stored form a database was indexed in: recorded by writes and backfills, read by
check W004 (never a sample of rows), caught after a kana rule change, never stale."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.management import CommandError, call_command
from django.db.migrations.loader import MigrationLoader
from django.test import override_settings

from deuz_transcripts import prepared, text
from deuz_transcripts.backfill import Backfill
from deuz_transcripts.checks import check_text_rules
from deuz_transcripts.message_text import indexed_text
from deuz_transcripts.models import Message, StoredForm
from deuz_transcripts.stores import DjangoConditionalChatStore
from deuz_transcripts.text import term_ranges
from tests.contract.helpers import ADA, chat, ids

pytestmark = pytest.mark.django_db


def bigrams() -> override_settings:
    """``CJK_BIGRAMS`` on, over the test project's own settings."""
    given = getattr(django_settings, "DEUZ_TRANSCRIPTS", {})
    return override_settings(DEUZ_TRANSCRIPTS={**given, "CJK_BIGRAMS": True})


def warnings() -> list[str]:
    return [message.msg for message in check_text_rules(databases=["default"])]


def backfill(*args: str) -> None:
    call_command("backfill_transcripts", *args, stdout=io.StringIO(), stderr=io.StringIO())


def write(chat_id: str, *texts: str) -> None:
    DjangoConditionalChatStore().write_chat(chat(chat_id, *texts), expected_revision=0)


def test_a_fresh_database_with_no_messages_does_not_warn():
    assert StoredForm.objects.count() == 0
    assert warnings() == []
    with bigrams():
        assert warnings() == []


def test_every_write_of_message_rows_records_its_form():
    write("c1", "plain words")
    with bigrams():
        write("c2", "東京都")
    assert sorted(StoredForm.objects.values_list("form", "reindexing")) == [
        ("1", False),
        ("1+cjk-bigrams-2", False),
    ]


def test_rows_of_the_other_form_are_caught_however_many_new_rows_follow():
    """A sample of the newest 50 rows went silent once 50 rows of the form in force
    followed the old ones."""
    write("old", "ご注文の確認")
    with bigrams():
        for n in range(30):
            write(f"new-{n}", "東京都", "京都")
        assert Message.objects.count() == 61
        [warning] = warnings()
        assert "indexed under CJK_BIGRAMS=False" in warning
        assert ids(DjangoConditionalChatStore().transcript.search(ADA, "注文")) == []
        backfill()
        assert warnings() == []
        assert ids(DjangoConditionalChatStore().transcript.search(ADA, "注文")) == ["old:0"]


def test_a_partly_reindexed_database_still_warns(monkeypatch):
    write("c1", "ご注文の確認")
    write("c2", "ご注文の確認")
    with bigrams():
        backfill("--chat-id", "c1")  # one chat of two: the other is still in the old form
        assert len(warnings()) == 1
        real = Backfill.stored_chat

        def failing(self: Backfill, pk: int, chat_id: str) -> Any:
            if chat_id == "c2":
                raise RuntimeError("disk full")
            return real(self, pk, chat_id)

        monkeypatch.setattr(Backfill, "stored_chat", failing)
        with pytest.raises(CommandError, match="failed to index"):
            backfill()
        [warning] = warnings()  # the old form is forgotten, but the re-index did not finish
        assert "started and has not finished" in warning
        monkeypatch.setattr(Backfill, "stored_chat", real)
        backfill("--dry-run")  # writes nothing, records nothing
        assert len(warnings()) == 1
        backfill()
        assert warnings() == []


def test_an_interrupted_backfill_leaves_a_warning(monkeypatch):
    write("c1", "ご注文の確認")
    with bigrams():

        def interrupted(self: Backfill, pk: int, chat_id: str) -> Any:
            raise KeyboardInterrupt

        monkeypatch.setattr(Backfill, "stored_chat", interrupted)
        with pytest.raises(KeyboardInterrupt):
            backfill()
        assert ["started and has not finished" in warning for warning in warnings()] == [True]


def _terms_before_the_kana_rule(message: Any) -> list[str] | None:
    """Bigrams of the fold that dropped voicing marks: what a database indexed with
    CJK_BIGRAMS before 2026-12-06 holds."""
    value = indexed_text(message)
    if value is None:
        return None
    words = re.findall(r"[^\W_]+", text._fold_seed(value))
    return list(dict.fromkeys(w[a:b] for w in words for a, b in term_ranges(w)))


@pytest.fixture
def indexed_before_the_kana_rule(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A database written with CJK_BIGRAMS by the version before voicing marks were kept."""
    with bigrams():
        with monkeypatch.context() as old:
            old.setattr(text, "CJK_BIGRAMS_TAG", "+cjk-bigrams")
            old.setattr(prepared, "message_terms", _terms_before_the_kana_rule)
            write("c1", "バス停", "デプロイが失敗")
        yield


@pytest.mark.usefixtures("indexed_before_the_kana_rule")
def test_a_database_indexed_before_the_kana_rule_is_caught_and_backfilled():
    search = DjangoConditionalChatStore().transcript.search
    assert ids(search(ADA, "バス")) == []  # stored as ハス
    assert ids(search(ADA, "ハス")) == ["c1:0"]
    [warning] = warnings()
    assert "kana voicing marks dropped" in warning
    backfill()
    assert warnings() == []
    assert ids(search(ADA, "バス")) == ["c1:0"]
    assert ids(search(ADA, "ハス")) == []
    assert ids(search(ADA, "デフォルト")) == []  # shared テフ..., no bigram now


@pytest.mark.django_db(databases=["default", "other"])  # Django 6's checks may query them
@pytest.mark.usefixtures("indexed_before_the_kana_rule")
def test_runserver_shows_it_with_debug_on(settings):
    """``runserver`` runs the checks without naming a database."""
    settings.DEBUG = True
    assert [m.id for m in check_text_rules(databases=None)] == ["deuz_transcripts.W004"]
    out = io.StringIO()
    call_command("check", stdout=out, stderr=out)
    assert "deuz_transcripts.W004" in out.getvalue()
    settings.DEBUG = False
    assert check_text_rules(databases=None) == []


def _migration_before_stored_forms() -> str:
    """The migration the stored-form one follows (found by what it creates, not a number)."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    [creating] = [
        migration
        for (app, _), migration in loader.disk_migrations.items()
        if app == "deuz_transcripts"
        and any(getattr(op, "name", "") == "StoredForm" for op in migration.operations)
    ]
    [(_, before)] = creating.dependencies
    return str(before)


@pytest.mark.django_db(transaction=True)
def test_a_database_that_held_messages_before_the_migration_asks_for_one_backfill():
    before = _migration_before_stored_forms()
    write("c1", "plain words")
    call_command("migrate", "deuz_transcripts", before, verbosity=0)
    call_command("migrate", "deuz_transcripts", verbosity=0)
    assert list(StoredForm.objects.values_list("form", flat=True)) == ["unrecorded"]
    [warning] = warnings()
    assert "did not record" in warning
    backfill()
    assert warnings() == []
    StoredForm.objects.all().delete()
    Message.objects.all().delete()
    call_command("migrate", "deuz_transcripts", before, verbosity=0)
    call_command("migrate", "deuz_transcripts", verbosity=0)
    assert StoredForm.objects.count() == 0  # an empty database records nothing
