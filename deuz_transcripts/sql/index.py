"""``DjangoTranscriptIndex``: the SQL index, one class for every backend.

A facade: writes go through the ``ChatWriter`` unit, searches through the search
pipeline's ``Collector`` and ``read_hits``; the backend (picked per call from the
connection) supplies the vendor SQL. Writes run on ``using``; searches and
``resolve_source`` read the search database (``sql.replica``), ``using`` unless set.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TypeGuard, TypeVar

from django.db import transaction

from ..backends import SearchBackend, get_backend
from ..backends.base import Candidate
from ..backends.search_cursor import SearchCursor
from ..base import BaseTranscriptIndex, check_chat_id
from ..conf import conf
from ..models import Message
from ..paging import HitKey, PageAfter, to_micros
from ..prepared import PreparedChat
from ..ranking import RankPlan
from ..records import (
    ChatRecord,
    MemorySourceRef,
    TranscriptHit,
    TranscriptMessage,
    decode_message,
    scope_matches,
)
from ..search_budget import search_budget
from ..search_request import CountedHits, SearchRequest
from ..signals import chat_indexed, chat_removed, send_after_commit
from .appended import AppendedChat
from .errors import WorkerThreadRunner, database_errors
from .hits import read_hits
from .replica import note_write, read_from
from .search import Collector
from .writer import ChatWriter, LockedChat

__all__ = ["DjangoTranscriptIndex", "hit_key"]

T = TypeVar("T")


def hit_key(candidate: Candidate) -> HitKey:
    """A candidate's place in the tie order (PostgreSQL gives ``updated_at`` as
    microseconds, SQLite as Django's text in UTC)."""
    micros = candidate.updated_at
    if isinstance(micros, str):
        micros = to_micros(datetime.fromisoformat(micros).replace(tzinfo=UTC))
    return HitKey(candidate.mask, micros, candidate.chat_id, candidate.position)


def _appends_over(chat: PreparedChat, locked: LockedChat) -> TypeGuard[AppendedChat]:
    """Whether ``chat`` is an append whose new messages alone can be written over
    ``locked``: the lock the store read the chat's row with (no write since), for a chat
    still searchable and whose tenant the settings have not moved (else it is written
    whole)."""
    row = locked.row
    return (
        isinstance(chat, AppendedChat)
        and row is not None
        and chat.row is row
        and locked.sets_revision is not None
        and row.is_indexed
        and row.tenant == conf.tenant_of(row.scope)
    )


def _hits_of(
    cursor: SearchCursor,
    backend: SearchBackend,
    request: SearchRequest,
    page: list[Candidate],
    plan: RankPlan,
) -> list[TranscriptHit]:
    """The planned page's hits, each with the spans of the request's terms: the
    search's last read."""
    cursor.last_read_next()
    return read_hits(
        cursor,
        page,
        plan,
        request.around,
        backend.source.tested_tenant(request.scope),  # the search filtered on it
        terms=request.terms,
        substring=backend.substring_matching,
    )


class DjangoTranscriptIndex(WorkerThreadRunner, BaseTranscriptIndex):
    """Search rows in the database ``using``, written in the caller's transaction.

    ``search_using`` names the database searches and ``resolve_source`` read (a replica
    of ``using``); ``None`` leaves it to ``DEUZ_TRANSCRIPTS["SEARCH_DATABASE"]``, which
    is ``using`` itself unless set. A caller's reads see its own writes (``sql.replica``).
    """

    def __init__(self, using: str = "default", *, search_using: str | None = None) -> None:
        self.using = using
        self.search_using = search_using
        self.writer = ChatWriter(using)

    def __repr__(self) -> str:
        if self.search_using is None:
            return f"DjangoTranscriptIndex(using={self.using!r})"
        return f"DjangoTranscriptIndex(using={self.using!r}, search_using={self.search_using!r})"

    @property
    def search_database(self) -> str:
        """The alias searches read: ``search_using``, else the setting's, else ``using``."""
        return self.search_using or conf.search_database(self.using)

    def read(self, read: Callable[[str], T]) -> T:
        """``read(alias)`` on the search database once it has this caller's writes, or on
        ``using`` when it cannot answer and ``REPLICA_FALLBACK`` allows (the admin's scope
        notice reads through this too)."""
        return read_from(self.using, self.search_database, read)

    @property
    def backend(self) -> SearchBackend:
        return get_backend(self.using)

    @property
    def backend_name(self) -> str:
        return self.backend.name

    # writing

    def index(self, record: ChatRecord | PreparedChat) -> None:
        """Index a chat; skipped when the chat has a tombstone in this database.

        Runs in the caller's transaction and takes the chat's write lock there (a no-op
        when the transaction holds it). A store that has locked and read the chat hands
        that lock over (``ChatWriter.handing_over``): the row it read is written over
        without a second read, with the store's revision. An append (``AppendedChat``)
        over the store's lock writes its new messages alone. ``chat_indexed`` is sent
        once the caller's transaction commits.
        """
        chat = PreparedChat.of(record)
        with database_errors(self.using), transaction.atomic(using=self.using, savepoint=False):
            locked = self.writer.lock(chat.chat_id)
            if locked.tombstoned:
                return
            if _appends_over(chat, locked):
                self.writer.append(locked, chat.tail)
            else:
                self.writer.write(locked, chat)
            note_write(self.using, self.search_database)
            send_after_commit(
                chat_indexed, type(self), chat_id=chat.chat_id, scope=chat.scope, using=self.using
            )

    def remove(self, chat_id: str) -> None:
        """Take a chat out of search; a chat no store wrote (revision 0) is deleted whole.

        ``chat_removed`` is sent once the caller's transaction commits, if the chat was
        searchable.
        """
        chat_id = check_chat_id(chat_id)
        with database_errors(self.using), transaction.atomic(using=self.using, savepoint=False):
            locked = self.writer.lock(chat_id)
            row = locked.row
            searchable = row is not None and row.is_indexed  # read before purge changes it
            self.writer.purge(locked, keep_content=True)
            note_write(self.using, self.search_database)
            if row is not None and searchable:
                send_after_commit(
                    chat_removed, type(self), chat_id=chat_id, scope=row.scope, using=self.using
                )

    # reading

    def _search(self, request: SearchRequest) -> list[TranscriptHit]:
        return self.read(lambda alias: self._search_on(alias, request))

    def _search_on(self, alias: str, request: SearchRequest) -> list[TranscriptHit]:
        """The whole search, its statements and its hits' spans, runs within
        ``SEARCH_TIMEOUT_MS``."""
        backend = get_backend(alias)
        with (
            search_budget(conf.SEARCH_TIMEOUT_MS),
            database_errors(alias),
            backend.search_cursor(conf.SEARCH_TIMEOUT_MS) as cursor,
        ):
            collected = Collector(backend, cursor).collect(request)
            if collected is None:
                return []
            return _hits_of(cursor, backend, request, collected.page, collected.plan)

    def _search_page(
        self, request: SearchRequest, after: PageAfter | None, total_cap: int | None = None
    ) -> CountedHits:
        return self.read(lambda alias: self._search_page_on(alias, request, after, total_cap))

    def _search_page_on(
        self, alias: str, request: SearchRequest, after: PageAfter | None, total_cap: int | None
    ) -> CountedHits:
        backend = get_backend(alias)
        with (
            search_budget(conf.SEARCH_TIMEOUT_MS),
            database_errors(alias),
            backend.search_cursor(conf.SEARCH_TIMEOUT_MS) as cursor,
        ):
            collected = Collector(backend, cursor).collect(
                request,
                count="exact" if total_cap is None else "capped",
                cap=total_cap,
                after=after,
            )
            if collected is None or collected.total is None:
                return CountedHits([], [], 0, None)
            page = collected.page
            hits = _hits_of(cursor, backend, request, page, collected.plan) if page else []
        # read_hits leaves out a row deleted since it was planned: keep the keys in step
        keys = {(c.chat_id, c.position): hit_key(c) for c in page}
        found = [keys[h.chat_id, h.index] for h in hits]
        return CountedHits(hits, found, collected.total, collected.pinned)

    def _resolve(self, scope: dict[str, str], ref: MemorySourceRef) -> TranscriptMessage | None:
        return self.read(lambda alias: self._resolve_on(alias, scope, ref))

    def _resolve_on(
        self, alias: str, scope: dict[str, str], ref: MemorySourceRef
    ) -> TranscriptMessage | None:
        rows = Message.objects.using(alias)
        tenant = get_backend(alias).source.tested_tenant(scope)
        if tenant is not None:
            rows = rows.filter(tenant=tenant)  # one partition (shard) of a split schema
        with database_errors(alias):
            row = (
                rows.select_related("chat")
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
