"""The cursor one search's statements run on: Django's, with a word for the backend
about which read is the search's last (PostgreSQL ends its transaction with it)."""

from __future__ import annotations

from typing import Any

from django.db.backends.utils import CursorWrapper

__all__ = ["SearchCursor"]


class SearchCursor(CursorWrapper):
    """Sends each statement through Django's cursor ``inner`` (its execute wrappers and
    query log run once, as for any statement)."""

    def __init__(self, inner: CursorWrapper) -> None:
        super().__init__(inner.cursor, inner.db)
        self.inner = inner

    def execute(self, sql: Any, params: Any = None) -> Any:
        return self.inner.execute(sql, params)

    def executemany(self, sql: Any, param_list: Any) -> Any:
        return self.inner.executemany(sql, param_list)

    def last_read_next(self) -> None:
        """The next statement is the search's last read (here: nothing to do)."""
