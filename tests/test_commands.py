"""The management commands: backfill_transcripts, search_transcripts, load_demo_transcripts.

Bad and hostile arguments (NUL, lone surrogates, SQL and FTS syntax, huge values) end in
one clear ``CommandError``, never a traceback from deeper down.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import transaction
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from deuz_transcripts import ChatRecord
from deuz_transcripts.models import Chat, LegacyChat, Tombstone
from deuz_transcripts.stores import (
    DjangoChatStore,
    DjangoConditionalChatStore,
    DjangoTranscriptIndex,
)
from tests.answer_shape import ANSWER_KEYS, HIT_KEYS
from tests.cursor_forgery import forged_cursors
from tests.factories import ChatRecordFactory
from tests.strategies import any_char, tricky_char

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]

ROOT = Path(__file__).resolve().parent.parent
BASE = datetime(2025, 1, 1, tzinfo=UTC)


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def run(name: str, *args: str, stderr: io.StringIO | None = None) -> tuple[str, str]:
    out, err = io.StringIO(), stderr if stderr is not None else io.StringIO()
    call_command(name, *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def record(chat_id: str, text: str, user: str = "ada", n: int = 0) -> ChatRecord:
    return ChatRecord(
        chat_id=chat_id,
        scope={"userId": user},
        messages=[
            {"role": "system", "content": "system words"},
            {"role": "user", "content": text},
            {"role": "assistant", "content": "Sure."},
        ],
        updated_at=BASE + timedelta(minutes=n),
    )


# backfill_transcripts


def test_backfill_prints_progress_lines_and_a_summary() -> None:
    for n in range(5):
        DjangoChatStore().save_chat(record(f"l{n}", "alpha", n=n))
    DjangoConditionalChatStore().write_chat(record("s", "beta"), expected_revision=0)
    DjangoConditionalChatStore().delete_chat("l4")
    DjangoChatStore().save_chat(record("l4", "alpha"))  # a legacy copy of a deleted chat
    out, err = run("backfill_transcripts", "--batch-size", "2")
    assert out.strip() == (
        "Backfill: 4 indexed, 1 unchanged, 1 skipped (tombstoned), 0 skipped (other), 0 failed."
    )
    assert err.splitlines() == [
        "legacy: 0/5 chats",
        "legacy: 2/5 chats",
        "legacy: 4/5 chats",
        "legacy: 5/5 chats",
        "stored: 0/1 chats",
        "stored: 1/1 chats",
    ]
    out, _ = run("backfill_transcripts")
    assert out.startswith("Backfill: 0 indexed, 5 unchanged, 1 skipped (tombstoned)")


def test_backfill_draws_a_bar_on_a_terminal() -> None:
    DjangoChatStore().save_chat(record("l", "alpha"))
    _, err = run("backfill_transcripts", "--source", "legacy", stderr=Tty())
    assert "\rlegacy [##############################] 1/1 100%" in err
    assert err.endswith("\n")


def test_backfill_reports_a_failing_chat_and_exits_non_zero() -> None:
    for chat_id in ("a", "b", "c"):
        DjangoChatStore().save_chat(record(chat_id, "alpha"))
    LegacyChat.objects.filter(chat_id="b").update(payload="[broken")
    err = io.StringIO()
    with pytest.raises(CommandError, match=r"1 chat\(s\) failed to index: 'b'"):
        call_command("backfill_transcripts", stdout=io.StringIO(), stderr=err)
    assert "failed: chat 'b': JSONDecodeError" in err.getvalue()
    assert set(Chat.objects.values_list("chat_id", flat=True)) == {"a", "c"}


def test_backfill_dry_run_and_chat_id() -> None:
    DjangoChatStore().save_chat(record("a", "alpha"))
    DjangoChatStore().save_chat(record("b", "alpha"))
    out, _ = run("backfill_transcripts", "--dry-run")
    assert out.startswith("Dry run: 2 would index, 0 unchanged")
    assert not Chat.objects.exists()
    run("backfill_transcripts", "--chat-id", "b")
    assert list(Chat.objects.values_list("chat_id", flat=True)) == ["b"]


@pytest.mark.parametrize("mode", [[], ["--verify"], ["--fix"], ["--dry-run"]])
def test_a_chat_id_no_chat_has_is_an_error_naming_it_and_nothing_is_done(mode: list[str]) -> None:
    DjangoChatStore().save_chat(record("a", "alpha"))
    DjangoConditionalChatStore().write_chat(record("gone", "beta"), expected_revision=0)
    DjangoConditionalChatStore().delete_chat("gone")
    with pytest.raises(CommandError) as excinfo:
        run("backfill_transcripts", *mode, "--chat-id", "a", "--chat-id", "does-not-exist")
    assert "no chat with --chat-id 'does-not-exist'" in str(excinfo.value)
    assert "nothing was done" in str(excinfo.value)
    assert not Chat.objects.exists()
    with pytest.raises(CommandError, match=r"'gone' \(deleted\)"):
        run("backfill_transcripts", *mode, "--chat-id", "gone")


def test_verify_prints_progress_and_the_same_counts_as_fix() -> None:
    for n in range(5):
        DjangoChatStore().save_chat(record(f"l{n}", "alpha", n=n))
    for n in range(3):
        DjangoConditionalChatStore().write_chat(record(f"s{n}", "beta", n=n), expected_revision=0)
    Chat.objects.filter(chat_id__in=["s0", "s2"]).update(message_count=7)
    with pytest.raises(CommandError):
        call_command(
            "backfill_transcripts",
            "--verify",
            "--batch-size",
            "2",
            stdout=io.StringIO(),
            stderr=(err := io.StringIO()),
        )
    lines = err.getvalue().splitlines()
    assert [line for line in lines if not line.startswith("search data")] == [
        "legacy: 0/5 chats",
        "legacy: 2/5 chats",
        "legacy: 4/5 chats",
        "legacy: 5/5 chats",
        "stored: 0/3 chats",
        "stored: 2/3 chats",
        "stored: 3/3 chats",
    ]
    if DjangoTranscriptIndex().backend_name == "sqlite-fts5":  # the pass over every FTS row
        swept = [line for line in lines if line.startswith("search data")]
        assert swept[0] == "search data: 0/9 messages" and swept[-1] == lines[-1]
        assert lines[-1] == "search data: 9/9 messages"
    verify = io.StringIO()
    with pytest.raises(CommandError):
        call_command("backfill_transcripts", "--verify", stdout=verify, stderr=io.StringIO())
    out, _ = run("backfill_transcripts", "--fix")
    counted = "7 problem(s) in 7 chat(s)"
    assert counted in verify.getvalue().splitlines()[-1]
    assert out.splitlines()[:-1] == verify.getvalue().splitlines()[:-1]
    assert out.splitlines()[-1].endswith(f"{counted}; 0 left after fixing.")


def test_verify_reports_an_unreadable_legacy_row_and_goes_on() -> None:
    for chat_id in ("a", "b", "c"):
        DjangoChatStore().save_chat(record(chat_id, "alpha"))
    LegacyChat.objects.filter(chat_id="b").update(payload="[broken")
    out = io.StringIO()
    with pytest.raises(CommandError, match=r"3 chat\(s\) needs repair"):
        call_command("backfill_transcripts", "--verify", stdout=out, stderr=io.StringIO())
    assert out.getvalue().splitlines()[:3] == [
        "missing: a: legacy chat not indexed",
        "unreadable: b: legacy row cannot be read: JSONDecodeError: "
        "Expecting value: line 1 column 2 (char 1)",
        "missing: c: legacy chat not indexed",
    ]
    err = io.StringIO()
    with pytest.raises(CommandError, match=r"1 problem\(s\) could not be fixed"):
        call_command("backfill_transcripts", "--fix", stdout=io.StringIO(), stderr=err)
    assert (
        err.getvalue()
        .splitlines()[-1]
        .startswith("not fixed: unreadable: b: legacy row cannot be read")
    )
    assert set(Chat.objects.values_list("chat_id", flat=True)) == {"a", "c"}


def test_problem_lines_print_control_characters_escaped() -> None:
    DjangoChatStore().save_chat(record("c\x1b[2J\u202e", "alpha"))
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("backfill_transcripts", "--verify", stdout=out, stderr=io.StringIO())
    assert out.getvalue().splitlines()[0] == "missing: c\\x1b[2J\\u202e: legacy chat not indexed"


def test_verify_reports_without_changing_and_fix_repairs() -> None:
    DjangoChatStore().save_chat(record("a", "alpha"))
    DjangoConditionalChatStore().write_chat(record("s", "beta"), expected_revision=0)
    Chat.objects.filter(chat_id="s").update(message_count=7)
    out = io.StringIO()
    with pytest.raises(CommandError, match=r"search data of 2 chat\(s\) needs repair"):
        call_command("backfill_transcripts", "--verify", stdout=out, stderr=io.StringIO())
    lines = out.getvalue().splitlines()
    assert lines[:2] == [
        "missing: a: legacy chat not indexed",
        "stale: s: message_count 7 != 3",
    ]
    assert "2 problem(s) in 2 chat(s); run with --fix to repair." in lines[-1]
    assert not Chat.objects.filter(chat_id="a").exists()
    out, _ = run("backfill_transcripts", "--fix")
    assert out.splitlines()[-1].endswith("2 problem(s) in 2 chat(s); 0 left after fixing.")
    out, _ = run("backfill_transcripts", "--verify")
    assert out.strip().endswith("no problems found.")
    assert Chat.objects.get(chat_id="s").message_count == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--batch-size", "0"], "--batch-size must be between 1 and 100,000"),
        (["--verify", "--batch-size", str(2**31)], "--batch-size must be between 1 and 100,000"),
        (["--source", "everything"], "invalid choice"),
        (["--fix", "--dry-run"], "use it alone"),
        (["--chat-id", ""], "not a valid chat id"),
        (["--chat-id", "\udcff"], "not a valid chat id: it is not valid Unicode"),
        (["--verify", "--chat-id", "a\x00b"], "not a valid chat id: it must not contain NUL"),
        (["--database", "nope"], "unknown database"),
    ],
)
def test_backfill_bad_arguments(args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        call_command("backfill_transcripts", *args, stdout=io.StringIO(), stderr=io.StringIO())


# search_transcripts


def _chats() -> None:
    store = DjangoConditionalChatStore()
    store.write_chat(record("trip", "Book the flight to İzmir."), expected_revision=0)
    store.write_chat(record("bob-trip", "izmir again", user="bob", n=1), expected_revision=0)


def test_search_prints_a_table() -> None:
    _chats()
    out, _ = run("search_transcripts", "--scope", "userId=ada", "IZMIR", "--around", "1")
    lines = out.splitlines()
    assert lines[0].startswith("1 hit(s) (")
    assert lines[1].split()[4:7] == ["updated", "(UTC)", "snippet"]
    assert lines[2].split() == [
        "1.000",
        "trip",
        "1",
        "user",
        "2025-01-01T00:00Z",  # the chat's updated_at
        "Book",
        "the",
        "flight",
        "to",
        "İzmir.",
    ]
    assert lines[3].split()[:2] == ["2>", "assistant"]
    assert len(lines) == 4  # the system message is never context


def test_search_json_is_one_document() -> None:
    _chats()
    out, _ = run("search_transcripts", "--all-scopes", "izmir", "--json", "--limit", "5")
    document = json.loads(out)
    assert document.pop("backend") == DjangoTranscriptIndex().backend_name
    assert set(document) == ANSWER_KEYS  # the endpoint's shape (README)
    assert [hit["chat_id"] for hit in document["hits"]] == ["bob-trip", "trip"]
    assert set(document["hits"][0]) == HIT_KEYS
    assert document["hits"][0]["updated_at"] == "2025-01-01T00:01:00+00:00"  # BASE + 1 min
    assert document["hits"][0]["snippet"] == "izmir again"
    assert document["hits"][0]["around"] == []
    out, _ = run("search_transcripts", "--scope", "userId=ada", "izmir", "--json", "--around", "1")
    hit = json.loads(out)["hits"][0]
    assert [item["message_id"] for item in hit["around"]] == ["trip:2"]
    assert hit["score"] == 1.0


def write_izmir_trips() -> None:
    store = DjangoConditionalChatStore()
    for number in range(3):
        store.write_chat(
            record(f"c{number}", f"izmir trip {number}", n=number), expected_revision=0
        )


def test_a_forged_cursor_is_a_one_line_error() -> None:
    write_izmir_trips()
    out, _ = run("search_transcripts", "--scope", "userId=ada", "izmir", "--limit", "1")
    cursor = out.splitlines()[-1].split()[-1]
    for forged in forged_cursors(cursor):
        with pytest.raises(CommandError) as caught:
            run("search_transcripts", "--scope", "userId=ada", "izmir", "--cursor", forged)
        assert str(caught.value) == "cursor: is not a cursor of this index"


def test_search_filters_count_and_cursor() -> None:
    write_izmir_trips()
    out, _ = run("search_transcripts", "--scope", "userId=ada", "izmir", "--limit", "2")
    lines = out.splitlines()
    assert lines[0].startswith("2 hit(s) (") and "of 3 matching message(s)" in lines[0]
    assert lines[-1].startswith("Next page: --cursor ")
    capped, _ = run("search_transcripts", "--scope", "userId=ada", "izmir", "--total-cap", "2")
    assert "of more than 2 matching message(s)" in capped.splitlines()[0]
    out_json, _ = run(
        "search_transcripts", "--scope", "userId=ada", "izmir", "--total-cap", "2", "--json"
    )
    assert (json.loads(out_json)["count"], json.loads(out_json)["count_exact"]) == (2, False)
    exact, _ = run("search_transcripts", "--scope", "userId=ada", "izmir", "--total-cap", "0")
    assert "of 3 matching message(s)" in exact.splitlines()[0]
    with pytest.raises(CommandError, match="--total-cap"):
        run("search_transcripts", "--scope", "userId=ada", "izmir", "--total-cap", "-1")
    cursor = lines[-1].split()[-1]
    out, _ = run(
        "search_transcripts", "--scope", "userId=ada", "izmir", "--limit", "2", "--cursor", cursor
    )
    assert out.splitlines()[0].startswith("1 hit(s) (") and "Next page" not in out
    out, _ = run(
        "search_transcripts", "--scope", "userId=ada", "izmir", "--json", "--role", "assistant"
    )
    document = json.loads(out)
    assert (document["count"], document["next_cursor"], document["hits"]) == (0, None, [])
    out, _ = run(
        "search_transcripts",
        "--scope",
        "userId=ada",
        "izmir",
        "--json",
        "--role",
        "user",
        "--updated-after",
        "2000-01-01T00:00:00Z",
        "--updated-before",
        "2999-01-01T00:00:00+02:00",
    )
    assert json.loads(out)["count"] == 3


def test_search_shows_each_hits_snippet_around_its_matches() -> None:
    """A long hit is printed as the excerpt around its matched words, not its first line."""
    text = "preamble\n" + "filler words " * 60 + "the izmir flight\tis booked " + "tail " * 40
    DjangoConditionalChatStore().write_chat(record("long", text), expected_revision=0)
    out, _ = run("search_transcripts", "--scope", "userId=ada", "izmir")
    line = out.splitlines()[2]
    assert line.split()[:4] == ["1.000", "long", "1", "user"]
    assert "…" in line and "the izmir flight is booked" in line and "preamble" not in line
    assert out.splitlines()[1].endswith("snippet")
    out, _ = run("search_transcripts", "--scope", "userId=ada", "izmir", "--json")
    [hit] = json.loads(out)["hits"]
    assert hit["snippet"].startswith("…") and "the izmir flight is booked" in hit["snippet"]
    assert "\n" not in hit["snippet"] and "\t" not in hit["snippet"]


def test_search_names_the_words_past_the_32nd() -> None:
    _chats()
    query = " ".join(f"filler{n}" for n in range(40)) + " izmir"
    out, _ = run("search_transcripts", "--scope", "userId=ada", query)
    notice, total = out.splitlines()[:2]
    assert notice == (
        "Only the first 32 words of the query are searched; these were ignored: "
        "filler32, filler33, filler34, filler35, filler36, filler37, filler38, filler39, izmir."
    )
    assert total.startswith("No hits")
    out, _ = run("search_transcripts", "--scope", "userId=ada", query, "--json")
    assert json.loads(out)["ignored_terms"] == [*(f"filler{n}" for n in range(32, 40)), "izmir"]
    out, _ = run("search_transcripts", "--scope", "userId=ada", "izmir")
    assert "ignored" not in out


def test_a_time_without_an_offset_is_read_in_the_current_time_zone(settings: Any) -> None:
    _chats()  # trip: updated at BASE (2025-01-01T00:00Z)
    settings.TIME_ZONE = "Europe/Istanbul"  # UTC+3
    out, _ = run(
        "search_transcripts", "--scope", "userId=ada", "izmir", "--updated-before",
        "2025-01-01T03:00:01", "--json",
    )  # fmt: skip
    assert [hit["chat_id"] for hit in json.loads(out)["hits"]] == ["trip"]
    out, _ = run(
        "search_transcripts", "--scope", "userId=ada", "izmir", "--updated-before",
        "2025-01-01T03:00", "--json",
    )  # fmt: skip
    assert json.loads(out)["hits"] == []


def _hostile_chat() -> None:
    DjangoConditionalChatStore().write_chat(
        ChatRecord(
            chat_id="c\x1b[2J",
            scope={"userId": "ada"},
            messages=[
                {
                    "role": "user\x1b[31m",
                    "content": "quokka \x1b]0;pwned\x07 \u202eevil \ud800 \x9b",
                }
            ],
        ),
        expected_revision=0,
    )


def test_search_table_never_prints_control_characters() -> None:
    """Escape sequences, bidi overrides and lone surrogates in data are printed escaped,
    to a strict UTF-8 stream (a terminal's): nothing drives the terminal or fails."""
    _hostile_chat()
    stream = io.BytesIO()
    out = io.TextIOWrapper(stream, encoding="utf-8", errors="strict", write_through=True)
    call_command("search_transcripts", "--scope", "userId=ada", "quokka", stdout=out)
    printed = stream.getvalue().decode("utf-8")
    assert not any(0xD800 <= ord(c) <= 0xDFFF for c in printed)
    assert not {"\x1b", "\x07", "\u202e", "\x9b"} & set(printed)
    assert "c\\x1b[2J" in printed and "user\\x1b[31m" in printed
    assert "\\u202eevil" in printed and "\\ud800" in printed


def test_search_json_with_a_lone_surrogate_is_valid_json_on_a_utf8_stream() -> None:
    _hostile_chat()
    stream = io.BytesIO()
    out = io.TextIOWrapper(stream, encoding="utf-8", errors="strict", write_through=True)
    call_command("search_transcripts", "--scope", "userId=ada", "quokka", "--json", stdout=out)
    [hit] = json.loads(stream.getvalue().decode("utf-8"))["hits"]
    assert hit["chat_id"] == "c\x1b[2J" and hit["role"] == "user\x1b[31m"
    assert "\ufffd" in hit["snippet"] and "<mark>" not in hit["snippet"]


def test_search_without_hits() -> None:
    out, _ = run("search_transcripts", "--scope", "userId=ada", "nothing")
    assert out.startswith("No hits")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["izmir"], "--scope is required"),
        (["izmir", "--scope", "userId=ada", "--all-scopes"], "not both"),
        (["izmir", "--scope", "userId"], "key=value"),
        (["izmir", "--scope", ""], "use --all-scopes"),
        (["izmir", "--scope", "userId=ada", "--limit", "0"], "--limit"),
        (["izmir", "--scope", "userId=ada", "--around", "-1"], "--around"),
        (["izmir", "--scope", "userId=ada", "--around", "x"], "invalid int"),
        (["iz\x00mir", "--scope", "userId=ada"], "NUL"),
        (["izmir", "--scope", "userId=ada", "--updated-after", "2025-01-01"], "needs a time"),
        (
            [
                "izmir",
                "--scope",
                "userId=ada",
                "--updated-after",
                "2025-01-02T00:00Z",
                "--updated-before",
                "2025-01-01T00:00Z",
            ],
            "--updated-before: must be later than --updated-after",
        ),
        (["izmir", "--scope", "userId=ada", "--role", "system"], "never indexed"),
        (["!?", "--scope", "userId=ada"], "query: has no words to search for"),
        (["", "--scope", "userId=ada"], "query: is required"),
        (["izmir", "--scope", "userId=ada", "--updated-before", "yesterday"], "ISO 8601"),
        (["izmir", "--scope", "userId=ada", "--cursor", "bogus"], "cursor"),
        (["izmir", "--scope", "userId=ada", "--role", "\ud800"], "--role"),
        ([], "arguments are required: query"),
    ],
)
def test_search_bad_arguments(args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        call_command("search_transcripts", *args, stdout=io.StringIO())


def test_bad_arguments_on_the_command_line_are_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'cli.sqlite3'}"}
    for args, status in [
        (["backfill_transcripts", "--batch-size", "0"], 1),
        (["backfill_transcripts", "--source", "bogus"], 2),
        (["search_transcripts", "izmir"], 1),
        (["search_transcripts", "--scope", "a=b", "izmir", "--limit", "x"], 2),
        (["backfill_transcripts", "--chat-id", b"\xff"], 1),  # argv bytes: a lone surrogate
        (["load_demo_transcripts", "--database", "nope"], 1),
    ]:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == status, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "error" in done.stderr.lower()


_PIPE_SCRIPT = """
import django
django.setup()
from django.core.management import call_command, execute_from_command_line
from deuz_transcripts import ChatRecord
from deuz_transcripts.stores import DjangoConditionalChatStore
call_command("migrate", verbosity=0)
messages = [{"role": "user", "content": f"izmir {n} " + "words " * 30} for n in range(1000)]
DjangoConditionalChatStore().write_chat(
    ChatRecord(chat_id="long", scope={"userId": "ada"}, messages=messages), expected_revision=0
)
execute_from_command_line(
    ["manage.py", "search_transcripts", "--scope", "userId=ada", "izmir", "--limit", "1000"]
)
"""


def test_search_piped_into_a_reader_that_stops_ends_quietly(tmp_path: Path) -> None:
    """``search_transcripts ... | head -1``: 1,000 lines (far more than a pipe holds), the
    reader gone after the first: no traceback, the status of a command a pipe stopped."""
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'pipe.sqlite3'}"}
    env["DJANGO_SETTINGS_MODULE"] = "testproject.settings"
    with subprocess.Popen(
        [sys.executable, "-c", _PIPE_SCRIPT],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as child:
        assert child.stdout is not None and child.stderr is not None
        assert child.stdout.readline().startswith(b"1000 hit(s) (")
        child.stdout.close()
        errors = child.stderr.read().decode()
        assert child.wait(timeout=120) == 141, errors
    assert errors == ""


# hostile queries and arguments


@pytest.mark.parametrize("query", ["' OR 1=1 --", "NEAR(a b)", "a:* & !b", "\u202eordinary"])
def test_search_command_with_hostile_queries(query, capsys):
    DjangoConditionalChatStore().write_chat(
        ChatRecordFactory(chat_id="c1", texts=["ordinary words"]), expected_revision=0
    )
    call_command("search_transcripts", query, "--scope", "userId=ada", "--json")
    document = json.loads(capsys.readouterr().out)
    expected = ["c1"] if "ordinary" in query else []
    assert [hit["chat_id"] for hit in document["hits"]] == expected
    with pytest.raises(CommandError, match="no words"):
        call_command("search_transcripts", "%", "--scope", "userId=ada")
    with pytest.raises(CommandError):
        call_command("search_transcripts", "a\x00b", "--scope", "userId=ada")


@pytest.mark.parametrize(
    "args",
    [
        ["backfill_transcripts", "--chat-id", "a\x00b"],
        ["backfill_transcripts", "--chat-id", "x" * 10_000],
        ["backfill_transcripts", "--batch-size", "0"],
        ["search_transcripts", "x", "--scope", "userId"],
        ["search_transcripts", "x", "--scope", "a=b,,c=d"],
        ["search_transcripts", "x", "--scope", "=x"],
        ["search_transcripts", "x", "--scope", "userId=" + "x" * 300],
        ["search_transcripts", "x", "--scope", "userId=\ud800"],
        ["search_transcripts", "x", "--all-scopes", "--limit", "0"],
        ["search_transcripts", "x", "--scope", "userId=ada", "--around", "-1"],
    ],
    ids=repr,
)
def test_commands_refuse_hostile_arguments_with_a_clear_error(args):
    """A one-line CommandError, never a traceback from deeper down."""
    with pytest.raises(CommandError):
        call_command(*args)


# load_demo_transcripts


def test_demo_loader(monkeypatch: Any) -> None:
    monkeypatch.setenv("DEUZ_DEMO_ADMIN_USER", "boss")
    monkeypatch.setenv("DEUZ_DEMO_ADMIN_PASSWORD", "s3cret-pass")
    out, _ = run("load_demo_transcripts", "--chats", "24", "--seed", "7")
    assert "Superuser: boss / s3cret-pass" in out and "support / support" in out
    assert Chat.objects.filter(revision=1).count() == 24
    assert LegacyChat.objects.count() == 12
    users = get_user_model().objects
    assert users.get(username="boss").is_superuser
    support = users.get(username="support")
    assert support.is_staff and not support.is_superuser
    assert support.has_perm("deuz_transcripts.search_transcripts")
    assert not support.has_perm("deuz_transcripts.delete_chat")
    hits = DjangoTranscriptIndex().search({"userId": "ada"}, "izmir", around=1)
    assert hits[0].message == {"role": "user", "content": "Book the flight to İzmir."}
    assert len(hits[0].around) == 2
    # several languages, long tool logs, reasoning parts, system prompts
    records = DjangoConditionalChatStore().list_chats({})
    text = json.dumps([r.messages for r in records], ensure_ascii=False)
    letters = {"mehmet": "şğı", "lena": "äöüß", "camille": "éèàç", "minh": "ơưđạờ", "eleni": "αεοτ"}
    for user, sample in {**letters, "yuki": "のをにす"}.items():
        mine = json.dumps(
            [r.messages for r in records if r.scope["userId"] == user], ensure_ascii=False
        )
        assert any(char in mine.lower() for char in sample), user
    assert '"type": "reasoning"' in text and '"role": "system"' in text
    assert any(
        len(part.get("output", "")) > 5_000
        for r in records
        for m in r.messages
        if isinstance(m["content"], list)
        for part in m["content"]
        if isinstance(part.get("output"), str)
    )
    assert {r.scope["userId"] for r in records} >= {"ada", "mehmet", "lena", "yuki"}
    out, _ = run("load_demo_transcripts", "--if-empty")
    assert "not loaded" in out and Chat.objects.count() == 24
    assert not Tombstone.objects.exists()


def test_demo_is_deterministic_for_a_seed() -> None:
    from deuz_transcripts.demo import demo_chats

    first = [(r.chat_id, r.messages, r.updated_at) for r in demo_chats(12, seed=3)]
    again = [(r.chat_id, r.messages, r.updated_at) for r in demo_chats(12, seed=3)]
    other = [(r.chat_id, r.messages, r.updated_at) for r in demo_chats(12, seed=4)]
    assert first == again and first != other


def test_demo_loader_unknown_database() -> None:
    with pytest.raises(CommandError, match="unknown database 'nope'"):
        run("load_demo_transcripts", "--database", "nope")


def test_demo_loader_bad_arguments() -> None:
    with pytest.raises(CommandError, match="--chats"):
        call_command("load_demo_transcripts", "--chats", "0", stdout=io.StringIO())


# random arguments

FUZZ_EXAMPLES = int(os.environ.get("DEUZ_FUZZ_EXAMPLES", "40"))
hostile_text = st.text(st.one_of(tricky_char, any_char), max_size=12)
hostile_values = st.one_of(
    hostile_text,
    st.integers(-(2**70), 2**70).map(str),
    st.sampled_from(
        ["\udcff", "a\x00b", "", " ", "-1", "0", "1e3", "--fix", "-\x1b[2J", "x" * 300]
    ),
)
X = object()  # where the drawn value goes

#: Each command with one argument replaced by a drawn value (the rest valid), so every
#: argument meets hostile values however rarely a random mix of options would reach it.
SLOTS = [
    ["backfill_transcripts", "--chat-id", X],
    ["backfill_transcripts", "--verify", "--chat-id", X],
    ["backfill_transcripts", "--fix", "--chat-id", "a", "--chat-id", X],
    ["backfill_transcripts", "--dry-run", "--chat-id", X],
    ["backfill_transcripts", "--batch-size", X],
    ["backfill_transcripts", "--verify", "--batch-size", X],
    ["backfill_transcripts", "--source", X],
    ["backfill_transcripts", "--database", X],
    ["backfill_transcripts", "--verify", "--database", X],
    ["search_transcripts", X, "--scope", "userId=ada"],
    ["search_transcripts", X, "--all-scopes", "--json", "--around", "1"],
    ["search_transcripts", "alpha", "--scope", X],
    ["search_transcripts", "alpha", "--scope", X, "--json"],
    ["search_transcripts", "alpha", "--all-scopes", "--around", X],
    ["search_transcripts", "alpha", "--scope", "userId=ada", "--limit", X],
    ["search_transcripts", "alpha", "--all-scopes", "--database", X],
    ["load_demo_transcripts", "--chats", "1", "--seed", X],
    ["load_demo_transcripts", "--chats", "1", "--database", X],
    ["load_demo_transcripts", "--if-empty", "--chats", X],
]


def _small(value: str) -> bool:
    """``--chats`` values that do not load thousands of chats."""
    try:
        return int(value) <= 3
    except ValueError:
        return True


@settings(
    max_examples=FUZZ_EXAMPLES * 5,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(slot=st.sampled_from(SLOTS), value=hostile_values)
def test_hostile_arguments_work_or_are_one_clear_line(slot: list[Any], value: str) -> None:
    """Any value in any argument: the command works, or raises one ``CommandError`` whose
    message is one printable line; what it prints goes to a strict UTF-8 stream (a
    terminal's) without failing; no other exception, no traceback."""
    assume(slot[-1] is not X or slot[-2] != "--chats" or _small(value))
    command = [value if arg is X else arg for arg in slot]
    stream = io.BytesIO()
    out = io.TextIOWrapper(stream, encoding="utf-8", errors="strict", write_through=True)
    try:
        with transaction.atomic():
            DjangoChatStore().save_chat(record("a", "alpha"))
            DjangoConditionalChatStore().write_chat(record("s", "alpha beta"), expected_revision=0)
            try:
                call_command(*command, stdout=out, stderr=out)
            except CommandError as exc:
                assert str(exc).isprintable(), str(exc)  # one line, nothing drives a terminal
            raise Rollback
    except Rollback:
        pass
    stream.getvalue().decode("utf-8")


class Rollback(Exception):
    """Undoes one example's writes."""


def test_a_window_filters_hits_and_keeps_their_scores() -> None:
    """``--updated-after`` filters hits only: each scores as in the search without it."""
    store = DjangoConditionalChatStore()
    store.write_chat(record("c0", "izmir flight"), expected_revision=0)
    for number in (1, 2):
        store.write_chat(record(f"c{number}", "izmir", n=number), expected_revision=0)
    out, _ = run("search_transcripts", "--scope", "userId=ada", "izmir flight", "--json")
    every = {hit["message_id"]: hit["score"] for hit in json.loads(out)["hits"]}
    assert every["c0:1"] == 1.0
    out, _ = run(
        "search_transcripts",
        "--scope",
        "userId=ada",
        "izmir flight",
        "--json",
        "--updated-after",
        (BASE + timedelta(seconds=30)).isoformat(),
    )
    recent = json.loads(out)
    assert [(hit["message_id"], hit["score"]) for hit in recent["hits"]] == [
        ("c2:1", every["c2:1"]),
        ("c1:1", every["c1:1"]),
    ]
    assert recent["count"] == 2 and every["c2:1"] < 1.0
