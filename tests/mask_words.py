"""The messages of the mask-plan tests: three words in most messages, often together
(``tests/test_unread_masks.py``, ``tests/test_window_pages.py``)."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["TEXTS", "WHEN"]

WHEN = datetime(2025, 5, 1, tzinfo=UTC)
TEXTS = [
    "alpha beta gamma",
    "alpha beta",
    "beta gamma",
    "alpha gamma",
    "alpha",
    "gamma filler",
    "beta",
    "plain words",
]
