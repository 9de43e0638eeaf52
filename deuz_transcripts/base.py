"""The interfaces every index and store implements, with their async twins."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from .errors import InvalidRecord
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


@dataclass(frozen=True)
class SearchRequest:
    """A search's arguments, validated and reduced to terms."""

    scope: dict[str, str]
    terms: list[str]
    around: int | None
    limit: int
    offset: int
    chat_ids: frozenset[str] | None

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
        )

    @property
    def empty(self) -> bool:
        return not self.terms or self.limit == 0 or self.chat_ids == frozenset()


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
    ) -> list[TranscriptHit]:
        """Hits best first; ``[]`` for a query with no term (arguments validated once, here)."""
        request = SearchRequest.build(
            scope, query, around=around, limit=limit, offset=offset, chat_ids=chat_ids
        )
        return [] if request.empty else self._search(request)

    @abstractmethod
    def _search(self, request: SearchRequest) -> list[TranscriptHit]:
        """One backend's search of a validated, non-empty request."""

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
    ) -> list[TranscriptHit]:
        return await self._run(
            self.search, scope, query, around=around, limit=limit, offset=offset, chat_ids=chat_ids
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
