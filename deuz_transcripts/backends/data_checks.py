"""The verify role of a backend: its search data checked against the message rows.

``SearchDataChecks`` is the default (the rows' own columns are the search data);
SQLite FTS5 and PostgreSQL subclass it (``sqlite.fts5_checks``, ``postgresql.checks``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..models import Chat
    from ..problems import Problem

__all__ = ["SearchDataChecks", "StoredMessage"]


class StoredMessage(Protocol):
    """The columns of a ``Message`` row that reading a chat back and checking it use:
    a ``Message`` instance or a ``MessageRow`` tuple."""

    @property
    def pk(self) -> int: ...
    @property
    def position(self) -> int: ...
    @property
    def message_id(self) -> str: ...
    @property
    def role(self) -> str: ...
    @property
    def payload(self) -> str: ...
    @property
    def digest(self) -> str: ...
    @property
    def visible_position(self) -> int | None: ...
    @property
    def search_text(self) -> str | None: ...
    @property
    def has_terms(self) -> bool: ...
    @property
    def tenant(self) -> str: ...


class SearchDataChecks:
    """Verifies a chat's search data against its message rows (``verify``); by default
    the rows' own columns are the search data, checked with the rows."""

    def __init__(self, alias: str) -> None:
        self.alias = alias

    def check_chat(
        self,
        chat: Chat,
        rows: Sequence[StoredMessage],
        expected_terms: Sequence[list[str] | None] | None,
    ) -> list[Problem]:
        """Problems of the chat's search data; ``expected_terms`` holds each row's terms in
        order, ``None`` when a payload cannot be read (the rows are reported then)."""
        return []

    def check_chats(
        self,
        chats: Sequence[tuple[Chat, Sequence[StoredMessage], Sequence[list[str] | None] | None]],
        *,
        full_run: bool = False,
    ) -> list[Problem]:
        """``check_chat`` of a batch of chats (``(chat, rows, expected_terms)`` each); a
        backend overrides it to check the batch in a few statements. ``full_run``: the
        sweep follows, so what it checks exactly need not be checked here."""
        return [problem for item in chats for problem in self.check_chat(*item)]

    def sweep(
        self, batch_size: int, progress: Callable[[str, int, int], None] | None = None
    ) -> Iterator[Problem]:
        """Search data that no row owns (a full run's last pass); ``progress(label, done,
        total)`` hears of long passes, counted in messages."""
        return iter(())

    def repair(self, problem: Problem) -> None:
        """Repair search data ``check_chat`` or ``sweep`` found, before rows are rewritten."""

    def repair_chat(self, chat: Chat) -> None:
        """Make the chat's search data hold exactly what its rows say (before a rewrite)."""
