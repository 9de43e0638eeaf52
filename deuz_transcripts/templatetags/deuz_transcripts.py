"""``{% load deuz_transcripts %}``: a hit's matched words in ``<mark>``, safely, in any page.

The filter renders with ``highlight.highlighted_excerpt``, the one rule the admin shows
hits with: every piece of message text is escaped, only ``<mark>`` is added, and a long
message shows bounded excerpts around its first matches.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import template
from django.utils.safestring import SafeString

from ..highlight import highlighted_excerpt as render_excerpt
from ..records import TranscriptHit, TranscriptMessage
from ..text import indexed_text

register = template.Library()

#: Text longer than this is shown as excerpts (the admin's default).
DEFAULT_LIMIT = 1_200


@register.filter
def highlighted_excerpt(value: Any, limit: Any = DEFAULT_LIMIT) -> SafeString:
    """``{{ hit|highlighted_excerpt }}``: the hit's message text, escaped, its matched
    words in ``<mark>``; excerpts when longer than ``limit`` characters
    (``{{ hit|highlighted_excerpt:400 }}``).

    Takes a ``TranscriptHit`` (its spans mark the words the search matched), a
    ``TranscriptMessage`` or message dict (shown unmarked) or a string. A system message
    and anything else render as an empty string.
    """
    spans: tuple[tuple[int, int], ...] = ()
    if isinstance(value, TranscriptHit):
        text, spans = indexed_text(value.message), value.spans
    elif isinstance(value, TranscriptMessage):
        text = indexed_text(value.message)
    elif isinstance(value, Mapping):
        text = indexed_text(value)
    else:
        text = value if isinstance(value, str) else None
    try:
        bound = max(1, int(limit))
    except (TypeError, ValueError):
        bound = DEFAULT_LIMIT
    return render_excerpt(text or "", spans, limit=bound)
