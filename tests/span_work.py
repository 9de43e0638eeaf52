"""What the span rule reads, counted (characters given to it, spans it gives), for tests
that bound a page's span work instead of timing it: ``count_span_work(monkeypatch)``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from deuz_transcripts import span_match


@dataclass
class SpanWork:
    """One ``(characters, spans)`` pair per piece of text the rule ran on."""

    pieces: list[tuple[int, int]] = field(default_factory=list)

    @property
    def characters(self) -> int:
        return sum(size for size, _ in self.pieces)

    @property
    def spans(self) -> int:
        return sum(count for _, count in self.pieces)


def count_span_work(monkeypatch: pytest.MonkeyPatch) -> SpanWork:
    """Counts, until ``monkeypatch`` is undone, every piece the span rule runs on."""
    work = SpanWork()
    original = span_match._spans_in

    def counted(prefix: str, *args: Any) -> list[tuple[int, int]]:
        found = original(prefix, *args)
        work.pieces.append((len(prefix), len(found)))
        return found

    monkeypatch.setattr(span_match, "_spans_in", counted)
    return work
