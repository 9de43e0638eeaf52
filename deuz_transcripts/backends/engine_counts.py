"""What an engine counts in its own index: N, each term's n_t, the mask histogram and a
search's exact total (``EngineCounts``), and where an engine keeps counts stored per
tenant, the interface the search's statistics read them through (``StoredStatistics``).

Which of them a search uses is decided once, by its statistics
(``deuz_transcripts.sql.search.statistics``): stored counts, else these, else none.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import replace
from typing import ClassVar, Literal

from django.db.backends.utils import CursorWrapper

from ..models import Chat
from .base import RowSource
from .candidates import Known, fetch_int
from .chat_filter import ChatFilter, table

__all__ = ["Density", "EngineCounts", "RareTerms", "StoredStatistics"]

#: N and each term's n_t, where both are read without visiting a match.
Density = tuple[int, list[int]]

#: How the essential-terms plan reads the rarest terms' rows at once (``rare_terms``):
#: not at all, picked by their rows in the whole index counted up to a cap, or picked by
#: their n_t in the filter, counted first.
RareTerms = Literal["none", "by_index_counts", "by_filter_counts"]


class StoredStatistics(ABC):
    """N and n_t read from counts an engine keeps stored (PostgreSQL's per-tenant term
    counts), for the filters they describe: no match is visited."""

    @abstractmethod
    def covers(self, chats: ChatFilter) -> bool:
        """Whether the stored counts are this filter's N and (where counted) n_t."""

    @abstractmethod
    def total(self, cursor: CursorWrapper, chats: ChatFilter) -> int:
        """N of a filter the counts ``covers``."""

    @abstractmethod
    def term_counts(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str]
    ) -> list[int | None]:
        """Each term's stored n_t in a filter the counts ``covers`` (``None``: not
        stored), read once per search."""

    @abstractmethod
    def index_density(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str]
    ) -> Density | None:
        """Rows and each term's rows in the whole index, to guess a filter's density where
        it has no stored counts of its own (for a bounded walk, never N or n_t)."""


class EngineCounts:
    """N, n_t, histograms and totals counted in one engine's index (or from its matches,
    read through its ``RowSource``)."""

    #: How the essential-terms plan reads the rarest terms' rows at once here.
    rare_terms: ClassVar[RareTerms] = "none"

    def __init__(self, source: RowSource, stored: StoredStatistics | None = None) -> None:
        self.source = source
        self.policy = source.policy
        #: The engine's stored counts, read before these where they ``cover`` a filter.
        self.stored = stored

    def total(self, cursor: CursorWrapper, chats: ChatFilter) -> int:
        """N: the indexed messages the search may return (the scope's chats, summed).

        With roles taken from role tokens, N is counted in the index (``_token_total``)
        unless the scope is small enough to read its own rows (``_reads_scope_rows`` of
        its unfiltered N, a sum of per-chat counts): the index count reads each role's
        whole posting list, a small scope's rows cost the scope alone.
        """
        if chats.roles is not None and chats.role_tokens and chats.tokens_suffice:
            scoped = bool(chats.scope) or chats.chat_ids is not None
            if not scoped:
                return self._token_total(cursor, chats)
            return self._roles_total(cursor, chats, self.total(cursor, replace(chats, roles=None)))
        return _summed_total(cursor, chats)

    def _roles_total(self, cursor: CursorWrapper, chats: ChatFilter, size: int) -> int:
        """N of a scope with roles from role tokens, whose N without roles is ``size``: its
        own rows counted where it is small enough to read them, else the index count."""
        if not self._reads_scope_rows(size):
            return self._token_total(cursor, chats)
        return _summed_total(cursor, chats)

    def _reads_scope_rows(self, size: int) -> bool:
        """Whether a scope of ``size`` indexed messages is read row by row, not in the index."""
        return True

    def _token_total(self, cursor: CursorWrapper, chats: ChatFilter) -> int:
        """N counted from the index's scope, chat and role tokens (role-token engines)."""
        raise NotImplementedError(f"{type(self).__name__} has no role tokens")

    def walk_size(self, cursor: CursorWrapper, chats: ChatFilter, cap: int) -> int | None:
        """The least ``within_rows`` of a walk that sees every chat of the filter (its
        chats or their indexed messages, whichever are more) where at most ``cap``, else
        ``None``: read from at most ``cap + 1`` chat rows, never the messages."""
        admitted, params = chats.chat_condition()
        cursor.execute(
            "SELECT count(*), COALESCE(SUM(w.indexed_count), 0) FROM (SELECT c.indexed_count "
            f"FROM {table(Chat)} c WHERE {admitted} LIMIT %s) w",
            [*params, cap + 1],
        )
        row = cursor.fetchone()
        size = max(int(row[0]), int(row[1])) if row else 0
        return size if size <= cap else None

    def mask_histogram(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str]
    ) -> dict[int, int]:
        """``{mask: rows}`` of every match in scope: each match read once, nothing sorted."""
        matches, params = self.source.matches_sql(chats, terms)
        cursor.execute(f"SELECT h.mask, count(*) FROM ({matches}) h GROUP BY h.mask", params)
        return {int(mask): int(count) for mask, count in cursor.fetchall()}

    def counts_terms(self, chats: ChatFilter, total: int) -> bool:
        """Whether ``term_counts`` counts each term in the index without reading rows
        (so the essential-terms plan pays off) for this filter and N."""
        return False

    def term_counts(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str]
    ) -> list[int]:
        """n_t of each term counted in the index: the rows of the filter holding it."""
        raise NotImplementedError(f"{type(self).__name__} does not count terms")

    def count_matches(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str], known: Known = None
    ) -> int:
        """The rows of the filter holding any of the terms (``known``: N and every n_t,
        when the caller has them)."""
        return sum(self.mask_histogram(cursor, chats, terms).values())


def _summed_total(cursor: CursorWrapper, chats: ChatFilter) -> int:
    """N summed from the filter's chats (``ChatFilter.total_sql``)."""
    sql, params = chats.total_sql()
    cursor.execute(sql, params)
    return fetch_int(cursor)
