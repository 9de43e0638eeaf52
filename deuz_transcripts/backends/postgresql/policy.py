"""PostgreSQL's planner thresholds: the shared routes' and its own (GIN or a scope's
rows, stored counts, term-subset counts)."""

from __future__ import annotations

from dataclasses import dataclass

from ..policy import SearchPolicy

__all__ = ["PostgresPolicy"]


@dataclass(frozen=True)
class PostgresPolicy(SearchPolicy):
    """PostgreSQL's thresholds."""

    single_statement_max: int = 5_000
    #: Where every n_t is read, not counted (the stored term counts: unscoped and tenant
    #: searches), queries of at least this many terms try the essential-terms plan.
    essential_min_terms_stored: int = 2
    #: Queries of at most this many terms count masks (where GIN filters the scope) and
    #: exact totals (where it visits fewer rows) by inclusion-exclusion over the counts of
    #: every term subset (2^n - 1 counts).
    subset_count_max_terms: int = 4
    #: Scopes of more indexed messages are filtered inside GIN by their scope lexemes
    #: (cost follows the scope's matches, but a common word's whole posting list is
    #: merged); smaller ones read their own rows through the chat btree.
    lexeme_scope_min: int = 10_000
    #: ... and so are scopes of more than this many (up to ``lexeme_scope_min``) whose
    #: query terms' posting lists hold at most ``gin_rows_per_scope_row`` rows per
    #: message of the scope, in the whole index: GIN reads a posting entry in a fraction
    #: of a scope row's cost through the chat btree, and a plan may read each list several
    #: times (term-subset counts), hence the margin.
    rare_lexeme_scope_min: int = 1_000
    gin_rows_per_scope_row: int = 25

    def essential_terms_from(self, *, stored: bool) -> int:
        return self.essential_min_terms_stored if stored else self.essential_min_terms
