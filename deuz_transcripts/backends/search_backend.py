"""A database engine's search backend: its rows, row source, counts and checks together,
picked by ``deuz_transcripts.backends.get_backend`` from the connection's vendor."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, ClassVar

from django.db import connections, models

from .base import RowSource
from .data_checks import SearchDataChecks
from .engine_counts import EngineCounts
from .matches import Matches
from .search_cursor import SearchCursor
from .search_rows import SearchRows

if TYPE_CHECKING:
    from django.db.backends.utils import CursorWrapper

    from ..records import Scope
    from ..search_request import SearchRequest

__all__ = ["SearchBackend"]


class SearchBackend:
    """One database engine's way of storing and matching terms: its parts."""

    name: ClassVar[str]
    #: True when a query term matches any word containing it (the LIKE fallback).
    substring_matching: ClassVar[bool] = False
    rows_class: ClassVar[type[SearchRows]]
    checks_class: ClassVar[type[SearchDataChecks]] = SearchDataChecks
    #: One search's matches as this engine binds them (``matches``).
    matches_class: ClassVar[type[Matches]] = Matches

    def __init__(self, alias: str) -> None:
        self.alias = alias
        self.rows = self.rows_class(alias)
        #: the rows holding query terms (``source``) and what the engine counts in its
        #: index (``counts``), with the planner's thresholds read now
        self.source, self.counts = self.search_parts()
        self.checks = self.checks_class(alias)

    def search_parts(self) -> tuple[RowSource, EngineCounts]:
        """This engine's row source and counts under its policy, read now
        (``policy.current_policy`` of its own policy type)."""
        raise NotImplementedError

    def matches(self, cursor: CursorWrapper, request: SearchRequest) -> Matches:
        """The matches of ``request`` on ``cursor``, bound once per search: its scope,
        chat ids, roles and window as this engine's statements test them."""
        return self.matches_class.of_request(self.source, self.counts, cursor, request)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.alias!r})"

    def search_cursor(self, timeout_ms: int) -> AbstractContextManager[SearchCursor]:
        """The cursor of one search's statements, all of them within ``timeout_ms``
        (``0``: no limit, else ``SearchTimeout``); nothing is left set afterwards."""
        return self._limited_cursor(timeout_ms)

    @contextmanager
    def _limited_cursor(self, timeout_ms: int) -> Iterator[SearchCursor]:
        with self.time_limit(timeout_ms), connections[self.alias].cursor() as cursor:
            yield SearchCursor(cursor)

    def time_limit(self, timeout_ms: int) -> AbstractContextManager[None]:
        """Statements run inside are stopped by the database after ``timeout_ms``
        (``0``: no limit), raising ``SearchTimeout``; nothing is left set afterwards
        (``search_cursor``'s limit, unless a backend sends it with the statements)."""
        return nullcontext()

    def legacy_scope_filter(self, rows: models.QuerySet[Any], scope: Scope) -> models.QuerySet[Any]:
        """Legacy ``deuz_chats`` rows whose JSON scope has every field of ``scope``."""
        raise NotImplementedError
