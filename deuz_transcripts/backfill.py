"""Backfill: index legacy ``deuz_chats`` rows and re-index stored chats.

Rows are walked by primary-key ranges (``pk > last ORDER BY pk LIMIT n``), never
OFFSET and never all at once, so memory stays constant and rows added during a
run are still seen. Chats are written ``chats_per_transaction`` to a transaction
(one commit, not one per chat, is what makes a backfill fast), each chat in its
own savepoint, so a failing chat rolls back alone. Legacy chats with no row yet
(all of them, in a first backfill) are written a group at a time in a few
multi-row statements, falling back to the chat-by-chat path if the group write
fails. On SQLite, whose group transaction holds the one write lock, their records are
read, validated and folded before it and read again under it; elsewhere, once, under
the chats' locks. A killed run loses at most the transaction in flight, and a rerun
converges because a chat already in its indexed form is recognised as unchanged and
not written.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from django.db import connections, transaction
from django.db.models import F, QuerySet
from django.db.models.functions import Mod

from .models import Chat, LegacyChat
from .prepared import PreparedChat, check_record
from .records import fill_message_ids
from .signals import chat_indexed, send_after_commit
from .sql import ChatWriter, LockedChat
from .sql.errors import retry_lock_conflicts
from .sql.stored import prepared_from_rows
from .sql.writer import chat_messages
from .stores import DjangoChatStore

__all__ = ["SOURCES", "Backfill", "BackfillStats", "Outcome", "pk_batches"]

SOURCES = ("legacy", "stored", "all")


class Outcome(enum.Enum):
    INDEXED = "indexed"
    UNCHANGED = "unchanged"
    TOMBSTONED = "skipped (tombstoned)"
    SKIPPED = "skipped"


@dataclass
class BackfillStats:
    """Counts of one run; ``skipped`` holds chats left alone on purpose (see ``Outcome``)."""

    indexed: int = 0
    unchanged: int = 0
    tombstoned: int = 0
    skipped: int = 0
    failed: int = 0
    failed_ids: list[str] = field(default_factory=list)

    def add(self, outcome: Outcome) -> None:
        name = {Outcome.TOMBSTONED: "tombstoned"}.get(outcome, outcome.value)
        setattr(self, name, getattr(self, name) + 1)

    def merge(self, other: BackfillStats) -> None:
        """Add the counts of another run (a worker's share) to these."""
        for name in ("indexed", "unchanged", "tombstoned", "skipped", "failed"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.failed_ids.extend(other.failed_ids)

    @property
    def total(self) -> int:
        return self.indexed + self.unchanged + self.tombstoned + self.skipped + self.failed


def pk_batches(queryset: QuerySet[Any], batch_size: int) -> Iterator[list[tuple[int, str]]]:
    """``(pk, chat_id)`` pairs in pk order, ``batch_size`` at a time, by key ranges."""
    last: int | None = None
    while True:
        page = queryset if last is None else queryset.filter(pk__gt=last)
        batch = list(page.order_by("pk").values_list("pk", "chat_id")[:batch_size])
        if not batch:
            return
        yield batch
        last = batch[-1][0]


Progress = Callable[[str, int, int], None]
Failure = Callable[[str, BaseException], None]


class Backfill:
    """One backfill run over database ``using``; ``dry_run`` counts without writing.

    ``share=(index, count)`` limits the run to the chats whose primary key is ``index``
    modulo ``count``: the shares of ``count`` runs are disjoint and cover every chat, so
    workers (``backfill_workers``) never write the same chat.
    """

    def __init__(
        self,
        using: str = "default",
        *,
        batch_size: int = 500,
        chat_ids: Iterable[str] | None = None,
        dry_run: bool = False,
        progress: Progress | None = None,
        on_failure: Failure | None = None,
        chats_per_transaction: int = 50,
        share: tuple[int, int] = (0, 1),
    ) -> None:
        index, count = share
        if not 0 <= index < count:
            raise ValueError(f"share must be (index, count) with 0 <= index < count, not {share}")
        self.share = share
        self.using = using
        self.batch_size = batch_size
        self.chats_per_transaction = max(1, chats_per_transaction)
        self.chat_ids = None if chat_ids is None else sorted(set(chat_ids))
        self.dry_run = dry_run
        self.writer = ChatWriter(using)
        self.progress = progress or (lambda label, done, total: None)
        self.on_failure = on_failure or (lambda chat_id, exc: None)

    def _rows(self, model: type[Chat] | type[LegacyChat]) -> QuerySet[Any]:
        rows = model.objects.using(self.using).all()
        if self.chat_ids is not None:
            rows = rows.filter(chat_id__in=self.chat_ids)
        index, count = self.share
        if count > 1:
            rows = rows.annotate(backfill_share=Mod(F("pk"), count)).filter(backfill_share=index)
        return rows

    def run(self, source: str = "all") -> BackfillStats:
        if source not in SOURCES:
            raise ValueError(f"source must be one of {SOURCES}, not {source!r}")
        stats = BackfillStats()
        if source in ("legacy", "all"):
            self._walk("legacy", self._rows(LegacyChat), self.legacy_chat, stats)
        if source in ("stored", "all"):
            chats = self._rows(Chat)
            if source == "all":  # indexed-only copies of legacy rows were just handled
                legacy_ids = LegacyChat.objects.using(self.using).values("chat_id")
                chats = chats.exclude(revision=0, chat_id__in=legacy_ids)
            self._walk("stored", chats, self.stored_chat, stats)
        return stats

    def _walk(
        self,
        label: str,
        rows: QuerySet[Any],
        handle: Callable[[int, str], Outcome],
        stats: BackfillStats,
    ) -> None:
        total = rows.count()
        done = 0
        index, count = self.share
        shown = label if count == 1 else f"{label} (worker {index + 1}/{count})"
        self.progress(shown, done, total)
        step = self.chats_per_transaction
        legacy = label == "legacy"  # new legacy chats take the group's fast path
        for batch in pk_batches(rows, self.batch_size):
            for start in range(0, len(batch), step):
                group = batch[start : start + step]
                written, failures = retry_lock_conflicts(
                    self.using, partial(self._group, group, handle, legacy)
                )
                stats.merge(written)
                for chat_id, exc in failures:
                    self.on_failure(chat_id, exc)
                done += len(group)
                self.progress(shown, done, max(total, done))

    def _group(
        self, group: list[tuple[int, str]], handle: Callable[[int, str], Outcome], legacy: bool
    ) -> tuple[BackfillStats, list[tuple[str, Exception]]]:
        """One group's transaction: its counts and its chats' failures, told only once it
        has committed, so a group tried again after a lock conflict counts once."""
        written = BackfillStats()
        failures: list[tuple[str, Exception]] = []
        ready = self._prepare_new_legacy(group) if legacy else {}
        with self._group_transaction():
            outcomes = self._new_legacy_chats(group, ready) if legacy else {}
            for pk, chat_id in group:
                try:
                    outcome = outcomes.get(chat_id)
                    if isinstance(outcome, BaseException):
                        raise outcome
                    written.add(outcome or handle(pk, chat_id))
                except Exception as exc:  # reported, and the run goes on
                    written.failed += 1
                    written.failed_ids.append(chat_id)
                    failures.append((chat_id, exc))
        return written, failures

    def _prepare_new_legacy(self, group: list[tuple[int, str]]) -> dict[str, _ReadLegacy]:
        """Read and prepare, before the group's transaction, the legacy chats that have no
        chat row yet: their validation, JSON encoding and term extraction (SQLite only:
        ``_group_holds_every_writer``).

        Why: on SQLite the group's transaction holds the database's one write lock, so
        work done inside it is work no other worker can overlap. Done here, workers fold
        text on both cores while one of them writes. Inside the transaction each chat's
        row is read again under the lock; a chat whose row changed meanwhile is prepared
        again from what the lock saw, so nothing stale is written.
        """
        if self.dry_run or not self._group_holds_every_writer():
            return {}
        chat_ids = [chat_id for _, chat_id in group]
        try:
            indexed = set(
                Chat.objects.using(self.using)
                .filter(chat_id__in=chat_ids)
                .values_list("chat_id", flat=True)
            )
            fresh = [chat_id for chat_id in chat_ids if chat_id not in indexed]
            rows = self._legacy_rows(fresh)
        except Exception:  # e.g. a busy database: the transaction reads and prepares them
            return {}
        return {row[0]: _ReadLegacy(row, _prepared(row)) for row in rows}

    def _group_holds_every_writer(self) -> bool:
        """Whether a group's transaction keeps other workers from writing (SQLite's one
        write lock). Elsewhere locks are per chat, so the chats are read and prepared
        once, under their locks, instead of read before the transaction and again."""
        return connections[self.using].vendor == "sqlite"

    def _legacy_rows(self, chat_ids: list[str]) -> list[tuple[Any, ...]]:
        if not chat_ids:
            return []
        rows = LegacyChat.objects.using(self.using).filter(chat_id__in=chat_ids)
        return list(rows.values_list(*_LEGACY_FIELDS))

    def _new_legacy_chats(
        self, group: list[tuple[int, str]], ready: dict[str, _ReadLegacy]
    ) -> dict[str, Outcome | Exception]:
        """Index the group's legacy chats that have no chat row yet, all in one go.

        A first backfill meets only such chats, and statements per group instead of
        per chat are what make it fast. Locks, tombstones and rows are read for the
        whole group; each record is validated alone (a bad one fails alone); the rest
        are written together by ``insert_new_chats``. Returns the outcome (or error)
        of each chat decided here. Chats with a row already, and every chat when
        anything here fails (rolled back to the savepoint), take the chat-by-chat path.
        ``ready``: chats prepared before the transaction (``_prepare_new_legacy``).
        """
        if self.dry_run:
            return {}
        try:
            with transaction.atomic(using=self.using):
                return self._write_new_legacy_chats([chat_id for _, chat_id in group], ready)
        except Exception:  # the chat-by-chat path retries each chat and reports its error
            return {}

    def _write_new_legacy_chats(
        self, chat_ids: list[str], ready: dict[str, _ReadLegacy]
    ) -> dict[str, Outcome | Exception]:
        locked = self.writer.lock_many(chat_ids)
        legacy = {row[0]: row for row in self._legacy_rows(chat_ids)}
        outcomes: dict[str, Outcome | Exception] = {}
        fresh = []
        for chat_id in chat_ids:
            if locked[chat_id].tombstoned:
                outcomes[chat_id] = Outcome.TOMBSTONED
            elif chat_id not in legacy:
                outcomes[chat_id] = Outcome.SKIPPED  # deleted since the batch was read
            elif locked[chat_id].row is None:
                row = legacy[chat_id]
                early = ready.get(chat_id)
                chat = early.chat if early is not None and early.row == row else _prepared(row)
                if isinstance(chat, PreparedChat):
                    fresh.append(chat)
                else:
                    outcomes[chat_id] = chat  # reported as this chat's failure
        if fresh:
            self.writer.insert_new(fresh)
            for chat in fresh:
                self._announce(chat)
                outcomes[chat.chat_id] = Outcome.INDEXED
        return outcomes

    @contextmanager
    def _group_transaction(self) -> Iterator[None]:
        if self.dry_run:
            yield
            return
        with transaction.atomic(using=self.using):
            yield

    @contextmanager
    def _chat_transaction(self) -> Iterator[None]:
        """A savepoint per chat (none in a dry run); the chat's write lock is taken
        before anything is read, so a store writing the same chat concurrently is
        never overwritten with older rows."""
        if self.dry_run:
            yield
            return
        with transaction.atomic(using=self.using):
            yield

    def _announce(self, chat: PreparedChat) -> None:
        """``chat_indexed``, sent if and when the chat's transaction commits."""
        send_after_commit(
            chat_indexed, type(self), chat_id=chat.chat_id, scope=chat.scope, using=self.using
        )

    def _lock(self, chat_id: str) -> LockedChat:
        return self.writer.read(chat_id) if self.dry_run else self.writer.lock(chat_id)

    def legacy_chat(self, pk: int, chat_id: str) -> Outcome:
        """Index one ``deuz_chats`` row with ``index_chat``'s id filling."""
        with self._chat_transaction():
            locked = self._lock(chat_id)
            if locked.tombstoned:
                return Outcome.TOMBSTONED
            record = DjangoChatStore(self.using).load_chat(chat_id)
            if record is None:
                return Outcome.SKIPPED  # deleted since the batch was read
            if locked.revision > 0:
                return Outcome.SKIPPED  # a store owns this chat: its copy wins
            chat = PreparedChat.of(record)
            if self.writer.is_current(locked, chat):
                return Outcome.UNCHANGED
            if not self.dry_run:
                self.writer.write(locked, chat)
                self._announce(chat)
            return Outcome.INDEXED

    def stored_chat(self, pk: int, chat_id: str) -> Outcome:
        """Re-index one chat from its own rows (e.g. after the stored form changed)."""
        with self._chat_transaction():
            locked = self._lock(chat_id)
            row = locked.row
            if row is None or row.pk != pk:
                return Outcome.SKIPPED
            if locked.tombstoned:
                return Outcome.TOMBSTONED
            if not row.is_indexed:
                return Outcome.SKIPPED  # taken out of search on purpose: stays out
            rows = list(chat_messages(self.using, row).order_by("position"))
            chat = prepared_from_rows(row, rows)
            if self.writer.is_current(locked, chat):
                return Outcome.UNCHANGED
            if not self.dry_run:
                self.writer.write(locked, chat)
                self._announce(chat)
            return Outcome.INDEXED


#: The ``deuz_chats`` columns a legacy chat's record comes from, in ``values_list`` order.
_LEGACY_FIELDS = ("chat_id", "scope", "payload", "updated_at")


@dataclass(frozen=True)
class _ReadLegacy:
    """A legacy row as read before the group's transaction, and the chat prepared from it."""

    row: tuple[Any, ...]
    chat: PreparedChat | Exception


def _prepared(row: tuple[Any, ...]) -> PreparedChat | Exception:
    """The chat of a ``_LEGACY_FIELDS`` row with its terms and digests computed (what a
    write of it needs), or the error that makes it fail alone."""
    chat_id, scope, payload, updated_at = row
    try:
        record = DjangoChatStore.record_of(
            LegacyChat(chat_id=chat_id, scope=scope, payload=payload, updated_at=updated_at)
        )
        checked = check_record(record, revalidate=False)  # built just now: checked once
        return PreparedChat.from_checked(checked, fill_message_ids(checked)).compute_ahead()
    except Exception as exc:  # the chat fails alone, as in the chat-by-chat path
        return exc
