"""A search reads one snapshot on PostgreSQL: a write that commits between two of its
reads is seen by none of them, so a page's total is never short of its hits (the soak's
``count`` invariant, broken once under load by a plan that counted in one statement and
read the page in another)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection, connections

from deuz_transcripts import ChatRecord
from deuz_transcripts.backends import forced_policies, policy
from deuz_transcripts.stores import DjangoConditionalChatStore

ADA = {"userId": "ada"}


def chat(chat_id: str, hours: int) -> ChatRecord:
    return ChatRecord(
        chat_id=chat_id,
        scope=ADA,
        messages=[{"role": "user", "content": f"quokka sighting {chat_id}"}],
        updated_at=datetime(2025, 1, 1, tzinfo=UTC) + timedelta(hours=hours),
    )


def write_elsewhere(record: ChatRecord) -> None:
    """``record`` written and committed by another thread, on its own connection."""

    def write() -> None:
        try:
            DjangoConditionalChatStore().write_chat(record, expected_revision=0)
        finally:
            connections.close_all()

    thread = threading.Thread(target=write)
    thread.start()
    thread.join()


@pytest.mark.django_db(transaction=True)
def test_a_write_committed_between_a_searchs_reads_is_seen_by_none(monkeypatch):
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's isolation (a SQLite read transaction holds one snapshot)")
    store = DjangoConditionalChatStore()
    for number in range(6):
        store.write_chat(chat(f"c{number}", number), expected_revision=0)
    # masks counted first, then the page's rows read: two reads at least
    monkeypatch.setattr(
        policy,
        "FORCED",
        forced_policies(single_statement_max=0, lexeme_scope_min=0, small_read_rows=10**9),
    )
    reads: list[str] = []

    def between(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        result = execute(sql, params, many, context)
        reads.append(sql)
        if len(reads) == 1:  # after the search's first read, before its others
            write_elsewhere(chat("newest", 100))
        return result

    with connection.execute_wrapper(between):
        page = store.transcript.search_page(ADA, "quokka", limit=10)
    assert len(reads) > 1
    assert sorted(hit.chat_id for hit in page.hits) == [f"c{n}" for n in range(6)]
    assert page.total == 6
    after = store.transcript.search_page(ADA, "quokka", limit=10)
    assert after.total == 7 and after.hits[0].chat_id == "newest"
