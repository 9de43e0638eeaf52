"""``ChatFilter``: the one place SQL filters chats by scope (and by chat id).

Searches, ``N``, the walks and ``list_chats`` all take their chats from here, so the
scope rule (every field set in the filter is equal in the chat's scope) is written
once for SQL, as ``records.scope_matches`` writes it once for Python.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import models

from ..models import Chat, ChatScope

__all__ = ["JOINED_SCOPE_FIELDS", "ChatFilter", "table"]

#: Scope fields a filter joins (the planner orders so few exhaustively and fast); a
#: scope's further fields are checked per chat (``ChatFilter._scope_rows``).
JOINED_SCOPE_FIELDS = 4


def table(model: type[models.Model]) -> str:
    return model._meta.db_table


@dataclass(frozen=True)
class ChatFilter:
    """The chats a search may return: scope fields, an optional chat id list, and
    (``searchable_only``, the default) only chats that are in search."""

    scope: Mapping[str, str]
    chat_ids: frozenset[str] | None = None
    searchable_only: bool = True
    #: N, the indexed messages these chats hold, once counted (backends pick plans by it).
    size: int | None = None

    @property
    def narrowed(self) -> bool:
        """Whether a scope field or a chat id list narrows the chats."""
        return bool(self.scope) or self.chat_ids is not None

    def chat_pks_sql(self) -> tuple[str, list[Any]]:
        """``SELECT chat pk ...`` of the chats this filter admits.

        A scoped filter starts from the ``(key, value)`` btree of ``ChatScope`` and
        checks each chat by a scalar subquery, one primary-key probe per scope row (as
        a join, PostgreSQL hashes it and reads the whole chat table for a big scope),
        so its cost follows the scope, never the table.
        """
        check, check_params = self._chat_check()
        if not self.scope:
            return f"SELECT c.id FROM {table(Chat)} c WHERE {check}", check_params
        rows, params = self._scope_rows()
        if check == "TRUE":
            return f"SELECT s0.chat_id {rows}", params
        return (
            f"SELECT s0.chat_id {rows} "
            f"AND (SELECT {check} FROM {table(Chat)} c WHERE c.id = s0.chat_id)",
            [*params, *check_params],
        )

    def _scope_rows(self) -> tuple[str, list[Any]]:
        """``FROM ... WHERE ...`` of the scope's ``ChatScope`` rows, one per chat (``s0``).

        The first ``JOINED_SCOPE_FIELDS`` fields (in key order) are joined, so the planner
        starts from the most selective of them; every further field is checked on each
        chat those admit by one count over that chat's own scope rows (its ``(chat, key)``
        index). The plan has at most that many joins whatever the field count: one join
        per field made PostgreSQL's planning explode (seconds at 32 fields) and SQLite fail
        past 63 fields.
        """
        fields = sorted(self.scope.items())
        joined, checked = fields[:JOINED_SCOPE_FIELDS], fields[JOINED_SCOPE_FIELDS:]
        joins, params = [], []
        for number, (key, value) in enumerate(joined[1:], start=1):
            joins.append(
                f"JOIN {table(ChatScope)} s{number} ON s{number}.chat_id = s0.chat_id "
                f"AND s{number}.key = %s AND s{number}.value = %s"
            )
            params.extend([key, value])
        where = "s0.key = %s AND s0.value = %s"
        params.extend(joined[0])
        if checked:
            pairs = " OR ".join(["(r.key = %s AND r.value = %s)"] * len(checked))
            # (chat, key) is unique: the count reaches len(checked) only when every field holds
            where += (
                f" AND (SELECT count(*) FROM {table(ChatScope)} r "
                f"WHERE r.chat_id = s0.chat_id AND ({pairs})) = {len(checked)}"
            )
            params.extend(part for pair in checked for part in pair)
        return f"FROM {table(ChatScope)} s0 {' '.join(joins)} WHERE {where}", params

    def _chat_check(self) -> tuple[str, list[Any]]:
        """What chat row ``c`` itself must satisfy: searchable, and one of ``chat_ids``."""
        conditions = ["c.is_indexed"] if self.searchable_only else []
        params: list[Any] = []
        if self.chat_ids is not None:
            ids = sorted(self.chat_ids)
            conditions.append(f"c.chat_id IN ({', '.join(['%s'] * len(ids))})")
            params.extend(ids)
        return " AND ".join(conditions) or "TRUE", params

    def chat_condition(self) -> tuple[str, list[Any]]:
        """SQL true when chat row ``c`` is admitted.

        Without a scope it tests ``c`` itself: ``c.id IN (every indexed chat)`` would
        make the engine list the whole chat table before using any row of it.
        """
        if self.scope:
            pks, params = self.chat_pks_sql()
            return f"c.id IN ({pks})", params
        return self._chat_check()

    def total_sql(self) -> tuple[str, list[Any]]:
        """N: the number of indexed messages the search may return (one probe per chat)."""
        check, check_params = self._chat_check()
        if not self.scope:
            return (
                f"SELECT COALESCE(SUM(c.indexed_count), 0) FROM {table(Chat)} c WHERE {check}",
                check_params,
            )
        rows, params = self._scope_rows()
        probe = f"SELECT c.indexed_count FROM {table(Chat)} c WHERE c.id = s0.chat_id AND {check}"
        return f"SELECT COALESCE(SUM(({probe})), 0) {rows}", [*check_params, *params]
