"""Appending messages to a stored chat: what an append names, checked before any store
work, and the whole chat it equals.

``append_messages(chat_id, messages, expected_revision=...)`` is exactly ``write_chat``
of the stored chat with ``messages`` after its own (ids filled as ``index_chat`` fills
them, ``updated_at`` now unless given). A store that can, writes the new messages alone;
any other loads the chat and writes it whole (``appended_to``).

Pure Python: no Django import.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, cast

from .errors import InvalidRecord
from .records import ChatRecord, encode_message

__all__ = ["appended_to", "check_revision", "new_messages", "no_chat"]


def new_messages(
    chat_id: str,
    messages: Sequence[Mapping[str, Any]],
    message_ids: Sequence[str | None] | None,
    updated_at: datetime | None,
    *,
    encode: bool = False,
) -> ChatRecord:
    """The appended messages as a record (no scope: the stored chat's is kept), validated
    as ``write_chat`` validates a record (``encode``: their JSON encoding too); field names
    count from the first new message."""
    # ChatRecord checks every value as a plain object (what a caller passes may be anything)
    record = ChatRecord(
        chat_id=chat_id,
        scope={},
        messages=cast(list[dict[str, Any]], messages),
        message_ids=cast(list[str | None] | None, message_ids),
        updated_at=datetime.now(UTC) if updated_at is None else updated_at,
    )
    if encode:  # a store writing whole chats would name the encoding's error by the whole chat
        for position, message in enumerate(record.messages):
            encode_message(message, f"messages[{position}]")
    return record


def check_revision(expected_revision: object) -> int:
    """The revision an append names, as ``write_chat`` checks it (a bool is no integer)."""
    if isinstance(expected_revision, bool) or not isinstance(expected_revision, int):
        raise InvalidRecord("expected_revision", "must be an integer")
    return expected_revision


def no_chat(chat_id: str) -> InvalidRecord:
    """An append to a chat no store wrote (``write_chat`` creates a chat)."""
    return InvalidRecord("chat_id", f"{chat_id!r} names no stored chat to append to")


def appended_to(stored: ChatRecord, new: ChatRecord) -> ChatRecord:
    """The whole chat an append writes: the stored messages and ids, then the new ones,
    under the stored scope and the append's ``updated_at``."""
    return ChatRecord(
        chat_id=stored.chat_id,
        scope=dict(stored.scope),
        messages=[*stored.messages, *new.messages],
        message_ids=[*(stored.message_ids or []), *(new.message_ids or [None] * len(new.messages))],
        updated_at=new.updated_at,
    )
