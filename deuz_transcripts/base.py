"""The interfaces every index and store implements, with their async twins."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from .errors import InvalidRecord
from .paging import HitKey, PageAfter, PinnedRanking, SearchPage, decode_cursor, encode_cursor
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
from .text import query_terms

__all__ = [
    "BaseChatStore",
    "BaseConditionalChatStore",
    "BaseTranscriptIndex",
    "CountedHits",
    "SearchRequest",
]

T = TypeVar("T")


class _AsyncRunner:
    """Runs a sync method for its async twin; SQL classes hop to a worker thread."""

    async def _run(self, method: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return method(*args, **kwargs)


#: ``limit``, ``offset`` and ``around`` are at most this (a 32-bit signed integer): every
#: backend answers the same (SQL engines overflow on 64-bit values), and no scope holds more.
MAX_SEARCH_ARGUMENT = 2**31 - 1


def _non_negative_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidRecord(name, "must be a non-negative integer")
    if value > MAX_SEARCH_ARGUMENT:
        raise InvalidRecord(name, f"must be at most {MAX_SEARCH_ARGUMENT:,}")
    return value


def _aware_datetime(value: Any, name: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidRecord(name, f"must be an aware datetime, not {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidRecord(name, "must be timezone-aware")
    try:  # in UTC, as every backend compares it (SQLite: as UTC text)
        return value.astimezone(UTC)
    except OverflowError:
        raise InvalidRecord(name, "is out of range") from None


def _roles(roles: Any) -> frozenset[str] | None:
    if roles is None:
        return None
    if isinstance(roles, str | bytes):
        raise InvalidRecord("roles", "must be a list of roles, not a string")
    try:
        return frozenset(_check_identifier(role, "roles", allow_empty=True) for role in iter(roles))
    except TypeError:
        raise InvalidRecord(
            "roles", f"must be a list of roles, not {type(roles).__name__}"
        ) from None


@dataclass(frozen=True)
class SearchRequest:
    """A search's arguments, validated and reduced to terms."""

    scope: dict[str, str]
    terms: list[str]
    around: int | None
    limit: int
    offset: int
    chat_ids: frozenset[str] | None
    #: Only messages of these roles take part (hits, N and n_t); ``None``: every role.
    roles: frozenset[str] | None = None
    #: Only chats updated strictly after / before these take part (hits, N and n_t).
    updated_after: datetime | None = None
    updated_before: datetime | None = None

    @classmethod
    def build(
        cls,
        scope: Any,
        query: Any,
        *,
        around: Any = None,
        limit: Any = 20,
        offset: Any = 0,
        chat_ids: Iterable[str] | None = None,
        roles: Iterable[str] | None = None,
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
    ) -> SearchRequest:
        if query is not None and not isinstance(query, str):
            raise InvalidRecord("query", f"must be a string, not {type(query).__name__}")
        if chat_ids is not None:
            if isinstance(chat_ids, str | bytes):
                raise InvalidRecord("chat_ids", "must be a list of chat ids, not a string")
            try:
                chat_ids = frozenset(_check_identifier(chat_id, "chat_ids") for chat_id in chat_ids)
            except TypeError:
                raise InvalidRecord("chat_ids", "must be a list of chat ids") from None
        return cls(
            scope=validate_scope(scope),
            terms=query_terms(query or ""),
            around=None if around is None else _non_negative_int(around, "around"),
            limit=_non_negative_int(limit, "limit"),
            offset=_non_negative_int(offset, "offset"),
            chat_ids=chat_ids,
            roles=_roles(roles),
            updated_after=_aware_datetime(updated_after, "updated_after"),
            updated_before=_aware_datetime(updated_before, "updated_before"),
        )

    @property
    def matches_nothing(self) -> bool:
        """No message can match: no term, or an empty chat id or role list."""
        return not self.terms or self.chat_ids == frozenset() or self.roles == frozenset()

    @property
    def empty(self) -> bool:
        return self.matches_nothing or self.limit == 0

    @property
    def filters_messages(self) -> bool:
        """Whether a filter beyond scope and chat ids narrows the messages."""
        return (
            self.roles is not None
            or self.updated_after is not None
            or self.updated_before is not None
        )


@dataclass(frozen=True)
class CountedHits:
    """What a backend's ``_search_page`` returns: the hits, each hit's ``HitKey``, the
    exact match count and the ranking the hits were scored by (``None``: no match)."""

    hits: list[TranscriptHit]
    keys: list[HitKey]
    total: int
    pinned: PinnedRanking | None


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
    ) -> SearchPage:
        """``search()`` with the exact number of matching messages and a cursor.

        Without ``cursor`` the page is the one ``search()`` returns for the same
        arguments. ``cursor`` (a page's ``next_cursor``) continues after that page's last
        hit, ranked as the search's first page was; ``offset`` then skips hits after it.
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
        after = None if cursor is None else decode_cursor(cursor, request)
        if request.matches_nothing:
            return SearchPage([], 0, None)
        # one hit more than the page tells whether a next page exists
        counted = self._search_page(replace(request, limit=request.limit + 1), after)
        hits = counted.hits[: request.limit]
        next_cursor = None
        if request.limit and len(counted.hits) > request.limit:
            pinned, key = counted.pinned, counted.keys[request.limit - 1]
            assert pinned is not None
            next_cursor = encode_cursor(request, PageAfter(pinned, key))
        return SearchPage(hits, counted.total, next_cursor)

    @abstractmethod
    def _search(self, request: SearchRequest) -> list[TranscriptHit]:
        """One backend's search of a validated, non-empty request."""

    @abstractmethod
    def _search_page(self, request: SearchRequest, after: PageAfter | None) -> CountedHits:
        """One backend's counted page (``request.limit`` hits at most, after ``after``)."""

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
