"""``DjangoTranscriptIndex``: the SQL index, one class for every backend."""

from __future__ import annotations

import hashlib
import threading
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import DatabaseError, connections, transaction

from . import ranking
from .backends import SearchBackend, get_backend
from .backends.base import Candidate, ChatFilter, NewRows, StoredRow
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

__all__ = ["DjangoTranscriptIndex", "database_errors", "message_digest", "order_page"]

T = TypeVar("T")

#: Bump when the text rules change what a message indexes: re-indexing then rewrites rows.
STORED_FORM_VERSION = 1

#: The newest-first walk of rows holding every term is tried for queries of at most this
#: many terms (longer ones rarely have a page of such rows: the probe would be wasted).
WALK_MAX_TERMS = 4
#: A mask with at least this many rows (or the page depth, if larger) is walked newest
#: chat first instead of being read and sorted whole.
WALK_MIN_ROWS = 2_048


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


def order_page(candidates: Iterable[Candidate], plan: ranking.RankPlan) -> list[Candidate]:
    """Candidates of the plan's masks, best first with the shared tie rules.

    Three stable sorts (chat id and index, then newer chat, then raw score) because
    ``updated_at`` may be Django's sortable SQLite text, which cannot be negated.
    """
    found = [c for c in candidates if c.mask in plan.page_masks]
    found.sort(key=lambda c: (c.chat_id, c.position))
    found.sort(key=lambda c: c.updated_at, reverse=True)
    found.sort(key=lambda c: plan.raws[c.mask], reverse=True)
    return found


def around_windows(page: Sequence[Candidate], around: int | None) -> tuple[str, list[Any]]:
    """SQL for the page's rows and, with ``around``, every hit's window of visible messages.

    A window holds its hit, and overlapping windows of one chat merge into one range,
    so a page clustered in a few chats costs a few index ranges.
    """
    if not around:
        return f"m.id IN ({', '.join(['%s'] * len(page))})", [hit.pk for hit in page]
    ranges: dict[int, list[list[int]]] = defaultdict(list)
    for hit in sorted(page, key=lambda h: (h.chat_pk, h.visible_position)):
        low, high = hit.visible_position - around, hit.visible_position + around
        spans = ranges[hit.chat_pk]
        if spans and low <= spans[-1][1] + 1:
            spans[-1][1] = max(spans[-1][1], high)
        else:
            spans.append([low, high])
    where, params = [], []
    for chat_pk, spans in ranges.items():
        for low, high in spans:
            where.append("(m.chat_id = %s AND m.visible_position BETWEEN %s AND %s)")
            params.extend([chat_pk, low, high])
    return " OR ".join(where), params


def _new_rows(
    chat: Chat, prepared: Sequence[PreparedMessage], digests: Sequence[str], keep_text: bool
) -> NewRows:
    """The ``Message`` rows of ``prepared`` for ``chat``, with their space-separated terms."""
    texts = [" ".join(message.terms or ()) for message in prepared]
    return NewRows(
        chat,
        [
            Message(
                chat=chat,
                position=message.index,
                message_id=message.message_id,
                role=message.role,
                payload=message.payload,
                digest=digests[message.index],
                visible_position=message.visible_position,
                search_text=text if keep_text else None,
                has_terms=bool(message.terms),
            )
            for message, text in zip(prepared, texts, strict=True)
        ],
        texts,
    )


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
        self._locked_write = threading.local()

    @contextmanager
    def locked_write(self, chat: Chat | None, chat_id: str, revision: int) -> Iterator[None]:
        """The caller (a store, a backfill) has locked ``chat_id`` and checked its tombstone.

        ``index()`` inside this block skips repeating that work, reuses the chat row
        the store read, and writes ``revision`` with the chat's other fields.
        """
        self._locked_write.state = (chat_id, chat, revision)
        try:
            yield
        finally:
            self._locked_write.state = None

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
        self.index_checked(with_filled_ids(check_record(record)))

    def index_checked(self, record: ChatRecord) -> None:
        """``index`` of a record the caller validated and filled ids of (stores, backfill)."""
        prepared = prepare_messages(record)
        with database_errors(self.using), transaction.atomic(using=self.using, savepoint=False):
            self._write(record, prepared)

    def _write(self, record: ChatRecord, prepared: Sequence[PreparedMessage]) -> bool:
        backend = self.backend
        db = self.using
        state = getattr(self._locked_write, "state", None)
        with connections[db].cursor() as cursor:
            if state is not None and state[0] == record.chat_id:
                _, chat, revision = state
            else:
                backend.lock_chat(cursor, record.chat_id)
                if Tombstone.objects.using(db).filter(chat_id=record.chat_id).exists():
                    return False
                chat = Chat.objects.using(db).filter(chat_id=record.chat_id).first()
                revision = None if chat is None else chat.revision
            digests = [message_digest(message) for message in prepared]
            keep_text = backend.stores_search_text()
            # Kept rows: {position: has_terms}. Their terms are never extracted again.
            unchanged: dict[int, bool] = {}
            if chat is not None:
                unchanged = self._drop_changed_rows(backend, cursor, chat, record, digests)
            fresh = [m for m in prepared if m.index not in unchanged]
            fields = {
                "scope": record.scope,
                "updated_at": to_db_datetime(record.updated_at),
                "is_indexed": True,
                "indexed_count": sum(unchanged.values()) + sum(1 for m in fresh if m.terms),
                "message_count": len(prepared),
            }
            if revision is not None:
                fields["revision"] = revision
            if chat is None:
                chat = Chat.objects.using(db).create(chat_id=record.chat_id, **fields)
                self._write_scope(chat)
            else:
                scope_changed = chat.scope != record.scope
                for name, value in fields.items():
                    setattr(chat, name, value)
                chat.save(using=db, update_fields=list(fields))
                if scope_changed:
                    ChatScope.objects.using(db).filter(chat=chat).delete()
                    self._write_scope(chat)
            backend.insert_chat_messages(cursor, [_new_rows(chat, fresh, digests, keep_text)])
        return True

    def insert_new_chats(
        self, chats: Sequence[tuple[ChatRecord, Sequence[PreparedMessage]]]
    ) -> None:
        """Write chats that have no row yet in a few statements for all (backfill's fast path).

        The caller runs inside a transaction, holds every chat's lock, and has checked
        that none has a tombstone or a row; the records are validated and prepared.
        """
        backend = self.backend
        db = self.using
        keep_text = backend.stores_search_text()
        rows = Chat.objects.using(db).bulk_create(
            Chat(
                chat_id=record.chat_id,
                scope=record.scope,
                updated_at=to_db_datetime(record.updated_at),
                is_indexed=True,
                indexed_count=sum(1 for message in prepared if message.terms),
                message_count=len(prepared),
            )
            for record, prepared in chats
        )
        ChatScope.objects.using(db).bulk_create(
            ChatScope(chat=chat, key=key, value=value)
            for chat in rows
            for key, value in chat.scope.items()
        )
        batches = []
        for chat, (_, prepared) in zip(rows, chats, strict=True):
            digests = [message_digest(message) for message in prepared]
            batches.append(_new_rows(chat, prepared, digests, keep_text))
        with connections[db].cursor() as cursor:
            backend.insert_chat_messages(cursor, batches)

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
    ) -> dict[int, bool]:
        """Delete rows whose message changed; return the positions kept as they are,
        each with its ``has_terms`` (the digest covers everything the terms come from)."""
        rewrite_all = chat.scope != record.scope or not chat.is_indexed
        unchanged: dict[int, bool] = {}
        stale: list[tuple[int, str | None]] = []
        rows = Message.objects.using(self.using).filter(chat=chat)
        for pk, position, digest, search_text, has_terms in rows.values_list(
            "pk", "position", "digest", "search_text", "has_terms"
        ):
            if not rewrite_all and position < len(digests) and digests[position] == digest:
                unchanged[position] = has_terms
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

    def _search(self, request: SearchRequest) -> list[TranscriptHit]:
        backend = self.backend
        chats = ChatFilter(request.scope, request.chat_ids)
        depth = request.offset + request.limit
        terms = request.terms
        with database_errors(self.using), connections[self.using].cursor() as cursor:
            page = self._newest_page(backend, cursor, chats, terms, depth)
            if page is not None:  # N is not needed: every hit of the page scores 1.0
                plan = ranking.RankPlan(raws={page[0].mask: 1.0}, best=1.0, page_masks=frozenset())
                return self._hits(cursor, page[request.offset :], plan, request.around)
            total = backend.total(cursor, chats)
            if not total:
                return []
            single = len(terms) > backend.plan_max_terms or backend.single_statement(chats, total)
            if single:
                histogram, candidates = backend.candidates(cursor, chats, terms, depth, total)
            else:
                histogram = backend.mask_histogram(cursor, chats, terms)
            plan = ranking.plan_page(histogram, len(terms), total, request.offset, request.limit)
            if plan is None:
                return []
            if not single:
                candidates = self._page_rows(backend, cursor, chats, terms, plan, histogram, depth)
            page = order_page(candidates, plan)[request.offset : depth]
            return self._hits(cursor, page, plan, request.around)

    def _page_rows(
        self,
        backend: SearchBackend,
        cursor: Any,
        chats: ChatFilter,
        terms: Sequence[str],
        plan: ranking.RankPlan,
        histogram: Mapping[int, int],
        depth: int,
    ) -> list[Candidate]:
        """The rows a page needs, once the histogram has told which masks reach it.

        Masks with few rows are read in one statement through the index; a mask with
        many (at least ``WALK_MIN_ROWS``) is walked newest chat first, stopping after
        ``depth`` rows, instead of sorting all of them.
        """
        walked = {
            mask
            for mask in plan.page_masks
            if backend.walks_newest_first and histogram[mask] >= max(WALK_MIN_ROWS, depth)
        }
        few = plan.page_masks - walked
        rows = backend.mask_candidates(cursor, chats, terms, few, depth) if few else []
        for mask in walked:  # order_page orders the rows of every mask
            rows.extend(backend.newest_with_mask(cursor, chats, terms, mask, depth))
        return rows

    def _newest_page(
        self,
        backend: SearchBackend,
        cursor: Any,
        chats: ChatFilter,
        terms: Sequence[str],
        depth: int,
    ) -> list[Candidate] | None:
        """The first ``depth`` hits without ranking every match, when that is exact.

        A row holding every query term has the highest raw score whatever the idfs,
        so when at least ``depth`` rows hold them all, the page is the first ``depth``
        of those in tie order (newest chat first), each scoring 1.0. A probe counts
        such rows up to ``WALK_MIN_ROWS`` (it stops there); only then does the walk
        run, visiting about ``depth * N / rows`` messages instead of every match.
        """
        cap = max(WALK_MIN_ROWS, depth)
        if (
            not backend.walks_newest_first
            or len(terms) > WALK_MAX_TERMS
            or backend.count_with_all_terms(cursor, chats, terms, cap) < cap
        ):
            return None
        full = (1 << len(terms)) - 1
        page = backend.newest_with_mask(cursor, chats, terms, full, depth)
        return page if len(page) >= depth else None  # rows deleted meanwhile: rank them all

    def _hits(
        self,
        cursor: Any,
        page: Sequence[Candidate],
        plan: ranking.RankPlan,
        around: int | None,
    ) -> list[TranscriptHit]:
        """The page's messages and their ``around`` windows, in one statement."""
        where, params = around_windows(page, around)
        cursor.execute(
            "SELECT m.id, m.chat_id, m.position, m.message_id, m.payload, m.visible_position "
            f"FROM {Message._meta.db_table} m WHERE {where}",
            params,
        )
        rows = {row[0]: row for row in cursor.fetchall()}
        by_chat: dict[int, list[tuple]] = defaultdict(list)
        for row in sorted(rows.values(), key=lambda row: row[2]):  # chat order: no ORDER BY
            by_chat[row[1]].append(row)
        hits = []
        for hit in page:
            row = rows.get(hit.pk)
            if row is None:  # deleted between the two statements
                continue
            neighbours = None
            if around is not None:
                low, high = (
                    hit.visible_position - (around or 0),
                    hit.visible_position + (around or 0),
                )
                neighbours = [
                    TranscriptMessage(hit.chat_id, n[3], n[2], decode_message(n[4]))
                    for n in by_chat[hit.chat_pk]
                    if n[5] is not None and low <= n[5] <= high and n[0] != hit.pk
                ]
            hits.append(
                TranscriptHit(
                    chat_id=hit.chat_id,
                    message_id=row[3],
                    index=row[2],
                    message=decode_message(row[4]),
                    score=plan.score(hit.mask),
                    around=neighbours,
                )
            )
        return hits

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
