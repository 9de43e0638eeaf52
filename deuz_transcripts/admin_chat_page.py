"""The chat's admin page: its messages as search sees them, with a search's words marked.

Only reads; text is escaped piece by piece before highlighting (``highlight``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.core.paginator import Page, Paginator
from django.http import HttpRequest
from django.urls import reverse
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _

from .admin_views import MESSAGES_PER_PAGE, can_search, typed_search
from .forms import MAX_SCOPE_LENGTH
from .highlight import printable, render_spans, role_label
from .models import Chat, Message
from .records import decode_message
from .spans import Span, match_spans
from .sql import DjangoTranscriptIndex
from .sql.writer import chat_messages
from .text import indexed_text, is_system, query_terms

__all__ = ["MESSAGES_PER_PAGE", "MessageRow", "message_page", "search_context"]


@dataclass(frozen=True)
class PartRow:
    kind: str
    indexed: bool
    reason: str
    html: SafeString


@dataclass(frozen=True)
class MessageRow:
    index: int
    message_id: str
    role: str
    indexed: bool
    reason: str
    parts: list[PartRow]


def _json_html(value: Any, limit: int = 4_000) -> SafeString:
    shown = json.dumps(value, ensure_ascii=False, indent=1)
    return render_spans(shown if len(shown) <= limit else shown[:limit] + "…", [])


def _part_row(role: str, part: Any, marks: _Marks) -> PartRow:
    kind = str(part.get("type", "?")) if isinstance(part, dict) else type(part).__name__
    kind = printable(kind)
    text = indexed_text({"role": role, "content": [part]})
    if text:
        return PartRow(kind, True, "", render_spans(text, marks.take(text)))
    reasons = {
        "reasoning": _("reasoning"),
        "thinking": _("reasoning"),
        "redacted_thinking": _("reasoning"),
        "tool-call": _("tool input"),
        "tool_use": _("tool input"),
        "image": _("image"),
        "image_url": _("image"),
        "file": _("file"),
        "tool-result": _("structured tool result"),
        "tool_result": _("structured tool result"),
    }
    reason = reasons.get(kind, _("not searchable"))
    for key in ("text", "thinking"):  # reasoning reads better as text than as JSON
        if isinstance(part, dict) and isinstance(part.get(key), str):
            return PartRow(kind, False, reason, render_spans(part[key], []))
    return PartRow(kind, False, reason, _json_html(part))


class _Marks:
    """A message's spans handed out to its indexed parts in order: the message's indexed
    text is its indexed parts joined by newlines."""

    def __init__(self, spans: tuple[Span, ...]) -> None:
        self.spans = spans
        self.offset = 0

    def take(self, text: str) -> list[Span]:
        low, high = self.offset, self.offset + len(text)
        self.offset = high + 1
        return [(a - low, b - low) for a, b in self.spans if low <= a and b <= high]


def message_row(row: Message, terms: Sequence[str] = (), substring: bool = False) -> MessageRow:
    """How a stored message is shown: what search sees, and what it does not; with
    ``terms``, the words the search matched are marked (the hits' rule, ``match_spans``)."""
    message = decode_message(row.payload)
    role = role_label(message)
    if is_system(message):
        content = message.get("content")
        html = render_spans(content, []) if isinstance(content, str) else _json_html(content)
        parts = [PartRow("system", False, _("system message"), html)]
        return MessageRow(row.position, row.message_id, role, False, _("system message"), parts)
    content = message.get("content") if isinstance(message, dict) else None
    spans = match_spans(indexed_text(message) or "", terms, substring=substring) if terms else ()
    marks = _Marks(spans)
    if isinstance(content, str):
        parts = [PartRow("text", True, "", render_spans(content, marks.take(content)))]
    elif isinstance(content, list):
        parts = [_part_row(role, part, marks) for part in content]
    else:
        parts = [PartRow("?", False, _("content of an unknown shape"), _json_html(content))]
    reason = "" if row.has_terms else _("no searchable words")
    return MessageRow(row.position, row.message_id, role, row.has_terms, reason, parts)


def message_page(
    request: HttpRequest, chat: Chat, database: str, terms: Sequence[str] = ()
) -> tuple[Page[Message], list[MessageRow]]:
    """One page (``?messages=N``) of the chat's messages in order, ``terms`` marked."""
    rows = chat_messages(database, chat).order_by("position")
    paginator = Paginator(rows, MESSAGES_PER_PAGE)
    page = paginator.get_page(request.GET.get("messages"))
    substring = DjangoTranscriptIndex(database).backend.substring_matching if terms else False
    return page, [message_row(row, terms, substring) for row in page.object_list]


def search_context(request: HttpRequest) -> dict[str, Any]:
    """What the chat page needs from the search that linked to it: the query's terms to
    mark, the way back to the results, and the parameters its own pager must keep."""
    carried = typed_search(request.GET)
    query = request.GET.get("q", "")[:MAX_SCOPE_LENGTH]
    back = bool(query) and can_search(request)
    return {
        "search_terms": query_terms(query),
        "search_back_url": (
            reverse("admin:deuz_transcripts_search") + "?" + urlencode(carried) if back else None
        ),
        "search_query": urlencode(carried) + "&" if carried else "",
    }
