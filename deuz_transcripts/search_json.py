"""The one JSON shape of a search answer, as the endpoint, the agent tool and
``search_transcripts --json`` give it (snake_case, every field always present)::

    {"count": 2, "count_exact": true, "next_cursor": null, "ignored_terms": [],
     "hits": [{"chat_id", "message_id", "index", "role", "score", "updated_at",
               "snippet", "spans", "around": [{"message_id", "index", "role",
               "snippet", "spans"}]}]}
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from .highlight import printable
from .paging import SearchPage
from .records import TranscriptHit, TranscriptMessage
from .spans import Span, match_spans, snippet_with_spans
from .text import indexed_text

__all__ = ["SNIPPET_WIDTH", "answer_json", "around_json", "hit_json", "moment_json"]

#: Characters of text a snippet shows around its best matches, at most.
SNIPPET_WIDTH = 160
#: Spans an around message's snippet needs at most.
_AROUND_SPANS = 12


def moment_json(moment: datetime | None) -> str | None:
    """ISO 8601 in UTC, e.g. ``2026-01-31T09:00:00+00:00``."""
    return None if moment is None else moment.astimezone(UTC).isoformat()


def _role(message: Mapping[str, Any]) -> str:
    role = message.get("role")
    return printable(role) if isinstance(role, str) else ""


def _spans_json(spans: tuple[Span, ...]) -> list[list[int]]:
    return [[start, end] for start, end in spans]


def around_json(item: TranscriptMessage, terms: list[str], substring: bool) -> dict[str, Any]:
    """A context message of a hit, with the spans of the query's terms in its snippet."""
    text = indexed_text(item.message) or ""
    spans = match_spans(text, terms, substring=substring, enough=_AROUND_SPANS)
    shown, inside = snippet_with_spans(text, spans, width=SNIPPET_WIDTH)
    return {
        "message_id": item.message_id,
        "index": item.index,
        "role": _role(item.message),
        "snippet": shown,
        "spans": _spans_json(inside),
    }


def hit_json(
    hit: TranscriptHit,
    terms: list[str],
    substring: bool,
    *,
    width: int = SNIPPET_WIDTH,
    score_digits: int | None = None,
) -> dict[str, Any]:
    """A hit; ``spans`` are offsets into ``snippet``, ``updated_at`` its chat's."""
    shown, inside = snippet_with_spans(indexed_text(hit.message) or "", hit.spans, width=width)
    return {
        "chat_id": hit.chat_id,
        "message_id": hit.message_id,
        "index": hit.index,
        "role": _role(hit.message),
        "score": hit.score if score_digits is None else round(hit.score, score_digits),
        "updated_at": moment_json(hit.updated_at),
        "snippet": shown,
        "spans": _spans_json(inside),
        "around": [around_json(item, terms, substring) for item in hit.around or ()],
    }


def answer_json(
    page: SearchPage, hits: list[dict[str, Any]], ignored_terms: list[str]
) -> dict[str, Any]:
    """The answer around its hits: ``count`` is exact up to the total cap (past it,
    ``count_exact`` is false); ``ignored_terms`` the query's words past the 32nd."""
    return {
        "count": page.total,
        "count_exact": page.total_exact,
        "next_cursor": page.next_cursor,
        "ignored_terms": ignored_terms,
        "hits": hits,
    }
