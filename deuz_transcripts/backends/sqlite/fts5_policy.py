"""SQLite FTS5's planner thresholds: the shared routes' and its own (small scopes
scanned, term-subset counts)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Self

from ...conf import conf
from ..policy import SearchPolicy

__all__ = ["Fts5Policy"]


@dataclass(frozen=True)
class Fts5Policy(SearchPolicy):
    """FTS5's thresholds."""

    #: Unbounded: with no stored counts to guess from, every FTS5 walk is the probe's,
    #: mostly of dense words, and a bounded walk first sums the rows of the newest chats
    #: in a window.
    bounds_probed_walks = False
    #: The roles' rows are counted by intersecting the role token's doclist, which runs
    #: to its end where they are fewer than the walk's size: every role's rows stop there.
    probes_every_role = True
    #: Scopes of at most this many indexed messages scan their own rows
    #: (``DEUZ_TRANSCRIPTS["SQLITE_SCAN_SCOPE_MAX"]`` sets it)...
    scan_scope_max: int = 2_000
    #: ... and find each row's mask in Python for queries of at least this many terms
    #: (SQL ``instr`` costs per term, the Python word test per row: ``sqlite.scope_scan``).
    scan_python_min_terms: int = 8

    @property
    def single_statement_max(self) -> int:
        """The scopes that scan their own rows: one statement there finds each match's
        mask by a subquery per term, each seeking that term's doclist to every row of the
        scope."""
        return self.scan_scope_max

    def with_settings(self) -> Self:
        return replace(self, scan_scope_max=conf.SQLITE_SCAN_SCOPE_MAX)
