"""The interfaces every index and store implements, with their async twins."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, TypeVar

from .appends import appended_to, check_revision, new_messages, no_chat
from .cursors import decode_cursor, encode_cursor
from .errors import InvalidRecord, RevisionConflict
from .paging import PageAfter, SearchPage, from_micros
from .prepared import PreparedChat
from .records import (
    MAX_MESSAGE_ID_LENGTH,
    ChatRecord,
    MemorySourceRef,
    TranscriptHit,
    TranscriptMessage,
    _check_identifier,
    validate_scope,
)
from .search_request import CountedHits, SearchRequest, validate_total_cap

__all__ = [
    "BaseChatStore",
    "BaseConditionalChatStore",
    "BaseTranscriptIndex",
]

T = TypeVar("T")


class _AsyncRunner:
    """Runs a sync method for its async twin; SQL classes hop to a worker thread."""

    async def _run(self, method: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return method(*args, **kwargs)


class BaseTranscriptIndex(_AsyncRunner, ABC):
    """Searches past messages by their words, inside one scope."""

    @abstractmethod
    def index(self, record: ChatRecord | PreparedChat) -> None:
        """Index (or re-index) a chat; ids are filled as ``index_chat`` fills them.

        Stores pass the ``PreparedChat`` they validated (read-only, with the record's
        fields), so the record is validated once per write; ``PreparedChat.of`` takes
        either.
        """

    @abstractmethod
    def remove(self, chat_id: str) -> None:
        """Take a chat out of search."""

    def search(
        self,
        scope: Mapping[str, str],
        query: str,
        *,
        around: int | None = None,
        limit: int = 20,
        offset: int = 0,
        chat_ids: Iterable[str] | None = None,
        roles: Iterable[str] | None = None,
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
    ) -> list[TranscriptHit]:
        """Hits best first; ``[]`` for a query with no term (arguments validated once, here)."""
        request = SearchRequest.build(
            scope,
            query,
            around=around,
            limit=limit,
            offset=offset,
            chat_ids=chat_ids,
            roles=roles,
            updated_after=updated_after,
            updated_before=updated_before,
        )
        return [] if request.empty else self._search(request)

    def search_page(
        self,
        scope: Mapping[str, str],
        query: str,
        *,
        around: int | None = None,
        limit: int = 20,
        offset: int = 0,
        cursor: str | None = None,
        chat_ids: Iterable[str] | None = None,
        roles: Iterable[str] | None = None,
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
        total_cap: int | None = None,
    ) -> SearchPage:
        """``search()`` with the exact number of matching messages and a cursor.

        Without ``cursor`` the page is the one ``search()`` returns for the same
        arguments. ``cursor`` (a page's ``next_cursor``) continues after that page's last
        hit, ranked as the search's first page was; ``offset`` then skips hits after it.
        ``total_cap``: count exactly up to this many matches only; past it the total is
        the cap and ``total_exact`` False, and the page costs what ``search()`` costs
        instead of a count of every match. Hits, scores and cursors are the same either
        way.
        """
        request = SearchRequest.build(
            scope,
            query,
            around=around,
            limit=limit,
            offset=offset,
            chat_ids=chat_ids,
            roles=roles,
            updated_after=updated_after,
            updated_before=updated_before,
        )
        cap = validate_total_cap(total_cap)
        after = None if cursor is None else decode_cursor(cursor, request)
        if request.matches_nothing:
            return SearchPage([], 0, None)
        # one hit more than the page tells whether a next page exists
        counted = self._search_page(replace(request, limit=request.limit + 1), after, cap)
        hits = [
            replace(hit, updated_at=from_micros(key.updated_micros))  # dated by its chat
            for hit, key in zip(counted.hits[: request.limit], counted.keys, strict=False)
        ]
        next_cursor = None
        if request.limit and len(counted.hits) > request.limit:
            pinned, key = counted.pinned, counted.keys[request.limit - 1]
            assert pinned is not None
            next_cursor = encode_cursor(request, PageAfter(pinned, key))
        if cap is not None and counted.total > cap:
            return SearchPage(hits, cap, next_cursor, total_exact=False)
        return SearchPage(hits, counted.total, next_cursor)

    @abstractmethod
    def _search(self, request: SearchRequest) -> list[TranscriptHit]:
        """One backend's search of a validated, non-empty request."""

    @abstractmethod
    def _search_page(
        self, request: SearchRequest, after: PageAfter | None, total_cap: int | None = None
    ) -> CountedHits:
        """One backend's counted page (``request.limit`` hits at most, after ``after``);
        with ``total_cap``, its count may stop anywhere above the cap."""

    def resolve_source(
        self, scope: Mapping[str, str], ref: MemorySourceRef
    ) -> TranscriptMessage | None:
        """The cited message, only when its chat's scope matches; ``None`` for a ref whose
        ids no message can have (not strings, too long, NUL, lone surrogates), on every
        backend alike."""
        scope = validate_scope(scope)
        ref = MemorySourceRef.coerce(ref)
        for value in (ref.chat_id, ref.message_id):
            try:
                _check_identifier(value, "ref", allow_empty=True, max_length=MAX_MESSAGE_ID_LENGTH)
            except InvalidRecord:
                return None
        return self._resolve(scope, ref)

    @abstractmethod
    def _resolve(self, scope: dict[str, str], ref: MemorySourceRef) -> TranscriptMessage | None:
        """One backend's lookup of a validated ref."""

    async def aindex(self, record: ChatRecord | PreparedChat) -> None:
        return await self._run(self.index, record)

    async def aremove(self, chat_id: str) -> None:
        return await self._run(self.remove, chat_id)

    async def asearch(
        self,
        scope: Mapping[str, str],
        query: str,
        *,
        around: int | None = None,
        limit: int = 20,
        offset: int = 0,
        chat_ids: Iterable[str] | None = None,
        roles: Iterable[str] | None = None,
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
    ) -> list[TranscriptHit]:
        return await self._run(
            self.search,
            scope,
            query,
            around=around,
            limit=limit,
            offset=offset,
            chat_ids=chat_ids,
            roles=roles,
            updated_after=updated_after,
            updated_before=updated_before,
        )

    async def asearch_page(
        self,
        scope: Mapping[str, str],
        query: str,
        *,
        around: int | None = None,
        limit: int = 20,
        offset: int = 0,
        cursor: str | None = None,
        chat_ids: Iterable[str] | None = None,
        roles: Iterable[str] | None = None,
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
        total_cap: int | None = None,
    ) -> SearchPage:
        return await self._run(
            self.search_page,
            scope,
            query,
            around=around,
            limit=limit,
            offset=offset,
            cursor=cursor,
            chat_ids=chat_ids,
            roles=roles,
            updated_after=updated_after,
            updated_before=updated_before,
            total_cap=total_cap,
        )

    async def aresolve_source(
        self, scope: Mapping[str, str], ref: MemorySourceRef
    ) -> TranscriptMessage | None:
        return await self._run(self.resolve_source, scope, ref)


class BaseConditionalChatStore(_AsyncRunner, ABC):
    """A revisioned chat store: each write names the revision it replaces."""

    transcript: BaseTranscriptIndex | None

    @abstractmethod
    def write_chat(self, record: ChatRecord, *, expected_revision: int) -> int:
        """Write the chat if it is at ``expected_revision``; return the new revision."""

    @abstractmethod
    def load_chat(self, chat_id: str) -> tuple[ChatRecord, int] | None:
        """The chat and its revision, ``None`` when unknown or deleted."""

    @abstractmethod
    def list_chats(self, scope: Mapping[str, str]) -> list[ChatRecord]:
        """Chats whose scope matches, newest first."""

    @abstractmethod
    def delete_chat(self, chat_id: str) -> None:
        """Tombstone the chat: content gone at once, id never writable again."""

    def append_messages(
        self,
        chat_id: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        expected_revision: int,
        message_ids: Sequence[str | None] | None = None,
        updated_at: datetime | None = None,
    ) -> int:
        """Append ``messages`` to the stored chat if it is at ``expected_revision``; return
        the new revision. Exactly ``write_chat`` of the stored chat with ``messages`` after
        its own (ids filled as it fills them, ``updated_at`` now unless given, the scope
        kept); a chat no store wrote is ``InvalidRecord``.

        This default loads the chat and writes it whole; ``DjangoConditionalChatStore``
        validates, encodes and writes the new messages alone.
        """
        new = new_messages(chat_id, messages, message_ids, updated_at, encode=True)
        expected_revision = check_revision(expected_revision)
        found = self.load_chat(new.chat_id)
        if found is None:
            raise self._not_appendable(new.chat_id)
        stored, revision = found
        if revision != expected_revision:
            raise RevisionConflict(new.chat_id, expected_revision, revision)
        return self.write_chat(appended_to(stored, new), expected_revision=expected_revision)

    def _not_appendable(self, chat_id: str) -> Exception:
        """The error of an append to a chat ``load_chat`` does not find (a store that
        keeps tombstones says ``ChatDeleted`` for a deleted one, as ``write_chat`` does)."""
        return no_chat(chat_id)

    async def aappend_messages(
        self,
        chat_id: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        expected_revision: int,
        message_ids: Sequence[str | None] | None = None,
        updated_at: datetime | None = None,
    ) -> int:
        return await self._run(
            self.append_messages,
            chat_id,
            messages,
            expected_revision=expected_revision,
            message_ids=message_ids,
            updated_at=updated_at,
        )

    async def awrite_chat(self, record: ChatRecord, *, expected_revision: int) -> int:
        return await self._run(self.write_chat, record, expected_revision=expected_revision)

    async def aload_chat(self, chat_id: str) -> tuple[ChatRecord, int] | None:
        return await self._run(self.load_chat, chat_id)

    async def alist_chats(self, scope: Mapping[str, str]) -> list[ChatRecord]:
        return await self._run(self.list_chats, scope)

    async def adelete_chat(self, chat_id: str) -> None:
        return await self._run(self.delete_chat, chat_id)


class BaseChatStore(_AsyncRunner, ABC):
    """The legacy, non-conditional store: last write wins."""

    @abstractmethod
    def save_chat(self, record: ChatRecord) -> None: ...

    @abstractmethod
    def load_chat(self, chat_id: str) -> ChatRecord | None: ...

    @abstractmethod
    def list_chats(self, scope: Mapping[str, str]) -> list[ChatRecord]: ...

    @abstractmethod
    def delete_chat(self, chat_id: str) -> None: ...

    async def asave_chat(self, record: ChatRecord) -> None:
        return await self._run(self.save_chat, record)

    async def aload_chat(self, chat_id: str) -> ChatRecord | None:
        return await self._run(self.load_chat, chat_id)

    async def alist_chats(self, scope: Mapping[str, str]) -> list[ChatRecord]:
        return await self._run(self.list_chats, scope)

    async def adelete_chat(self, chat_id: str) -> None:
        return await self._run(self.delete_chat, chat_id)


def check_chat_id(chat_id: Any) -> str:
    return _check_identifier(chat_id, "chat_id")
