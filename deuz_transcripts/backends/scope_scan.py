"""SQLite FTS5's small scopes, read row by row with each row's mask found in Python.

A query of ``scan_python_min_terms`` terms or more costs FTS5 a subquery per term, each
seeking that term's doclist to the scope's rows; a scope of at most
``SQLITE_SCAN_SCOPE_MAX`` indexed messages is cheaper to read once through the chat
btree, the query terms a row holds found by ``held_mask`` on its ``search_text`` (one
split and a set intersection, ~8 us a row whatever the number of terms). Shorter
queries take FTS5 whatever the scope's size.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db.backends.utils import CursorWrapper

from ..models import Chat, Message
from .base import Candidate, sort_in_tie_order
from .chat_filter import ChatFilter, table
from .fts5_expressions import held_mask, term_bits

__all__ = ["scanned_candidates"]


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
