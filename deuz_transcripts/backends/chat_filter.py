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

__all__ = ["JOINED_SCOPE_FIELDS", "RARITY_CAP", "ChatFilter", "table"]

#: A scope of at most this many fields is joined field by field (the planner orders so
#: few exhaustively and fast); a wider one is driven by its rarest field
#: (``ChatFilter._scope_rows``).
JOINED_SCOPE_FIELDS = 4
#: How far the rows of each field of a wide scope are counted to find the rarest one.
RARITY_CAP = 1_000


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

        Up to ``JOINED_SCOPE_FIELDS`` fields are joined: the planner orders so few
        exhaustively, from the most selective. A wider scope is driven by its rarest field
        instead — the one whose ``(key, value)`` btree holds the fewest rows, counted up to
        ``RARITY_CAP`` — and each chat of that field is checked by one count of its own
        scope rows matching the scope. Neither plan grows with the field count: one join
        per field made PostgreSQL's planning explode (seconds at 32 fields) and SQLite fail
        past 63 fields.
        """
        fields = sorted(self.scope.items())
        if len(fields) > JOINED_SCOPE_FIELDS:
            return self._rarest_field_rows(fields)
        joins, params = [], []
        for number, (key, value) in enumerate(fields[1:], start=1):
            joins.append(
                f"JOIN {table(ChatScope)} s{number} ON s{number}.chat_id = s0.chat_id "
                f"AND s{number}.key = %s AND s{number}.value = %s"
            )
            params.extend([key, value])
        return (
            f"FROM {table(ChatScope)} s0 {' '.join(joins)} WHERE s0.key = %s AND s0.value = %s",
            [*params, *fields[0]],
        )

    def _rarest_field_rows(self, fields: list[tuple[str, str]]) -> tuple[str, list[Any]]:
        """Each field's rows are counted by its own ``(key, value)`` values (so the planner
        reads their statistics), in the btree's order (so an index scan stops at the cap
        where a bitmap scan would read every row of a common field); the rarest field's
        rows are ``s0``, and each of its chats is checked against every field."""
        scopes = table(ChatScope)
        counted = " UNION ALL ".join(
            f"SELECT %s AS k, %s AS v, (SELECT count(*) FROM (SELECT 1 FROM {scopes} x "
            "WHERE x.key = %s AND x.value = %s ORDER BY x.chat_id "
            f"LIMIT {RARITY_CAP}) AS q) AS n"
            for _ in fields
        )
        matches = " OR ".join(["(r.key = %s AND r.value = %s)"] * len(fields))
        # (chat, key) is unique: the count reaches len(fields) only when every field holds
        return (
            f"FROM (SELECT f.k, f.v FROM ({counted}) AS f ORDER BY f.n, f.k LIMIT 1) AS d "
            f"JOIN {scopes} s0 ON s0.key = d.k AND s0.value = d.v "
            f"WHERE (SELECT count(*) FROM {scopes} r WHERE r.chat_id = s0.chat_id "
            f"AND ({matches})) = {len(fields)}",
            [
                *(part for key, value in fields for part in (key, value, key, value)),
                *(part for pair in fields for part in pair),
            ],
        )

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
