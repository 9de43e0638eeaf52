"""SQLite FTS5's matches of one search: what it reads beyond every engine's reads.

A big scope's N is counted chat by chat only until it is past every size that picks a
route (``Fts5Counts.total_past``), and a long query's mask histogram is built from the
n_t FTS5 counts and the rarer terms' rows (``Fts5MatchCounts``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from ..matches import FirstSize, MatchCounts, Matches
from .fts5 import Fts5Counts

__all__ = ["Fts5MatchCounts", "Fts5Matches"]


class Fts5MatchCounts(MatchCounts):
    """FTS5's counts of one filter's matches."""

    def capped_term_counts(self, cap: int) -> list[int]:
        """Each term's rows in the whole index, unfiltered, counted up to ``cap``: how the
        essential-terms plan picks the rarest terms here."""
        return self._fts5.capped_term_counts(self._cursor, self._terms, cap)

    @property
    def _fts5(self) -> Fts5Counts:
        counts = self._counts
        assert isinstance(counts, Fts5Counts)
        return counts

    def histogram_from_term_counts(self) -> bool:
        """FTS5 counts each term without reading a row, and its histogram of more terms
        than it counts by subset computes every match's mask (299 ms for five words, one
        common, at 1M): past that, the rarer terms' rows cost less."""
        return self._chats.tokens_suffice and (len(self._terms) > self._fts5.policy.few_terms)


class Fts5Matches(Matches):
    """The matches of one FTS5 search within one filter."""

    counts_class: ClassVar[type[MatchCounts]] = Fts5MatchCounts

    def first_size(
        self, depth: int, most: int, past: int | None, total: Callable[[], int]
    ) -> FirstSize:
        """A scope's per-chat counts summed until they pass ``past`` (a big user's N
        costs its first chats); without roles and a scope, or counted exactly (``past``
        ``None``), N as the statistics read it."""
        counts = self._engine_counts
        assert isinstance(counts, Fts5Counts)
        if past is not None:
            stopped = counts.total_past(self._cursor, self._chats, past)
            if stopped is not None:
                return FirstSize(*stopped, None)
        return super().first_size(depth, most, past, total)
