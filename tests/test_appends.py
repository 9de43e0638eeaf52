"""``append_messages`` on the SQL store against the whole chat it stands for (hypothesis):
every stored row is the row ``write_chat`` of the stored chat (its ids as filled) with the
new messages after it writes: ids, visible positions, digests and counts included,
whatever ids the appends give."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deuz_transcripts import ChatRecord
from deuz_transcripts.models import Chat, Message
from deuz_transcripts.prepared import PreparedChat
from deuz_transcripts.stores import DjangoConditionalChatStore

pytestmark = pytest.mark.django_db
T0 = datetime(2025, 1, 1, tzinfo=UTC)
_chat_ids = itertools.count()

_messages = st.builds(
    lambda role, word: {"role": role, "content": word},
    st.sampled_from(["user", "assistant", "system", "tool"]),
    st.sampled_from(["alpha", "beta gamma", "", "delta"]),
)
#: ids that collide with one another and with the filled ``<chat_id>:<i>`` form
_ids = st.one_of(st.none(), st.sampled_from(["", "a", "b", "{chat}:1", "{chat}:3", "{chat}:3:1"]))
_appends = st.lists(st.lists(st.tuples(_messages, _ids), max_size=4), min_size=1, max_size=4)


def _rows(chat_id: str) -> list[tuple[Any, ...]]:
    return list(
        Message.objects.filter(chat__chat_id=chat_id)
        .order_by("position")
        .values_list("position", "message_id", "visible_position", "digest", "payload", "has_terms")
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    first=st.lists(st.tuples(_messages, _ids), max_size=4),
    appends=_appends,
    looked_up=st.sampled_from([500, 0]),
)
def test_appended_rows_are_the_rows_of_the_whole_chat(first, appends, looked_up):
    """``looked_up`` 0: every stored id read at once (a long append), not looked up."""
    from deuz_transcripts.sql import writer

    writer._IDS_LOOKED_UP, bound = looked_up, writer._IDS_LOOKED_UP
    try:
        _append_and_compare(first, appends)
    finally:
        writer._IDS_LOOKED_UP = bound


def _append_and_compare(first, appends):
    store = DjangoConditionalChatStore()
    chat_id = f"c{next(_chat_ids)}"

    def ids(pairs: list[tuple[dict[str, Any], str | None]]) -> list[str | None]:
        return [None if i is None else i.replace("{chat}", chat_id) for _, i in pairs]

    record = ChatRecord(chat_id, {"userId": "ada"}, [m for m, _ in first], ids(first), T0)
    revision = store.write_chat(record, expected_revision=0)
    stored = PreparedChat.of(record)
    for step, pairs in enumerate(appends, start=1):
        when = T0 + timedelta(hours=step)
        given_ids = ids(pairs)
        # the stored chat (its ids as filled) with the new messages after it
        whole = ChatRecord(
            chat_id,
            {"userId": "ada"},
            [*stored.messages, *(m for m, _ in pairs)],
            [*stored.message_ids, *given_ids],
            when,
        )
        revision = store.append_messages(
            chat_id,
            [m for m, _ in pairs],
            expected_revision=revision,
            message_ids=given_ids,
            updated_at=when,
        )
        expected = stored = PreparedChat.of(whole)
        assert _rows(chat_id) == [
            (m.index, m.message_id, m.visible_position, m.digest, m.payload, bool(m.terms))
            for m in expected.prepared
        ]
        chat = Chat.objects.get(chat_id=chat_id)
        assert (chat.message_count, chat.indexed_count, chat.revision) == (
            len(expected.prepared),
            expected.indexed_count,
            step + 1,
        )
        assert chat.updated_at == when
