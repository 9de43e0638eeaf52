"""Counted pages and their cursors, pure Python, shared by every index.

A cursor pins the ranking of the search's first page (N and every n_t, so every idf)
and names the last hit served by its sort key. The next page is the hits that sort
after that key under the pinned ranking, read from the data as it is now. A hit whose
chat is not written in between keeps its key, so it is served exactly once, whatever
else is written meanwhile (see ``docs/guarantees.md``).

The cursor is urlsafe base64 of compact JSON, signed (``cursor_signing``: only this
server can mint one); it is opaque to callers and bound to its search (scope, terms and
filters) by a fingerprint. Anything that is not a cursor of this search, or pins counts
that no longer rank (an idf of 0), is ``InvalidRecord("cursor")``, never a raw error.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any

from . import ranking
from .cursor_signing import sign, unsign
from .errors import InvalidRecord
from .records import TranscriptHit, _check_identifier

if TYPE_CHECKING:
    from .search_request import SearchRequest

__all__ = ["HitKey", "PageAfter", "PinnedRanking", "SearchPage", "decode_cursor", "encode_cursor"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MICROSECOND = timedelta(microseconds=1)
_CURSOR_VERSION = 2
#: No cursor this app writes is longer (a 255-character chat id escaped, 32 counts).
MAX_CURSOR_LENGTH = 8_192
#: Every integer a cursor carries is below this (SQL engines hold 64-bit integers).
_MAX_COUNT = 2**62


def to_micros(value: datetime) -> int:
    """Microseconds since the epoch of an aware datetime (the tie order's first key)."""
    return (value - _EPOCH) // _ONE_MICROSECOND


def from_micros(micros: int) -> datetime:
    return _EPOCH + timedelta(microseconds=micros)


_MIN_MICROS = to_micros(datetime.min.replace(tzinfo=UTC))
_MAX_MICROS = to_micros(datetime.max.replace(tzinfo=UTC))


@dataclass(frozen=True)
class SearchPage:
    """One page of a counted search.

    ``hits``: best first, as ``search()`` returns them. ``total``: the exact number of
    messages matching the search (scope, terms and filters) when the page was read; with
    ``total_cap=C``, at most ``C``: when more match, ``total`` is ``C`` and
    ``total_exact`` is False ("more than C"). ``next_cursor``: pass it as ``cursor=`` for
    the next page; ``None`` when no hit follows this page.
    """

    hits: list[TranscriptHit]
    total: int
    next_cursor: str | None = None
    total_exact: bool = True

    @property
    def has_next(self) -> bool:
        return self.next_cursor is not None


@dataclass(frozen=True)
class PinnedRanking:
    """N and every n_t of a search's first page: the idfs every later page ranks by."""

    total: int
    matching: tuple[int, ...]
    best_mask: int

    @classmethod
    def of(cls, histogram: Mapping[int, int], term_count: int, total: int) -> PinnedRanking | None:
        """The ranking ``ranking.plan_page`` uses for this histogram; ``None`` without a
        match."""
        histogram = {mask: count for mask, count in histogram.items() if mask and count}
        if not histogram:
            return None
        total, matching = ranking.term_counts(histogram, term_count, total)
        idfs = [ranking.idf(total, n) for n in matching]
        best = max(histogram, key=lambda mask: ranking.mask_raw(mask, idfs))
        return cls(total, tuple(matching), best)

    @cached_property
    def idfs(self) -> list[float]:
        return [ranking.idf(self.total, n) for n in self.matching]

    def raw(self, mask: int) -> float:
        return ranking.mask_raw(mask, self.idfs)

    @cached_property
    def best(self) -> float:
        return self.raw(self.best_mask)

    def score(self, mask: int) -> float:
        return ranking.normalized(self.raw(mask), self.best)

    def plan(self, masks: Mapping[int, int], page_masks: frozenset[int]) -> ranking.RankPlan:
        """A ``RankPlan`` scoring ``masks`` by the pinned idfs."""
        return ranking.RankPlan(
            raws={mask: self.raw(mask) for mask in masks}, best=self.best, page_masks=page_masks
        )


@dataclass(frozen=True)
class HitKey:
    """Where a hit sits in the order: which query terms it holds (its raw score under a
    ranking), then the tie rules' keys (newer chat, chat id, lower index)."""

    mask: int
    updated_micros: int
    chat_id: str
    index: int

    def sort_key(self, pinned: PinnedRanking) -> tuple[float, int, str, int]:
        return (-pinned.raw(self.mask), -self.updated_micros, self.chat_id, self.index)


@dataclass(frozen=True)
class PageAfter:
    """A decoded cursor: the pinned ranking and the last hit served."""

    pinned: PinnedRanking
    key: HitKey

    def admits(self, key: HitKey) -> bool:
        """Whether a hit of ``key`` sorts after the cursor's hit."""
        return key.sort_key(self.pinned) > self.key.sort_key(self.pinned)

    def split_masks(self, masks: Mapping[int, int], depth: int) -> tuple[set[int], set[int]]:
        """``(tied, lower)``: masks scoring as the cursor's hit (their rows must sort after
        it by the tie rules), and the lower masks that can reach a page of ``depth`` rows
        (best first until ``depth`` rows, plus every mask tied with the last one)."""
        cut = self.pinned.raw(self.key.mask)
        tied = {mask for mask in masks if self.pinned.raw(mask) == cut}
        lower = sorted(
            (mask for mask in masks if self.pinned.raw(mask) < cut),
            key=lambda mask: -self.pinned.raw(mask),
        )
        picked: set[int] = set()
        seen = 0
        floor = None
        for mask in lower:
            raw = self.pinned.raw(mask)
            if floor is not None and raw < floor:
                break
            picked.add(mask)
            seen += masks[mask]
            if seen >= depth and floor is None:
                floor = raw
        return tied, picked


def fingerprint(request: SearchRequest) -> str:
    """What binds a cursor to its search: scope, terms and filters (not limit or around)."""
    described = [
        sorted(request.scope.items()),
        request.terms,
        None if request.chat_ids is None else sorted(request.chat_ids),
        None if request.roles is None else sorted(request.roles),
        None if request.updated_after is None else to_micros(request.updated_after),
        None if request.updated_before is None else to_micros(request.updated_before),
    ]
    data = json.dumps(described, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def encode_cursor(request: SearchRequest, after: PageAfter) -> str:
    key = after.key
    body = json.dumps(
        {
            "v": _CURSOR_VERSION,
            "q": fingerprint(request),
            "n": after.pinned.total,
            "t": list(after.pinned.matching),
            "b": after.pinned.best_mask,
            "k": [key.mask, key.updated_micros, key.chat_id, key.index],
        },
        ensure_ascii=True,
        separators=(",", ":"),
    ).encode("ascii")
    return sign(base64.urlsafe_b64encode(body).decode("ascii").rstrip("="))


def _int(value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(value)
    return value


def decode_cursor(cursor: Any, request: SearchRequest) -> PageAfter:
    """The cursor's pinned ranking and key; ``InvalidRecord("cursor")`` for anything that
    is not a cursor this search handed out (garbage, a changed byte, an unsigned or
    forged one, another search's)."""
    if not isinstance(cursor, str):
        raise InvalidRecord("cursor", f"must be a string, not {type(cursor).__name__}")
    signed = unsign(cursor) if len(cursor) <= MAX_CURSOR_LENGTH else None
    if signed is None:
        raise InvalidRecord("cursor", "is not a cursor of this index")
    try:
        body = base64.urlsafe_b64decode(signed + "=" * (-len(signed) % 4))
        data = json.loads(body.decode("ascii"))
        if not isinstance(data, dict) or data.get("v") != _CURSOR_VERSION:
            raise ValueError("version")
    except (ValueError, binascii.Error, UnicodeError, RecursionError):
        raise InvalidRecord("cursor", "is not a cursor of this index") from None
    if data.get("q") != fingerprint(request):
        raise InvalidRecord("cursor", "belongs to another search (scope, query or filters)")
    try:
        return _page_after(data, len(request.terms))
    except (ValueError, TypeError, KeyError, InvalidRecord):
        raise InvalidRecord("cursor", "is not a cursor of this index") from None


def _page_after(data: dict[str, Any], term_count: int) -> PageAfter:
    full = (1 << term_count) - 1
    total = _int(data["n"], 1, _MAX_COUNT)
    matching = data["t"]
    if not isinstance(matching, list) or len(matching) != term_count:
        raise ValueError("t")
    pinned = PinnedRanking(
        total, tuple(_int(n, 0, total) for n in matching), _int(data["b"], 1, full)
    )
    mask, micros, chat_id, index = data["k"]
    key = HitKey(
        _int(mask, 1, full),
        _int(micros, _MIN_MICROS, _MAX_MICROS),
        _check_identifier(chat_id, "cursor"),
        _int(index, 0, 2**31 - 1),
    )
    if not all(math.isfinite(weight) and weight > 0 for weight in pinned.idfs):
        raise ValueError("t")  # counts no search has: a term that weighs nothing
    if pinned.raw(key.mask) > pinned.best:
        raise ValueError("k")
    return PageAfter(pinned, key)
