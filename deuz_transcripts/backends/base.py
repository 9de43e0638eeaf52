"""What every SQL search backend provides, by role.

A backend (``search_backend.SearchBackend``) is four parts: ``SearchRows``
(``search_rows``) writes and deletes message rows with their search data (and owns the chat
write lock), ``RowSource`` (here) reads the rows holding query terms (see
``deuz_transcripts.ranking`` for masks) and counts them up to a cap, ``EngineCounts``
(``engine_counts``) counts N, n_t and masks in the engine's index, and
``SearchDataChecks`` (``data_checks``) verifies and repairs the search data against the
rows. A search binds the row source and counts to its filter once (``matches.Matches``):
the pipeline asks that, never these with a ``ChatFilter``. Rows, ``around`` and scores
are built once, in ``deuz_transcripts.sql``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any, ClassVar

from django.db.backends.utils import CursorWrapper

from ..conf import conf
from ..models import Chat, Message
from .candidates import (
    Candidate,
    Known,
    MaskTier,
    TermStats,
    fetch_int,
    mask_sql,
    more_than_by_counts,
    sort_in_tie_order,
)
from .chat_filter import ChatFilter, table
from .data_checks import SearchDataChecks, StoredMessage
from .policy import SearchPolicy
from .search_rows import SearchRows

__all__ = [
    "Candidate",
    "Known",
    "MaskTier",
    "Ranked",
    "RowSource",
    "SearchDataChecks",
    "SearchRows",
    "StoredMessage",
    "TermStats",
    "fetch_int",
    "mask_sql",
    "more_than_by_counts",
    "sort_in_tie_order",
]

#: A mask histogram and the first rows of each mask (``RowSource.candidates``).
Ranked = tuple[dict[int, int], list[Candidate]]


class RowSource(ABC):
    """One engine's rows holding query terms: of given masks in tie order (after a key,
    up to a limit, within a filter's chats), and their number up to a cap. How the
    engine's index finds them stays in its own subpackage."""

    #: ``ORDER BY`` of a chat id in code point order.
    chat_id_order: ClassVar[str] = "c.chat_id"
    #: Whether walking newest chats first pays off (not for LIKE: its probe is a scan).
    walks_newest_first: ClassVar[bool] = True
    #: Whether the search data holds a role token per row (``ChatFilter.role_tokens``).
    role_tokens: ClassVar[bool] = False
    #: A candidate row's chat time as this database hands it to Python fastest, of ``{}``.
    _updated_at_sql: ClassVar[str] = "{}"
    #: Joins ``c`` (chats) to ``m`` (messages) so rows come out newest chat first.
    _walk_join: ClassVar[str] = "JOIN"
    #: Whether every statement tests the tenant column where the scope names a tenant
    #: (PostgreSQL: a partitioned table reads one partition, docs/scaling.md).
    tests_tenant: ClassVar[bool] = False

    def __init__(self, alias: str, policy: SearchPolicy) -> None:
        self.alias = alias
        self.policy = policy

    def tested_tenant(self, scope: Mapping[str, str]) -> str | None:
        """The scope's ``TENANT_KEY`` value where statements test the tenant, else ``None``."""
        return conf.scope_tenant(scope) if self.tests_tenant else None

    def _tie_order(self, position: str) -> str:
        """``ORDER BY`` of the tie rules (newer chat, chat id by code point, lower index)
        over chat ``c`` and the message position column ``position``; Python's is
        ``ranking.sort_key``."""
        return f"c.updated_at DESC, {self.chat_id_order}, {position}"

    @abstractmethod
    def matches_sql(self, chats: ChatFilter, terms: Sequence[str]) -> tuple[str, list[Any]]:
        """``SELECT id, mask, chat_pk, position, visible_position`` of every match in scope."""

    def mask_matches_sql(
        self,
        chats: ChatFilter,
        terms: Sequence[str],
        masks: Collection[int] | MaskTier,
        expected: int | None = None,
    ) -> tuple[str, list[Any]]:
        """``matches_sql`` of the rows of ``masks`` only, or of a tier's masks (backends
        narrow it in the index; ``expected``: how many rows, when known)."""
        matches, params = self.matches_sql(chats, terms)
        if isinstance(masks, MaskTier):
            holding = " OR ".join(f"x.mask & {int(m)} = {int(m)}" for m in sorted(masks.least))
            wanted = f"({holding}) AND x.mask & {int(masks.none_of)} = 0"
            return f"SELECT * FROM ({matches}) x WHERE {wanted}", params
        wanted = ", ".join(str(int(mask)) for mask in sorted(masks))
        return f"SELECT * FROM ({matches}) x WHERE x.mask IN ({wanted})", params

    def _candidate_matches_sql(
        self, chats: ChatFilter, terms: Sequence[str], total: int
    ) -> tuple[str, list[Any]]:
        """The matches ``candidates`` ranks; ``total`` (N) lets a backend pick how to find
        them (SQLite FTS5 scans small scopes)."""
        return self.matches_sql(chats, terms)

    def plans_masks(self, chats: ChatFilter, terms: Sequence[str], total: int) -> bool:
        """Whether to count masks first and read only the page's rows (big scopes, any
        number of terms), rather than rank every match in one statement."""
        return total > self.policy.single_statement_max

    def few_rows(self, expected: int | None) -> bool:
        """Whether rows known to be ``expected`` look their chats up one by one (a join,
        or ``IN`` the chats a window or cursor admits, reads or hashes every such chat)."""
        return expected is not None and expected <= self.policy.chat_lookup_max_rows

    def chat_join(self, chat_pk: str, expected: int | None = None) -> str:
        """Joins chat ``c`` (``id``, ``chat_id``, ``updated_at``) to rows whose chat pk is
        the SQL ``chat_pk``; ``expected``: how many rows it joins, when the plan knows."""
        return f"JOIN {table(Chat)} c ON c.id = {chat_pk}"

    def candidates(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str], depth: int, total: int
    ) -> Ranked:
        """The mask histogram and the first ``depth`` rows of every mask, in one pass.

        Each match is read and its mask computed once (a materialized CTE); a window
        numbers the rows of each mask in tie order. Any row of the global page
        (``offset + limit`` = ``depth``) is among the first ``depth`` of its own mask.
        """
        matches, params = self._candidate_matches_sql(chats, terms, total)
        return self._ranked_candidates(cursor, matches, params, depth)

    def _ranked_candidates(
        self,
        cursor: CursorWrapper,
        matches: str,
        params: Sequence[Any],
        depth: int,
        expected: int | None = None,
    ) -> Ranked:
        """``candidates`` over the rows of ``matches`` (``SELECT id, mask, chat_pk, ...``;
        ``expected`` of them, when known)."""
        cursor.execute(
            f"WITH {self._ranked_ctes(matches, expected)} "
            f"SELECT {self._ranked_columns()} FROM r WHERE r.rank <= %s",
            [*params, depth],
        )
        return ranked_rows(cursor.fetchall())

    def _ranked_ctes(self, matches: str, expected: int | None) -> str:
        """``h``, each match read and its mask computed once, and ``r``, its rows with
        their chats, numbered by mask in tie order and counted by mask."""
        return (
            f"h AS MATERIALIZED ({matches}), "
            "r AS (SELECT h.id, h.mask, h.chat_pk, c.chat_id, c.updated_at, h.position, "
            "h.visible_position, count(*) OVER (PARTITION BY h.mask) AS n, "
            f"row_number() OVER (PARTITION BY h.mask ORDER BY {self._tie_order('h.position')}) "
            "AS rank "
            f"FROM h {self.chat_join('h.chat_pk', expected)})"
        )

    def _ranked_columns(self) -> str:
        """The columns of a kept row of ``r`` (the chat's time of kept rows only)."""
        updated_at = self._updated_at_sql.format("r.updated_at")
        return (
            f"r.mask, r.n, r.id, r.chat_pk, r.chat_id, {updated_at}, r.position, r.visible_position"
        )

    def _sized_candidates_of(
        self,
        cursor: CursorWrapper,
        total: tuple[str, list[Any]],
        chats: ChatFilter,
        terms: Sequence[str],
        depth: int,
        most: int,
        past: Sequence[tuple[str, list[Any]]] = (),
    ) -> tuple[int, Ranked | None, list[Any]]:
        """N of the scope ``chats`` (the one statement ``total``) and, where it is at most
        ``most``, ``candidates`` in the same statement (a bigger N skips the matches: a
        one-time filter on N), and the values of
        the scalar SQL expressions ``past`` (N is ``t.total`` in them), evaluated in the
        same statement only where N is past ``most`` (``None`` each otherwise): what a
        big scope's plan reads next, without a statement of its own."""
        total_sql, total_params = total
        # the matches of every N up to ``most``: the same SQL as for the N found
        matches, params = self._candidate_matches_sql(replace(chats, size=most), terms, most)
        columns = "".join(  # a CASE runs a branch's subqueries only where it is taken
            f", CASE WHEN t.total > %s THEN {sql} END" for sql, _ in past
        )
        past_params = [param for _, own in past for param in (most, *own)]
        cursor.execute(
            f"WITH s AS (SELECT t.*{columns} FROM (SELECT ({total_sql}) AS total) t), "
            + self._ranked_ctes(  # at most ``most`` rows: none to join when N is bigger
                f"SELECT x.* FROM ({matches}) x WHERE (SELECT s.total FROM s) <= %s", most
            )
            + f" SELECT s.*, {self._ranked_columns()} FROM s LEFT JOIN r ON r.rank <= %s",
            [*past_params, *total_params, *params, most, depth],
        )
        rows = cursor.fetchall()
        size = int(rows[0][0] or 0) if rows else 0
        values = list(rows[0][1 : 1 + len(past)]) if rows else [None] * len(past)
        if size > most:
            return size, None, values
        skip = 1 + len(past)
        return size, ranked_rows([row[skip:] for row in rows if row[skip] is not None]), values

    def mask_candidates(
        self,
        cursor: CursorWrapper,
        chats: ChatFilter,
        terms: Sequence[str],
        masks: Collection[int] | MaskTier,
        depth: int,
        expected: int | None = None,
    ) -> list[Candidate]:
        """The first ``depth`` rows of each of ``masks``, or of each mask of a tier (masks
        with few rows: ``expected`` in all, when known)."""
        matches, params = self.mask_matches_sql(chats, terms, masks, expected)
        return self._ranked_candidates(cursor, matches, params, depth, expected)[1]

    # the essential-terms plan (see ``deuz_transcripts.sql.search.essential``)

    def rows_with_terms(
        self,
        cursor: CursorWrapper,
        chats: ChatFilter,
        terms: Sequence[str],
        wanted: int,
        skipped: Collection[int],
        expected: int | None = None,
    ) -> list[Candidate]:
        """Rows of the filter holding term ``wanted`` and none of ``skipped`` (positions in
        ``terms``), each with its mask over every term (at most ``expected``, when known)."""
        raise NotImplementedError(f"{type(self).__name__} does not read a term's rows")

    def rows_with_any_terms(
        self,
        cursor: CursorWrapper,
        chats: ChatFilter,
        terms: Sequence[str],
        wanted: Collection[int],
        expected: int | None = None,
    ) -> list[Candidate]:
        """Rows of the filter holding any term of ``wanted`` (positions in ``terms``),
        each with its mask over every term (at most ``expected``, when known)."""
        raise NotImplementedError(f"{type(self).__name__} does not read rare terms at once")

    # counts up to a cap

    def matches_more_than(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str], cap: int
    ) -> bool:
        """Whether more than ``cap`` rows of the filter hold any of the terms: a count that
        stops after ``cap + 1`` matches, so it costs at most that many."""
        matches, params = self.matches_sql(chats, terms)
        cursor.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM ({matches}) h LIMIT %s) AS probe",
            [*params, cap + 1],
        )
        return fetch_int(cursor) > cap

    # the newest-first walk (see ``deuz_transcripts.sql.search.walks``)

    def mask_condition(self, alias: str, terms: Sequence[str], mask: int) -> tuple[str, list[Any]]:
        """SQL true when row ``alias`` holds exactly the terms of ``mask``."""
        raise NotImplementedError(f"{type(self).__name__} does not walk")

    def count_with_all_terms(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str], cap: int
    ) -> int:
        """Rows of the scope holding every term, counted up to ``cap`` (stops there)."""
        pks, pks_params = chats.chat_pks_sql()
        condition, params = self.mask_condition("m", terms, (1 << len(terms)) - 1)
        more, more_params = chats.message_sql()
        cursor.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM {table(Message)} m WHERE m.chat_id IN ({pks}) "
            f"AND m.has_terms AND {condition}{more} LIMIT %s) AS probe",
            [*pks_params, *params, *more_params, cap],
        )
        return fetch_int(cursor)

    def newest_with_mask(
        self,
        cursor: CursorWrapper,
        chats: ChatFilter,
        terms: Sequence[str],
        mask: int,
        depth: int,
        *,
        within_rows: int | None = None,
    ) -> list[Candidate]:
        """The first ``depth`` rows of ``mask`` in tie order, walking newest chats first
        and stopping there: the cost follows how common the mask is, not N. With
        ``within_rows``, only the newest chats holding that many indexed messages before
        them are walked: a bounded walk, whose rows are still the first in tie order.

        A row's own conditions (its role) come before its terms' test: SQLite tests them
        in the order written, and a message of another role then costs its ``role``
        column alone, not its text (read past the payload, often from overflow pages)."""
        admitted, admitted_params = chats.chat_condition()
        condition, params = self.mask_condition("m", terms, mask)
        more, more_params = chats.message_sql()
        source = f"{table(Chat)} c {self._walk_join}"
        if within_rows is not None:
            chat_order = f"c.updated_at DESC, {self.chat_id_order}"
            source = (  # a chat is walked when fewer than within_rows messages come before it
                "(SELECT w.id, w.chat_id, w.updated_at FROM (SELECT c.id, c.chat_id, "
                f"c.updated_at, SUM(c.indexed_count) OVER (ORDER BY {chat_order} "
                "ROWS UNBOUNDED PRECEDING) - c.indexed_count AS before "
                f"FROM {table(Chat)} c WHERE {admitted} ORDER BY {chat_order} LIMIT %s) w "
                "WHERE w.before < %s) c JOIN"
            )
            admitted_params = [*admitted_params, within_rows, within_rows]
            admitted = "TRUE"
        cursor.execute(
            f"SELECT m.id, m.chat_id, c.chat_id, {self._updated_at_sql.format('c.updated_at')}, "
            f"m.position, m.visible_position FROM {source} {table(Message)} m ON m.chat_id = c.id "
            f"WHERE {admitted}{more} AND m.has_terms AND {condition} "
            f"ORDER BY {self._tie_order('m.position')} LIMIT %s",
            [*admitted_params, *more_params, *params, depth],
        )
        return [Candidate(row[0], mask, *row[1:]) for row in cursor.fetchall()]


def ranked_rows(rows: Sequence[Sequence[Any]]) -> Ranked:
    """The mask histogram and the candidates of rows of ``RowSource._ranked_columns``."""
    histogram = {row[0]: row[1] for row in rows}
    found = [Candidate(row[2], row[0], row[3], row[4], row[5], row[6], row[7]) for row in rows]
    return histogram, found
