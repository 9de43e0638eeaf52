"""PostgreSQL: a ``tsvector`` of Python's terms per message, searched through GIN.

The vector is built with ``array_to_tsvector`` from the terms Python extracted,
never by PostgreSQL's parser, so it holds exactly the in-memory index's terms
(``simple`` semantics: no stemming, no stop words), plus one lexeme per scope field,
one for the chat and one for the message's role (private-use prefix, never in a
term). A search's scope, chat ids and roles are lexemes of its tsquery, so GIN
intersects them with the query terms
and only matching rows of the scope are read: a big scope costs its matches, not
its messages, and no chat join is planned. A query term becomes a quoted tsquery
lexeme; terms are letters and digits only, so no input can reach tsquery syntax.
The rows and their vectors are written by ``postgresql.rows``.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

from django.db.backends.utils import CursorWrapper

from ...models import Chat, Message
from ...text import stored_term
from ..base import Candidate, Ranked, RowSource, fetch_int, mask_sql, more_than_by_counts
from ..candidates import MaskTier
from ..chat_filter import ChatFilter, table
from .counts.statistics import PostgresStoredCounts
from .counts.stored import (
    each_stored_or_null,
    lexeme_stored_sql,
    per_term_array,
    stored_or,
    tenant_counted_sql,
)
from .counts.subsets import count_subsets, either_of_two_more_than, gin_count, gin_count_of
from .policy import PostgresPolicy
from .session import bitmap_scans as _bitmap_scans
from .session import bitmap_scans_free, keep_bitmap_scans
from .storage import VECTOR_COLUMN
from .tsquery import (
    every_term_tsquery,
    filtered_tsquery,
    mask_tsquery,
    tsquery_literal,
    uses_lexemes,
)

if TYPE_CHECKING:
    pass

__all__ = ["BIG_TENANTS", "PostgresRowSource"]

#: Per database alias, the tenants whose N a search of this process found past the
#: one-statement size (at most one per that many messages; a backend lives one search, so
#: this outlives it). Never forgotten: a tenant that shrank costs a search some planning,
#: not a wrong result.
BIG_TENANTS: dict[str, set[str]] = {}


class PostgresRowSource(RowSource):
    """Rows found through GIN (scope, chat and role lexemes ANDed with the terms), or a
    small scope's own rows through the chat btree; capped counts from the stored counts
    where they decide."""

    chat_id_order = 'c.chat_id COLLATE "C"'
    #: Microseconds since the epoch: an integer loads in a tenth of a ``timestamptz``'s
    #: time in psycopg (~4 us each), and a 32-term page's candidates are ~185 rows.
    _updated_at_sql = "(EXTRACT(EPOCH FROM {}) * 1000000)::bigint"
    role_tokens = True  # every vector holds its message's role lexeme (migration 0003)
    tests_tenant = True

    policy: PostgresPolicy

    def __init__(self, alias: str, policy: PostgresPolicy, stored: PostgresStoredCounts) -> None:
        super().__init__(alias, policy)
        self.stored = stored
        self._big_tenants = BIG_TENANTS.setdefault(alias, set())

    def chat_join(self, chat_pk: str, expected: int | None = None) -> str:
        """A known few rows look their chats up one by one through the primary key: a
        ``LATERAL`` subquery with ``LIMIT`` is never flattened into a join. PostgreSQL's
        default costs otherwise hash the whole chat table for them (1M messages, 62,185
        chats: 18.6 ms for 108 rows where the lookups take 1.6 ms; bench/RESULTS.md)."""
        if not self.few_rows(expected):
            return super().chat_join(chat_pk, expected)
        return (
            "CROSS JOIN LATERAL (SELECT c.id, c.chat_id, c.updated_at "
            f"FROM {table(Chat)} c WHERE c.id = {chat_pk} LIMIT 1) c"
        )

    def sized_candidates(
        self,
        cursor: CursorWrapper,
        chats: ChatFilter,
        terms: Sequence[str],
        depth: int,
        most: int,
    ) -> tuple[int, Ranked | None] | None:
        """N of the scope ``chats`` and, where it is at most ``most`` (at most
        ``one_statement_scope_max``), ``candidates`` in the same statement: a small
        scope's ranking needs N only to know it is small. A round trip saved: N is read
        whole here anyway (the stored counts' N where they are the filter's); ``None``
        with roles from role tokens, where which count pays off follows the scope's size.

        Where the counts are stored and N is past ``most``, every n_t comes in the same
        statement: the stored ones (what the walk's guess and the statistics read next),
        and, for a query longer than a walk takes and N past the sizes that rank every
        match, a counted tenant's words not stored (rare in the whole index, or new)
        counted in GIN: the essential-terms plan's statistics, in N's snapshot. Such a
        statement runs with the GIN counts' settings, as the rarest terms' rows read
        after it do, where that costs no ``set_config`` of its own (the search's first
        statement); else those words are counted later, as without it. The reads of a
        scope too small for the counts keep that mode (``keep_bitmap_scans``)."""
        total = self.stored.total_sql(chats)
        stored = self.stored.of(chats)
        if total is None or stored is None:
            if chats.roles is not None and chats.role_tokens and chats.tokens_suffice:
                return None
            return self._sized_candidates_of(cursor, chats.total_sql(), chats, terms, depth, most)[
                :2
            ]
        if stored.tenant is not None and stored.tenant not in self._big_tenants:
            # PostgreSQL plans a statement's subqueries whether they run or not: the n_t
            # come with N only for a tenant a search here found big (an unknown tenant,
            # mostly small, is read as before; a big one's first search then reads its
            # n_t in a statement of their own, once per process)
            size, read, _ = self._sized_candidates_of(cursor, total, chats, terms, depth, most)
            if size > most:
                self._big_tenants.add(stored.tenant)
            return size, read
        policy = self.policy
        counted = len(terms) > policy.few_terms and bitmap_scans_free(cursor)
        gate = max(policy.single_statement_max, policy.lexeme_scope_min)
        # arrays of every term's count: one subquery each to plan, however many terms
        past = [each_stored_or_null(terms, stored.tenant, stored.roles)]
        if counted:  # a counted tenant's words not stored, counted in GIN
            own, own_params = "TRUE", list[Any]()
            if stored.tenant is not None:
                own, own_params = tenant_counted_sql(stored.tenant)
            is_stored, is_stored_params = lexeme_stored_sql("q.lexeme", None)
            gin, gin_params = gin_count_of(chats, "q.query")
            condition = f"t.total > %s AND {own} AND NOT {is_stored}"
            queries = [filtered_tsquery(chats, tsquery_literal(term)) for term in terms]
            past.append(
                (
                    per_term_array(condition, gin, {"lexeme": "text", "query": "tsquery"}),
                    [
                        gate,
                        *own_params,
                        *is_stored_params,
                        *gin_params,
                        [stored_term(term) for term in terms],
                        queries,
                    ],
                )
            )
        mode = _bitmap_scans(self.alias, cursor) if counted else nullcontext()
        with mode:
            size, read, values = self._sized_candidates_of(
                cursor, total, chats, terms, depth, most, past
            )
        if counted and size <= gate:  # no n_t counted: a mid-size scope's reads follow
            keep_bitmap_scans(cursor)
        if size > most:
            self.stored.remember(terms, stored, values[0], values[1] if counted else [])
        return size, read

    def one_statement_scope_max(self) -> int:
        """The largest N of a scope that every plan ranks in one statement
        (``candidates``) whose matches are found as for any smaller N: up to
        ``rare_lexeme_scope_min`` messages a scope reads its own rows whatever its words
        (``PostgresMatches.sized``)."""
        policy = self.policy
        return min(
            policy.single_statement_max, policy.rare_lexeme_scope_min, policy.lexeme_scope_min
        )

    def mask_condition(self, alias: str, terms: Sequence[str], mask: int) -> tuple[str, list[Any]]:
        """One ``'a' & 'b' & !'c'`` tsquery: one vector test per row, GIN-searchable."""
        return f"{alias}.{VECTOR_COLUMN} @@ %s::tsquery", [mask_tsquery(terms, mask)]

    def matches_sql(self, chats: ChatFilter, terms: Sequence[str]) -> tuple[str, list[Any]]:
        return self._matches(chats, terms, " | ".join(tsquery_literal(term) for term in terms))

    def mask_matches_sql(
        self,
        chats: ChatFilter,
        terms: Sequence[str],
        masks: Collection[int] | MaskTier,
        expected: int | None = None,
    ) -> tuple[str, list[Any]]:
        """GIN finds the rows through one ``('a' & !'b') | ...`` tsquery of the masks, or
        a tier's ``('a' & 'b' | 'c' & 'd') & !'e'``."""
        few = self.few_rows(expected)
        if isinstance(masks, MaskTier):
            query = " | ".join(f"({every_term_tsquery(terms, m)})" for m in sorted(masks.least))
            absent = [
                f"!{tsquery_literal(term)}"
                for bit, term in enumerate(terms)
                if masks.none_of >> bit & 1
            ]
            return self._matches(chats, terms, " & ".join([f"({query})", *absent]), few=few)
        query = " | ".join(f"({mask_tsquery(terms, mask)})" for mask in sorted(masks))
        only = next(iter(masks)) if len(masks) == 1 else None
        return self._matches(chats, terms, query, only, few=few)

    def _matches(
        self,
        chats: ChatFilter,
        terms: Sequence[str],
        query: str,
        only: int | None = None,
        *,
        few: bool = False,
    ) -> tuple[str, list[Any]]:
        """Rows of ``query`` with their masks; ``only``: the query admits this one mask, a
        constant then (a vector test per term detoasts a long message's vector each time);
        ``few``: the rows are known to be few (``ChatFilter.token_sql``)."""
        if only is not None or len(terms) == 1:
            mask, literals = str(int(1 if only is None else only)), []
        else:
            mask = mask_sql([f"m.{VECTOR_COLUMN} @@ %s::tsquery" for _ in terms])
            literals = [tsquery_literal(term) for term in terms]
        select = (
            f"SELECT m.id, {mask} AS mask, m.chat_id AS chat_pk, m.position, "
            f"m.visible_position FROM {table(Message)} m WHERE "
        )
        if uses_lexemes(chats, self.policy):  # one GIN search of scope, chats and terms together
            more, more_params = chats.token_sql(few=few)
            return (
                f"{select}m.{VECTOR_COLUMN} @@ %s::tsquery{more}",
                [*literals, filtered_tsquery(chats, query), *more_params],
            )
        pks_sql, pks_params = chats.chat_pks_sql()
        more, more_params = chats.message_sql()
        return (
            f"{select}m.chat_id IN ({pks_sql}) AND m.{VECTOR_COLUMN} @@ %s::tsquery{more}",
            [*literals, *pks_params, query, *more_params],
        )

    def rows_with_terms(
        self,
        cursor: CursorWrapper,
        chats: ChatFilter,
        terms: Sequence[str],
        wanted: int,
        skipped: Collection[int],
        expected: int | None = None,
    ) -> list[Candidate]:
        """GIN finds the rows (``scope & wanted & !(skipped | ...)``); each row's mask is
        tested on its vector, for the terms the query admits (a ``skipped`` bit is 0)."""
        query = tsquery_literal(terms[wanted])
        if skipped:
            query += " & !(" + " | ".join(tsquery_literal(terms[p]) for p in sorted(skipped)) + ")"
        tested = [position for position in range(len(terms)) if position not in skipped]
        return self._rows_of(cursor, chats, terms, query, tested, expected)

    def rows_with_any_terms(
        self,
        cursor: CursorWrapper,
        chats: ChatFilter,
        terms: Sequence[str],
        wanted: Collection[int],
        expected: int | None = None,
    ) -> list[Candidate]:
        """One GIN search of ``scope & (w1 | w2 ...)``: the rare terms' rows in one
        statement, not one statement (and its settings) per term."""
        query = " | ".join(tsquery_literal(terms[position]) for position in sorted(wanted))
        return self._rows_of(cursor, chats, terms, query, range(len(terms)), expected)

    def _rows_of(
        self,
        cursor: CursorWrapper,
        chats: ChatFilter,
        terms: Sequence[str],
        query: str,
        tested: Sequence[int],
        expected: int | None,
    ) -> list[Candidate]:
        """The filter's rows of ``query``, each with its mask over the ``tested`` terms."""
        more, more_params = chats.token_sql(few=self.few_rows(expected))
        with _bitmap_scans(self.alias, cursor):
            cursor.execute(
                "SELECT m.id, ("
                + " + ".join(
                    f"(CASE WHEN m.{VECTOR_COLUMN} @@ %s::tsquery THEN {1 << p} ELSE 0 END)"
                    for p in tested
                )
                + f"), m.chat_id, c.chat_id, {self._updated_at_sql.format('c.updated_at')}, "
                "m.position, m.visible_position "
                f"FROM {table(Message)} m {self.chat_join('m.chat_id', expected)} "
                f"WHERE m.{VECTOR_COLUMN} @@ %s::tsquery{more}",
                [
                    *(tsquery_literal(terms[p]) for p in tested),
                    filtered_tsquery(chats, query),
                    *more_params,
                ],
            )
            return [Candidate(*row) for row in cursor.fetchall()]

    def count_with_all_terms(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str], cap: int
    ) -> int:
        """Rows of the chats holding every term, up to ``cap``: a one-term query's stored
        count in a tenant scope (one row, where GIN merges the word's and the tenant's
        whole posting lists: 9-24 ms for a common word and a 50,000-message tenant at 1M),
        else GIN alone when it filters the scope. Not unscoped: its stored count sums a
        row per tenant, where GIN stops after ``cap`` rows."""
        stored = self.stored.of(chats)
        if len(terms) == 1 and stored is not None and stored.tenant is not None:
            (count,) = self.stored.counts_of(cursor, terms, stored)
            if count is not None:
                return min(count, cap)
        if not uses_lexemes(chats, self.policy):
            return super().count_with_all_terms(cursor, chats, terms, cap)
        query = filtered_tsquery(chats, mask_tsquery(terms, (1 << len(terms)) - 1))
        more, more_params = chats.token_sql()
        cursor.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM {table(Message)} m "
            f"WHERE m.{VECTOR_COLUMN} @@ %s::tsquery{more} LIMIT %s) AS probe",
            [query, *more_params, cap],
        )
        return fetch_int(cursor)

    def matches_more_than(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str], cap: int
    ) -> bool:
        """Decided from each term's n_t where the filter's counts are stored (a term not
        counted is counted in GIN up to ``cap + 1``, in the same statement): one term past
        ``cap`` says yes, all together within it no; in between, two terms count the rows
        holding both (``either_of_two_more_than``), more terms their matches up to
        ``cap + 1``."""
        stored = self.stored.of(chats)
        if stored is None or not uses_lexemes(chats, self.policy):
            return super().matches_more_than(cursor, chats, terms, cap)
        columns = {
            position: stored_or(
                term,
                stored.tenant,
                stored.roles,
                gin_count(chats, filtered_tsquery(chats, tsquery_literal(term)), cap + 1),
            )
            for position, term in enumerate(terms)
        }
        if len(terms) == 2:
            both = filtered_tsquery(chats, every_term_tsquery(terms, 0b11))
            # no sequential scan: GIN overestimates an AND's rows, and a LIMIT would then
            # make reading the table until the bound look cheaper (it is never reached
            # when fewer rows hold both: the whole table read)
            with _bitmap_scans(self.alias, cursor):
                return either_of_two_more_than(cursor, chats, both, (columns[0], columns[1]), cap)
        decided = more_than_by_counts(list(count_subsets(cursor, columns).values()), cap)
        if decided is not None:
            return decided
        return super().matches_more_than(cursor, chats, terms, cap)
