"""PostgreSQL's matches of one search: what it reads beyond every engine's reads.

A scoped search's N comes with a small scope's ranking in one statement (and a big
tenant's every n_t with it: ``PostgresRowSource.sized_candidates``), and once N is
known a mid-size scope is routed through GIN where its words' posting lists are short
(``sized``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import ClassVar

from ..matches import FirstSize, MatchCounts, Matches
from .counts.statistics import PostgresCounts
from .engine import PostgresRowSource

__all__ = ["PostgresMatchCounts", "PostgresMatches"]


class PostgresMatchCounts(MatchCounts):
    """PostgreSQL's counts of one filter's matches."""

    def subset_histogram(self, total: int) -> dict[int, int] | None:
        """Every match's mask histogram from the stored n_t and one GIN count of each
        larger term subset, where that visits fewer rows than the essential-terms plan
        reads (``PostgresCounts.subset_histogram``); ``None``: not for this filter."""
        counts = self._counts
        assert isinstance(counts, PostgresCounts)
        return counts.subset_histogram(self._cursor, self._chats, self._terms, total)


class PostgresMatches(Matches):
    """The matches of one PostgreSQL search within one filter."""

    counts_class: ClassVar[type[MatchCounts]] = PostgresMatchCounts

    def first_size(
        self, depth: int, most: int, past: int | None, total: Callable[[], int]
    ) -> FirstSize:
        """A round trip saved: N with a scope's ranking where it is at most ``most`` (and
        at most the sizes that read a scope's own rows whatever its words), else N
        alone, in one statement; with roles from role tokens (whose count follows the
        scope's size) or a date window, N as the statistics read it."""
        if not self.windowed:
            source = self._postgres
            most = min(most, source.one_statement_scope_max())
            sized = source.sized_candidates(self._cursor, self._chats, self.terms, depth, most)
            if sized is not None:
                return FirstSize(sized[0], True, sized[1])
        return super().first_size(depth, most, past, total)

    def sized(self, size: int | None) -> Matches:
        """A mid-size scope (``rare_lexeme_scope_min`` to ``lexeme_scope_min`` messages) is
        filtered in GIN when the query terms' posting lists hold at most
        ``gin_rows_per_scope_row`` rows per message of the scope, over the whole index
        (stored counts; a term not counted holds fewer than ``COUNTED_MIN_ROWS``): GIN
        then reads fewer rows' worth than the scope's own rows cost through the chat
        btree. A word common in the whole index keeps the scope's rows: GIN would merge
        its posting list, which grows with the corpus. With no term ever counted, the
        terms' sizes are unknown: the scope's rows are read."""
        chats = replace(self._chats, size=size)
        policy = self._postgres.policy
        if size is None or chats.by_tokens:
            return self._bound(chats)
        if not policy.rare_lexeme_scope_min < size <= policy.lexeme_scope_min:
            return self._bound(chats)
        counts = self._engine_counts
        assert isinstance(counts, PostgresCounts)
        rows = counts.stored.index_counts(self._cursor, self.terms, chats.roles).posting_rows()
        if rows is None or rows > policy.gin_rows_per_scope_row * size:
            return self._bound(chats)
        return self._bound(replace(chats, by_tokens=True))

    @property
    def _postgres(self) -> PostgresRowSource:
        source = self._source
        assert isinstance(source, PostgresRowSource)
        return source
