"""SQLite without FTS5: substring matches in ``Message.search_text``.

The haystack is the message's distinct terms separated by spaces, so a query
term (letters and digits only) matches exactly the words that contain it.
``instr`` is used rather than ``LIKE`` so no character of a term is a wildcard.
Its rows are written by ``Fts5Rows``, which keeps an existing FTS5 table
current, so switching back to FTS5 needs no re-index.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...models import Message
from ..base import RowSource, mask_sql
from ..chat_filter import ChatFilter, table
from ..engine_counts import EngineCounts
from ..policy import SearchPolicy, current_policy
from .common import UPDATED_AT_TEXT, SQLiteBackend
from .fts5 import Fts5Rows

__all__ = ["LikePolicy", "LikeRowSource", "SQLiteLikeBackend"]


@dataclass(frozen=True)
class LikePolicy(SearchPolicy):
    """LIKE's thresholds: it plans no masks and never walks (its probe would scan the
    scope, as its search does), so of the shared routes' only the one-statement size is
    reached (a scoped search's N read with its ranking)."""

    single_statement_max: int = 5_000


class LikeRowSource(RowSource):
    """Rows of a scope whose haystack contains each term; every count reads the matches."""

    _updated_at_sql = UPDATED_AT_TEXT
    walks_newest_first = False  # its probe would scan the scope, as its search does

    def plans_masks(self, chats: ChatFilter, terms: Sequence[str], total: int) -> bool:
        return False  # every search scans the scope's rows once

    def matches_sql(self, chats: ChatFilter, terms: Sequence[str]) -> tuple[str, list[Any]]:
        pks_sql, pks_params = chats.chat_pks_sql()
        more, more_params = chats.message_sql()
        conditions = ["instr(m.search_text, %s) > 0" for _ in terms]
        return (
            f"SELECT * FROM (SELECT m.id, {mask_sql(conditions)} AS mask, m.chat_id AS chat_pk, "
            f"m.position, m.visible_position FROM {table(Message)} m "
            f"WHERE m.chat_id IN ({pks_sql}) AND m.has_terms{more}) WHERE mask > 0",
            [*terms, *pks_params, *more_params],
        )


class SQLiteLikeBackend(SQLiteBackend):
    name = "sqlite-like"
    substring_matching = True
    rows_class = Fts5Rows

    def search_parts(self) -> tuple[RowSource, EngineCounts]:
        source = LikeRowSource(self.alias, current_policy(LikePolicy))
        return source, EngineCounts(source)
