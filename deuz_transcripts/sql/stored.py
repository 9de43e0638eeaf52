"""How chats cross between Python and their rows: datetimes and records read back."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from django.conf import settings

from ..models import Chat, Message
from ..records import ChatRecord, decode_message

__all__ = ["from_db_datetime", "record_from_rows", "to_db_datetime"]


def to_db_datetime(value: datetime) -> datetime:
    return value if settings.USE_TZ else value.astimezone(UTC).replace(tzinfo=None)


def from_db_datetime(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def record_from_rows(chat: Chat, messages: Sequence[Message]) -> ChatRecord:
    """The chat as a store loads it, from its own message rows in order."""
    return ChatRecord(
        chat_id=chat.chat_id,
        scope=dict(chat.scope),
        messages=[decode_message(m.payload) for m in messages],
        message_ids=[m.message_id for m in messages],
        updated_at=from_db_datetime(chat.updated_at),
    )
