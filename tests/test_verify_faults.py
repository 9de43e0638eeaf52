"""verify finds rows whose digest is right but whose other columns or search data are wrong.

A row's digest covers its message id, visible position and payload, never its terms: a
check that trusted a matching digest would miss each fault planted here. Each is found,
counted alike by ``--verify`` and ``--fix``, and repaired.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from deuz_transcripts.backends.sqlite.fts5_expressions import fts_body
from deuz_transcripts.models import Message
from deuz_transcripts.prepared import message_digest
from deuz_transcripts.verify import Verifier
from tests.test_backfill import found, problems, record, stored

pytestmark = pytest.mark.django_db

OUT_OF_DATE = "stale: s: 1 message row(s) out of date (first index 1)"


def _fixed_like_verify_counted() -> None:
    verified = Verifier().run()
    fixed = Verifier().run(fix=True)
    assert (verified.found, verified.chats) == (fixed.found, fixed.chats)
    assert fixed.found > 0 and fixed.remaining == [] and problems() == []


def _backend() -> str:
    from deuz_transcripts.sql import DjangoTranscriptIndex

    return DjangoTranscriptIndex().backend_name


def test_a_row_claiming_no_terms_is_found_though_its_digest_is_right() -> None:
    stored(record("s", "alpha beta"))
    Message.objects.filter(message_id="s:1").update(has_terms=False)
    assert OUT_OF_DATE in problems()
    _fixed_like_verify_counted()
    assert found("alpha") == [("s", "s:1"), ("s", "s:2")]


def test_a_payload_not_in_its_stored_form_is_found_though_its_digest_matches_it() -> None:
    """The digest was computed over the payload as stored, but that text is not what
    encoding the message gives (spaces after separators): re-indexing would rewrite it."""
    stored(record("s", "alpha"))
    row = Message.objects.get(message_id="s:1")
    spaced = '{"role": "user", "content": "alpha"}'
    digest = message_digest(row.message_id, row.visible_position, spaced)
    Message.objects.filter(pk=row.pk).update(payload=spaced, digest=digest)
    assert problems() == [OUT_OF_DATE]
    _fixed_like_verify_counted()
    assert Message.objects.get(message_id="s:1").payload == '{"role":"user","content":"alpha"}'


def test_a_wrong_visible_position_is_found_though_the_digest_was_made_for_it() -> None:
    stored(record("s", "alpha"))
    row = Message.objects.get(message_id="s:2")
    digest = message_digest(row.message_id, 7, row.payload)
    Message.objects.filter(pk=row.pk).update(visible_position=7, digest=digest)
    assert problems() == ["stale: s: 1 message row(s) out of date (first index 2)"]
    _fixed_like_verify_counted()


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite keeps search_text")
def test_changed_search_text_is_found_though_its_digest_and_fts_row_are_right() -> None:
    stored(record("s", "alpha beta"))
    Message.objects.filter(message_id="s:1").update(search_text="alpha")
    found_problems = problems()
    assert OUT_OF_DATE in found_problems
    if _backend() == "sqlite-fts5":  # the FTS row holds beta, which the row no longer says
        assert any("FTS row(s) hold extra tokens" in problem for problem in found_problems)
    _fixed_like_verify_counted()
    assert found("beta") == [("s", "s:1"), ("s", "s:2")]


def _replace_fts_row(message_id: str, body: Any) -> int:
    row = Message.objects.select_related("chat").get(message_id=message_id)
    old = fts_body(row.search_text or "", row.chat.scope, row.chat.chat_id, row.role)
    table = "deuz_transcripts_fts"
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} ({table}, rowid, body) VALUES ('delete', %s, %s)", [row.pk, old]
        )
        cursor.execute(f"INSERT INTO {table} (rowid, body) VALUES (%s, %s)", [row.pk, body(old)])
    return row.pk


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite FTS5 table checks")
def test_an_fts_row_repeating_a_token_in_place_of_another_is_found() -> None:
    """As many tokens as the row needs, but one twice and one missing."""
    if _backend() != "sqlite-fts5":
        pytest.skip("FTS5 not in use")
    stored(record("s", "alpha beta"))
    pk = _replace_fts_row("s:1", lambda body: body.replace("beta", "alpha"))
    assert problems() == [f"stale: s: 1 FTS row(s) lack tokens (rowid {pk})"]
    assert problems(chat_ids=["s"]) == ["stale: s: 1 FTS row(s) lack tokens"]
    _fixed_like_verify_counted()
    assert found("beta") == [("s", "s:1"), ("s", "s:2")]


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite FTS5 table checks")
def test_an_fts_row_holding_its_tokens_in_another_order_is_right() -> None:
    if _backend() != "sqlite-fts5":
        pytest.skip("FTS5 not in use")
    stored(record("s", "alpha beta gamma"))
    _replace_fts_row("s:1", lambda body: " ".join(reversed(body.split(" "))))
    assert problems() == []


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL vectors")
def test_a_vector_lacking_a_scope_lexeme_or_holding_a_spaced_lexeme_is_found() -> None:
    stored(record("s", "alpha beta"), record("t", "gamma delta", n=1))
    with connection.cursor() as cursor:
        cursor.execute(  # the scope lexeme gone: a userId search would miss the row
            "UPDATE deuz_transcripts_message SET search_vector = "
            "ts_delete(search_vector, (SELECT array_agg(lexeme) FROM unnest(search_vector) "
            "WHERE left(lexeme, 1) = E'\\uE000')) WHERE message_id = 's:1'"
        )
        cursor.execute(  # the two terms as one lexeme
            "UPDATE deuz_transcripts_message SET search_vector = "
            "ts_delete(search_vector, ARRAY['gamma', 'delta']) || $$'gamma delta'$$::tsvector "
            "WHERE message_id = 't:1'"
        )
    assert problems() == [
        "stale: s: 1 row(s) with a wrong vector",
        "stale: t: 1 row(s) with a wrong vector",
    ]
    _fixed_like_verify_counted()
    assert found("gamma", {"userId": "ada"}) == [("t", "t:1"), ("t", "t:2")]


def test_fix_leaves_a_payload_it_cannot_read_reported_and_repairs_the_rest() -> None:
    """--fix used to stop with a traceback at the first stored payload it could not read."""
    stored(record("s", "alpha"), record("t", "beta", n=1))
    Message.objects.filter(message_id="s:1").update(payload="not json")
    Message.objects.filter(message_id="t:1").update(digest="0" * 32)
    unreadable = "stale: s: a message payload cannot be read"
    assert problems() == [unreadable, "stale: t: 1 message row(s) out of date (first index 1)"]
    result = Verifier().run(fix=True)
    assert (result.found, result.chats) == (2, {"s", "t"})
    assert [str(problem) for problem in result.remaining] == [unreadable]
    assert found("beta") == [("t", "t:1"), ("t", "t:2")]
