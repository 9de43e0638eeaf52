"""From a planned page to ``TranscriptHit``: the page's rows and their ``around``
windows, read in one statement, each hit built once with its spans."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from django.db.backends.utils import CursorWrapper

from ..backends.base import Candidate
from ..backends.chat_filter import table
from ..models import Message
from ..ranking import RankPlan
from ..records import TranscriptHit, TranscriptMessage, decode_message
from ..search_budget import check_budget
from ..spans import hit_spans

__all__ = ["around_windows", "read_hits"]

#: ``id, chat_id, position, message_id, payload, visible_position`` of a message row.
_Row = tuple[int, int, int, str, str, int | None]


def around_windows(page: Sequence[Candidate], around: int | None) -> tuple[str, list[Any]]:
    """SQL for the page's rows and, with ``around``, every hit's window of visible messages.

    A window holds its hit, and overlapping windows of one chat merge into one range,
    so a page clustered in a few chats costs a few index ranges.
    """
    if not around:
        return f"m.id IN ({', '.join(['%s'] * len(page))})", [hit.pk for hit in page]
    ranges: dict[int, list[list[int]]] = defaultdict(list)
    for hit in sorted(page, key=lambda h: (h.chat_pk, h.visible_position)):
        low, high = hit.visible_position - around, hit.visible_position + around
        spans = ranges[hit.chat_pk]
        if spans and low <= spans[-1][1] + 1:
            spans[-1][1] = max(spans[-1][1], high)
        else:
            spans.append([low, high])
    where: list[str] = []
    params: list[Any] = []
    for chat_pk, spans in ranges.items():
        for low, high in spans:
            where.append("(m.chat_id = %s AND m.visible_position BETWEEN %s AND %s)")
            params.extend([chat_pk, low, high])
    return " OR ".join(where), params


def read_hits(
    cursor: CursorWrapper,
    page: Sequence[Candidate],
    plan: RankPlan,
    around: int | None,
    tenant: str | None = None,
    *,
    terms: Sequence[str] = (),
    substring: bool = False,
) -> list[TranscriptHit]:
    """The page's hits in page order, with the spans of ``terms`` (``hit_spans``); a row
    deleted since it was planned is left out. ``tenant``: every row of the page has it
    (the search filtered on it). The search's budget is checked before each hit's spans
    (``SearchTimeout`` once it is spent)."""
    where, params = around_windows(page, around)
    if tenant is not None:
        where, params = f"m.tenant = %s AND ({where})", [tenant, *params]
    cursor.execute(
        "SELECT m.id, m.chat_id, m.position, m.message_id, m.payload, m.visible_position "
        f"FROM {table(Message)} m WHERE {where}",
        params,
    )
    rows: dict[int, _Row] = {row[0]: row for row in cursor.fetchall()}
    by_chat: dict[int, list[_Row]] = defaultdict(list)
    for row in sorted(rows.values(), key=lambda row: row[2]):  # chat order: no ORDER BY
        by_chat[row[1]].append(row)
    hits = []
    for hit in page:
        found = rows.get(hit.pk)
        if found is None:  # deleted between the two statements
            continue
        neighbours = None
        if around is not None:
            low, high = hit.visible_position - around, hit.visible_position + around
            neighbours = [
                TranscriptMessage(hit.chat_id, n[3], n[2], decode_message(n[4]))
                for n in by_chat[hit.chat_pk]
                if n[5] is not None and low <= n[5] <= high and n[0] != hit.pk
            ]
        check_budget()
        message = decode_message(found[4])
        hits.append(
            TranscriptHit(
                chat_id=hit.chat_id,
                message_id=found[3],
                index=found[2],
                message=message,
                score=plan.score(hit.mask),
                around=neighbours,
                spans=hit_spans(message, terms, substring=substring),
            )
        )
    return hits
