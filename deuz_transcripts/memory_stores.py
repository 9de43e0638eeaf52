"""In-memory chat stores: the conditional (revisioned) one and the legacy one."""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping

from .appends import check_revision
from .base import BaseChatStore, BaseConditionalChatStore, BaseTranscriptIndex, check_chat_id
from .errors import ChatDeleted, RevisionConflict
from .prepared import PreparedChat, check_record
from .records import ChatRecord, encode_message, scope_matches, validate_scope
from .signals import chat_deleted, held_until_complete, send_after_commit

__all__ = ["InMemoryChatStore", "InMemoryConditionalChatStore"]


def _frozen_copy(record: ChatRecord) -> ChatRecord:
    """A deep copy, so later changes to the caller's objects never reach the store."""
    for position, message in enumerate(record.messages):
        encode_message(message, f"messages[{position}]")  # same rule as the SQL stores
    return copy.deepcopy(record)


def _newest_first(records: list[ChatRecord]) -> list[ChatRecord]:
    return sorted(records, key=lambda r: (-r.updated_at.timestamp(), r.chat_id))


class InMemoryConditionalChatStore(BaseConditionalChatStore):
    """Revisions and tombstones in memory; updates ``transcript`` on every committed write.

    A chat is kept as its ``PreparedChat`` (JSON payloads), so loads decode fresh
    copies and nothing the caller holds can reach the store.
    """

    def __init__(self, transcript: BaseTranscriptIndex | None = None) -> None:
        self.transcript = transcript
        self._lock = threading.RLock()
        self._chats: dict[str, tuple[PreparedChat, int]] = {}
        self._tombstones: set[str] = set()

    def write_chat(self, record: ChatRecord, *, expected_revision: int) -> int:
        prepared = PreparedChat.of(record)
        expected_revision = check_revision(expected_revision)
        with held_until_complete(), self._lock:
            if prepared.chat_id in self._tombstones:
                raise ChatDeleted(prepared.chat_id)
            current = self._chats.get(prepared.chat_id, (None, 0))[1]
            if expected_revision != current:
                raise RevisionConflict(prepared.chat_id, expected_revision, current)
            if self.transcript is not None:
                self.transcript.index(prepared)  # raises: nothing was committed
            self._chats[prepared.chat_id] = (prepared, current + 1)
            return current + 1

    def _not_appendable(self, chat_id: str) -> Exception:
        return (
            ChatDeleted(chat_id)
            if chat_id in self._tombstones
            else super()._not_appendable(chat_id)
        )

    def load_chat(self, chat_id: str) -> tuple[ChatRecord, int] | None:
        chat_id = check_chat_id(chat_id)
        with self._lock:
            found = self._chats.get(chat_id)
        return None if found is None else (found[0].to_record(), found[1])

    def list_chats(self, scope: Mapping[str, str]) -> list[ChatRecord]:
        scope = validate_scope(scope)
        with self._lock:
            found = [c for c, _ in self._chats.values() if scope_matches(c.scope, scope)]
        return _newest_first([chat.to_record() for chat in found])

    def delete_chat(self, chat_id: str) -> None:
        """Tombstone the chat; if the index's ``remove`` raises, nothing changes.

        ``chat_deleted`` is sent as it returns (memory has no transaction) unless the chat
        was tombstoned already; the index's ``chat_removed`` is held until then, and sent
        first.
        """
        chat_id = check_chat_id(chat_id)
        with held_until_complete():
            with self._lock:
                if self.transcript is not None:
                    self.transcript.remove(chat_id)
                newly = chat_id not in self._tombstones
                self._tombstones.add(chat_id)
                stored = self._chats.pop(chat_id, None)
            if newly:
                scope = None if stored is None else stored[0].scope
                send_after_commit(
                    chat_deleted, type(self), chat_id=chat_id, scope=scope, using=None
                )

    def is_deleted(self, chat_id: str) -> bool:
        with self._lock:
            return chat_id in self._tombstones


class InMemoryChatStore(BaseChatStore):
    """The legacy store: no revisions, records kept as given (ids unfilled)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._chats: dict[str, ChatRecord] = {}

    def save_chat(self, record: ChatRecord) -> None:
        record = _frozen_copy(check_record(record))
        with self._lock:
            self._chats[record.chat_id] = record

    def load_chat(self, chat_id: str) -> ChatRecord | None:
        chat_id = check_chat_id(chat_id)
        with self._lock:
            found = self._chats.get(chat_id)
            return None if found is None else copy.deepcopy(found)

    def list_chats(self, scope: Mapping[str, str]) -> list[ChatRecord]:
        scope = validate_scope(scope)
        with self._lock:
            found = [
                copy.deepcopy(r) for r in self._chats.values() if scope_matches(r.scope, scope)
            ]
        return _newest_first(found)

    def delete_chat(self, chat_id: str) -> None:
        chat_id = check_chat_id(chat_id)
        with self._lock:
            self._chats.pop(chat_id, None)
