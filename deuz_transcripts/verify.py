"""Verify (and repair) that every chat's search data matches what indexing it would write.

Per chat: message rows against their own payloads (digest, terms, positions,
counts, scope lookup rows), then the backend's search data against the rows
(PostgreSQL: ``tsvector_to_array`` per row; SQLite FTS5: the chat's token
matches exactly its messages with terms, and each such row holds all its
tokens). A full run also sweeps the FTS5 table for rows no message owns, or
holding more tokens than their message. Nothing is changed unless ``fix``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from .backends.base import SearchDataChecks
from .backfill import pk_batches
from .models import Chat, LegacyChat, Message, Tombstone
from .prepared import PreparedChat
from .problems import Problem
from .sql import ChatWriter
from .sql.stored import record_from_rows
from .stores import DjangoChatStore

__all__ = ["Problem", "Verifier", "VerifyResult"]


@dataclass
class VerifyResult:
    found: int = 0
    chats: set[str] = field(default_factory=set)
    remaining: list[Problem] = field(default_factory=list)


class Verifier:
    """Read-only checks of one database; ``fix`` and ``run(fix=True)`` are the only writers."""

    def __init__(
        self,
        using: str = "default",
        *,
        batch_size: int = 500,
        chat_ids: Iterable[str] | None = None,
    ) -> None:
        self.using = using
        self.batch_size = batch_size
        self.chat_ids = None if chat_ids is None else sorted(set(chat_ids))
        self.writer = ChatWriter(using)
        backend = self.writer.backend
        self.backend_name = backend.name
        self.checks: SearchDataChecks = backend.checks

    def _rows(self, model: type[Chat] | type[LegacyChat]) -> Any:
        rows = model.objects.using(self.using).all()
        return rows if self.chat_ids is None else rows.filter(chat_id__in=self.chat_ids)

    def problems(self, source: str = "all") -> Iterator[Problem]:
        """Every problem found, chat by chat, then the FTS sweep (full runs only)."""
        if source in ("legacy", "all"):
            for batch in pk_batches(self._rows(LegacyChat), self.batch_size):
                for _, chat_id in batch:
                    yield from self.check_legacy(chat_id)
        if source in ("stored", "all"):
            for batch in pk_batches(self._rows(Chat), self.batch_size):
                for pk, _ in batch:
                    yield from self.check_chat(pk)
        if self.chat_ids is None:
            yield from self.checks.sweep(self.batch_size)

    def run(self, source: str = "all", *, fix: bool = False, report: Any = None) -> VerifyResult:
        """Report (and with ``fix`` repair) every problem, then look again if anything was fixed.

        Per-chat problems are fixed as they are found; the sweep's are collected and
        fixed once it is done, so no FTS row changes under the running scan.
        """
        result = VerifyResult()
        later: list[Problem] = []
        for problem in self.problems(source):
            result.found += 1
            result.chats.add(problem.chat_id)
            if report is not None:
                report(problem)
            if fix and problem.source == "sweep":
                later.append(problem)
            elif fix:
                self.fix(problem)
        for problem in later:
            self.fix(problem)
        if fix and result.found:
            result.remaining = list(self.problems(source))
        return result

    # checks

    def check_legacy(self, chat_id: str) -> list[Problem]:
        """A legacy row not tombstoned and not owned by a store must be indexed as it is."""
        locked = self.writer.read(chat_id)
        if locked.tombstoned:
            return []
        record = DjangoChatStore(self.using).load_chat(chat_id)
        if record is None or locked.revision > 0:
            return []
        if locked.row is None:
            return [Problem(chat_id, "missing", "legacy chat not indexed", "legacy")]
        if locked.row.is_indexed and not self.writer.is_current(locked, PreparedChat.of(record)):
            return [
                Problem(chat_id, "stale", "legacy chat differs from its indexed copy", "legacy")
            ]
        return []

    def check_chat(self, pk: int) -> list[Problem]:
        chat = Chat.objects.using(self.using).filter(pk=pk).first()
        if chat is None:
            return []
        if Tombstone.objects.using(self.using).filter(chat_id=chat.chat_id).exists():
            return [Problem(chat.chat_id, "orphaned", "rows of a deleted (tombstoned) chat")]
        rows = list(Message.objects.using(self.using).filter(chat=chat).order_by("position"))
        if not chat.is_indexed:
            return self.checks.check_chat(chat, [], None)
        expected = self._expected(chat, rows)
        if expected is None:  # an unreadable payload: reported as stale, --fix cannot help
            problems = [Problem(chat.chat_id, "stale", "a message payload cannot be read")]
            return problems + self.checks.check_chat(chat, rows, None)
        problems = []
        detail = self._rows_detail(chat, rows, expected)
        if detail:
            problems.append(Problem(chat.chat_id, "stale", detail))
        terms = [message.terms for message in expected.prepared]
        return problems + self.checks.check_chat(chat, rows, terms)

    def _expected(self, chat: Chat, rows: Sequence[Message]) -> PreparedChat | None:
        try:
            return PreparedChat.of(record_from_rows(chat, rows))
        except Exception:
            return None

    def _rows_detail(self, chat: Chat, rows: Sequence[Message], expected: PreparedChat) -> str:
        """What differs between the rows and indexing them again ("" when nothing)."""
        return "; ".join(self.writer.differences(chat, expected, rows))

    # repair

    def fix(self, problem: Problem) -> None:
        """Repair one problem, in its own transaction, holding the chat's write lock."""
        with transaction.atomic(using=self.using):
            if problem.source in ("fts", "sweep"):
                self.checks.repair(problem)
                return
            locked = self.writer.lock(problem.chat_id)
            if problem.source == "legacy":
                record = DjangoChatStore(self.using).load_chat(problem.chat_id)
                if record is not None and not locked.tombstoned:
                    self.writer.write(locked, PreparedChat.of(record))
                return
            chat = locked.row
            if chat is None:
                return
            self.checks.repair_chat(chat)  # first the search data exactly as the rows say
            if problem.kind == "orphaned":
                self.writer.purge(locked)  # a tombstoned chat: nothing may remain
            elif chat.is_indexed:
                rows = list(
                    Message.objects.using(self.using).filter(chat=chat).order_by("position")
                )
                self.writer.write(
                    locked, PreparedChat.of(record_from_rows(chat, rows)), rewrite=True
                )
