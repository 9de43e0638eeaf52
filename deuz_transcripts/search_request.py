"""A search's arguments, validated once and reduced to terms (``SearchRequest``), and
what a counted page returns to the index (``CountedHits``). Pure Python."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .errors import InvalidRecord
from .paging import HitKey, PinnedRanking
from .records import TranscriptHit, _check_identifier, validate_scope
from .text import query_terms

__all__ = [
    "MAX_SEARCH_ARGUMENT",
    "CountedHits",
    "SearchRequest",
    "validate_total_cap",
]


#: ``limit``, ``offset`` and ``around`` are at most this (a 32-bit signed integer): every
#: backend answers the same (SQL engines overflow on 64-bit values), and no scope holds more.
MAX_SEARCH_ARGUMENT = 2**31 - 1


def _non_negative_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidRecord(name, "must be a non-negative integer")
    if value > MAX_SEARCH_ARGUMENT:
        raise InvalidRecord(name, f"must be at most {MAX_SEARCH_ARGUMENT:,}")
    return value


def validate_total_cap(value: Any) -> int | None:
    """``search_page``'s ``total_cap``: ``None`` (an exact total) or a positive integer."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidRecord("total_cap", "must be a positive integer or None")
    if value > MAX_SEARCH_ARGUMENT:
        raise InvalidRecord("total_cap", f"must be at most {MAX_SEARCH_ARGUMENT:,}")
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
    #: Only messages of chats updated strictly after / before these can be hits; N and
    #: n_t are the search's without them (a window filters hits only, SPEC §8).
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
    match count and the ranking the hits were scored by (``None``: no match). The count
    is exact, or, under a ``total_cap``, may be any number above the cap once more
    than the cap match (the index then reports "more than the cap")."""

    hits: list[TranscriptHit]
    keys: list[HitKey]
    total: int
    pinned: PinnedRanking | None
