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
