"""Backfill: index legacy ``deuz_chats`` rows and re-index stored chats.

Rows are walked by primary-key ranges (``pk > last ORDER BY pk LIMIT n``), never
OFFSET and never all at once, so memory stays constant and rows added during a
run are still seen. Chats are written ``chats_per_transaction`` to a transaction
(one commit, not one per chat, is what makes a backfill fast), each chat in its
own savepoint, so a failing chat rolls back alone. Legacy chats with no row yet
(all of them, in a first backfill) are written a group at a time in a few
multi-row statements, falling back to the chat-by-chat path if the group write
fails. A killed run loses at most
the transaction in flight, and a rerun converges because a chat already in its
indexed form is recognised as unchanged and not written.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.db import connections, transaction
from django.db.models import QuerySet

from .indexing import index_chat
from .memory import prepare_messages
from .models import Chat, ChatScope, LegacyChat, Message, Tombstone
from .records import ChatRecord, with_filled_ids
from .sql_index import DjangoTranscriptIndex, from_db_datetime, message_digest
from .stores import DjangoChatStore, record_from_rows

__all__ = [
    "SOURCES",
    "Backfill",
    "BackfillStats",
    "Outcome",
    "chat_is_current",
    "pk_batches",
    "record_from_rows",
]

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


def chat_is_current(using: str, chat: Chat | None, record: ChatRecord) -> bool:
    """Whether indexing ``record`` would change nothing: same fields, same row digests."""
    if chat is None or not chat.is_indexed:
        return False
    prepared = prepare_messages(with_filled_ids(record))
    if (
        chat.scope != record.scope
        or from_db_datetime(chat.updated_at) != record.updated_at
        or chat.message_count != len(prepared)
        or chat.indexed_count != sum(1 for message in prepared if message.terms)
    ):
        return False
    stored = list(
        Message.objects.using(using)
        .filter(chat=chat)
        .order_by("position")
        .values_list("position", "digest")
    )
    expected = [(message.index, message_digest(message)) for message in prepared]
    if stored != expected:
        return False
    scope_rows = ChatScope.objects.using(using).filter(chat=chat).values_list("key", "value")
    return dict(scope_rows) == chat.scope


Progress = Callable[[str, int, int], None]
Failure = Callable[[str, BaseException], None]


class Backfill:
    """One backfill run over database ``using``; ``dry_run`` counts without writing."""

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
    ) -> None:
        self.using = using
        self.batch_size = batch_size
        self.chats_per_transaction = max(1, chats_per_transaction)
        self.chat_ids = None if chat_ids is None else sorted(set(chat_ids))
        self.dry_run = dry_run
        self.index = DjangoTranscriptIndex(using)
        self.progress = progress or (lambda label, done, total: None)
        self.on_failure = on_failure or (lambda chat_id, exc: None)

    def _rows(self, model: type[Chat] | type[LegacyChat]) -> QuerySet[Any]:
        rows = model.objects.using(self.using).all()
        return rows if self.chat_ids is None else rows.filter(chat_id__in=self.chat_ids)

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
        self.progress(label, done, total)
        step = self.chats_per_transaction
        for batch in pk_batches(rows, self.batch_size):
            for start in range(0, len(batch), step):
                group = batch[start : start + step]
                with self._group_transaction():
                    outcomes = self._new_legacy_chats(group) if label == "legacy" else {}
                    for pk, chat_id in group:
                        try:
                            outcome = outcomes.get(chat_id)
                            if isinstance(outcome, BaseException):
                                raise outcome
                            stats.add(outcome or handle(pk, chat_id))
                        except Exception as exc:  # reported, and the run goes on
                            stats.failed += 1
                            stats.failed_ids.append(chat_id)
                            self.on_failure(chat_id, exc)
                        done += 1
                        self.progress(label, done, max(total, done))

    def _new_legacy_chats(self, group: list[tuple[int, str]]) -> dict[str, Outcome | Exception]:
        """Index the group's legacy chats that have no chat row yet, all in one go.

        A first backfill meets only such chats, and statements per group instead of
        per chat are what make it fast. Locks, tombstones and rows are read for the
        whole group; each record is validated alone (a bad one fails alone); the rest
        are written together by ``insert_new_chats``. Returns the outcome (or error)
        of each chat decided here. Chats with a row already, and every chat when
        anything here fails (rolled back to the savepoint), take the chat-by-chat path.
        """
        if self.dry_run:
            return {}
        try:
            with transaction.atomic(using=self.using):
                return self._write_new_legacy_chats([chat_id for _, chat_id in group])
        except Exception:  # the chat-by-chat path retries each chat and reports its error
            return {}

    def _write_new_legacy_chats(self, chat_ids: list[str]) -> dict[str, Outcome | Exception]:
        db = self.using
        with connections[db].cursor() as cursor:
            self.index.backend.lock_chats(cursor, chat_ids)
        tombstoned = set(
            Tombstone.objects.using(db)
            .filter(chat_id__in=chat_ids)
            .values_list("chat_id", flat=True)
        )
        existing = set(
            Chat.objects.using(db).filter(chat_id__in=chat_ids).values_list("chat_id", flat=True)
        )
        legacy = {
            row.chat_id: row for row in LegacyChat.objects.using(db).filter(chat_id__in=chat_ids)
        }
        outcomes: dict[str, Outcome | Exception] = {}
        fresh = []
        for chat_id in chat_ids:
            if chat_id in tombstoned:
                outcomes[chat_id] = Outcome.TOMBSTONED
            elif chat_id not in legacy:
                outcomes[chat_id] = Outcome.SKIPPED  # deleted since the batch was read
            elif chat_id not in existing:
                try:
                    record = with_filled_ids(DjangoChatStore.record_of(legacy[chat_id]))
                    fresh.append((record, prepare_messages(record)))
                except Exception as exc:  # reported as this chat's failure
                    outcomes[chat_id] = exc
        if fresh:
            self.index.insert_new_chats(fresh)
            outcomes.update((record.chat_id, Outcome.INDEXED) for record, _ in fresh)
        return outcomes

    @contextmanager
    def _group_transaction(self) -> Iterator[None]:
        if self.dry_run:
            yield
            return
        with transaction.atomic(using=self.using):
            yield

    @contextmanager
    def _chat_transaction(self, chat_id: str) -> Iterator[None]:
        """A savepoint per chat, holding the chat's write lock before anything is read,
        so a store writing the same chat concurrently is never overwritten with older rows."""
        if self.dry_run:
            yield
            return
        with transaction.atomic(using=self.using):
            with connections[self.using].cursor() as cursor:
                self.index.backend.lock_chat(cursor, chat_id)
            yield

    def legacy_chat(self, pk: int, chat_id: str) -> Outcome:
        """Index one ``deuz_chats`` row with ``index_chat``'s id filling."""
        with self._chat_transaction(chat_id):
            if Tombstone.objects.using(self.using).filter(chat_id=chat_id).exists():
                return Outcome.TOMBSTONED
            record = DjangoChatStore(self.using).load_chat(chat_id)
            if record is None:
                return Outcome.SKIPPED  # deleted since the batch was read
            chat = Chat.objects.using(self.using).filter(chat_id=chat_id).first()
            if chat is not None and chat.revision > 0:
                return Outcome.SKIPPED  # a store owns this chat: its copy wins
            record = with_filled_ids(record)
            if chat_is_current(self.using, chat, record):
                return Outcome.UNCHANGED
            if not self.dry_run:
                with self.index.locked_write(chat, chat_id, 0):  # locked and checked above
                    index_chat(self.index, record)
            return Outcome.INDEXED

    def stored_chat(self, pk: int, chat_id: str) -> Outcome:
        """Re-index one chat from its own rows (e.g. after the stored form changed)."""
        with self._chat_transaction(chat_id):
            chat = Chat.objects.using(self.using).filter(pk=pk).first()
            if chat is None:
                return Outcome.SKIPPED
            if Tombstone.objects.using(self.using).filter(chat_id=chat.chat_id).exists():
                return Outcome.TOMBSTONED
            if not chat.is_indexed:
                return Outcome.SKIPPED  # taken out of search on purpose: stays out
            rows = list(Message.objects.using(self.using).filter(chat=chat).order_by("position"))
            record = record_from_rows(chat, rows)
            if chat_is_current(self.using, chat, record):
                return Outcome.UNCHANGED
            if not self.dry_run:
                with self.index.locked_write(chat, chat.chat_id, chat.revision):
                    self.index.index(record)
            return Outcome.INDEXED
