"""A page costs what its visible text costs: hits and around lines full of the query's words.

A user's chat mixes short messages with 256 KiB messages full of the searched word; a page
of 20 hits with 10 messages around each shows a snippet of each around line and carries
the first ``MAX_HIT_SPANS`` spans of each hit, so the span work of a message is bounded by
its first few KiB, not its 256 KiB. Work is counted (characters the span rule reads, spans
it gives), never timed.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.test import Client

from deuz_transcripts import ChatRecord, span_match
from deuz_transcripts.spans import MAX_HIT_SPANS
from deuz_transcripts.stores import DjangoConditionalChatStore
from tests.admin_support import search
from tests.span_work import SpanWork, count_span_work

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]

T0 = datetime(2026, 1, 10, 12, 0, tzinfo=UTC)
#: 262,140 characters: a message whose indexed text is all "izmir".
DENSE = "izmir " * 43_690
MESSAGES = 60


@pytest.fixture
def span_work(monkeypatch: pytest.MonkeyPatch) -> SpanWork:
    return count_span_work(monkeypatch)


@pytest.fixture
def dense_chat() -> None:
    """Short messages and 256 KiB ones full of the searched word, alternating."""
    messages = [
        {"role": "user" if n % 2 else "assistant", "content": DENSE if n % 2 else f"izmir {n}"}
        for n in range(MESSAGES)
    ]
    record = ChatRecord("dense", {"userId": "ada"}, messages, updated_at=T0)
    DjangoConditionalChatStore().write_chat(record, expected_revision=0)


#: What ``match_spans(enough=...)`` reads of a message full of 6-character words: pieces
#: doubling from ``_FIRST_PIECE`` until they hold ``enough`` spans (at most twice that text).
def _read_for(enough: int) -> int:
    return max(span_match._FIRST_PIECE, 2 * 6 * enough) + 8


def _bound(hits: int, around_lines: int) -> int:
    """Per hit, its first ``MAX_HIT_SPANS`` spans; per around line, a snippet's 12."""
    return hits * _read_for(MAX_HIT_SPANS) + around_lines * _read_for(12)


def test_the_endpoint_reads_a_snippets_worth_of_each_around_line(
    dense_chat: None, django_user_model: Any, span_work: SpanWork
) -> None:
    client = Client()
    client.force_login(django_user_model.objects.create_user("ada", password="pw"))
    response = client.get("/transcripts/search/", {"q": "izmir", "limit": 20, "around": 10})
    assert response.status_code == 200
    hits = response.json()["hits"]
    assert len(hits) == 20
    around_lines = sum(len(hit["around"]) for hit in hits)
    dense_lines = sum(1 for hit in hits for line in hit["around"] if len(line["spans"]) > 1)
    assert around_lines > 300 and dense_lines > 150  # the page really is dense
    assert span_work.characters <= _bound(len(hits), around_lines)
    # a message gives the spans of its first pieces, not 43,690
    assert span_work.spans <= _bound(len(hits), around_lines) // 6
    assert max(count for _, count in span_work.pieces) < 43_690 // 4


def test_the_admin_reads_a_snippets_worth_of_each_around_line(
    dense_chat: None, support_client: Any, settings: Any, span_work: SpanWork
) -> None:
    settings.DEUZ_TRANSCRIPTS = {**settings.DEUZ_TRANSCRIPTS, "ADMIN_PAGE_SIZE": 20}
    response = search(support_client, q="izmir", scope="userId=ada", around=10)
    rows = response.context["rows"]
    assert len(rows) == 20
    around_lines = sum(len(row.before) + len(row.after) for row in rows)
    assert around_lines > 300
    assert "<mark>izmir</mark>" in rows[0].after[0].html
    assert len(rows[1].hit.spans) == MAX_HIT_SPANS  # a dense hit: its first spans
    assert span_work.characters <= _bound(len(rows), around_lines)
