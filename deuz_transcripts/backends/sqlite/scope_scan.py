"""SQLite FTS5's small scopes (at most ``SQLITE_SCAN_SCOPE_MAX`` indexed messages).

FTS5's masks elsewhere cost a subquery per term, each seeking that term's doclist to the
scope's rows. A small scope's short query finds its matches in one FTS5 pass instead,
each matched row's mask by ``instr`` on its own stored terms (``one_pass_matches_sql``);
a query of ``scan_python_min_terms`` terms or more reads the scope's rows once through
the chat btree, the query terms a row holds found in its ``search_text`` by one regular
expression (``HeldTerms``: ``scanned_candidates``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.backends.utils import CursorWrapper

from ...models import Chat, Message
from ..base import Candidate, mask_sql, sort_in_tie_order
from ..chat_filter import ChatFilter, table
from .common import FTS_TABLE, UPDATED_AT_TEXT
from .fts5_expressions import HeldTerms, match_expression, word_condition

__all__ = ["one_pass_matches_sql", "scanned_candidates"]


def one_pass_matches_sql(chats: ChatFilter, terms: Sequence[str]) -> tuple[str, list[Any]]:
    """A small scope's matches found in one FTS5 pass, each row's mask by ``instr`` on the
    matched rows' own terms (``word_condition``): a subquery per term would seek each
    term's doclist to every row of the scope again."""
    tests = [word_condition("m", term) for term in terms] if len(terms) > 1 else [("1", [])]
    test_params = [param for _, params in tests for param in params]
    more, more_params = chats.token_sql()
    return (
        f"SELECT m.id, {mask_sql([sql for sql, _ in tests])} AS mask, m.chat_id AS chat_pk, "
        f"m.position, m.visible_position FROM {FTS_TABLE} JOIN {table(Message)} m "
        f"ON m.id = {FTS_TABLE}.rowid WHERE {FTS_TABLE} MATCH %s{more}",
        [*test_params, match_expression(chats, terms), *more_params],
    )


def scanned_candidates(
    cursor: CursorWrapper, chats: ChatFilter, terms: Sequence[str], depth: int
) -> tuple[dict[int, int], list[Candidate]]:
    """``RowSource.candidates`` of a scanned scope: the mask histogram of every match
    and the first ``depth`` rows of each mask in tie order (newer chat, chat id by code
    point, lower index), which hold any row of the page."""
    pks, pks_params = chats.chat_pks_sql()
    more, more_params = chats.message_sql()
    cursor.execute(
        "SELECT m.id, m.search_text, m.chat_id, c.chat_id, "
        f"{UPDATED_AT_TEXT.format('c.updated_at')}, m.position, m.visible_position "
        f"FROM {table(Message)} m JOIN {table(Chat)} c ON c.id = m.chat_id "
        f"WHERE m.chat_id IN ({pks}) AND m.has_terms{more}",
        [*pks_params, *more_params],
    )
    held = HeldTerms(terms)
    by_mask: dict[int, list[Candidate]] = {}
    for pk, search_text, *rest in cursor.fetchall():
        mask = held.mask(search_text)
        if mask:
            by_mask.setdefault(mask, []).append(Candidate(pk, mask, *rest))
    histogram = {mask: len(rows) for mask, rows in by_mask.items()}
    found: list[Candidate] = []
    for rows in by_mask.values():
        if len(rows) > depth:
            sort_in_tie_order(rows)
        found.extend(rows[:depth])
    return histogram, found
