"""SQLite FTS5's small scopes, read row by row with each row's mask found in Python.

FTS5 reads a common word's whole doclist (every scope's rows) before a scope token
narrows it, so a scope of at most ``SQLITE_SCAN_SCOPE_MAX`` indexed messages reads its
own rows through the chat btree instead. Which query terms a row holds is tested on its
``search_text``: by SQL ``instr`` for a short query (``scan_matches_sql``: a ``memcmp``
per character, per term, ~3 us a row per term), by ``held_mask`` in Python for a query
of ``scan_python_min_terms`` terms or more (``scanned_candidates``: one split and a set
intersection, ~8 us a row whatever the number of terms; it reads every row's text).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.backends.utils import CursorWrapper

from ..models import Chat, Message
from .base import Candidate, mask_sql, sort_in_tie_order
from .chat_filter import ChatFilter, table
from .fts5_expressions import held_mask, term_bits, word_condition

__all__ = ["scan_matches_sql", "scanned_candidates"]


def scanned_candidates(
    cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str], depth: int
) -> tuple[dict[int, int], list[Candidate]]:
    """``SearchMatcher.candidates`` of a scanned scope: the mask histogram of every match
    and the first ``depth`` rows of each mask in tie order (newer chat, chat id by code
    point, lower index), which hold any row of the page."""
    pks, pks_params = chats.chat_pks_sql()
    more, more_params = chats.message_sql()
    cursor.execute(
        "SELECT m.id, m.search_text, m.chat_id, c.chat_id, c.updated_at, m.position, "
        f"m.visible_position FROM {table(Message)} m JOIN {table(Chat)} c ON c.id = m.chat_id "
        f"WHERE m.chat_id IN ({pks}) AND m.has_terms{more}",
        [*pks_params, *more_params],
    )
    bits = term_bits(terms)
    by_mask: dict[int, list[Candidate]] = {}
    for pk, search_text, *rest in cursor.fetchall():
        mask = held_mask(search_text, bits)
        if mask:
            by_mask.setdefault(mask, []).append(Candidate(pk, mask, *rest))
    histogram = {mask: len(rows) for mask, rows in by_mask.items()}
    found: list[Candidate] = []
    for rows in by_mask.values():
        if len(rows) > depth:
            sort_in_tie_order(rows)
        found.extend(rows[:depth])
    return histogram, found


def scan_matches_sql(chats: ChatFilter, terms: Sequence[str]) -> tuple[str, list[Any]]:
    """Matches found by reading the scope's own rows, not FTS5."""
    pks_sql, pks_params = chats.chat_pks_sql()
    more, more_params = chats.message_sql()
    parts = [word_condition("m", term) for term in terms]
    return (
        f"SELECT * FROM (SELECT m.id, {mask_sql([sql for sql, _ in parts])} AS mask, "
        f"m.chat_id AS chat_pk, m.position, m.visible_position FROM {table(Message)} m "
        f"WHERE m.chat_id IN ({pks_sql}) AND m.has_terms{more}) WHERE mask > 0",
        [*(param for _, params in parts for param in params), *pks_params, *more_params],
    )
