"""Writing message rows and their search data: the first part of every SQL backend.

``SearchRows`` inserts new rows (plain multi-row ``INSERT ... RETURNING``, no model
instance per message), adds and deletes their search data through each backend's hooks,
and owns the chat write lock. ``NewRows``/``NewMessage`` are what the write unit
(``deuz_transcripts.sql.writer``) hands it; ``StoredRow`` names a row whose search data
is written or deleted.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

from django.db import connections
from django.db.backends.utils import CursorWrapper

from ..models import Chat, Message
from .batched import Statement, run_batched
from .chat_filter import table

__all__ = ["NEW_MESSAGE_COLUMNS", "NewMessage", "NewRows", "SearchRows", "StoredRow"]


@dataclass(frozen=True)
class StoredRow:
    """A message row whose search data is written or deleted."""

    pk: int
    search_text: str | None  # distinct terms, space separated ("" or None when none)
    role: str  # the message's role (its search data holds a role token)


class NewMessage(NamedTuple):
    """The columns of a message row not yet inserted, but its chat (``NewRows.chat``):
    plain values, so a write builds no model instance per message."""

    tenant: str
    position: int
    message_id: str
    role: str
    payload: str
    digest: str
    visible_position: int | None
    search_text: str | None
    has_terms: bool


#: ``INSERT`` columns of a new message row: its chat's key, then ``NewMessage``'s fields.
NEW_MESSAGE_COLUMNS = ("chat_id", *NewMessage._fields)
#: Parameters of one multi-row ``INSERT`` at most (an engine without a limit included).
_MAX_INSERT_PARAMS = 10_000


def rows_per_statement(alias: str, columns: int) -> int:
    """How many rows of ``columns`` values one multi-row ``INSERT`` on database ``alias``
    may hold: the engine's parameter limit, capped at ``_MAX_INSERT_PARAMS``."""
    limit = connections[alias].features.max_query_params or _MAX_INSERT_PARAMS
    return max(1, min(limit, _MAX_INSERT_PARAMS) // columns)


@dataclass(frozen=True)
class NewRows:
    """Message rows of one chat, not yet inserted, and their terms (space separated)."""

    chat: Chat
    messages: Sequence[NewMessage]
    terms: Sequence[str]


class SearchRows(ABC):
    """Writes message rows and their search data; serializes writers of a chat."""

    #: Whether ``Message.search_text`` is kept (SQLite: LIKE haystack, FTS5 delete key).
    keeps_search_text: ClassVar[bool] = True

    def __init__(self, alias: str) -> None:
        self.alias = alias

    #: An SQL expression of a new ``Chat`` key, evaluated in the round trip that locks
    #: and reads a chat with no row, so that the write inserting it sends its chat row
    #: with its other statements (``None``: the chat row's insert returns its key).
    new_chat_key_sql: ClassVar[str | None] = None

    @abstractmethod
    def lock_sql(self, chat_id: str) -> Statement:
        """The statement that serializes writers of one chat id until the transaction ends."""

    def lock_chat(self, cursor: CursorWrapper, chat_id: str) -> None:
        """Serialize writers of one chat id until the transaction ends."""
        cursor.execute(*self.lock_sql(chat_id))

    def lock_chats(self, cursor: CursorWrapper, chat_ids: Sequence[str]) -> None:
        """``lock_chat`` for each id, in the order given (callers keep one order)."""
        for chat_id in chat_ids:
            self.lock_chat(cursor, chat_id)

    def insert(
        self,
        cursor: CursorWrapper,
        batches: Sequence[NewRows],
        *,
        before: Sequence[Statement] = (),
    ) -> None:
        """Run ``before`` (the write's other statements: its chat row's), then insert the
        new rows of one chat or several (multi-row ``INSERT``s as large as the engine's
        parameter limit allows, each returning the keys it made), then their search data.
        Plain SQL: ``bulk_create`` built a model instance and compiled each field of each
        row, Python work that a write holds its lock through."""
        run_batched(cursor, before)
        values = [(batch.chat.pk, *message) for batch in batches for message in batch.messages]
        if not values:
            return
        per_statement = rows_per_statement(self.alias, len(NEW_MESSAGE_COLUMNS))
        row_sql = "(" + ", ".join(["%s"] * len(NEW_MESSAGE_COLUMNS)) + ")"
        keys: dict[tuple[int, int], int] = {}
        for start in range(0, len(values), per_statement):
            chunk = values[start : start + per_statement]
            cursor.execute(
                f"INSERT INTO {table(Message)} ({', '.join(NEW_MESSAGE_COLUMNS)}) "
                f"VALUES {', '.join([row_sql] * len(chunk))} RETURNING id, chat_id, position",
                [value for row in chunk for value in row],
            )
            keys.update(((chat, position), pk) for pk, chat, position in cursor.fetchall())
        self.add_search_data(
            cursor,
            [
                (
                    batch.chat,
                    [
                        StoredRow(keys[batch.chat.pk, message.position], text, message.role)
                        for message, text in zip(batch.messages, batch.terms, strict=True)
                    ],
                )
                for batch in batches
            ],
        )

    def insert_new_chats(self, cursor: CursorWrapper, batches: Sequence[NewRows]) -> None:
        """``insert`` for the rows of many new chats at once (a backfill group), where an
        engine has a faster bulk path than its write's statement."""
        self.insert(cursor, batches)

    def add_search_data(  # noqa: B027  (optional hook)
        self, cursor: CursorWrapper, written: Sequence[tuple[Chat, Sequence[StoredRow]]]
    ) -> None:
        """Search data of freshly inserted rows (default: the row's columns are enough)."""

    def delete(  # noqa: B027  (optional hook)
        self, cursor: CursorWrapper, chat: Chat, rows: Sequence[StoredRow]
    ) -> None:
        """Remove search data of rows about to be deleted or rewritten, with ``chat``'s
        old scope."""

    def clear(self, cursor: CursorWrapper, chat: Chat, rows: Sequence[StoredRow]) -> None:
        """Remove search data of rows that stay (``remove()`` of a chat a store owns)."""
        self.delete(cursor, chat, rows)

    def deleting(self) -> AbstractContextManager[None]:
        """Wraps a delete inside its transaction; its exit is the after-delete hook
        (SQLite erases what deleted rows left in the file)."""
        return nullcontext()
