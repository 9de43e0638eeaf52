"""How chats cross between Python and their rows: datetimes, records read back, and what
differs between a chat's rows and what indexing it writes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import NamedTuple

from django.conf import settings
from django.db import connections

from ..backends.base import StoredMessage
from ..conf import conf
from ..models import Chat, Message
from ..prepared import PreparedChat, check_record
from ..records import ChatRecord, decode_message, fill_message_ids

__all__ = [
    "MessageRow",
    "from_db_datetime",
    "prepared_from_rows",
    "read_message_rows",
    "record_from_rows",
    "stored_differences",
    "to_db_datetime",
]


class MessageRow(NamedTuple):
    """One ``Message`` row as a tuple: what ``verify`` reads (a model instance costs ~3x more)."""

    pk: int
    chat_pk: int
    position: int
    message_id: str
    role: str
    payload: str
    digest: str
    visible_position: int | None
    search_text: str | None
    tenant: str
    has_terms: bool


#: ``Message`` columns in ``MessageRow`` order.
_MESSAGE_ROW_COLUMNS = (
    "id, chat_id, position, message_id, role, payload, digest, visible_position, "
    "search_text, tenant, has_terms"
)


def read_message_rows(using: str, chat_pks: Sequence[int]) -> dict[int, list[MessageRow]]:
    """The message rows of each chat, in position order, in one statement (plain SQL:
    the ORM's row handling costs as much as reading the rows)."""
    found: dict[int, list[MessageRow]] = {pk: [] for pk in chat_pks}
    if not chat_pks:
        return found
    with connections[using].cursor() as cursor:
        cursor.execute(
            f"SELECT {_MESSAGE_ROW_COLUMNS} FROM {Message._meta.db_table} "
            f"WHERE chat_id IN ({', '.join(['%s'] * len(chat_pks))}) ORDER BY chat_id, position",
            list(chat_pks),
        )
        for values in cursor.fetchall():
            # has_terms: SQLite gives an integer; bool() of it, as the ORM reads it
            row = MessageRow._make([*values[:-1], bool(values[-1])])
            found[row.chat_pk].append(row)
    return found


def to_db_datetime(value: datetime) -> datetime:
    return value if settings.USE_TZ else value.astimezone(UTC).replace(tzinfo=None)


def from_db_datetime(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def record_from_rows(chat: Chat, messages: Sequence[StoredMessage]) -> ChatRecord:
    """The chat as a store loads it, from its own message rows in order."""
    return ChatRecord(
        chat_id=chat.chat_id,
        scope=dict(chat.scope),
        messages=[decode_message(m.payload) for m in messages],
        message_ids=[m.message_id for m in messages],
        updated_at=from_db_datetime(chat.updated_at),
    )


def prepared_from_rows(chat: Chat, messages: Sequence[StoredMessage]) -> PreparedChat:
    """``PreparedChat.of(record_from_rows(chat, messages))``, validating the record once:
    the same chat, the same ``InvalidRecord`` for a row that cannot be written back."""
    record = check_record(record_from_rows(chat, messages), revalidate=False)
    return PreparedChat.from_checked(record, fill_message_ids(record))


def stored_differences(
    chat: Chat,
    rows: Sequence[StoredMessage],
    scope_rows: Mapping[str, str],
    prepared: PreparedChat,
    *,
    keeps_search_text: bool,
) -> list[str]:
    """What differs between a chat's stored rows and what indexing ``prepared`` writes.

    ``[]`` means re-indexing would change nothing. ``rows`` are the chat's message
    rows in position order; ``scope_rows`` its ``ChatScope`` lookup rows.
    """
    reasons = []
    if chat.scope != dict(prepared.scope):
        reasons.append("scope differs")
    tenant = conf.tenant_of(prepared.scope)
    if chat.tenant != tenant or any(row.tenant != tenant for row in rows):
        reasons.append("tenant differs (TENANT_KEY)")
    if from_db_datetime(chat.updated_at) != prepared.updated_at:
        reasons.append("updated_at differs")
    if [row.position for row in rows] != list(range(len(rows))):
        reasons.append("message positions have gaps")
    bad = [
        row.position
        for row, message in zip(rows, prepared.prepared, strict=False)
        if row.digest != message.digest
        or row.visible_position != message.visible_position
        or row.has_terms != message.has_terms
        or row.message_id != message.message_id
        or (keeps_search_text and row.search_text != message.search_text)
    ]
    if bad:
        reasons.append(f"{len(bad)} message row(s) out of date (first index {bad[0]})")
    expected_count = len(prepared.prepared)
    if chat.message_count != len(rows) or len(rows) != expected_count:
        reasons.append(f"message_count {chat.message_count} != {expected_count}")
    if chat.indexed_count != prepared.indexed_count:
        reasons.append(f"indexed_count {chat.indexed_count} != {prepared.indexed_count}")
    if dict(scope_rows) != chat.scope:
        reasons.append("scope lookup rows differ from the scope")
    return reasons
