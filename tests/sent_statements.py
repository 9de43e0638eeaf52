"""The statements a ``CaptureQueriesContext`` saw, one query string split into the
statements it holds: a PostgreSQL search sends its transaction control and settings in
the query string of a read (``BEGIN; SELECT set_config(...); <read>``). No tests here."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from django.test.utils import CaptureQueriesContext

from bench.statements import CONTROL, split

__all__ = [
    "CONTROL",
    "reads",
    "reads_matches",
    "reads_with_params",
    "round_trips",
    "statements_sent",
]

#: The filter on N behind which N's statement holds a small scope's ranked candidates
#: (``PostgresRowSource.sized_candidates``), its bound as sent.
_SIZED = re.compile(r"\(SELECT s\.total FROM s\) <= (\d+)")

#: A placeholder, or an escaped ``%`` (not one).
_PLACEHOLDER = re.compile(r"%[%s]")


def round_trips(captured: CaptureQueriesContext) -> list[list[str]]:
    """Each query string sent, as its statements."""
    return [split(query["sql"]) for query in captured.captured_queries]


def statements_sent(captured: CaptureQueriesContext) -> list[str]:
    """Every statement sent, in order."""
    return [statement for trip in round_trips(captured) for statement in trip]


def reads(statements: list[str]) -> list[str]:
    """The statements that read data (not transaction control or settings)."""
    return [statement for statement in statements if not CONTROL.match(statement)]


def reads_with_params(sql: str, params: Sequence[Any] | None) -> list[tuple[str, list[Any]]]:
    """The reads of one query string, each with its own share of ``params``."""
    found = []
    left = list(params or ())
    for statement in split(sql):
        taken = sum(mark == "%s" for mark in _PLACEHOLDER.findall(statement))
        own, left = left[:taken], left[taken:]
        if not CONTROL.match(statement):
            found.append((statement, own))
    return found


def reads_matches(sql: str, size: int) -> bool:
    """Whether ``sql`` (as sent) reads the matches it holds for a scope of ``size``
    indexed messages: any statement but N's where the filter on N leaves them unread."""
    gate = _SIZED.search(sql)
    return gate is None or size <= int(gate.group(1))
