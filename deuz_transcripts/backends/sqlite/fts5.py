"""SQLite FTS5: a contentless table of Python's terms plus scope and chat tokens.

The FTS5 body of a message is its stored terms and one token per scope field
and per chat, all separated by spaces, tokenized by the ``ascii`` tokenizer: it
splits on ASCII punctuation only and our terms hold letters and digits only, so
FTS5 sees exactly Python's terms. Scope tokens (private-use prefix, never in a
term) let FTS5 intersect the scope inside its own index instead of joining.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import Any, ClassVar

from django.db.backends.utils import CursorWrapper

from ... import ranking
from ...models import Chat, Message
from ...text import stored_term
from ..base import Candidate, Known, Ranked, RowSource, fetch_int, mask_sql, more_than_by_counts
from ..candidates import MaskTier
from ..chat_filter import ChatFilter, table
from ..engine_counts import EngineCounts, RareTerms
from .common import FTS_TABLE, UPDATED_AT_TEXT
from .fts5_expressions import (
    HeldTerms,
    chat_token,
    fts_body,
    holding_expression,
    mask_expression,
    match_expression,
    phrase,
    reaching_expression,
    role_token,
    token_expression,
    word_condition,
)
from .fts5_policy import Fts5Policy
from .fts5_rows import Fts5Rows
from .scope_scan import one_pass_matches_sql, scanned_candidates

#: Up to this many masks of a longer query are read by one exact FTS5 query each (the
#: positive terms' doclists merged, the others excluded) rather than by computing every
#: match's mask (a cursor's next page of five words: 2 x 200+ ms at 1M).
_EXACT_MASKS_MAX = 4
#: A scope's per-chat counts are summed this many chats at a time (``total_past``).
_COUNTS_STEP = 64

#: Per connection, in ``temp``: FTS5's vocabulary (a term's rows), for unfiltered counts.
FTS_VOCAB = "deuz_transcripts_fts_vocab"

__all__ = [
    "Fts5Counts",
    "Fts5RowSource",
    "Fts5Rows",
    "chat_token",
    "fts_body",
]


class Fts5RowSource(RowSource):
    """Rows found inside FTS5 (scope tokens in the MATCH), small scopes by scan."""

    _updated_at_sql = UPDATED_AT_TEXT
    # Without the hint SQLite sorts every row of the scope before the LIMIT; with it, it
    # walks chats newest first (sorting only ties) and stops at the LIMIT.
    _walk_join = "INDEXED BY deuz_chat_updated CROSS JOIN"
    role_tokens = True  # every FTS row holds its message's role token (migration 0003)
    policy: Fts5Policy

    def candidates(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str], depth: int, total: int
    ) -> Ranked:
        """FTS5, or for a long query in a small scope a scan of the scope's rows.

        FTS5 ANDs the scope token's short doclist with each term's, seeking the term's
        to each of the scope's rows (its doclist index), so a common word costs about
        the scope's rows, not the corpus' (a word in 665,000 of 1M rows, in a
        250-message scope: 0.1-0.5 ms), a rare word less, and neither grows with the
        text. A query of ``scan_python_min_terms`` terms or more costs a subquery (or an
        ``instr``) per term; a scope of at most ``SQLITE_SCAN_SCOPE_MAX`` indexed messages
        is then cheaper to read once, each row's mask found in Python (``sqlite.scope_scan``).
        """
        if _scans(chats, total, self.policy) and len(terms) >= self.policy.scan_python_min_terms:
            return scanned_candidates(cursor, chats, terms, depth)
        return super().candidates(cursor, chats, terms, depth, total)

    def _candidate_matches_sql(
        self, chats: ChatFilter, terms: Sequence[str], total: int
    ) -> tuple[str, list[Any]]:
        """A small scope's matches found in one FTS5 pass, each row's mask by ``instr`` on
        the matched rows' own terms (``word_condition``): a subquery per term would seek
        each term's doclist to every row of the scope again."""
        if _scans(chats, total, self.policy):
            return one_pass_matches_sql(chats, terms)
        return self.matches_sql(chats, terms)

    def plans_masks(self, chats: ChatFilter, terms: Sequence[str], total: int) -> bool:
        """Masks are computed inside FTS5 for a query of any length; scanned scopes
        rank in one statement."""
        return total > self.policy.single_statement_max and not _scans(chats, total, self.policy)

    def mask_condition(self, alias: str, terms: Sequence[str], mask: int) -> tuple[str, list[Any]]:
        """``instr`` tests on the row's own terms (the walk reads rows newest first)."""
        sql: list[str] = []
        params: list[Any] = []
        for bit, term in enumerate(terms):
            condition, condition_params = word_condition(alias, term)
            sql.append(condition if mask >> bit & 1 else f"NOT ({condition})")
            params.extend(condition_params)
        return " AND ".join(sql), params

    def mask_matches_sql(
        self,
        chats: ChatFilter,
        terms: Sequence[str],
        masks: Collection[int] | MaskTier,
        expected: int | None = None,
    ) -> tuple[str, list[Any]]:
        """Rows of ``masks`` only, message rows read for those alone.

        Few terms: one exact FTS5 query per mask (``a NOT b``), the mask a constant.
        More: masks computed in FTS5 as for the histogram, then filtered. A tier: one
        ``MATCH`` of its least masks, the masks computed in FTS5.
        """
        if isinstance(masks, MaskTier):
            expression = reaching_expression(chats, terms, masks.least, masks.none_of)
            found, params = fts_masks(chats, terms, expression)
            where = "TRUE"
        elif len(terms) <= self.policy.few_terms or len(masks) <= _EXACT_MASKS_MAX:
            ordered = sorted(masks)
            found = " UNION ALL ".join(
                f"SELECT rowid AS id, {int(mask)} AS mask FROM {FTS_TABLE} "
                f"WHERE {FTS_TABLE} MATCH %s"
                for mask in ordered
            )
            params = [mask_expression(chats, terms, mask) for mask in ordered]
            where = "TRUE"
        else:
            found, params = fts_masks(chats, terms, match_expression(chats, terms))
            where = f"f.mask IN ({', '.join(str(int(mask)) for mask in sorted(masks))})"
        more, more_params = chats.token_sql(few=self.few_rows(expected))
        return (
            "SELECT m.id, f.mask, m.chat_id AS chat_pk, m.position, m.visible_position "
            f"FROM ({found}) f JOIN {table(Message)} m ON m.id = f.id WHERE {where}{more}",
            [*params, *more_params],
        )

    def count_with_all_terms(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str], cap: int
    ) -> int:
        """FTS5 alone (scope and role tokens AND every term): no message row is read
        (window filters: the rows FTS5 finds are read)."""
        if not chats.tokens_suffice:
            # FTS5 finds the rows holding every term; only those rows are read for the
            # window conditions (a scan of the scope would read every row)
            more, more_params = chats.token_sql()
            cursor.execute(
                f"SELECT count(*) FROM (SELECT 1 FROM {FTS_TABLE} f JOIN {table(Message)} m "
                f"ON m.id = f.rowid WHERE {FTS_TABLE} MATCH %s{more} LIMIT %s)",
                [match_expression(chats, terms, every=True), *more_params, cap],
            )
            return fetch_int(cursor)
        cursor.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s LIMIT %s)",
            [match_expression(chats, terms, every=True), cap],
        )
        return fetch_int(cursor)

    def matches_more_than(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str], cap: int
    ) -> bool:
        """Where tokens say which rows are admitted, each term's n_t in FTS5 (doclist
        counts, each up to ``cap + 1``) decide first: one past ``cap`` says yes, all
        together within it no; two terms in between pass it exactly when fewer than
        ``n_a + n_b - cap`` rows hold both, counted up to there (rows holding both are far
        fewer than the union's ``cap + 1``). Else the matches are counted up to ``cap + 1``."""
        if chats.tokens_suffice:
            counts = matched_counts(cursor, chats, terms, cap + 1)
            decided = more_than_by_counts(counts, cap)
            if decided is not None:
                return decided
            if len(terms) == 2:
                bound = sum(counts) - cap
                return self.count_with_all_terms(cursor, chats, terms, bound) < bound
        return super().matches_more_than(cursor, chats, terms, cap)

    def rows_with_terms(
        self,
        cursor: CursorWrapper,
        chats: ChatFilter,
        terms: Sequence[str],
        wanted: int,
        skipped: Collection[int],
        expected: int | None = None,
    ) -> list[Candidate]:
        """FTS5 finds the rows of ``wanted``; each row's mask is read from its own terms
        (``HeldTerms``), and rows holding a ``skipped`` term are dropped there: a
        ``NOT (s1 OR s2 ...)`` in the ``MATCH`` loads every skipped term's doclist to
        drop a few rows (~8 ms of a 32-term query's 22 reads, to drop 3 rows of 3,017)."""
        dropped = sum(1 << position for position in skipped)
        rows = self._rows_holding(
            cursor, chats, holding_expression(chats, terms[wanted], []), expected
        )
        held = HeldTerms(terms)
        masks = [(row, held.mask(row[1])) for row in rows]
        return [Candidate(row[0], mask, *row[2:]) for row, mask in masks if not mask & dropped]

    def rows_with_any_terms(
        self,
        cursor: CursorWrapper,
        chats: ChatFilter,
        terms: Sequence[str],
        wanted: Collection[int],
        expected: int | None = None,
    ) -> list[Candidate]:
        """One ``MATCH`` of ``scope AND (w1 OR w2 ...)``: the scope's doclist is read once,
        not once per term."""
        expression = match_expression(chats, [terms[position] for position in sorted(wanted)])
        rows = self._rows_holding(cursor, chats, expression, expected)
        held = HeldTerms(terms)
        return [Candidate(row[0], held.mask(row[1]), *row[2:]) for row in rows]

    def _rows_holding(
        self, cursor: CursorWrapper, chats: ChatFilter, expression: str, expected: int | None
    ) -> list[tuple[Any, ...]]:
        """``(id, search_text, chat pk, chat id, updated_at, position, visible_position)``
        of the rows FTS5 finds for ``expression`` that the filter admits (``expected``
        rows at most, when known: few are checked against a window chat by chat)."""
        more, more_params = chats.token_sql(few=self.few_rows(expected))
        cursor.execute(
            f"SELECT m.id, m.search_text, m.chat_id, c.chat_id, "
            f"{self._updated_at_sql.format('c.updated_at')}, m.position, m.visible_position "
            f"FROM {FTS_TABLE} f "
            f"JOIN {table(Message)} m ON m.id = f.rowid JOIN {table(Chat)} c ON c.id = m.chat_id "
            f"WHERE {FTS_TABLE} MATCH %s{more}",
            [expression, *more_params],
        )
        return list(cursor.fetchall())

    def matches_sql(self, chats: ChatFilter, terms: Sequence[str]) -> tuple[str, list[Any]]:
        """Matches from FTS5 (scope tokens inside the MATCH); each term's rowids read once."""
        found, params = fts_masks(chats, terms, match_expression(chats, terms))
        more, more_params = chats.token_sql()
        return (
            "SELECT m.id, f.mask, m.chat_id AS chat_pk, m.position, m.visible_position "
            f"FROM ({found}) f JOIN {table(Message)} m ON m.id = f.id WHERE TRUE{more}",
            [*params, *more_params],
        )


class Fts5Counts(EngineCounts):
    """N, n_t, histograms and totals counted in FTS5's doclists: no message row read."""

    rare_terms: ClassVar[RareTerms] = "by_index_counts"
    policy: Fts5Policy

    def total_past(
        self, cursor: CursorWrapper, chats: ChatFilter, past: int
    ) -> tuple[int, bool] | None:
        """A scope's per-chat counts summed as SQLite steps through them (``fetchmany``
        steps the statement), stopping past ``past``: a big user's N costs its first
        chats, not all of them (1.4 ms for the 50,000-message user at 1M). With roles
        from role tokens, past that the scope's rows of those roles are counted in FTS5
        up to ``past`` (``_roles_past``)."""
        if not chats.scope:
            return None
        past = max(past, self.policy.scan_scope_max)  # a smaller scope's routes need N
        if chats.roles is not None:
            return self._roles_past(cursor, chats, past)
        sql, params = chats.chat_counts_sql()
        cursor.execute(sql, params)
        total = 0
        while rows := cursor.fetchmany(_COUNTS_STEP):
            total += sum(count for (count,) in rows if count)
            if total > past:
                return total, False
        return total, True

    def _roles_past(
        self, cursor: CursorWrapper, chats: ChatFilter, past: int
    ) -> tuple[int, bool] | None:
        """``total_past`` with roles: the scope without them summed as far as ``past``
        (a scope within it has its N counted as ``total`` counts it), then the FTS rows
        of the scope and role tokens counted up to one past ``past``. Counted whole, the
        role token's doclist was merged with every row of the scope."""
        if not (chats.role_tokens and chats.tokens_suffice):
            return None
        whole = self.total_past(cursor, replace(chats, roles=None), past)
        assert whole is not None
        size, exact = whole
        if exact:
            return self._roles_total(cursor, chats, size), True
        cursor.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s LIMIT %s)",
            [token_expression(chats), past + 1],
        )
        total = fetch_int(cursor)
        return total, total <= past

    def _reads_scope_rows(self, size: int) -> bool:
        return size <= self.policy.scan_scope_max

    def _token_total(self, cursor: CursorWrapper, chats: ChatFilter) -> int:
        """The FTS rows holding the scope, chat and role tokens: no message row read.
        Roles alone (unscoped) are summed from FTS5's vocabulary: every FTS row holds one
        role token, and the vocabulary counts a doclist without stepping a statement per
        row (``term_counts``)."""
        if not chats.scope and chats.chat_ids is None and chats.roles is not None:
            return sum(vocabulary_rows(cursor, [role_token(role) for role in chats.roles]))
        cursor.execute(
            f"SELECT count(*) FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s",
            [token_expression(chats)],
        )
        return fetch_int(cursor)

    def mask_histogram(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str]
    ) -> dict[int, int]:
        """Counted in FTS5 alone: no message row is read (that lookup is what costs).
        Roles are tokens too; window filters need the rows: counted from the matches."""
        if not chats.tokens_suffice:
            return super().mask_histogram(cursor, chats, terms)
        if len(terms) <= self.policy.few_terms:
            subsets = range(1, 1 << len(terms))
            cursor.execute(
                " UNION ALL ".join(
                    f"SELECT {subset}, (SELECT count(*) FROM {FTS_TABLE} "
                    f"WHERE {FTS_TABLE} MATCH %s)"
                    for subset in subsets
                ),
                [
                    match_expression(
                        chats, [t for bit, t in enumerate(terms) if subset >> bit & 1], every=True
                    )
                    for subset in subsets
                ],
            )
            together = {int(subset): int(count) for subset, count in cursor.fetchall()}
            return ranking.masks_from_subset_counts(together, len(terms))
        masks, params = fts_masks(chats, terms, match_expression(chats, terms))
        cursor.execute(f"SELECT f.mask, count(*) FROM ({masks}) f GROUP BY f.mask", params)
        return {int(mask): int(count) for mask, count in cursor.fetchall()}

    def counts_terms(self, chats: ChatFilter, total: int) -> bool:
        return chats.tokens_suffice and not _scans(chats, total, self.policy)

    def term_counts(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str]
    ) -> list[int]:
        """Each term's rows in the filter, counted in FTS5 alone (doclists, no row read).

        Unfiltered, FTS5's own vocabulary counts them (an ``fts5vocab`` table of this
        connection's ``temp`` schema: nothing stored): every FTS row is a searchable
        message, and the vocabulary counts a doclist without stepping a statement per
        row (half the time of ``count(*)`` over a ``MATCH``).
        """
        if not chats.scope and chats.chat_ids is None and chats.roles is None:
            return vocabulary_rows(cursor, [stored_term(term) for term in terms])
        return matched_counts(cursor, chats, terms, None)

    def capped_term_counts(
        self, cursor: CursorWrapper, terms: Sequence[str], cap: int
    ) -> list[int]:
        """Each term's rows in the whole index, counted up to ``cap`` (FTS5 stops there):
        a rare term costs its few rowids, a common one ``cap`` of them."""
        cursor.execute(
            " UNION ALL ".join(
                f"SELECT {position}, (SELECT count(*) FROM (SELECT 1 FROM {FTS_TABLE} "
                f"WHERE {FTS_TABLE} MATCH %s LIMIT %s))"
                for position in range(len(terms))
            ),
            [param for term in terms for param in (phrase(stored_term(term)), cap)],
        )
        counts = dict(cursor.fetchall())
        return [int(counts[position]) for position in range(len(terms))]

    def count_matches(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str], known: Known = None
    ) -> int:
        """FTS5 alone when tokens say which rows are admitted (it merges doclists)."""
        if not chats.tokens_suffice:
            return super().count_matches(cursor, chats, terms)
        cursor.execute(
            f"SELECT count(*) FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s",
            [match_expression(chats, terms)],
        )
        return fetch_int(cursor)


def _scans(chats: ChatFilter, total: int, policy: Fts5Policy) -> bool:
    """Whether a scope of N ``total`` is small enough to scan its own rows."""
    scoped = bool(chats.scope) or chats.chat_ids is not None
    return scoped and total <= policy.scan_scope_max


def fts_masks(chats: ChatFilter, terms: Sequence[str], match: str) -> tuple[str, list[Any]]:
    """``SELECT rowid, mask`` of the FTS5 rows ``match`` finds: FTS5 alone, no row read."""
    conditions = [
        f"{FTS_TABLE}.rowid IN (SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s)"
        for _ in terms
    ]
    params = [match_expression(chats, [term]) for term in terms]
    if len(terms) == 1:
        conditions, params = ["1"], []
    return (
        f"SELECT {FTS_TABLE}.rowid AS id, {mask_sql(conditions)} AS mask FROM {FTS_TABLE} "
        f"WHERE {FTS_TABLE} MATCH %s",
        [*params, match],
    )


def vocabulary_rows(cursor: CursorWrapper, tokens: Sequence[str]) -> list[int]:
    """The FTS rows holding each of ``tokens`` (stored terms or tokens), from FTS5's
    vocabulary: an ``fts5vocab`` table of this connection's ``temp`` schema (nothing
    stored)."""
    cursor.execute(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{FTS_VOCAB} "
        f"USING fts5vocab(main, {FTS_TABLE}, 'row')"
    )
    cursor.execute(
        f"SELECT term, doc FROM temp.{FTS_VOCAB} WHERE term IN ({', '.join(['%s'] * len(tokens))})",
        list(tokens),
    )
    found = dict(cursor.fetchall())
    return [int(found.get(token, 0)) for token in tokens]


def matched_counts(
    cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str], cap: int | None
) -> list[int]:
    """Each term's rows (with the filter's tokens) counted over its ``MATCH``, up to
    ``cap`` (``None``: all), in one statement."""
    rows = f"FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s"
    if cap is not None:
        rows = f"FROM (SELECT 1 {rows} LIMIT {int(cap)})"
    cursor.execute(
        " UNION ALL ".join(
            f"SELECT {position}, (SELECT count(*) {rows})" for position in range(len(terms))
        ),
        [match_expression(chats, [term]) for term in terms],
    )
    counts = dict(cursor.fetchall())
    return [int(counts[position]) for position in range(len(terms))]
