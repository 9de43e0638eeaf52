"""SQLite FTS5's search backend: its rows, row source, counts, matches and checks."""

from __future__ import annotations

from ..base import RowSource
from ..engine_counts import EngineCounts
from ..policy import current_policy
from .common import SQLiteBackend
from .fts5 import Fts5Counts, Fts5Rows, Fts5RowSource
from .fts5_checks import Fts5Checks
from .fts5_matches import Fts5Matches
from .fts5_policy import Fts5Policy

__all__ = ["SQLiteFts5Backend"]


class SQLiteFts5Backend(SQLiteBackend):
    name = "sqlite-fts5"
    rows_class = Fts5Rows
    checks_class = Fts5Checks
    matches_class = Fts5Matches

    def search_parts(self) -> tuple[RowSource, EngineCounts]:
        source = Fts5RowSource(self.alias, current_policy(Fts5Policy))
        return source, Fts5Counts(source)
