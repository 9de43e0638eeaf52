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

from django.db import connections, transaction

from .backends.base import table
from .backfill import chat_is_current, pk_batches, record_from_rows
from .fts_check import FtsChecker
from .indexing import index_chat
from .memory import PreparedMessage, prepare_messages
from .models import Chat, ChatScope, LegacyChat, Message, Tombstone
from .sql_index import DjangoTranscriptIndex, message_digest
from .stores import DjangoChatStore
from .text import stored_term

__all__ = ["Problem", "Verifier", "VerifyResult"]


@dataclass(frozen=True)
class Problem:
    """One chat whose search data is ``missing``, ``stale`` or ``orphaned``."""

    chat_id: str
    kind: str
    detail: str
    source: str = "stored"  # what --fix repairs: "stored", "legacy", "fts" or "sweep"
    rowids: tuple[int, ...] = ()

    def __str__(self) -> str:
        return f"{self.kind}: {self.chat_id}: {self.detail}"


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
        self.index = DjangoTranscriptIndex(using)
        self.backend_name = self.index.backend_name
        self.fts = FtsChecker(using) if self.backend_name == "sqlite-fts5" else None

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
        if self.fts is not None and self.chat_ids is None:
            yield from self.fts.sweep(self.batch_size)

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
        if Tombstone.objects.using(self.using).filter(chat_id=chat_id).exists():
            return []
        record = DjangoChatStore(self.using).load_chat(chat_id)
        chat = Chat.objects.using(self.using).filter(chat_id=chat_id).first()
        if record is None or (chat is not None and chat.revision > 0):
            return []
        if chat is None:
            return [Problem(chat_id, "missing", "legacy chat not indexed", "legacy")]
        if chat.is_indexed and not chat_is_current(self.using, chat, record):
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
        problems = []
        if chat.is_indexed:
            expected = self._expected(chat, rows)
            detail = self._rows_detail(chat, rows, expected)
            if detail:
                problems.append(Problem(chat.chat_id, "stale", detail))
            problems.extend(self._search_data(chat, rows, expected))
        elif self.fts is not None:
            problems.extend(self.fts.check_chat(chat, []))
        return problems

    def _expected(self, chat: Chat, rows: Sequence[Message]) -> list[PreparedMessage] | None:
        try:
            return prepare_messages(record_from_rows(chat, rows))
        except Exception:  # an unreadable payload: reported as stale, --fix cannot help
            return None

    def _rows_detail(
        self, chat: Chat, rows: Sequence[Message], expected: list[PreparedMessage] | None
    ) -> str:
        """What differs between the rows and indexing them again ("" when nothing)."""
        if expected is None:
            return "a message payload cannot be read"
        reasons = []
        if [row.position for row in rows] != list(range(len(rows))):
            reasons.append("message positions have gaps")
        keep_text = self.index.backend.stores_search_text()
        bad = [
            row.position
            for row, message in zip(rows, expected, strict=True)
            if row.digest != message_digest(message)
            or row.visible_position != message.visible_position
            or row.has_terms != bool(message.terms)
            or row.message_id != message.message_id
            or (keep_text and row.search_text != " ".join(message.terms or ()))
        ]
        if bad:
            reasons.append(f"{len(bad)} message row(s) out of date (first index {bad[0]})")
        if chat.message_count != len(rows):
            reasons.append(f"message_count {chat.message_count} != {len(rows)}")
        indexed = sum(1 for message in expected if message.terms)
        if chat.indexed_count != indexed:
            reasons.append(f"indexed_count {chat.indexed_count} != {indexed}")
        scope_rows = ChatScope.objects.using(self.using).filter(chat=chat)
        if dict(scope_rows.values_list("key", "value")) != chat.scope:
            reasons.append("scope lookup rows differ from the scope")
        return "; ".join(reasons)

    def _search_data(
        self, chat: Chat, rows: Sequence[Message], expected: list[PreparedMessage] | None
    ) -> list[Problem]:
        if self.fts is not None:
            return self.fts.check_chat(chat, rows)
        if self.backend_name != "postgresql" or expected is None:
            return []  # LIKE: search_text is the search data, checked with the rows
        from .backends.postgresql import VECTOR_COLUMN

        with connections[self.using].cursor() as cursor:
            cursor.execute(
                f"SELECT id, tsvector_to_array({VECTOR_COLUMN}) FROM {table(Message)} "
                "WHERE chat_id = %s",
                [chat.pk],
            )
            vectors = dict(cursor.fetchall())
        missing = stale = 0
        for row, message in zip(rows, expected, strict=True):
            want = {stored_term(term) for term in message.terms or ()}
            have = vectors.get(row.pk)
            if want and have is None:
                missing += 1
            elif set(have or ()) != want:
                stale += 1
        problems = []
        if missing:
            problems.append(Problem(chat.chat_id, "missing", f"{missing} row(s) without a vector"))
        if stale:
            problems.append(Problem(chat.chat_id, "stale", f"{stale} row(s) with a wrong vector"))
        return problems

    # repair

    def fix(self, problem: Problem) -> None:
        """Repair one problem, in its own transaction, holding the chat's write lock."""
        with transaction.atomic(using=self.using):
            if problem.source in ("fts", "sweep"):
                if self.fts is not None:
                    self.fts.fix_rowids(problem.rowids)
                return
            with connections[self.using].cursor() as cursor:
                self.index.backend.lock_chat(cursor, problem.chat_id)
            if problem.source == "legacy":
                record = DjangoChatStore(self.using).load_chat(problem.chat_id)
                if record is not None:
                    index_chat(self.index, record)
                return
            chat = Chat.objects.using(self.using).filter(chat_id=problem.chat_id).first()
            if chat is None:
                return
            if self.fts is not None:  # first the FTS rows exactly as the rows say
                rowids = set(self.fts.chat_rowids(chat))
                rowids.update(
                    Message.objects.using(self.using).filter(chat=chat).values_list("pk", flat=True)
                )
                self.fts.fix_rowids(sorted(rowids))
            if problem.kind == "orphaned":
                self.index.purge(chat.chat_id)  # a tombstoned chat: nothing may remain
            elif chat.is_indexed:
                self._rewrite(chat)

    def _rewrite(self, chat: Chat) -> None:
        """Rewrite every row of the chat from its payload, and its scope lookup rows."""
        rows = list(Message.objects.using(self.using).filter(chat=chat).order_by("position"))
        record = record_from_rows(chat, rows)
        Message.objects.using(self.using).filter(chat=chat).update(digest="")
        ChatScope.objects.using(self.using).filter(chat=chat).delete()
        ChatScope.objects.using(self.using).bulk_create(
            ChatScope(chat=chat, key=key, value=value) for key, value in chat.scope.items()
        )
        self.index.index(record)
