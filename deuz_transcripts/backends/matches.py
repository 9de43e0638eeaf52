"""One search's matches within one filter: an engine's row source and counts bound, once
per search, to the request's chats, its terms and its cursor.

A search engine builds a query's cursor over one segment's matches once (tantivy's
``Weight`` -> ``Scorer``) and every step of the top-k collection then asks that cursor,
never the query again. So does a search here: the collector binds the request's filter
(``Matches.of_request``), and the routes (walks, essential terms, unread masks, page rows,
the statistics) take ``Matches`` and masks, keys and limits; which SQL finds the rows, and
how the filter says so, stays with the engine's ``RowSource`` and ``EngineCounts``, the
only builders of SQL from the ``ChatFilter``.

A narrower filter of the same search (its N known, without its date window, after a
cursor's hit) is bound anew from this one (``sized``, ``without``, ``after``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, ClassVar, NamedTuple, Protocol, runtime_checkable

from django.db.backends.utils import CursorWrapper

from ..paging import HitKey
from .base import Candidate, Known, MaskTier, Ranked, RowSource
from .chat_filter import ChatFilter, after_key, request_filter
from .engine_counts import Density, EngineCounts, RareTerms
from .policy import SearchPolicy

if TYPE_CHECKING:
    from ..search_request import SearchRequest

__all__ = ["FirstSize", "IndexCappedCounts", "MatchCounts", "Matches", "SubsetHistograms"]


class FirstSize(NamedTuple):
    """N of a scoped search read before anything else (its size picks the route):
    ``size`` is N where ``exact``, else a number past every size that picks a route;
    ``read``: a small scope's mask histogram and candidates, read with N."""

    size: int
    exact: bool
    read: Ranked | None


@runtime_checkable
class IndexCappedCounts(Protocol):
    """Counts of an engine that picks the rarest terms by their rows in the whole index
    (``RareTerms`` ``"by_index_counts"``: SQLite FTS5)."""

    def capped_term_counts(self, cap: int) -> list[int]:
        """Each term's rows in the whole index, unfiltered, counted up to ``cap``."""


@runtime_checkable
class SubsetHistograms(Protocol):
    """Counts of an engine that can build every match's mask histogram from counts alone
    (PostgreSQL: stored n_t and a GIN count per larger term subset)."""

    def subset_histogram(self, total: int) -> dict[int, int] | None:
        """The histogram where that is cheaper than the essential-terms plan's reading;
        ``None``: not for this filter."""


class MatchCounts:
    """What the engine counts of one filter's matches: N, n_t, the mask histogram and the
    exact total, and the stored counts where the engine keeps them for the filter."""

    def __init__(
        self, counts: EngineCounts, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str]
    ) -> None:
        self._counts = counts
        self._cursor = cursor
        self._chats = chats
        self._terms = tuple(terms)
        self._walk_size: int | None = None
        self._walk_sized = False

    @property
    def rare_terms(self) -> RareTerms:
        """How the essential-terms plan reads the rarest terms' rows at once here."""
        return self._counts.rare_terms

    def total(self) -> int:
        """N counted in the engine (not the stored counts)."""
        return self._counts.total(self._cursor, self._chats)

    def walk_size(self, cap: int, *, read: bool = True) -> int | None:
        """How many messages a walk visits to see every chat of the filter, where at
        most ``cap`` (``None``: more), read once; with ``read=False``, only if read
        before. Nothing else sizes a date window: a route asks once a walk of it ended
        short."""
        if read and not self._walk_sized:
            self._walk_size = self._counts.walk_size(self._cursor, self._chats, cap)
            self._walk_sized = True
        return self._walk_size

    def mask_histogram(self) -> dict[int, int]:
        """``{mask: rows}`` of every match."""
        return self._counts.mask_histogram(self._cursor, self._chats, self._terms)

    def counts_terms(self, total: int) -> bool:
        """Whether each n_t is counted in the index without reading rows, for N ``total``."""
        return self._counts.counts_terms(self._chats, total)

    def histogram_from_term_counts(self) -> bool:
        """Whether a mask histogram costs less built from the n_t and the rarer terms'
        rows than read from every match: where the n_t are stored counts (an engine that
        counts terms cheaply in its index says where else)."""
        return self.stored_cover()

    def term_counts(self, terms: Sequence[str]) -> list[int]:
        """n_t of each of ``terms`` counted in the index."""
        return self._counts.term_counts(self._cursor, self._chats, terms)

    def count_matches(self, known: Known = None) -> int:
        """The rows holding any of the terms (``known``: N and every n_t, when known)."""
        return self._counts.count_matches(self._cursor, self._chats, self._terms, known)

    # the stored counts

    def stored_cover(self) -> bool:
        """Whether the engine's stored counts are this filter's N and n_t."""
        stored = self._counts.stored
        return stored is not None and stored.covers(self._chats)

    def stored_total(self) -> int:
        """N from the stored counts (``stored_cover``)."""
        stored = self._counts.stored
        assert stored is not None
        return stored.total(self._cursor, self._chats)

    def stored_term_counts(self, terms: Sequence[str]) -> list[int | None]:
        """Each term's stored n_t (``None``: not stored), where ``stored_cover``."""
        stored = self._counts.stored
        assert stored is not None
        return stored.term_counts(self._cursor, self._chats, terms)

    def index_density(self) -> Density | None:
        """Rows and each term's rows in the whole index, to guess the density of a filter
        without stored counts of its own (a walk's bound only); ``None``: no guess."""
        stored = self._counts.stored
        if stored is None:
            return None
        return stored.index_density(self._cursor, self._chats, self._terms)


class Matches:
    """The rows holding one search's terms within one filter: of given masks in tie order,
    newest chats first, the rarest terms' rows, counts up to a cap (``counts``: what the
    engine counts of them). Two are equal when they bind the same filter and terms.

    An engine that reads more in the same statements (PostgreSQL: N with a small scope's
    ranking; FTS5: a big scope's N counted until it is big enough) binds its own kind
    (``SearchBackend.matches_class``)."""

    #: What the engine counts of these matches, bound alike.
    counts_class: ClassVar[type[MatchCounts]] = MatchCounts

    def __init__(
        self,
        source: RowSource,
        counts: EngineCounts,
        cursor: CursorWrapper,
        chats: ChatFilter,
        terms: Sequence[str],
    ) -> None:
        self._source = source
        self._engine_counts = counts
        self._cursor = cursor
        self._chats = chats
        #: The query's terms, in the request's order (mask bit ``i`` is ``terms[i]``).
        self.terms = tuple(terms)
        #: What the engine counts of these matches.
        self.counts = self.counts_class(counts, cursor, chats, self.terms)

    @classmethod
    def of_request(
        cls,
        source: RowSource,
        counts: EngineCounts,
        cursor: CursorWrapper,
        request: SearchRequest,
    ) -> Matches:
        """The matches of ``request``: its scope, chat ids, roles and window, as the
        engine's statements test them."""
        chats = request_filter(
            request,
            source.alias,
            role_tokens=source.role_tokens,
            tenant=source.tested_tenant(request.scope),
        )
        return cls(source, counts, cursor, chats, request.terms)

    def _bound(self, chats: ChatFilter) -> Matches:
        return type(self)(self._source, self._engine_counts, self._cursor, chats, self.terms)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Matches):
            return NotImplemented
        return self._chats == other._chats and self.terms == other.terms

    __hash__ = None  # type: ignore[assignment]  # a scope is a dict: not hashable

    def __repr__(self) -> str:
        return f"Matches({self._chats!r}, {self.terms!r})"

    # what the filter is

    @property
    def policy(self) -> SearchPolicy:
        """The engine's thresholds between exact routes."""
        return self._source.policy

    @property
    def size(self) -> int | None:
        """N where it is known (bound by ``sized``), else ``None``."""
        return self._chats.size

    @property
    def windowed(self) -> bool:
        """Whether a date window narrows the chats (it filters hits only, SPEC §8)."""
        return self._chats.windowed

    @property
    def scoped(self) -> bool:
        """Whether a scope or a chat id list names the chats (so a scan may read them)."""
        return bool(self._chats.scope) or self._chats.chat_ids is not None

    @property
    def narrowed(self) -> bool:
        """Whether a scope field, a chat id list or another filter narrows the chats (so
        N is theirs to count, not the index's)."""
        return self.scoped or not self._chats.tokens_suffice

    @property
    def walks_newest_first(self) -> bool:
        """Whether walking newest chats first pays off (not for LIKE: its probe is a scan)."""
        return self._source.walks_newest_first

    # the same search, narrower

    def sized(self, size: int | None) -> Matches:
        """These matches with their N (``None``: past every size that routes them), which
        picks how the engine finds their rows."""
        return self._bound(replace(self._chats, size=size))

    def without(self, *, window: bool = False, roles: bool = False) -> Matches:
        """The search without its date window (and without its N: the search whose N
        and n_t score a windowed one), or without its roles (every role's rows, a
        superset found by the same route), or both."""
        chats = self._chats
        if window:
            chats = chats.without_window()
        if roles:
            chats = chats.without_roles()
        return self._bound(chats)

    def after(self, key: HitKey) -> Matches:
        """The rows after ``key`` in tie order (a cursor's next page)."""
        source = self._source
        return self._bound(after_key(self._chats, key, source.alias, source.chat_id_order))

    # rows

    def candidates(self, depth: int, total: int) -> Ranked:
        """The mask histogram and the first ``depth`` rows of every mask, in one pass
        (``total``: N)."""
        return self._source.candidates(self._cursor, self._chats, self.terms, depth, total)

    def first_size(
        self, depth: int, most: int, past: int | None, total: Callable[[], int]
    ) -> FirstSize:
        """N of a scoped search, read first as cheaply as the engine can: with
        ``candidates`` of its ``depth`` rows where N is at most ``most`` and one statement
        reads both, or counted until it is past ``past`` (``None``: exactly); here, N as
        the search's statistics read it (``total``: stored counts, else counted)."""
        return FirstSize(total(), True, None)

    def plans_masks(self, total: int) -> bool:
        """Whether to count masks first and read only the page's rows (big scopes)."""
        return self._source.plans_masks(self._chats, self.terms, total)

    def mask_candidates(
        self, masks: Collection[int] | MaskTier, depth: int, expected: int | None = None
    ) -> list[Candidate]:
        """The first ``depth`` rows of each of ``masks``, or of each mask of a tier
        (``expected`` rows in all, when known)."""
        return self._source.mask_candidates(
            self._cursor, self._chats, self.terms, masks, depth, expected
        )

    def newest_with_mask(
        self, mask: int, depth: int, *, within_rows: int | None = None
    ) -> list[Candidate]:
        """The first ``depth`` rows of ``mask`` in tie order, walked newest chats first
        (``within_rows``: only the newest chats holding that many messages)."""
        return self._source.newest_with_mask(
            self._cursor, self._chats, self.terms, mask, depth, within_rows=within_rows
        )

    def count_with_all_terms(self, cap: int) -> int:
        """Rows holding every term, counted up to ``cap``."""
        return self._source.count_with_all_terms(self._cursor, self._chats, self.terms, cap)

    def rows_with_terms(
        self, wanted: int, skipped: Collection[int], expected: int | None = None
    ) -> list[Candidate]:
        """Rows holding term ``wanted`` and none of ``skipped`` (positions), each with its
        mask over every term."""
        return self._source.rows_with_terms(
            self._cursor, self._chats, self.terms, wanted, skipped, expected
        )

    def rows_with_any_terms(
        self, wanted: Collection[int], expected: int | None = None
    ) -> list[Candidate]:
        """Rows holding any term of ``wanted`` (positions), each with its full mask."""
        return self._source.rows_with_any_terms(
            self._cursor, self._chats, self.terms, wanted, expected
        )

    def more_than(self, cap: int) -> bool:
        """Whether more than ``cap`` rows hold any of the terms."""
        return self._source.matches_more_than(self._cursor, self._chats, self.terms, cap)
