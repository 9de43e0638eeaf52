"""Cursors while chats are written: the guarantee of ``docs/guarantees.md``, as a property.

Between two pages chats are added, rewritten (newer or older) and removed. Every hit of a
chat that no write touched is served exactly once, in the first page's order, on the
database's backend and in memory alike; each page's ``total`` is the exact count of that
moment.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deuz_transcripts import ChatRecord, InMemoryTranscriptIndex
from deuz_transcripts.stores import DjangoTranscriptIndex
from tests.test_backend_parity import BASE, DENSE_WORDS, Rollback, dense_corpora

pytestmark = pytest.mark.django_db

ALL = 10**6


@st.composite
def writes(draw: st.DrawFn) -> tuple[str, ChatRecord | None]:
    """``(chat id, record)``; ``None`` removes the chat."""
    chat_id = (
        draw(st.sampled_from(["a", "B", "é", "chat-10", "new", "newer"]))
        + "-"
        + (draw(st.sampled_from(["0", "1", "2", "w"])))
    )
    if draw(st.booleans()) and draw(st.booleans()):
        return chat_id, None
    texts = draw(st.lists(st.lists(DENSE_WORDS, max_size=3).map(" ".join), max_size=4))
    return chat_id, ChatRecord(
        chat_id=chat_id,
        scope={"userId": draw(st.sampled_from(["ada", "bob"]))},
        messages=[{"role": "user", "content": text} for text in texts],
        updated_at=BASE + timedelta(minutes=draw(st.integers(-1, 3))),
    )


SEARCH = st.fixed_dictionaries(
    {
        "scope": st.sampled_from([{}, {"userId": "ada"}]),
        "query": st.lists(DENSE_WORDS, min_size=1, max_size=3).map(" ".join),
        "limit": st.integers(1, 4),
        "roles": st.sampled_from([None, ["user"]]),
    }
)


def walk_while_writing(index, records, search, planned) -> None:
    for record in records:
        index.index(record)
    before = index.search(**{**search, "limit": ALL})
    touched: set[str] = set()
    served = []
    page = index.search_page(**search)
    pending = list(planned)
    while True:
        served.extend(page.hits)
        assert page.total == len(index.search(**{**search, "limit": ALL}))  # nothing since
        if page.next_cursor is None:
            break
        if pending:  # one write between two pages
            chat_id, record = pending.pop(0)
            touched.add(chat_id)
            if record is None:
                index.remove(chat_id)
            else:
                index.index(record)
        page = index.search_page(**search, cursor=page.next_cursor)
    untouched = [(h.chat_id, h.index, h.score) for h in before if h.chat_id not in touched]
    assert [(h.chat_id, h.index, h.score) for h in served if h.chat_id not in touched] == (
        untouched
    )
    assert all(0 < h.score <= 1.0 for h in served)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=dense_corpora(),
    search=SEARCH,
    planned=st.lists(writes(), max_size=6),
)
def test_untouched_hits_are_served_once_while_chats_are_written(records, search, planned):
    unique = list({r.chat_id: r for r in records}.values())
    walk_while_writing(InMemoryTranscriptIndex(), unique, search, planned)
    try:
        with transaction.atomic():
            walk_while_writing(DjangoTranscriptIndex(), unique, search, planned)
            raise Rollback
    except Rollback:
        pass
