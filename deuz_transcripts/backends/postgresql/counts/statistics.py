"""PostgreSQL's counts: N, each term's n_t, the mask histogram and a search's exact total,
read from the stored counts where they are the filter's (``postgresql.counts.stored``) and
counted in GIN otherwise, never by reading a matching row's vector: a GIN count only
checks each found row's visibility. ``PostgresMatcher`` reads rows on top of these."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from django.db.backends.utils import CursorWrapper

from .... import ranking
from ....models import Message
from ...base import Candidate, Known, SearchMatcher, fetch_int, more_than_by_counts
from ...chat_filter import ChatFilter, table
from ...policy import PlanPolicy
from ..session import bitmap_scans as _bitmap_scans
from ..session import bitmap_scans_free, keep_bitmap_scans
from ..storage import VECTOR_COLUMN
from ..tsquery import every_term_tsquery, filter_parts, filtered_tsquery, tsquery_literal
from .index_figures import IndexTermCounts, index_term_counts
from .stored import (
    COUNTED_TENANT_MIN_ROWS,
    StoredCounts,
    is_stored_sql,
    stored_or,
    stored_term_counts,
    stored_total,
    tenant_counted_sql,
)
from .subsets import (
    count_subsets,
    either_of_two_more_than,
    gin_count,
    gin_rows,
    subsets_beat_reading,
    subsets_visit_fewer,
    union_size,
)

__all__ = ["PostgresCounts"]

#: Whose n_t: the terms, the tenant (``None``: every tenant) and the roles.
_CountsKey = tuple[tuple[str, ...], str | None, frozenset[str] | None]


class PostgresCounts(SearchMatcher):
    """N, n_t, histograms and totals of PostgreSQL searches (stored or GIN counts)."""

    def __init__(self, alias: str, policy: PlanPolicy) -> None:
        super().__init__(alias, policy)
        #: ``index_counts`` already read: a matcher serves one search (``get_backend``
        #: makes one per call), whose route and walk guess both need them
        self._index_counts: dict[tuple[tuple[str, ...], frozenset[str] | None], IndexTermCounts]
        self._index_counts = {}
        #: N of each filter already asked (``total``), for the same reason
        self._totals: list[tuple[ChatFilter, int]] = []
        #: stored n_t already read (``stored_counts``): the walk's guess, the probe and
        #: the ranking of one search ask for the same ones
        self._stored_counts: dict[_CountsKey, list[int | None]] = {}
        #: n_t of the terms not stored, counted in GIN in N's statement (``sized_candidates``)
        self._sized_counts: dict[_CountsKey, list[int | None]] = {}

    def index_counts(
        self, cursor: CursorWrapper, terms: Sequence[str], roles: frozenset[str] | None
    ) -> IndexTermCounts:
        """The whole index's counts of ``terms`` (``index_term_counts``), read once."""
        key = (tuple(terms), roles)
        if key not in self._index_counts:
            self._index_counts[key] = index_term_counts(cursor, terms, roles)
        return self._index_counts[key]

    @staticmethod
    def stored_counts_of(chats: ChatFilter) -> StoredCounts | None:
        """Whose stored term counts are this filter's n_t and N: a tenant's or every
        tenant's, of the filter's roles; ``None`` when the filter admits less than whole
        tenants (other scope fields, chat ids, a window): those are counted in GIN."""
        if not chats.searchable_only or not chats.tokens_suffice or chats.chat_ids is not None:
            return None
        if not chats.scope:
            return StoredCounts(None, chats.roles)
        return StoredCounts(chats.tenant, chats.roles) if chats.tenant_only else None

    def stored_counts(
        self, cursor: CursorWrapper, terms: Sequence[str], stored: StoredCounts
    ) -> list[int | None]:
        """Each term's stored count in ``stored``'s tenant and roles (``None``: not
        stored), read once per search (``stored_term_counts``)."""
        key = _counts_key(terms, stored)
        if key not in self._stored_counts:
            self._stored_counts[key] = stored_term_counts(
                cursor, terms, stored.tenant, stored.roles
            )
        return self._stored_counts[key]

    def stores_term_counts(self, chats: ChatFilter) -> bool:
        return self.stored_counts_of(chats) is not None

    def sized_candidates(
        self,
        cursor: CursorWrapper,
        chats: ChatFilter,
        terms: Sequence[str],
        depth: int,
        most: int,
    ) -> tuple[int, tuple[dict[int, int], list[Candidate]] | None] | None:
        """As every backend, and where the filter's counts are stored and N is past
        ``most``, every n_t in the same statement: the stored ones (what the walk's guess
        and the statistics read next), and, for a query longer than a walk takes and N
        past the sizes that rank every match, the others counted in GIN (the statistics
        come next: the essential-terms plan). N and the n_t then share one snapshot and
        one statement. Such a statement runs with the GIN counts' settings, as the rows
        of the rarest terms read after it do (``bitmap_scans``), where that costs no
        ``set_config`` of its own (the search's first statement): else its terms not
        stored are counted later, as without it. The reads of a scope too small for
        the counts keep that mode (``keep_bitmap_scans``)."""
        stored = self.stored_counts_of(chats)
        if stored is None:
            return super().sized_candidates(cursor, chats, terms, depth, most)
        policy = self.policy
        counted = len(terms) > policy.walk_max_terms and bitmap_scans_free(cursor)
        gate = max(policy.single_statement_max, policy.lexeme_scope_min)
        past: list[tuple[str, list[Any]]] = []
        for term in terms:
            past.append(stored_or(term, stored.tenant, stored.roles, ("NULL", [])))
            if counted:  # a rare or new word of a counted tenant (or of every tenant)
                is_stored, is_stored_params = is_stored_sql(term, stored.tenant)
                own, own_params = "TRUE", list[Any]()
                if stored.tenant is not None:
                    own, own_params = tenant_counted_sql(stored.tenant)
                gin, gin_params = gin_count(chats, filtered_tsquery(chats, tsquery_literal(term)))
                past.append(
                    (
                        f"CASE WHEN t.total > %s AND {own} AND NOT {is_stored} THEN {gin} END",
                        [gate, *own_params, *is_stored_params, *gin_params],
                    )
                )
        if counted:
            with _bitmap_scans(self.alias, cursor):
                sized = self._sized_read(cursor, chats, terms, depth, most, past)
        else:
            sized = self._sized_read(cursor, chats, terms, depth, most, past)
        if sized is None:
            return None
        size, read, values = sized
        if counted and size <= gate:  # no n_t counted: a mid-size scope's reads follow
            keep_bitmap_scans(cursor)
        if size > most:
            key = _counts_key(terms, stored)
            step = 2 if counted else 1
            found = values[::step]
            self._stored_counts[key] = [None if n is None else int(n) for n in found]
            if counted:
                self._sized_counts[key] = [None if n is None else int(n) for n in values[1::2]]
        return size, read

    def stored_density(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str]
    ) -> tuple[int, list[int]] | None:
        """N and each n_t from the stored counts: one statement for the n_t (a term not
        counted, rare or new, ends it there), and one for N unless the filter knows it.
        A date window gets the figures of the search without it (a window filters hits
        only, SPEC §8): as a walk's guess, they only bound a walk of the window's rows."""
        whole = chats.without_window() if chats.windowed else chats
        stored = self.stored_counts_of(whole)
        if stored is None:
            return None
        counts = self.stored_counts(cursor, terms, stored)
        known = [count for count in counts if count is not None]
        if len(known) < len(counts):
            return None
        return self.total(cursor, whole) if whole.size is None else whole.size, known

    def index_density(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str]
    ) -> tuple[int, list[int]] | None:
        """A tenant of fewer than ``COUNTED_TENANT_MIN_ROWS`` messages (N known: so without
        counts of its own, but where one shrank since the tenants were chosen) guessed as
        dense as the whole index: its words' stored counts over every tenant against the
        table's estimated rows. A word not counted is rare, and a page of rows holding it
        is not to be guessed. A bigger tenant's own counts were ``stored_density``'s."""
        if chats.size is None or chats.size >= COUNTED_TENANT_MIN_ROWS:
            return None
        stored = self.stored_counts_of(chats)
        if stored is None or stored.tenant is None:
            return None
        counts = self.index_counts(cursor, terms, chats.roles)
        role_rows = [rows for rows in counts.role_rows if rows is not None]
        if not counts.table_rows or len(role_rows) < len(terms):
            return None
        return counts.table_rows, role_rows

    def total(self, cursor: CursorWrapper, chats: ChatFilter) -> int:
        """N from the stored counts where they are the filter's, else as every backend;
        read once per filter."""
        for seen, size in self._totals:
            if seen == chats:
                return size
        stored = self.stored_counts_of(chats)
        if stored is None:
            size = super().total(cursor, chats)
        else:
            size = stored_total(cursor, stored.tenant, stored.roles)
        self._totals.append((chats, size))
        return size

    def essential_min_terms(self, chats: ChatFilter) -> int:
        if self.stored_counts_of(chats) is not None:
            return self.policy.essential_min_terms_stored
        return super().essential_min_terms(chats)

    def token_total(self, cursor: CursorWrapper, chats: ChatFilter) -> int:
        """The vectors holding the scope, chat and role lexemes: one GIN count."""
        tenant, tenant_params = chats.tenant_sql()
        with _bitmap_scans(self.alias, cursor):
            cursor.execute(
                f"SELECT count(*) FROM {table(Message)} m "
                f"WHERE m.{VECTOR_COLUMN} @@ %s::tsquery{tenant}",
                [" & ".join(filter_parts(chats)), *tenant_params],
            )
            return fetch_int(cursor)

    def uses_lexemes(self, chats: ChatFilter) -> bool:
        """GIN filters the scope (big or unscoped searches, and ``routed`` ones), else the
        scope's rows are read."""
        return chats.by_tokens or chats.size is None or chats.size > self.policy.lexeme_scope_min

    def routed(self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str]) -> ChatFilter:
        """A mid-size scope (``rare_lexeme_scope_min`` to ``lexeme_scope_min`` messages) is
        filtered in GIN when the query terms' posting lists hold at most
        ``gin_rows_per_scope_row`` rows per message of the scope, over the whole index
        (stored counts; a term not counted holds fewer than ``COUNTED_MIN_ROWS``): GIN
        then reads fewer rows' worth than the scope's own rows cost through the chat
        btree. A word common in the whole index keeps the scope's rows: GIN would merge
        its posting list, which grows with the corpus. With no term ever counted, the
        terms' sizes are unknown: the scope's rows are read."""
        size = chats.size
        policy = self.policy
        if size is None or chats.by_tokens:
            return chats
        if not policy.rare_lexeme_scope_min < size <= policy.lexeme_scope_min:
            return chats
        rows = self.index_counts(cursor, terms, chats.roles).posting_rows()
        if rows is None or rows > policy.gin_rows_per_scope_row * size:
            return chats
        return replace(chats, by_tokens=True)

    def mask_histogram(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str]
    ) -> dict[int, int]:
        """Few terms of a GIN-filtered search: one count per term subset in one
        statement (inclusion-exclusion), so rows are only checked for visibility, never
        read; a term's own count is its stored count where it has one."""
        if len(terms) > self.policy.subset_count_max_terms or not self.uses_lexemes(chats):
            return super().mask_histogram(cursor, chats, terms)
        return ranking.masks_from_subset_counts(
            self._count_subsets(cursor, chats, terms), len(terms)
        )

    def _count_subsets(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str]
    ) -> dict[int, int]:
        """Every non-empty term subset's rows, in one statement (one snapshot): a term's
        own count as ``_term_count`` takes it, every other count in GIN."""
        stored = self.stored_counts_of(chats)
        columns = {}
        for subset in range(1, 1 << len(terms)):
            query = every_term_tsquery(terms, subset)
            if subset.bit_count() == 1:
                term = terms[subset.bit_length() - 1]
                columns[subset] = _term_count(chats, term, query, stored)
            else:
                columns[subset] = gin_count(chats, filtered_tsquery(chats, query))
        with _bitmap_scans(self.alias, cursor):
            return count_subsets(cursor, columns)

    def counts_terms(self, chats: ChatFilter, total: int) -> bool:
        """GIN (or the stored counts) give each n_t without reading rows where GIN filters
        the scope; a date window's rows (a windowed histogram's) are counted over its
        chats."""
        return chats.without_window().tokens_suffice and self.uses_lexemes(chats)

    def term_counts(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str]
    ) -> list[int]:
        """Each term's rows in the filter: stored (common terms of unscoped and tenant
        searches), or one GIN count per term (no vector is read).

        One statement per term, not one holding a subquery per term: a statement keeps
        every bitmap it built until it ends, and 30 counts of common words in one
        statement took 6.0 s at 1M messages (36 s on 16 partitions) where the same counts
        one by one take 2.6-3.5 s (bench/RESULTS.md, partitions by tenant). Only the
        words of a counted tenant that are not stored (rare in the whole index, or new)
        may come counted already, in N's statement (``sized_candidates``)."""
        stored = self.stored_counts_of(chats)
        counts: list[int | None] = (
            [None] * len(terms) if stored is None else self.stored_counts(cursor, terms, stored)
        )
        if stored is not None:  # the ones counted with N already (``sized_candidates``)
            sized = self._sized_counts.get(_counts_key(terms, stored), [])
            for position, count in enumerate(sized):
                if counts[position] is None:
                    counts[position] = count
        missing = [position for position, count in enumerate(counts) if count is None]
        if missing:  # the bitmap settings cost a savepoint and two statements: only for GIN
            with _bitmap_scans(self.alias, cursor):
                for position in missing:
                    sql, params = gin_rows(
                        chats, filtered_tsquery(chats, tsquery_literal(terms[position]))
                    )
                    cursor.execute(f"SELECT count(*) {sql}", params)
                    counts[position] = fetch_int(cursor)
        return [int(count or 0) for count in counts]

    def count_matches(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str], known: Known = None
    ) -> int:
        """GIN counts when GIN filters the scope and tokens say which rows are admitted:
        of the union, or, with N and every n_t ``known``, of the term subsets where that
        visits fewer rows (``subsets_visit_fewer``)."""
        if not (chats.tokens_suffice and self.uses_lexemes(chats)):
            return super().count_matches(cursor, chats, terms)
        if (
            known is not None
            and len(terms) <= self.policy.subset_count_max_terms
            and subsets_visit_fewer(*known)
        ):
            return union_size(self._count_subsets(cursor, chats, terms), len(terms))
        query = " | ".join(tsquery_literal(term) for term in terms)
        tenant, tenant_params = chats.tenant_sql()
        with _bitmap_scans(self.alias, cursor):
            cursor.execute(
                f"SELECT count(*) FROM {table(Message)} m "
                f"WHERE m.{VECTOR_COLUMN} @@ %s::tsquery{tenant}",
                [filtered_tsquery(chats, query), *tenant_params],
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
        stored = self.stored_counts_of(chats)
        if stored is None or not self.uses_lexemes(chats):
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

    def subset_histogram(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str], total: int
    ) -> dict[int, int] | None:
        """Every match's mask histogram from the terms' stored counts and one GIN count of
        each larger subset, where every n_t is stored and those counts visit fewer rows
        than the essential-terms plan reads for it (``subsets_beat_reading``)."""
        stored = self.stored_counts_of(chats)
        if (
            stored is None
            or not 2 <= len(terms) <= self.policy.subset_count_max_terms
            or not self.uses_lexemes(chats)
        ):
            return None
        counts = self.stored_counts(cursor, terms, stored)
        known = [count for count in counts if count is not None]
        if len(known) < len(counts) or not subsets_beat_reading(total, known):
            return None
        # the counts again, in the subsets' statement: one snapshot for all of them
        together = self._count_subsets(cursor, chats, terms)
        return ranking.masks_from_subset_counts(together, len(terms))


def _counts_key(terms: Sequence[str], stored: StoredCounts) -> _CountsKey:
    roles = None if stored.roles is None else frozenset(stored.roles)
    return tuple(terms), stored.tenant, roles


def _term_count(
    chats: ChatFilter, term: str, query: str, stored: StoredCounts | None
) -> tuple[str, list[Any]]:
    """Scalar SQL: ``term``'s rows in the filter (``query``: its tsquery): its ``stored``
    count where it is counted, else a GIN count."""
    counted = gin_count(chats, filtered_tsquery(chats, query))
    if stored is None:
        return counted
    return stored_or(term, stored.tenant, stored.roles, counted)
