"""A database that is not migrated or not reachable: one line naming the cause and the fix.

Commands print ``CommandError: <why>`` (one line, exit 1, no traceback); the API raises
``TranscriptError`` whose message names the cause (``run `manage.py migrate```, "cannot
reach the database") with the driver's error as ``__cause__``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection, transaction

from deuz_transcripts import TranscriptError
from deuz_transcripts.models import Chat
from deuz_transcripts.sql.errors import describe_database_error
from deuz_transcripts.stores import DjangoConditionalChatStore, DjangoTranscriptIndex

ROOT = Path(__file__).resolve().parent.parent

COMMANDS = [
    ["search_transcripts", "izmir", "--scope", "userId=ada"],
    ["backfill_transcripts"],
    ["backfill_transcripts", "--verify"],
    ["backfill_transcripts", "--fix"],
    ["load_demo_transcripts", "--chats", "2"],
]

API_SCRIPT = """
import django
django.setup()
from deuz_transcripts import TranscriptError
from deuz_transcripts.stores import DjangoConditionalChatStore
try:
    DjangoConditionalChatStore().load_chat("c")
except TranscriptError as exc:
    print(exc)
"""


def _run(args: list[str], database_url: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "testproject.settings",
    }
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def _assert_one_line(done: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("CommandError: ")
    for text in expected:
        assert text in lines[0], lines[0]


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_commands_on_a_database_that_is_not_migrated(args: list[str], tmp_path: Path) -> None:
    done = _run(["manage.py", *args], f"sqlite:///{tmp_path / 'empty.sqlite3'}")
    _assert_one_line(done, "not migrated", "no such table", "run `manage.py migrate`")


@pytest.mark.parametrize(
    "database_url",
    ["postgres://postgres@127.0.0.1:1/refused", "sqlite:////nonexistent-dir/x/db.sqlite3"],
    ids=["postgresql-refused", "sqlite-unopenable"],
)
@pytest.mark.parametrize("args", COMMANDS[:3], ids=" ".join)
def test_commands_on_a_database_that_is_not_reachable(args: list[str], database_url: str) -> None:
    done = _run(["manage.py", *args], database_url)
    _assert_one_line(done, "cannot reach the database", "check DATABASES")


def test_the_system_check_of_an_unreachable_database_is_an_error() -> None:
    """``check --database default`` must not say "no issues" when it could read nothing.
    (On SQLite, Django's own model checks open the database first and fail before ours.)"""
    done = _run(
        ["manage.py", "check", "--database", "default"], "postgres://postgres@127.0.0.1:1/refused"
    )
    assert done.returncode == 1, done.stderr
    assert "(deuz_transcripts.E019) Database 'default': cannot reach the database" in done.stderr
    assert "Connection refused" in done.stderr and "no issues" not in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("database_url", "expected"),
    [
        ("postgres://postgres@127.0.0.1:1/refused", "Connection refused"),
        ("sqlite:////nonexistent-dir/x/db.sqlite3", "unable to open database file"),
    ],
)
def test_the_api_error_of_an_unreachable_database_names_the_cause(
    database_url: str, expected: str
) -> None:
    done = _run(["-c", API_SCRIPT], database_url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("cannot reach the database (")
    assert expected in done.stdout


@pytest.mark.django_db
def test_the_api_error_of_a_database_that_is_not_migrated_names_the_fix() -> None:
    """The app's tables renamed away inside a rolled-back savepoint: every call says migrate."""
    store, index = DjangoConditionalChatStore(), DjangoTranscriptIndex()
    table = Chat._meta.db_table
    with pytest.raises(RuntimeError), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(f"ALTER TABLE {table} RENAME TO {table}_away")
        for call in (
            lambda: store.load_chat("c"),
            # (not a tenant-only scope: with TENANT_KEY set, its N is a stored count,
            # and a search with nothing indexed reads no chat row)
            lambda: index.search({"userId": "ada", "team": "x"}, "izmir"),
        ):
            with pytest.raises(TranscriptError) as excinfo, transaction.atomic():
                call()
            message = str(excinfo.value)
            assert "not migrated" in message and "run `manage.py migrate`" in message
            assert table in message
            assert excinfo.value.__cause__ is not None
        raise RuntimeError("roll the rename back")
    assert not Chat.objects.exists()


def test_describe_keeps_only_the_first_line_of_the_driver_message() -> None:
    class Fake(Exception):
        pass

    exc = Fake('duplicate key value violates unique constraint "x"\nDETAIL:  Key (id)=(secret)')
    assert describe_database_error(exc) == (
        'database error: Fake: duplicate key value violates unique constraint "x"'
    )
    assert describe_database_error(Fake("x" * 1000)).endswith("x…")
    # lock conflicts are told by their error code (``is_lock_conflict``), never by the text
    assert describe_database_error(Fake("database is locked")) == (
        "database error: Fake: database is locked"
    )
