"""The planner's thresholds, in one frozen value.

Each number picks between exact plans of different cost; none changes a result.
Tests replace ``DEFAULT_POLICY`` to force every plan on small data.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..conf import conf

__all__ = ["DEFAULT_POLICY", "PlanPolicy", "current_policy"]


@dataclass(frozen=True)
class PlanPolicy:
    #: Scopes of at most this many indexed messages rank every match in one statement;
    #: bigger ones count masks first and fetch only what the page needs.
    single_statement_max: int = 5_000
    #: (SQLite FTS5: at most ``scan_scope_max``, the scopes that scan their own rows; one
    #: statement there finds each match's mask by a subquery per term, each seeking that
    #: term's doclist to every row of the scope.)
    #: A mask with at least this many rows (or the page depth, if larger) is walked
    #: newest chat first instead of being read and sorted whole.
    walk_min_rows: int = 2_048
    #: The newest-first walk of rows holding every term is tried for queries of at most
    #: this many terms (longer ones rarely have a page of such rows).
    walk_max_terms: int = 4
    #: Where the stored counts give N and every n_t (PostgreSQL): when they predict, as if
    #: the terms were independent, ``walk_guess_margin`` pages of rows holding every term
    #: within the newest chats of at most this many messages, those chats are walked at
    #: once, without the probe (a GIN AND of whole posting lists); a walk that finds less
    #: than a page falls back to the probe. 0: always probe.
    walk_guess_max_rows: int = 16_384
    walk_guess_margin: int = 4
    #: A walk the probe chose (at least ``walk_min_rows`` rows hold every term) visits at
    #: most the newest chats of this many messages; when they hold less than a page, the
    #: rows holding every term are read and sorted instead. Such rows may gather in old
    #: chats: at 10M messages, an unbounded walk for 2,808 rows holding a log word and a
    #: common word took 1.2 s; bounded, 45 ms, and their rows read and sorted 30 ms more.
    #: 0: unbounded.
    walk_probed_max_rows: int = 16_384
    #: ... on SQLite FTS5: unbounded. With no stored counts to guess from, every FTS5 walk
    #: is the probe's, mostly of dense words, and a bounded walk first sums the rows of
    #: the newest chats in a window (1M: one common word 1.8 -> 65 ms unscoped, 6.3 -> 37
    #: ms for the 50,000-message user).
    fts5_walk_probed_max_rows: int = 0
    #: Queries of at most this many terms count masks (SQLite FTS5, and PostgreSQL where
    #: GIN filters the scope) and PostgreSQL's exact totals (where it visits fewer rows)
    #: by inclusion-exclusion over the counts of every term subset (2^n - 1 counts).
    subset_count_max_terms: int = 4
    #: PostgreSQL: scopes of more indexed messages are filtered inside GIN by their scope
    #: lexemes (cost follows the scope's matches, but a common word's whole posting list
    #: is merged); smaller ones read their own rows through the chat btree.
    lexeme_scope_min: int = 10_000
    #: PostgreSQL: ... and so are scopes of more than this many (up to ``lexeme_scope_min``)
    #: whose query terms' posting lists hold at most ``gin_rows_per_scope_row`` rows per
    #: message of the scope, in the whole index. At 1M messages GIN read a posting entry
    #: in ~13 ns, and a scope's own row cost 2.0-2.3 us through the chat btree; a plan may
    #: read each list several times (term-subset counts), hence the margin.
    rare_lexeme_scope_min: int = 1_000
    gin_rows_per_scope_row: int = 25
    #: Queries of at least this many terms first try the essential-terms plan: every
    #: term's count n_t alone, then only the rows of the rarest terms, until no row
    #: without them can reach the page (``sql.search.essential``).
    essential_min_terms: int = 5
    #: ... or this many where every n_t is read, not counted (PostgreSQL's stored term
    #: counts: unscoped and tenant searches).
    essential_min_terms_stored: int = 2
    #: ... which gives up (for the mask plans) before reading a term of more rows than
    #: this, summed over the terms it read: then ranking every match costs no more.
    essential_max_rows: int = 20_000
    #: ... and past that, with at most this many terms left unread, fills the page from
    #: their masks' rows, best raw score first (``sql.search.unread_masks``); 0: ranks every
    #: match instead.
    unread_max_terms: int = 5
    #: ... and first reads, in one statement, the rows of the rarest terms, up to this many
    #: rows in all (SQLite FTS5: by their rows in the whole index, each count capped there,
    #: and the scope's doclist read once, not once per term; PostgreSQL: by their counted
    #: n_t, one GIN search and one chat lookup per row instead of settings and a statement
    #: per term), whatever the query's length. 0: term by term.
    essential_rare_rows: int = 2_000
    #: PostgreSQL: a statement joining at most this many rows, known in advance, to their
    #: chats looks each chat up by its key instead of hashing the chat table.
    chat_lookup_max_rows: int = 5_000
    #: SQLite FTS5: scopes of at most this many indexed messages scan their own rows
    #: (``DEUZ_TRANSCRIPTS["SQLITE_SCAN_SCOPE_MAX"]``).
    scan_scope_max: int = 2_000
    #: ... and find each row's mask in Python for queries of at least this many terms
    #: (SQL ``instr`` costs per term, the Python word test per row: ``sqlite.scope_scan``).
    scan_python_min_terms: int = 8


DEFAULT_POLICY = PlanPolicy()


def current_policy() -> PlanPolicy:
    """``DEFAULT_POLICY`` with the settings' thresholds, read now (``override_settings``)."""
    return replace(DEFAULT_POLICY, scan_scope_max=conf.SQLITE_SCAN_SCOPE_MAX)
