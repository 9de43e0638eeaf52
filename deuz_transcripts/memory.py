"""The in-memory transcript index: an inverted index guarded by one lock."""

from __future__ import annotations

import heapq
import threading
from collections import Counter
from dataclasses import dataclass
from datetime import datetime

from .base import BaseTranscriptIndex, check_chat_id
from .paging import HitKey, PageAfter, PinnedRanking, to_micros
from .prepared import PreparedChat, PreparedMessage
from .records import (
    ChatRecord,
    MemorySourceRef,
    TranscriptHit,
    TranscriptMessage,
    decode_message,
    scope_matches,
)
from .search_request import CountedHits, SearchRequest
from .signals import chat_indexed, chat_removed, send_after_commit
from .spans import with_spans
from .text import stored_term

__all__ = ["InMemoryTranscriptIndex"]


_Row = tuple[str, int]  # (chat id, message index)


@dataclass
class _Chat:
    chat_id: str
    scope: dict[str, str]
    updated_at: datetime
    messages: tuple[PreparedMessage, ...]
    visible: list[int]  # indexes of non-system messages, in chat order
    by_id: dict[str, int]
    indexed_count: int
    indexed_roles: Counter[str]  # indexed messages per role

    def indexed(self, roles: frozenset[str] | None) -> int:
        """Indexed messages of these roles (``None``: every role): this chat's share of N."""
        if roles is None:
            return self.indexed_count
        return sum(self.indexed_roles[role] for role in roles)


class InMemoryTranscriptIndex(BaseTranscriptIndex):
    """Thread-safe; a query costs in proportion to its matches, not to the corpus."""

    backend_name = "memory"

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._chats: dict[str, _Chat] = {}
        self._postings: dict[str, dict[str, list[int]]] = {}
        self._by_scope_field: dict[tuple[str, str], set[str]] = {}

    def __len__(self) -> int:
        with self._lock:
            return sum(chat.indexed_count for chat in self._chats.values())

    # writing

    def index(self, record: ChatRecord | PreparedChat) -> None:
        chat_record = PreparedChat.of(record)
        prepared = chat_record.prepared
        chat = _Chat(
            chat_id=chat_record.chat_id,
            scope=dict(chat_record.scope),
            updated_at=chat_record.updated_at,
            messages=prepared,
            visible=[m.index for m in prepared if m.visible_position is not None],
            by_id={m.message_id: m.index for m in prepared},
            indexed_count=sum(1 for m in prepared if m.terms),
            indexed_roles=Counter(m.role for m in prepared if m.terms),
        )
        with self._lock:
            self._drop(chat.chat_id)
            self._chats[chat.chat_id] = chat
            for field in chat.scope.items():
                self._by_scope_field.setdefault(field, set()).add(chat.chat_id)
            for message in prepared:
                for term in message.terms or ():
                    postings = self._postings.setdefault(stored_term(term), {})
                    postings.setdefault(chat.chat_id, []).append(message.index)
        # Memory has no transaction to wait for: sent at once, outside the lock.
        send_after_commit(
            chat_indexed, type(self), chat_id=chat.chat_id, scope=chat.scope, using=None
        )

    def remove(self, chat_id: str) -> None:
        """Take a chat out of search; ``chat_removed`` is sent at once if it was in."""
        chat_id = check_chat_id(chat_id)
        with self._lock:
            dropped = self._drop(chat_id)
        if dropped is not None:
            send_after_commit(
                chat_removed, type(self), chat_id=chat_id, scope=dropped.scope, using=None
            )

    def _drop(self, chat_id: str) -> _Chat | None:
        chat = self._chats.pop(chat_id, None)
        if chat is None:
            return None
        for scope_field in chat.scope.items():
            holders = self._by_scope_field.get(scope_field)
            if holders is not None:
                holders.discard(chat_id)
                if not holders:
                    del self._by_scope_field[scope_field]
        for message in chat.messages:
            for term in message.terms or ():
                key = stored_term(term)
                postings = self._postings.get(key)
                if (
                    postings is not None
                    and postings.pop(chat_id, None) is not None
                    and not postings
                ):
                    del self._postings[key]
        return chat

    # reading

    def _candidates(self, request: SearchRequest) -> set[str] | None:
        """Chat ids the search may score (its window left out: a window filters hits
        only); ``None`` means every chat."""
        candidates: set[str] | None = None
        if request.chat_ids is not None:
            candidates = {chat_id for chat_id in request.chat_ids if chat_id in self._chats}
        fields = sorted(
            (self._by_scope_field.get(field, set()) for field in request.scope.items()), key=len
        )
        for holders in fields:
            candidates = set(holders) if candidates is None else candidates & holders
        return candidates

    def _matches(self, request: SearchRequest) -> tuple[dict[str, _Chat], dict[_Row, int], int]:
        """The chats the search scores, ``{(chat id, index): mask}`` of every match and N,
        all without the window (the caller holds the lock)."""
        candidates = self._candidates(request)
        chats = self._chats if candidates is None else {c: self._chats[c] for c in candidates}
        roles = request.roles
        masks: dict[_Row, int] = {}
        for bit, term in enumerate(request.terms):
            postings = self._postings.get(stored_term(term), {})
            if candidates is not None and len(candidates) < len(postings):
                pairs = ((c, postings[c]) for c in candidates if c in postings)
            else:
                pairs = ((c, p) for c, p in postings.items() if c in chats)
            for chat_id, indexes in pairs:
                for index in indexes:
                    if roles is not None and chats[chat_id].messages[index].role not in roles:
                        continue
                    key = (chat_id, index)
                    masks[key] = masks.get(key, 0) | 1 << bit
        total = sum(chat.indexed(roles) for chat in chats.values())
        return chats, masks, total

    def _ranked(
        self, request: SearchRequest, after: PageAfter | None
    ) -> tuple[PinnedRanking | None, list[tuple[HitKey, _Chat, int]], int]:
        """The ranking (the cursor's, else N and n_t of the search without its window),
        the page's rows after ``after`` (the window's hits, best first) and how many hits
        the window holds (the caller holds the lock)."""
        chats, masks, total = self._matches(request)
        pinned = (
            PinnedRanking.of(Counter(masks.values()), len(request.terms), total)
            if after is None
            else after.pinned
        )
        if pinned is None:
            return None, [], 0
        start, end = request.updated_after, request.updated_before
        keys = (
            (HitKey(mask, to_micros(chats[c].updated_at), c, i), chats[c], i)
            for (c, i), mask in masks.items()
            if (start is None or chats[c].updated_at > start)
            and (end is None or chats[c].updated_at < end)
        )
        hits = list(keys)
        following = (row for row in hits if after is None or after.admits(row[0]))
        depth = request.offset + request.limit
        ranked = heapq.nsmallest(depth, following, key=lambda row: row[0].sort_key(pinned))
        return pinned, ranked[request.offset :], len(hits)

    def _search(self, request: SearchRequest) -> list[TranscriptHit]:
        with self._lock:
            pinned, page, _total = self._ranked(request, None)
            if pinned is None:
                return []
            hits = [
                self._hit(chat, index, pinned.score(key.mask), request.around)
                for key, chat, index in page
            ]
        return with_spans(hits, request.terms)

    def _search_page(
        self, request: SearchRequest, after: PageAfter | None, total_cap: int | None = None
    ) -> CountedHits:
        """Every match is in memory: the count is always exact (the index caps it)."""
        with self._lock:
            pinned, page, total = self._ranked(request, after)
            if pinned is None or not total:
                return CountedHits([], [], 0, None)
            return CountedHits(
                hits=with_spans(
                    [
                        self._hit(chat, index, pinned.score(key.mask), request.around)
                        for key, chat, index in page
                    ],
                    request.terms,
                ),
                keys=[key for key, _chat, _index in page],
                total=total,
                pinned=pinned,
            )

    def _hit(self, chat: _Chat, index: int, score: float, around: int | None) -> TranscriptHit:
        message = chat.messages[index]
        neighbours = None
        if around is not None:
            here = message.visible_position
            assert here is not None
            start = max(0, here - around)
            picked = chat.visible[start:here] + chat.visible[here + 1 : here + 1 + around]
            neighbours = [self._message(chat, i) for i in picked]
        return TranscriptHit(
            chat_id=chat.chat_id,
            message_id=message.message_id,
            index=index,
            message=decode_message(message.payload),
            score=score,
            around=neighbours,
        )

    @staticmethod
    def _message(chat: _Chat, index: int) -> TranscriptMessage:
        message = chat.messages[index]
        return TranscriptMessage(
            chat_id=chat.chat_id,
            message_id=message.message_id,
            index=index,
            message=decode_message(message.payload),
        )

    def _resolve(self, scope: dict[str, str], ref: MemorySourceRef) -> TranscriptMessage | None:
        with self._lock:
            chat = self._chats.get(ref.chat_id)
            if chat is None or not scope_matches(chat.scope, scope):
                return None
            index = chat.by_id.get(ref.message_id)
            if index is None or chat.messages[index].terms is None:
                return None
            return self._message(chat, index)
