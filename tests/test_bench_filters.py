"""The bench's filter variants: a first page stopped by the search budget while the next
page's cursor is read (outside the timing) is that variant's error, not the run's end."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from bench.filters import _NextPage
from deuz_transcripts.errors import SearchTimeout


class _Index:
    """``search_page`` that runs out of budget for one query."""

    def search_page(self, scope: dict[str, str], q: str, **options: Any) -> Any:
        if q == "slow":
            raise SearchTimeout(10_000)
        return SimpleNamespace(next_cursor=None, hits=[])


def test_a_timeout_while_reading_the_cursor_is_raised_when_the_variant_is_timed():
    next_page = _NextPage(_Index(), {})
    next_page.prepare(None, "slow")  # no exception: prepare runs outside the timing
    next_page.prepare(None, "fast")
    with pytest.raises(SearchTimeout):
        next_page(None, "slow")
    assert next_page(None, "fast") == []  # one page holds every hit: nothing after it
