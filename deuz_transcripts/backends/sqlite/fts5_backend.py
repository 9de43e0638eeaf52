"""SQLite FTS5's search backend: its rows, row source, counts, matches and checks."""

from __future__ import annotations

from ..base import RowSource
from ..engine_counts import EngineCounts
from ..policy import PlanPolicy
from .common import SQLiteBackend
from .fts5 import Fts5Counts, Fts5Rows, Fts5RowSource, fts5_policy
from .fts5_checks import Fts5Checks
from .fts5_matches import Fts5Matches

__all__ = ["SQLiteFts5Backend"]


class SQLiteFts5Backend(SQLiteBackend):
    name = "sqlite-fts5"
    rows_class = Fts5Rows
    checks_class = Fts5Checks
    matches_class = Fts5Matches

    def search_parts(self, policy: PlanPolicy) -> tuple[RowSource, EngineCounts]:
        source = Fts5RowSource(self.alias, fts5_policy(policy))
        return source, Fts5Counts(source)
