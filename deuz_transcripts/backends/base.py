"""What every SQL search backend provides, and the SQL they share.

A backend only knows how to store a message's terms and how to answer two
questions about a scope: the histogram of query-term masks, and the ordered rows
of the masks a page needs (see ``deuz_transcripts.ranking``). Everything else
(rows, around, scores) is done once, in ``deuz_transcripts.sql_index``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.backends.utils import CursorWrapper

from ..models import Chat, ChatScope, Message

__all__ = ["Candidate", "ChatFilter", "NewRows", "SearchBackend", "StoredRow", "mask_sql"]


#: Scopes of at most this many indexed messages rank every match in one statement;
#: bigger ones count masks first and fetch only what the page needs.
SINGLE_STATEMENT_MAX = 5_000


def table(model: type) -> str:
    return model._meta.db_table  # type: ignore[attr-defined, no-any-return]


@dataclass(frozen=True)
class StoredRow:
    """A message row whose search data is written or deleted."""

    pk: int
    search_text: str  # distinct terms, space separated ("" when none)


@dataclass(frozen=True)
class NewRows:
    """Message rows of one chat, not yet inserted, and their terms (space separated)."""

    chat: Chat
    messages: Sequence[Message]
    terms: Sequence[str]


@dataclass(frozen=True)
class ChatFilter:
    """The chats a search may return: scope fields and an optional chat id list."""

    scope: Mapping[str, str]
    chat_ids: frozenset[str] | None

    def chat_pks_sql(self) -> tuple[str, list[Any]]:
        """``SELECT chat pk ...`` of the searchable chats this filter admits.

        A scoped filter starts from the ``(key, value)`` btree of ``ChatScope`` and
        checks each chat by a scalar subquery, one primary-key probe per scope row (as
        a join, PostgreSQL hashes it and reads the whole chat table for a big scope),
        so its cost follows the scope, never the table.
        """
        check, check_params = self._chat_check()
        if not self.scope:
            return f"SELECT c.id FROM {table(Chat)} c WHERE {check}", check_params
        rows, params = self._scope_rows()
        return (
            f"SELECT s0.chat_id {rows} "
            f"AND (SELECT {check} FROM {table(Chat)} c WHERE c.id = s0.chat_id)",
            [*params, *check_params],
        )

    def _scope_rows(self) -> tuple[str, list[Any]]:
        """``FROM ... WHERE ...`` of the scope's ``ChatScope`` rows, one per chat (``s0``)."""
        fields = sorted(self.scope.items())
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

    def _chat_check(self) -> tuple[str, list[Any]]:
        """What chat row ``c`` itself must satisfy: indexed, and one of ``chat_ids``."""
        if self.chat_ids is None:
            return "c.is_indexed", []
        ids = sorted(self.chat_ids)
        return f"c.is_indexed AND c.chat_id IN ({', '.join(['%s'] * len(ids))})", ids

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


@dataclass(frozen=True)
class Candidate:
    """A matching message that may reach the page: the best of its mask by the tie rules."""

    pk: int
    mask: int
    chat_pk: int
    chat_id: str
    updated_at: Any  # datetime on PostgreSQL, Django's sortable text on SQLite
    position: int
    visible_position: int


def mask_sql(conditions: Sequence[str]) -> str:
    """``CASE WHEN cond_i THEN 2^i ELSE 0 END + ...``: which query terms a row holds."""
    return " + ".join(
        f"(CASE WHEN {condition} THEN {1 << bit} ELSE 0 END)"
        for bit, condition in enumerate(conditions)
    )


class SearchBackend(ABC):
    """One database engine's way of storing and matching terms."""

    name: str
    #: True when a query term matches any word containing it (the LIKE fallback).
    substring_matching = False

    def __init__(self, alias: str) -> None:
        self.alias = alias

    # writing

    @abstractmethod
    def lock_chat(self, cursor: CursorWrapper, chat_id: str) -> None:
        """Serialize writers of one chat id until the transaction ends."""

    def lock_chats(self, cursor: CursorWrapper, chat_ids: Sequence[str]) -> None:
        """``lock_chat`` for each id, in the order given (callers keep one order)."""
        for chat_id in chat_ids:
            self.lock_chat(cursor, chat_id)

    def stores_search_text(self) -> bool:
        """Whether ``Message.search_text`` is kept (SQLite: LIKE haystack, FTS5 delete key)."""
        return True

    def insert_messages(
        self, cursor: CursorWrapper, chat: Chat, messages: Sequence[Message], terms: Sequence[str]
    ) -> None:
        """Insert new message rows with their search data (``terms``: space-separated)."""
        self.insert_chat_messages(cursor, [NewRows(chat, messages, terms)])

    def insert_chat_messages(self, cursor: CursorWrapper, batches: Sequence[NewRows]) -> None:
        """Insert the new rows of several chats: one ``bulk_create``, then their search data."""
        rows = [message for batch in batches for message in batch.messages]
        if not rows:
            return
        created = iter(Message.objects.using(self.alias).bulk_create(rows))
        self.write_chats_rows(
            cursor,
            [
                (batch.chat, [StoredRow(next(created).pk, text) for text in batch.terms])
                for batch in batches
            ],
        )

    def write_chats_rows(
        self, cursor: CursorWrapper, written: Sequence[tuple[Chat, Sequence[StoredRow]]]
    ) -> None:
        """``write_rows`` for several chats (a backend may do it in one statement)."""
        for chat, rows in written:
            self.write_rows(cursor, chat, rows)

    def write_rows(  # noqa: B027  (optional hook)
        self, cursor: CursorWrapper, chat: Chat, rows: Sequence[StoredRow]
    ) -> None:
        """Add search data for freshly inserted message rows (default: the column is enough)."""

    def delete_rows(  # noqa: B027  (optional hook)
        self, cursor: CursorWrapper, chat: Chat, rows: Sequence[StoredRow]
    ) -> None:
        """Remove search data of rows about to be deleted or rewritten, with ``chat``'s old scope."""

    def clear_rows(self, cursor: CursorWrapper, chat: Chat, rows: Sequence[StoredRow]) -> None:
        """Remove search data of rows that stay (``remove()`` of a chat a store owns)."""
        self.delete_rows(cursor, chat, rows)

    # reading

    #: ``ORDER BY`` of a chat id in code point order.
    chat_id_order = "c.chat_id"

    @abstractmethod
    def matches_sql(self, chats: ChatFilter, terms: Sequence[str]) -> tuple[str, list[Any]]:
        """``SELECT id, mask, chat_pk, position, visible_position`` of every match in scope."""

    def mask_matches_sql(
        self, chats: ChatFilter, terms: Sequence[str], masks: Collection[int]
    ) -> tuple[str, list[Any]]:
        """``matches_sql`` of the rows of ``masks`` only (backends narrow it in the index)."""
        matches, params = self.matches_sql(chats, terms)
        wanted = ", ".join(str(int(mask)) for mask in sorted(masks))
        return f"SELECT * FROM ({matches}) x WHERE x.mask IN ({wanted})", params

    def single_statement(self, chats: ChatFilter, total: int) -> bool:
        """Whether one statement ranking every match is cheapest (small scopes)."""
        return total <= SINGLE_STATEMENT_MAX

    def total(self, cursor: CursorWrapper, chats: ChatFilter) -> int:
        """N: the indexed messages the search may return (the scope's chats, summed)."""
        sql, params = chats.total_sql()
        cursor.execute(sql, params)
        return int(cursor.fetchone()[0])

    def candidates(
        self,
        cursor: CursorWrapper,
        chats: ChatFilter,
        terms: Sequence[str],
        depth: int,
        total: int,
    ) -> tuple[dict[int, int], list[Candidate]]:
        """The mask histogram and the first ``depth`` rows of every mask, in one pass.

        Each match is read and its mask computed once (a materialized CTE); a window
        numbers the rows of each mask in tie order. Any row of the global page
        (``offset + limit`` = ``depth``) is among the first ``depth`` of its own mask.
        """
        matches, params = self.candidate_matches_sql(chats, terms, total)
        return self.ranked_candidates(cursor, matches, params, depth)

    def candidate_matches_sql(
        self, chats: ChatFilter, terms: Sequence[str], total: int
    ) -> tuple[str, list[Any]]:
        """The matches ``candidates`` ranks; ``total`` (N) lets a backend pick how to find
        them (SQLite FTS5 scans small scopes)."""
        return self.matches_sql(chats, terms)

    def ranked_candidates(
        self, cursor: CursorWrapper, matches: str, params: Sequence[Any], depth: int
    ) -> tuple[dict[int, int], list[Candidate]]:
        """``candidates`` over the rows of ``matches`` (``SELECT id, mask, chat_pk, ...``)."""
        cursor.execute(
            f"WITH h AS MATERIALIZED ({matches}), "
            "r AS (SELECT h.id, h.mask, h.chat_pk, c.chat_id, c.updated_at, h.position, "
            "h.visible_position, count(*) OVER (PARTITION BY h.mask) AS n, "
            "row_number() OVER (PARTITION BY h.mask ORDER BY c.updated_at DESC, "
            f"{self.chat_id_order}, h.position) AS rank "
            f"FROM h JOIN {table(Chat)} c ON c.id = h.chat_pk) "
            "SELECT r.mask, r.n, r.id, r.chat_pk, r.chat_id, "
            "r.updated_at, r.position, r.visible_position FROM r WHERE r.rank <= %s",
            [*params, depth],
        )
        rows = cursor.fetchall()
        histogram = {row[0]: row[1] for row in rows}
        found = [Candidate(row[2], row[0], row[3], row[4], row[5], row[6], row[7]) for row in rows]
        return histogram, found

    # big scopes: the histogram first, then only the rows the page needs (see ``sql_index``)

    #: Longest query planned that way; longer ones rank every match in one statement
    #: (PostgreSQL's exact-mask tsqueries grow with masks x terms).
    plan_max_terms = 4

    def mask_histogram(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str]
    ) -> dict[int, int]:
        """``{mask: rows}`` of every match in scope: each match read once, nothing sorted."""
        matches, params = self.matches_sql(chats, terms)
        cursor.execute(f"SELECT h.mask, count(*) FROM ({matches}) h GROUP BY h.mask", params)
        return {int(mask): int(count) for mask, count in cursor.fetchall()}

    def mask_candidates(
        self,
        cursor: CursorWrapper,
        chats: ChatFilter,
        terms: Sequence[str],
        masks: Collection[int],
        depth: int,
    ) -> list[Candidate]:
        """The first ``depth`` rows of each of ``masks`` (masks with few rows)."""
        matches, params = self.mask_matches_sql(chats, terms, masks)
        return self.ranked_candidates(cursor, matches, params, depth)[1]

    # the newest-first walk (see ``sql_index``)

    #: Whether walking newest chats first pays off (not for LIKE: its probe is a scan).
    walks_newest_first = True
    #: Joins ``c`` (chats) to ``m`` (messages) so rows come out newest chat first.
    walk_join = "JOIN"

    def term_condition(self, alias: str, term: str) -> tuple[str, list[Any]]:
        """SQL true when message row ``alias`` holds ``term`` (for ``mask_condition``)."""
        raise NotImplementedError

    def mask_condition(self, alias: str, terms: Sequence[str], mask: int) -> tuple[str, list[Any]]:
        """SQL true when row ``alias`` holds exactly the terms of ``mask`` (backends that
        walk override it, or ``term_condition``)."""
        sql: list[str] = []
        params: list[Any] = []
        for bit, term in enumerate(terms):
            condition, condition_params = self.term_condition(alias, term)
            sql.append(condition if mask >> bit & 1 else f"NOT ({condition})")
            params.extend(condition_params)
        return " AND ".join(sql), params

    def count_with_all_terms(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str], cap: int
    ) -> int:
        """Rows of the scope holding every term, counted up to ``cap`` (stops there)."""
        pks, pks_params = chats.chat_pks_sql()
        condition, params = self.mask_condition("m", terms, (1 << len(terms)) - 1)
        cursor.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM {table(Message)} m WHERE m.chat_id IN ({pks}) "
            f"AND m.has_terms AND {condition} LIMIT %s) AS probe",
            [*pks_params, *params, cap],
        )
        return int(cursor.fetchone()[0])

    def newest_with_mask(
        self,
        cursor: CursorWrapper,
        chats: ChatFilter,
        terms: Sequence[str],
        mask: int,
        depth: int,
    ) -> list[Candidate]:
        """The first ``depth`` rows of ``mask`` in tie order, walking newest chats first
        and stopping there: the cost follows how common the mask is, not N."""
        admitted, admitted_params = chats.chat_condition()
        condition, params = self.mask_condition("m", terms, mask)
        cursor.execute(
            "SELECT m.id, m.chat_id, c.chat_id, c.updated_at, m.position, m.visible_position "
            f"FROM {table(Chat)} c {self.walk_join} {table(Message)} m ON m.chat_id = c.id "
            f"WHERE {admitted} AND m.has_terms AND {condition} "
            f"ORDER BY c.updated_at DESC, {self.chat_id_order}, m.position LIMIT %s",
            [*admitted_params, *params, depth],
        )
        return [Candidate(row[0], mask, *row[1:]) for row in cursor.fetchall()]

    def message_table(self) -> str:
        return table(Message)
