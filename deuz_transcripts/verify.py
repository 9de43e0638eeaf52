"""Verify (and repair) that every chat's search data matches what indexing it would write.

Per chat: message rows against their own payloads (digest, terms, positions,
counts, scope lookup rows), then the backend's search data against the rows
(PostgreSQL: ``tsvector_to_array`` per row; SQLite FTS5: each message with terms
of a searchable chat has exactly one FTS row holding exactly its tokens).
Chats are checked a batch at a time, a few statements per batch, never one per
chat or per message. A full run also sweeps the search data for rows no message
owns (SQLite FTS5: one pass over the FTS vocabulary checks every row exactly).
Nothing is changed unless ``fix``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from .backends.base import SearchDataChecks
from .backfill import pk_batches
from .models import Chat, ChatScope, LegacyChat, Tombstone
from .prepared import PreparedChat
from .problems import Problem
from .sql import ChatWriter
from .sql.stored import MessageRow, prepared_from_rows, read_message_rows
from .stores import DjangoChatStore

__all__ = ["Problem", "Verifier", "VerifyResult"]

Progress = Callable[[str, int, int], None]


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
        progress: Progress | None = None,
    ) -> None:
        self.using = using
        self.batch_size = batch_size
        self.chat_ids = None if chat_ids is None else sorted(set(chat_ids))
        self.writer = ChatWriter(using)
        backend = self.writer.backend
        self.backend_name = backend.name
        self.checks: SearchDataChecks = backend.checks
        self.progress = progress or (lambda label, done, total: None)

    def _rows(self, model: type[Chat] | type[LegacyChat]) -> Any:
        rows = model.objects.using(self.using).all()
        return rows if self.chat_ids is None else rows.filter(chat_id__in=self.chat_ids)

    def problems(self, source: str = "all") -> Iterator[Problem]:
        """Every problem found, a batch of chats at a time, then the sweep (full runs only)."""
        full = self.chat_ids is None
        if source in ("legacy", "all"):
            yield from self._walk("legacy", self._rows(LegacyChat), self.check_legacy_chats)
        if source in ("stored", "all"):
            yield from self._walk("stored", self._rows(Chat), self.check_chats)
        if full:
            yield from self.checks.sweep(self.batch_size, self.progress)

    def _walk(
        self, label: str, rows: Any, check: Callable[[list[tuple[int, str]]], list[Problem]]
    ) -> Iterator[Problem]:
        total = rows.count()
        done = 0
        self.progress(label, done, total)
        for batch in pk_batches(rows, self.batch_size):
            yield from check(batch)
            done += len(batch)
            self.progress(label, done, max(done, total))

    def run(
        self,
        source: str = "all",
        *,
        fix: bool = False,
        report: Callable[[Problem], None] | None = None,
    ) -> VerifyResult:
        """Report (and with ``fix`` repair) every problem, then look again if anything was fixed.

        Everything is found first, exactly as a run without ``fix`` finds it (so both report
        the same problems and counts), then fixed: per-chat problems first, the sweep's last.
        """
        result = VerifyResult()
        found = []
        for problem in self.problems(source):
            result.found += 1
            if problem.chat_id:
                result.chats.add(problem.chat_id)
            if report is not None:
                report(problem)
            if fix:
                found.append(problem)
        if fix and found:
            for problem in sorted(found, key=lambda problem: problem.source == "sweep"):
                self.fix(problem)
            result.remaining = list(self.problems(source))
        return result

    # checks

    def check_legacy_chats(self, batch: Sequence[tuple[int, str]]) -> list[Problem]:
        """A legacy row not tombstoned and not owned by a store must be indexed as it is;
        one that cannot be read is reported (``unreadable``), and the run goes on."""
        chat_ids = [chat_id for _, chat_id in batch]
        locked = self.writer.read_many(chat_ids)
        legacy = {
            row.chat_id: row
            for row in LegacyChat.objects.using(self.using).filter(chat_id__in=chat_ids)
        }
        expected: dict[str, PreparedChat] = {}
        problems = []
        for chat_id in chat_ids:
            if locked[chat_id].tombstoned or chat_id not in legacy:
                continue
            try:
                expected[chat_id] = PreparedChat.of(DjangoChatStore.record_of(legacy[chat_id]))
            except Exception as exc:  # reported like the backfill reports it; not fixable
                reason = f"legacy row cannot be read: {type(exc).__name__}: {exc}"
                problems.append(Problem(chat_id, "unreadable", reason, "legacy"))
        rows = [
            locked[chat_id].row
            for chat_id in expected
            if locked[chat_id].revision == 0 and locked[chat_id].row is not None
        ]
        messages, scopes = self._read_rows([row for row in rows if row and row.is_indexed])
        keeps_search_text = self.writer.backend.rows.keeps_search_text
        for chat_id, prepared in expected.items():
            row = locked[chat_id].row
            if locked[chat_id].revision > 0:
                continue  # a store owns this chat: its copy wins
            if row is None:
                problems.append(Problem(chat_id, "missing", "legacy chat not indexed", "legacy"))
            elif row.is_indexed and self.writer.differences(
                row, prepared, messages[row.pk], scopes[row.pk], keeps_search_text=keeps_search_text
            ):
                detail = "legacy chat differs from its indexed copy"
                problems.append(Problem(chat_id, "stale", detail, "legacy"))
        order = {chat_id: number for number, chat_id in enumerate(chat_ids)}
        return sorted(problems, key=lambda problem: order[problem.chat_id])

    def check_chats(self, batch: Sequence[tuple[int, str]]) -> list[Problem]:
        """The stored rows of a batch of chats against their payloads, and their search
        data against the rows: a few statements for the whole batch."""
        db = self.using
        chats = list(Chat.objects.using(db).filter(pk__in=[pk for pk, _ in batch]).order_by("pk"))
        tombstoned = set(
            Tombstone.objects.using(db)
            .filter(chat_id__in=[chat.chat_id for chat in chats])
            .values_list("chat_id", flat=True)
        )
        live = [chat for chat in chats if chat.chat_id not in tombstoned]
        messages, scopes = self._read_rows(live)
        keeps_search_text = self.writer.backend.rows.keeps_search_text
        found: dict[str, list[Problem]] = {chat.chat_id: [] for chat in chats}
        searchable: list[tuple[Chat, Sequence[MessageRow], Sequence[list[str] | None] | None]] = []
        for chat in chats:
            if chat.chat_id in tombstoned:
                found[chat.chat_id].append(
                    Problem(chat.chat_id, "orphaned", "rows of a deleted (tombstoned) chat")
                )
                continue
            rows = messages[chat.pk]
            if not chat.is_indexed:
                searchable.append((chat, [], None))
                continue
            expected = self._expected(chat, rows)
            if expected is None:  # an unreadable payload: reported as stale, --fix cannot help
                found[chat.chat_id].append(
                    Problem(chat.chat_id, "stale", "a message payload cannot be read")
                )
                searchable.append((chat, rows, None))
                continue
            differences = self.writer.differences(
                chat, expected, rows, scopes[chat.pk], keeps_search_text=keeps_search_text
            )
            detail = "; ".join(differences)
            if detail:
                found[chat.chat_id].append(Problem(chat.chat_id, "stale", detail))
            searchable.append((chat, rows, [message.terms for message in expected.prepared]))
        for problem in self.checks.check_chats(searchable, full_run=self.chat_ids is None):
            found[problem.chat_id].append(problem)
        return [problem for problems in found.values() for problem in problems]

    def _read_rows(
        self, chats: Sequence[Chat]
    ) -> tuple[dict[int, list[MessageRow]], dict[int, dict[str, str]]]:
        """Message rows (in position order, as tuples) and scope lookup rows of each chat,
        in two statements."""
        pks = [chat.pk for chat in chats]
        messages = read_message_rows(self.using, pks)
        scopes: dict[int, dict[str, str]] = {pk: {} for pk in pks}
        if not pks:
            return messages, scopes
        scope_rows = ChatScope.objects.using(self.using).filter(chat_id__in=pks)
        for chat_pk, key, value in scope_rows.values_list("chat_id", "key", "value"):
            scopes[chat_pk][key] = value
        return messages, scopes

    def _expected(self, chat: Chat, rows: Sequence[MessageRow]) -> PreparedChat | None:
        try:
            return prepared_from_rows(chat, rows)
        except Exception:
            return None

    # repair

    def fix(self, problem: Problem) -> None:
        """Repair one problem, in its own transaction, holding the chat's write lock."""
        if problem.kind == "unreadable":
            return  # only a person can repair a row that cannot be read
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
                prepared = self._expected(chat, read_message_rows(self.using, [chat.pk])[chat.pk])
                if prepared is not None:  # a payload that cannot be read stays reported
                    self.writer.write(locked, prepared, rewrite=True)
