"""The SQL stores: conditional (revisioned) chats with their index, and the legacy table."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from django.db import transaction
from django.db.models import Prefetch
from django.db.models.expressions import RawSQL

from .appends import check_revision, new_messages, no_chat
from .backends import get_backend
from .backends.chat_filter import ChatFilter
from .base import BaseChatStore, BaseConditionalChatStore, check_chat_id
from .conf import conf
from .errors import ChatDeleted, RevisionConflict
from .models import Chat, LegacyChat, Message, Tombstone
from .prepared import PreparedChat, check_record
from .records import ChatRecord, encode_message, validate_scope
from .signals import chat_deleted, chat_removed, send_after_commit
from .sql import DjangoTranscriptIndex, LockedChat, database_errors
from .sql.appended import AppendedChat
from .sql.errors import WorkerThreadRunner, retry_lock_conflicts
from .sql.replica import note_write, read_from
from .sql.stored import from_db_datetime, record_from_rows, to_db_datetime
from .sql.writer import chat_messages

__all__ = [
    "DjangoChatStore",
    "DjangoConditionalChatStore",
    "DjangoTranscriptIndex",
]

T = TypeVar("T")


class _SqlRunner(WorkerThreadRunner):
    using: str

    def _retrying(self, write: Callable[[], T]) -> T:
        """``write`` tried again when a lock conflict stopped it (``retry_lock_conflicts``)."""
        return retry_lock_conflicts(self.using, write)


class DjangoConditionalChatStore(_SqlRunner, BaseConditionalChatStore):
    """Revisioned chats; ``transcript`` is updated in the same transaction as each write.

    Writes, ``load_chat`` (its revision is what the next write must name) and
    ``is_deleted`` use ``using``; ``list_chats`` and the transcript's searches read
    ``search_using`` (see ``DjangoTranscriptIndex``).
    """

    transcript: DjangoTranscriptIndex

    def __init__(self, using: str = "default", *, search_using: str | None = None) -> None:
        self.using = using
        self.search_using = search_using
        self.transcript = DjangoTranscriptIndex(using, search_using=search_using)
        self.writer = self.transcript.writer  # kept: ``transcript`` may be replaced

    @property
    def search_database(self) -> str:
        """The alias ``list_chats`` reads: ``search_using``, else the setting's, else ``using``."""
        return self.search_using or conf.search_database(self.using)

    def write_chat(self, record: ChatRecord, *, expected_revision: int) -> int:
        chat = PreparedChat.of(record)
        expected_revision = check_revision(expected_revision)
        return self._retrying(lambda: self._write(chat, expected_revision))

    def _write(self, chat: PreparedChat, expected_revision: int) -> int:
        with transaction.atomic(using=self.using):
            locked = self._locked(chat.chat_id, expected_revision)
            return self._index(locked, chat, expected_revision + 1)

    def _locked(
        self, chat_id: str, expected_revision: int, *, existing: bool = False
    ) -> LockedChat:
        """Take the chat's lock and check its tombstone and revision (``existing``: a chat
        a store wrote, which an append needs)."""
        locked = self.writer.lock(chat_id)
        if locked.tombstoned:
            raise ChatDeleted(chat_id)
        if existing and locked.revision == 0:  # no row, or one only an index wrote
            raise no_chat(chat_id)
        if locked.revision != expected_revision:
            raise RevisionConflict(chat_id, expected_revision, locked.revision)
        return locked

    def _index(self, locked: LockedChat, chat: PreparedChat, revision: int) -> int:
        """``self.transcript.index(chat)`` (public: a subclass or wrapper is honoured) with
        the lock held and read handed over, then the revision, unless the index's write
        set it with the chat row: one transaction, so an exception from ``index`` leaves
        the previous revision as it was."""
        with self.writer.handing_over(locked, revision=revision) as handed:
            self.transcript.index(chat)
        if not handed.written:  # an index of another kind or database, or one that skips
            self.writer.set_revision(chat.chat_id, revision)
        note_write(self.using, self.search_database)
        return revision

    def append_messages(
        self,
        chat_id: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        expected_revision: int,
        message_ids: Sequence[str | None] | None = None,
        updated_at: datetime | None = None,
    ) -> int:
        """``BaseConditionalChatStore.append_messages`` at the cost of the new messages:
        they alone are validated, encoded and written (the stored ids they could take
        are looked up), with the chat row, in one transaction. ``index()`` is given an
        ``AppendedChat``: the whole chat to an ``index`` of the caller's own, which loads
        the stored messages when it reads them."""
        new = new_messages(chat_id, messages, message_ids, updated_at)
        expected = check_revision(expected_revision)
        return self._retrying(lambda: self._append(new, expected))

    def _append(self, new: ChatRecord, expected_revision: int) -> int:
        with transaction.atomic(using=self.using):
            locked = self._locked(new.chat_id, expected_revision, existing=True)
            assert locked.row is not None  # a revision above 0 has its row
            tail = self.writer.appended(locked.row, new)
            appended = AppendedChat(self.using, locked.row, tail)
            return self._index(locked, appended, expected_revision + 1)

    def _not_appendable(self, chat_id: str) -> Exception:
        return (
            ChatDeleted(chat_id) if self.is_deleted(chat_id) else super()._not_appendable(chat_id)
        )

    def load_chat(self, chat_id: str) -> tuple[ChatRecord, int] | None:
        chat_id = check_chat_id(chat_id)
        with database_errors(self.using):
            chat = Chat.objects.using(self.using).filter(chat_id=chat_id, revision__gt=0).first()
            if chat is None:
                return None
            messages = list(chat_messages(self.using, chat).order_by("position"))
        return record_from_rows(chat, messages), chat.revision

    def list_chats(self, scope: Mapping[str, str]) -> list[ChatRecord]:
        scope = validate_scope(scope)
        return read_from(self.using, self.search_database, lambda alias: self._list(alias, scope))

    def _list(self, alias: str, scope: dict[str, str]) -> list[ChatRecord]:
        chats = Chat.objects.using(alias).filter(revision__gt=0)
        if scope:
            chats = chats.filter(
                pk__in=RawSQL(*ChatFilter(scope, searchable_only=False).chat_pks_sql())
            )
        ordered = Message.objects.using(alias).order_by("position")
        tenant = get_backend(alias).source.tested_tenant(scope)
        if tenant is not None:  # one partition (shard) of a split schema
            ordered = ordered.filter(tenant=tenant)
        with database_errors(alias):
            found = chats.order_by("-updated_at", "chat_id").prefetch_related(
                Prefetch("messages", queryset=ordered, to_attr="ordered_messages")
            )
            return [record_from_rows(chat, chat.ordered_messages) for chat in found]

    def delete_chat(self, chat_id: str) -> None:
        """Tombstone; the messages, search rows and any legacy copy are deleted now.

        On SQLite (``SQLITE_SECURE_DELETE``, on by default) freed bytes are zeroed and the
        chat's FTS5 entries are erased (in place on SQLite 3.42+, else by merging the
        index), so the deleted text is left nowhere in the file.
        """
        self.delete_chats([chat_id])

    def delete_chats(self, chat_ids: Iterable[str]) -> None:
        """``delete_chat`` of several chats in one transaction and one FTS5 merge.

        Before SQLite 3.42 the merge costs in proportion to the whole FTS5 index, so a
        bulk delete (the admin's action) pays it once instead of once per chat.
        """
        chat_ids = [check_chat_id(chat_id) for chat_id in chat_ids]
        writer = self.writer

        def delete() -> None:
            with transaction.atomic(using=self.using), writer.backend.rows.deleting():
                for chat_id in chat_ids:
                    locked = writer.lock(chat_id)
                    searchable = locked.row is not None and locked.row.is_indexed
                    writer.purge(locked)
                    Tombstone.objects.using(self.using).get_or_create(chat_id=chat_id)
                    LegacyChat.objects.using(self.using).filter(chat_id=chat_id).delete()
                    self._announce_delete(locked, searchable)
                note_write(self.using, self.search_database)

        self._retrying(delete)

    def _announce_delete(self, locked: LockedChat, searchable: bool) -> None:
        """``chat_removed`` (if it was searchable), then ``chat_deleted`` (unless it was
        tombstoned already), both after the delete commits."""
        scope = None if locked.row is None else locked.row.scope
        if searchable:
            send_after_commit(
                chat_removed,
                type(self.transcript),
                chat_id=locked.chat_id,
                scope=scope,
                using=self.using,
            )
        if not locked.tombstoned:
            send_after_commit(
                chat_deleted, type(self), chat_id=locked.chat_id, scope=scope, using=self.using
            )

    async def adelete_chats(self, chat_ids: Iterable[str]) -> None:
        return await self._run(self.delete_chats, list(chat_ids))

    def is_deleted(self, chat_id: str) -> bool:
        return Tombstone.objects.using(self.using).filter(chat_id=chat_id).exists()


class DjangoChatStore(_SqlRunner, BaseChatStore):
    """The legacy store on the ``deuz_chats`` table: last write wins, ids kept as given."""

    def __init__(self, using: str = "default") -> None:
        self.using = using

    def save_chat(self, record: ChatRecord) -> None:
        record = check_record(record)  # the legacy store keeps ids as given: not prepared
        messages = ",".join(
            encode_message(message, f"messages[{i}]") for i, message in enumerate(record.messages)
        )
        payload = f'{{"messages":[{messages}],"message_ids":{json.dumps(record.message_ids)}}}'
        self._retrying(
            lambda: LegacyChat.objects.using(self.using).update_or_create(
                chat_id=record.chat_id,
                defaults={
                    "scope": record.scope,
                    "payload": payload,
                    "updated_at": to_db_datetime(record.updated_at),
                },
            )
        )

    @staticmethod
    def record_of(row: LegacyChat) -> ChatRecord:
        """The record a ``deuz_chats`` row holds (its JSON ``payload``)."""
        data = json.loads(row.payload)
        return ChatRecord(
            chat_id=row.chat_id,
            scope=dict(row.scope),
            messages=data["messages"],
            message_ids=data.get("message_ids"),
            updated_at=from_db_datetime(row.updated_at),
        )

    def load_chat(self, chat_id: str) -> ChatRecord | None:
        chat_id = check_chat_id(chat_id)
        with database_errors(self.using):
            row = LegacyChat.objects.using(self.using).filter(chat_id=chat_id).first()
        return None if row is None else self.record_of(row)

    def list_chats(self, scope: Mapping[str, str]) -> list[ChatRecord]:
        scope = validate_scope(scope)
        rows = get_backend(self.using).legacy_scope_filter(
            LegacyChat.objects.using(self.using).all(), scope
        )
        with database_errors(self.using):
            return [self.record_of(row) for row in rows.order_by("-updated_at", "chat_id")]

    def delete_chat(self, chat_id: str) -> None:
        chat_id = check_chat_id(chat_id)
        self._retrying(
            lambda: LegacyChat.objects.using(self.using).filter(chat_id=chat_id).delete()
        )
