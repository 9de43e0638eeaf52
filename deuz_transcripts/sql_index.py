"""``DjangoTranscriptIndex``: the SQL index, one class for every backend."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from functools import reduce
from operator import or_
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import DatabaseError, connections, transaction
from django.db.models import Q

from . import ranking
from .backends import SearchBackend, get_backend
from .backends.base import ChatFilter, StoredRow
from .base import BaseTranscriptIndex, SearchRequest, check_chat_id, check_record
from .errors import InvalidRecord, TranscriptError
from .memory import PreparedMessage, prepare_messages
from .models import Chat, ChatScope, Message, Tombstone
from .records import (
    MAX_MESSAGE_ID_LENGTH,
    ChatRecord,
    MemorySourceRef,
    TranscriptHit,
    TranscriptMessage,
    _check_identifier,
    decode_message,
    scope_matches,
    validate_scope,
    with_filled_ids,
)

__all__ = ["DjangoTranscriptIndex", "database_errors", "message_digest"]

T = TypeVar("T")

#: Bump when the text rules change what a message indexes: re-indexing then rewrites rows.
STORED_FORM_VERSION = 1


@contextmanager
def database_errors(using: str | None = None) -> Iterator[None]:
    """Raw database errors leave the public API as ``TranscriptError``.

    With ``using``, a connection found dead (server restart, ``pg_terminate_backend``,
    network) is closed at once when no transaction is open, so the next call
    reconnects instead of failing until Django's request cycle recycles it.
    """
    try:
        yield
    except DatabaseError as exc:
        if using is not None:
            _close_if_broken(using)
        if "locked" in str(exc):
            raise TranscriptError("the database is locked by another writer; try again") from exc
        raise TranscriptError(f"database error: {type(exc).__name__}") from exc


def _close_if_broken(using: str) -> None:
    connection = connections[using]
    if connection.in_atomic_block:
        return  # the caller's transaction: Django closes it when the block ends
    with suppress(DatabaseError):
        connection.close_if_unusable_or_obsolete()


def message_digest(message: PreparedMessage) -> str:
    key = f"{STORED_FORM_VERSION}\x00{message.message_id}\x00{message.visible_position}\x00"
    return hashlib.blake2b((key + message.payload).encode("utf-8"), digest_size=16).hexdigest()


def to_db_datetime(value: datetime) -> datetime:
    return value if settings.USE_TZ else value.astimezone(UTC).replace(tzinfo=None)


def from_db_datetime(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


class DjangoTranscriptIndex(BaseTranscriptIndex):
    """Search rows in the database ``using``, written in the caller's transaction."""

    def __init__(self, using: str = "default") -> None:
        self.using = using

    def __repr__(self) -> str:
        return f"DjangoTranscriptIndex(using={self.using!r})"

    async def _run(self, method: Any, *args: Any, **kwargs: Any) -> Any:
        return await sync_to_async(method, thread_sensitive=True)(*args, **kwargs)

    @property
    def backend(self) -> SearchBackend:
        return get_backend(self.using)

    @property
    def backend_name(self) -> str:
        return self.backend.name

    # writing

    def index(self, record: ChatRecord) -> None:
        """Index a chat; skipped when the chat has a tombstone in this database."""
        record = with_filled_ids(check_record(record))
        prepared = prepare_messages(record)
        with database_errors(self.using), transaction.atomic(using=self.using, savepoint=False):
            self._write(record, prepared)

    def _write(self, record: ChatRecord, prepared: Sequence[PreparedMessage]) -> bool:
        backend = self.backend
        db = self.using
        with connections[db].cursor() as cursor:
            backend.lock_chat(cursor, record.chat_id)
            if Tombstone.objects.using(db).filter(chat_id=record.chat_id).exists():
                return False
            chat = Chat.objects.using(db).filter(chat_id=record.chat_id).first()
            digests = [message_digest(message) for message in prepared]
            keep_text = backend.stores_search_text()
            indexed_count = sum(1 for message in prepared if message.terms)
            fields = {
                "scope": record.scope,
                "updated_at": to_db_datetime(record.updated_at),
                "is_indexed": True,
                "indexed_count": indexed_count,
                "message_count": len(prepared),
            }
            unchanged: set[int] = set()
            if chat is None:
                chat = Chat.objects.using(db).create(chat_id=record.chat_id, **fields)
                self._write_scope(chat)
            else:
                unchanged = self._drop_changed_rows(backend, cursor, chat, record, digests)
                scope_changed = chat.scope != record.scope
                for name, value in fields.items():
                    setattr(chat, name, value)
                chat.save(using=db, update_fields=list(fields))
                if scope_changed:
                    ChatScope.objects.using(db).filter(chat=chat).delete()
                    self._write_scope(chat)
            fresh = [m for m in prepared if m.index not in unchanged]
            created = Message.objects.using(db).bulk_create(
                Message(
                    chat=chat,
                    position=message.index,
                    message_id=message.message_id,
                    role=message.role,
                    payload=message.payload,
                    digest=digests[message.index],
                    visible_position=message.visible_position,
                    search_text=" ".join(message.terms or ()) if keep_text else None,
                    has_terms=bool(message.terms),
                )
                for message in fresh
            )
            backend.write_rows(
                cursor,
                chat,
                [
                    StoredRow(row.pk, " ".join(message.terms or ()))
                    for row, message in zip(created, fresh, strict=True)
                ],
            )
        return True

    def _write_scope(self, chat: Chat) -> None:
        ChatScope.objects.using(self.using).bulk_create(
            ChatScope(chat=chat, key=key, value=value) for key, value in chat.scope.items()
        )

    def _drop_changed_rows(
        self,
        backend: SearchBackend,
        cursor: Any,
        chat: Chat,
        record: ChatRecord,
        digests: Sequence[str],
    ) -> set[int]:
        """Delete rows whose message changed; return the positions kept as they are."""
        rewrite_all = chat.scope != record.scope or not chat.is_indexed
        unchanged: set[int] = set()
        stale: list[tuple[int, str | None]] = []
        rows = Message.objects.using(self.using).filter(chat=chat)
        for pk, position, digest, search_text in rows.values_list(
            "pk", "position", "digest", "search_text"
        ):
            if not rewrite_all and position < len(digests) and digests[position] == digest:
                unchanged.add(position)
            else:
                stale.append((pk, search_text))
        if stale:
            if chat.is_indexed:  # rows of a removed chat have no search data left
                backend.delete_rows(
                    cursor, chat, [StoredRow(pk, text) for pk, text in stale if text]
                )
            Message.objects.using(self.using).filter(pk__in=[pk for pk, _ in stale]).delete()
        return unchanged

    def remove(self, chat_id: str) -> None:
        """Take a chat out of search; a chat no store wrote (revision 0) is deleted whole."""
        chat_id = check_chat_id(chat_id)
        with database_errors(self.using), transaction.atomic(using=self.using, savepoint=False):
            self.purge(chat_id, keep_content=True)

    def purge(self, chat_id: str, *, keep_content: bool = False) -> None:
        """Delete a chat's search data, and its rows unless a store still owns them."""
        backend = self.backend
        with connections[self.using].cursor() as cursor:
            backend.lock_chat(cursor, chat_id)
            chat = Chat.objects.using(self.using).filter(chat_id=chat_id).first()
            if chat is None:
                return
            keep = keep_content and chat.revision > 0
            if chat.is_indexed:
                texts = Message.objects.using(self.using).filter(chat=chat, has_terms=True)
                rows = [StoredRow(pk, text) for pk, text in texts.values_list("pk", "search_text")]
                (backend.clear_rows if keep else backend.delete_rows)(cursor, chat, rows)
            if keep:
                chat.is_indexed = False
                chat.indexed_count = 0
                chat.save(using=self.using, update_fields=["is_indexed", "indexed_count"])
            else:
                chat.delete(using=self.using)

    # reading

    def search(
        self,
        scope: Mapping[str, str],
        query: str,
        *,
        around: int | None = None,
        limit: int = 20,
        offset: int = 0,
        chat_ids: Iterable[str] | None = None,
    ) -> list[TranscriptHit]:
        request = SearchRequest.build(
            scope, query, around=around, limit=limit, offset=offset, chat_ids=chat_ids
        )
        if request.empty:
            return []
        backend = self.backend
        chats = ChatFilter(request.scope, request.chat_ids)
        with database_errors(self.using), connections[self.using].cursor() as cursor:
            total_sql, total_params = chats.total_sql()
            cursor.execute(total_sql, total_params)
            total = int(cursor.fetchone()[0])
            histogram = backend.histogram(cursor, chats, request.terms)
            plan = ranking.plan_page(
                histogram, len(request.terms), total, request.offset, request.limit
            )
            if plan is None:
                return []
            page = backend.page(cursor, chats, request.terms, plan, request.offset, request.limit)
            return self._hits(page, plan, request.around)

    def _hits(
        self, page: Sequence[tuple[int, int]], plan: ranking.RankPlan, around: int | None
    ) -> list[TranscriptHit]:
        rows = (
            Message.objects.using(self.using)
            .select_related("chat")
            .only("chat__chat_id", "position", "message_id", "payload", "visible_position")
            .in_bulk([pk for pk, _ in page])
        )
        neighbours = self._around([rows[pk] for pk, _ in page if pk in rows], around)
        hits = []
        for pk, mask in page:
            row = rows.get(pk)
            if row is None:  # deleted between the two queries
                continue
            hits.append(
                TranscriptHit(
                    chat_id=row.chat.chat_id,
                    message_id=row.message_id,
                    index=row.position,
                    message=decode_message(row.payload),
                    score=plan.score(mask),
                    around=None if around is None else neighbours.get(pk, []),
                )
            )
        return hits

    def _around(
        self, rows: Sequence[Message], around: int | None
    ) -> dict[int, list[TranscriptMessage]]:
        """Up to ``around`` non-system messages on each side of every hit, in one query."""
        if not around or not rows:
            return {}
        windows = reduce(
            or_,
            (
                Q(
                    chat_id=row.chat_id,
                    visible_position__gte=max(0, row.visible_position - around),
                    visible_position__lte=row.visible_position + around,
                )
                for row in rows
            ),
        )
        by_chat: dict[int, list[Message]] = defaultdict(list)
        found = (
            Message.objects.using(self.using)
            .filter(windows)
            .only("chat_id", "position", "message_id", "payload", "visible_position")
            .order_by("chat_id", "position")
        )
        for neighbour in found:
            by_chat[neighbour.chat_id].append(neighbour)
        result = {}
        for row in rows:
            low, high = row.visible_position - around, row.visible_position + around
            result[row.pk] = [
                TranscriptMessage(
                    row.chat.chat_id, n.message_id, n.position, decode_message(n.payload)
                )
                for n in by_chat[row.chat_id]
                if low <= n.visible_position <= high and n.pk != row.pk
            ]
        return result

    def resolve_source(
        self, scope: Mapping[str, str], ref: MemorySourceRef
    ) -> TranscriptMessage | None:
        scope = validate_scope(scope)
        ref = MemorySourceRef.coerce(ref)
        for value in (ref.chat_id, ref.message_id):
            try:  # no stored id is a non-string, too long, or holds NUL or a lone surrogate
                _check_identifier(value, "ref", allow_empty=True, max_length=MAX_MESSAGE_ID_LENGTH)
            except InvalidRecord:
                return None
        with database_errors(self.using):
            row = (
                Message.objects.using(self.using)
                .select_related("chat")
                .filter(
                    chat__chat_id=ref.chat_id,
                    message_id=ref.message_id,
                    chat__is_indexed=True,
                    visible_position__isnull=False,
                )
                .first()
            )
        if row is None or not scope_matches(row.chat.scope, scope):
            return None
        return TranscriptMessage(
            row.chat.chat_id, row.message_id, row.position, decode_message(row.payload)
        )
