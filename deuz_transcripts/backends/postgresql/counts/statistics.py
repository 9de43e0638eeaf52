"""PostgreSQL's counts: N, each term's n_t, the mask histogram and a search's exact total,
counted in GIN, never by reading a matching row's vector (a GIN count only checks each
found row's visibility; ``PostgresCounts``), and the stored counts where they are the
filter's (``PostgresStoredCounts``, over ``postgresql.counts.stored``), which the search's
statistics read first and these counts inline where one statement takes both. A term these
counted in GIN past the counted-term threshold is noted, to be marked for counting once
the search ends (``postgresql.counts.notes``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from django.db.backends.utils import CursorWrapper

from .... import ranking
from ....models import Message
from ....text import stored_term
from ...base import Known, RowSource, fetch_int
from ...chat_filter import ChatFilter, table
from ...engine_counts import Density, EngineCounts, RareTerms, StoredStatistics
from ..policy import PostgresPolicy
from ..session import bitmap_scans as _bitmap_scans
from ..storage import VECTOR_COLUMN
from ..tsquery import (
    every_term_tsquery,
    filter_parts,
    filtered_tsquery,
    tenant_sql,
    tsquery_literal,
    uses_lexemes,
)
from . import choice
from .index_figures import IndexTermCounts, index_term_counts
from .notes import send_notes
from .stored import (
    COUNTED_TENANT_MIN_ROWS,
    StoredCounts,
    stored_or,
    stored_term_counts,
    stored_total,
    stored_total_sql,
)
from .subsets import (
    count_subsets,
    gin_count,
    gin_rows,
    subsets_beat_reading,
    subsets_visit_fewer,
    union_size,
)

__all__ = ["PostgresCounts", "PostgresStoredCounts"]

#: Whose n_t: the terms, the tenant (``None``: every tenant) and the roles.
_CountsKey = tuple[tuple[str, ...], str | None, frozenset[str] | None]


class PostgresStoredCounts(StoredStatistics):
    """The stored per-tenant counts of one search, each read at most once."""

    def __init__(self, alias: str) -> None:
        self.alias = alias
        #: ``index_counts`` already read: a backend serves one search (``get_backend``
        #: makes one per call), whose route and walk guess both need them
        self._index_counts: dict[tuple[tuple[str, ...], frozenset[str] | None], IndexTermCounts]
        self._index_counts = {}
        #: stored n_t already read (``counts_of``): the walk's guess, the probe and the
        #: ranking of one search ask for the same ones
        self._stored_counts: dict[_CountsKey, list[int | None]] = {}
        #: n_t of the words not stored, counted in GIN in N's statement (``remember``)
        self._sized_counts: dict[_CountsKey, list[int | None]] = {}
        #: N read from the stored counts (``total``), by tenant and roles
        self._totals: dict[_CountsKey, int] = {}
        #: terms (stored forms) to be marked for counting once the search ends (``note``)
        self._noted: set[str] = set()

    @staticmethod
    def of(chats: ChatFilter) -> StoredCounts | None:
        """Whose stored term counts are this filter's n_t and N: a tenant's or every
        tenant's, of the filter's roles; ``None`` when the filter admits less than whole
        tenants (other scope fields, chat ids, a window): those are counted in GIN."""
        if not chats.searchable_only or not chats.tokens_suffice or chats.chat_ids is not None:
            return None
        if not chats.scope:
            return StoredCounts(None, chats.roles)
        return StoredCounts(chats.tenant, chats.roles) if chats.tenant_only else None

    def covers(self, chats: ChatFilter) -> bool:
        return self.of(chats) is not None

    def total(self, cursor: CursorWrapper, chats: ChatFilter) -> int:
        stored = self._required(chats)
        total = stored_total(cursor, stored.tenant, stored.roles)
        self._totals[_counts_key((), stored)] = total
        return total

    def total_sql(self, chats: ChatFilter) -> tuple[str, list[Any]] | None:
        """N of the filter as one statement reads it from the stored counts, where they
        are the filter's."""
        stored = self.of(chats)
        return None if stored is None else stored_total_sql(stored.tenant, stored.roles)

    def term_counts(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str]
    ) -> list[int | None]:
        return self.counts_of(cursor, terms, self._required(chats))

    def counts_of(
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

    def remember(
        self,
        terms: Sequence[str],
        stored: StoredCounts,
        counts: Sequence[Any],
        counted: Sequence[Any],
    ) -> None:
        """The n_t N's statement read (``PostgresRowSource.sized_candidates``): each term's
        stored count (``None``: not stored), and the ones ``counted`` in GIN there
        (``None``: not counted), which ``PostgresCounts.term_counts`` then takes."""
        key = _counts_key(terms, stored)
        self._stored_counts[key] = [None if n is None else int(n) for n in counts]
        if counted:
            self._sized_counts[key] = [None if n is None else int(n) for n in counted]

    def counted_with_size(self, chats: ChatFilter, terms: Sequence[str]) -> dict[str, int]:
        """The words of ``terms`` counted in GIN in N's statement, with their counts."""
        stored = self.of(chats)
        if stored is None:
            return {}
        for key, counted in self._sized_counts.items():
            if key[1:] == _counts_key((), stored)[1:]:
                return {
                    term: count
                    for term, count in zip(key[0], counted, strict=True)
                    if count is not None and term in terms
                }
        return {}

    def note(self, chats: ChatFilter, counted: Mapping[str, int]) -> None:
        """Note the terms of ``counted`` (n_t counted in GIN) past the counted-term
        threshold, in a filter whose stored counts would give them their n_t once they
        are counted (``serves_counted``): marked for counting once the search ends
        (``send_notes``). A filter's n_t is at most the term's rows in the whole index,
        so each of them is past the threshold there too."""
        stored = self.of(chats)
        if stored is None:
            return
        least = choice.COUNTED_MIN_ROWS  # read when used: the choice's threshold
        common = [term for term, count in counted.items() if count >= least]
        if common and self.serves_counted(stored, chats.size):
            read = self._read_counts(stored)
            self._noted.update(stored_term(term) for term in common if read.get(term) is None)

    def serves_counted(self, stored: StoredCounts, size: int | None) -> bool:
        """Whether ``stored``'s counts hold a term's n_t once it is counted: every
        tenant's do; a tenant's do where it is counted, as far as this search read
        (a stored n_t of it, or N's statement's GIN counts, which only a counted tenant
        makes), or where its N (``size``, or as read) is past the tenant threshold (a
        fold gives it its own counts). A smaller tenant's searches count every term in
        GIN, counted or not."""
        if stored.tenant is None:
            return True
        total = size if size is not None else self._totals.get(_counts_key((), stored))
        if total is not None and total >= choice.COUNTED_TENANT_MIN_ROWS:
            return True
        return any(
            key[1] == stored.tenant and any(count is not None for count in counts)
            for known in (self._stored_counts, self._sized_counts)
            for key, counts in known.items()
        )

    def send_notes(self) -> None:
        """Mark the terms noted for counting, after the search's transaction
        (``notes.send_notes``): nothing when none was noted."""
        if self._noted:
            noted, self._noted = self._noted, set()
            send_notes(self.alias, noted)

    def _read_counts(self, stored: StoredCounts) -> dict[str, int | None]:
        """The stored n_t this search read in ``stored``'s tenant and roles."""
        read: dict[str, int | None] = {}
        for key, counts in self._stored_counts.items():
            if key[1:] == _counts_key((), stored)[1:]:
                for term, count in zip(key[0], counts, strict=True):
                    if read.get(term) is None:
                        read[term] = count
        return read

    def index_counts(
        self, cursor: CursorWrapper, terms: Sequence[str], roles: frozenset[str] | None
    ) -> IndexTermCounts:
        """The whole index's counts of ``terms`` (``index_term_counts``), read once."""
        key = (tuple(terms), roles)
        if key not in self._index_counts:
            self._index_counts[key] = index_term_counts(cursor, terms, roles)
        return self._index_counts[key]

    def index_density(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str]
    ) -> Density | None:
        """A tenant of fewer than ``COUNTED_TENANT_MIN_ROWS`` messages (N known: so without
        counts of its own, but where one shrank since the tenants were chosen) guessed as
        dense as the whole index: its words' stored counts over every tenant against the
        table's estimated rows. A word not counted is rare, and a page of rows holding it
        is not to be guessed. A bigger tenant's own counts were its stored density."""
        if chats.size is None or chats.size >= COUNTED_TENANT_MIN_ROWS:
            return None
        stored = self.of(chats)
        if stored is None or stored.tenant is None:
            return None
        counts = self.index_counts(cursor, terms, chats.roles)
        role_rows = [rows for rows in counts.role_rows if rows is not None]
        if not counts.table_rows or len(role_rows) < len(terms):
            return None
        return counts.table_rows, role_rows

    def _required(self, chats: ChatFilter) -> StoredCounts:
        stored = self.of(chats)
        if stored is None:
            raise ValueError("the stored counts do not cover this filter")
        return stored


class PostgresCounts(EngineCounts):
    """N, n_t, histograms and totals of PostgreSQL searches, counted in GIN (a term's own
    stored count inlined where one statement counts term subsets)."""

    rare_terms: ClassVar[RareTerms] = (
        "by_filter_counts"  # every n_t is a stored count or one GIN count
    )
    stored: PostgresStoredCounts
    policy: PostgresPolicy

    def __init__(self, source: RowSource, stored: PostgresStoredCounts) -> None:
        super().__init__(source, stored)

    def _reads_scope_rows(self, size: int) -> bool:
        return size <= self.policy.lexeme_scope_min

    def _token_total(self, cursor: CursorWrapper, chats: ChatFilter) -> int:
        """The vectors holding the scope, chat and role lexemes: one GIN count."""
        tenant, tenant_params = tenant_sql(chats)
        with _bitmap_scans(self.source.alias, cursor):
            cursor.execute(
                f"SELECT count(*) FROM {table(Message)} m "
                f"WHERE m.{VECTOR_COLUMN} @@ %s::tsquery{tenant}",
                [" & ".join(filter_parts(chats)), *tenant_params],
            )
            return fetch_int(cursor)

    def mask_histogram(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str]
    ) -> dict[int, int]:
        """Few terms of a GIN-filtered search: one count per term subset in one
        statement (inclusion-exclusion), so rows are only checked for visibility, never
        read; a term's own count is its stored count where it has one."""
        if len(terms) > self.policy.few_terms or not uses_lexemes(chats, self.policy):
            return super().mask_histogram(cursor, chats, terms)
        return ranking.masks_from_subset_counts(
            self._count_subsets(cursor, chats, terms), len(terms)
        )

    def _count_subsets(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str]
    ) -> dict[int, int]:
        """Every non-empty term subset's rows, in one statement (one snapshot): a term's
        own count as ``_term_count`` takes it, every other count in GIN."""
        stored = self.stored.of(chats)
        columns = {}
        for subset in range(1, 1 << len(terms)):
            query = every_term_tsquery(terms, subset)
            if subset.bit_count() == 1:
                term = terms[subset.bit_length() - 1]
                columns[subset] = _term_count(chats, term, query, stored)
            else:
                columns[subset] = gin_count(chats, filtered_tsquery(chats, query))
        with _bitmap_scans(self.source.alias, cursor):
            return count_subsets(cursor, columns)

    def counts_terms(self, chats: ChatFilter, total: int) -> bool:
        """GIN (or the stored counts) give each n_t without reading rows where GIN filters
        the scope; a date window's rows (a windowed histogram's) are counted over its
        chats."""
        return chats.without_window().tokens_suffice and uses_lexemes(chats, self.policy)

    def term_counts(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str]
    ) -> list[int]:
        """Each term's rows in the filter, one GIN count per term (no vector is read).

        One statement per term, not one holding a subquery per term: a statement keeps
        every bitmap it built until it ends, and 30 counts of common words in one
        statement took 6.0 s at 1M messages (36 s on 16 partitions) where the same counts
        one by one take 2.6-3.5 s (bench/RESULTS.md, partitions by tenant). Only the
        words of a counted tenant that are not stored (rare in the whole index, or new)
        may come counted already, in N's statement (``counted_with_size``). A word past
        the counted-term threshold is noted for counting (``PostgresStoredCounts.note``)."""
        known = self.stored.counted_with_size(chats, terms)
        if all(term in known for term in terms):
            counts = [known[term] for term in terms]
        else:
            counts = []
            with _bitmap_scans(self.source.alias, cursor):
                for term in terms:
                    if term in known:
                        counts.append(known[term])
                        continue
                    sql, params = gin_rows(chats, filtered_tsquery(chats, tsquery_literal(term)))
                    cursor.execute(f"SELECT count(*) {sql}", params)
                    counts.append(fetch_int(cursor))
        self.stored.note(chats, dict(zip(terms, counts, strict=True)))
        return counts

    def count_matches(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str], known: Known = None
    ) -> int:
        """GIN counts when GIN filters the scope and tokens say which rows are admitted:
        of the union, or, with N and every n_t ``known``, of the term subsets where that
        visits fewer rows (``subsets_visit_fewer``)."""
        if not (chats.tokens_suffice and uses_lexemes(chats, self.policy)):
            return super().count_matches(cursor, chats, terms)
        if (
            known is not None
            and len(terms) <= self.policy.few_terms
            and subsets_visit_fewer(*known)
        ):
            return union_size(self._count_subsets(cursor, chats, terms), len(terms))
        query = " | ".join(tsquery_literal(term) for term in terms)
        tenant, tenant_params = tenant_sql(chats)
        with _bitmap_scans(self.source.alias, cursor):
            cursor.execute(
                f"SELECT count(*) FROM {table(Message)} m "
                f"WHERE m.{VECTOR_COLUMN} @@ %s::tsquery{tenant}",
                [filtered_tsquery(chats, query), *tenant_params],
            )
            return fetch_int(cursor)

    def subset_histogram(
        self, cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str], total: int
    ) -> dict[int, int] | None:
        """Every match's mask histogram from the terms' stored counts and one GIN count of
        each larger subset, where every n_t is stored and those counts visit fewer rows
        than the essential-terms plan reads for it (``subsets_beat_reading``)."""
        stored = self.stored.of(chats)
        if (
            stored is None
            or not 2 <= len(terms) <= self.policy.few_terms
            or not uses_lexemes(chats, self.policy)
        ):
            return None
        counts = self.stored.counts_of(cursor, terms, stored)
        known = [count for count in counts if count is not None]
        if len(known) < len(counts) or not subsets_beat_reading(total, known):
            return None
        # the counts again, in the subsets' statement: one snapshot for all of them
        together = self._count_subsets(cursor, chats, terms)
        return ranking.masks_from_subset_counts(together, len(terms))


def _term_count(
    chats: ChatFilter, term: str, query: str, stored: StoredCounts | None
) -> tuple[str, list[Any]]:
    """Scalar SQL: ``term``'s rows in the filter (``query``: its tsquery): its ``stored``
    count where it is counted, else a GIN count."""
    counted = gin_count(chats, filtered_tsquery(chats, query))
    if stored is None:
        return counted
    return stored_or(term, stored.tenant, stored.roles, counted)


def _counts_key(terms: Sequence[str], stored: StoredCounts) -> _CountsKey:
    roles = None if stored.roles is None else frozenset(stored.roles)
    return tuple(terms), stored.tenant, roles
