"""The one write unit of the SQL half: lock and load a chat, then write its rows.

The store, ``DjangoTranscriptIndex.index()``/``remove()``, the backfill and the
verifier all write through ``ChatWriter`` inside their own transaction, so "lock
the chat id, check its tombstone, read its row" and "which rows changed" are
written here once. Each caller that needs the locked state asks ``lock()`` for it
(taking a lock this transaction already holds is a no-op). The store, which has locked
and read the chat to check its revision, hands that over (``handing_over``) while it
calls ``transcript.index()``: the index's ``lock()`` then gets it without a statement,
and its write sets the store's revision with the chat row.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any

from django.db import connections
from django.db.models import QuerySet

from ..backends import SearchBackend, get_backend, get_search_rows
from ..backends.base import StoredMessage
from ..backends.batched import Statement
from ..backends.chat_filter import table
from ..backends.search_rows import NewMessage, NewRows, SearchRows, StoredRow
from ..conf import conf
from ..models import Chat, ChatScope, Message, Tombstone
from ..prepared import PreparedChat, PreparedMessage
from ..records import ChatRecord, fill_ids
from .chat_rows import (
    insert_chat,
    insert_chats,
    insert_scope_rows,
    load_chat,
    new_chat_sql,
    scope_rows_sql,
    update_chat_sql,
)
from .stored import stored_differences, to_db_datetime
from .stored_forms import record_form, record_form_sql

__all__ = ["ChatWriter", "HandOver", "LockedChat", "chat_messages"]

#: Up to this many ids an append may take are looked up in the chat's stored ids; more,
#: and every stored id of the chat is read (a bound on one statement's parameters).
_IDS_LOOKED_UP = 500
#: Up to this many changed rows of a chat, their stored terms are read by primary key;
#: more (a rewrite), with the rest of the chat's rows.
_STALE_BY_PK = 500


def chat_messages(using: str, chat: Chat) -> QuerySet[Message]:
    """A chat's message rows, found by tenant and chat: on a partitioned (or distributed)
    schema the tenant names the one partition (shard) that holds them."""
    return Message.objects.using(using).filter(tenant=chat.tenant, chat=chat)


@dataclass(frozen=True)
class LockedChat:
    """A chat id whose write lock this transaction holds, and what the database has for it;
    ``sets_revision``: the revision a write over this lock sets with the chat row (the
    store's, handed over), ``None`` to keep the row's."""

    chat_id: str
    tombstoned: bool
    row: Chat | None
    sets_revision: int | None = None
    #: The key reserved for the chat row a write inserts (a chat with no row, on an
    #: engine whose ``SearchRows.new_chat_key_sql`` the lock's round trip evaluated).
    new_key: int | None = None

    @property
    def revision(self) -> int:
        return 0 if self.row is None else self.row.revision


@dataclass
class HandOver:
    """A lock the store holds, offered to the next ``lock()`` of its chat in its database."""

    using: str
    locked: LockedChat
    #: A ``lock()`` returned it (once: a later one reads the row the write changed).
    taken: bool = False
    #: The chat row was written over it, with its ``sets_revision``.
    written: bool = field(default=False)


#: The store's lock on offer in this context (thread, task) while it calls ``index()``.
_handed: ContextVar[HandOver | None] = ContextVar("deuz_transcripts_handed_lock", default=None)


def _new_rows(chat: Chat, messages: Sequence[PreparedMessage], keeps_search_text: bool) -> NewRows:
    """The message rows of ``messages`` for ``chat``, with their space-separated terms."""
    texts = [message.search_text for message in messages]
    return NewRows(
        chat,
        [
            NewMessage(
                tenant=chat.tenant,
                position=message.index,
                message_id=message.message_id,
                role=message.role,
                payload=message.payload,
                digest=message.digest,
                visible_position=message.visible_position,
                search_text=text if keeps_search_text else None,
                has_terms=bool(text),
            )
            for message, text in zip(messages, texts, strict=True)
        ],
        texts,
    )


def _wrote(using: str, locked: LockedChat) -> None:
    """Note that the chat row was written over the handed-over ``locked``."""
    handed = _handed.get()
    if handed is not None and handed.using == using and handed.locked is locked:
        handed.written = True


class ChatWriter:
    """Writes chats into database ``using``; every method runs in the caller's transaction."""

    def __init__(self, using: str = "default") -> None:
        self.using = using

    @property
    def backend(self) -> SearchBackend:
        """Looked up at each use: ``SQLITE_BACKEND`` may change between calls."""
        return get_backend(self.using)

    # locking

    def lock(self, chat_id: str) -> LockedChat:
        """Take the chat's write lock, then read its tombstone and row; the lock a store
        hands over (``handing_over``) is returned as it is, once, with no statement."""
        handed = _handed.get()
        if (
            handed is not None
            and not handed.taken
            and handed.using == self.using
            and handed.locked.chat_id == chat_id
        ):
            handed.taken = True
            return handed.locked
        return self._load_one(chat_id, locking=True)

    @contextmanager
    def handing_over(self, locked: LockedChat, *, revision: int) -> Iterator[HandOver]:
        """Offer ``locked`` (taken in the caller's transaction) to the next ``lock()`` of
        its chat on this database, as setting ``revision``; whether a write used it is
        ``written`` once the block ends (else the caller sets the revision itself)."""
        handed = HandOver(self.using, replace(locked, sets_revision=revision))
        token = _handed.set(handed)
        try:
            yield handed
        finally:
            _handed.reset(token)

    def read(self, chat_id: str) -> LockedChat:
        """What ``lock`` reads, without the lock (a dry run, which writes nothing)."""
        return self._load_one(chat_id, locking=False)

    def _load_one(self, chat_id: str, *, locking: bool) -> LockedChat:
        """One chat's tombstone and row (``locking``: after its lock, in the same round
        trip, with a key reserved for its row if it has none): this runs at every store
        write."""
        rows = get_search_rows(self.using)
        with connections[self.using].cursor() as cursor:
            tombstoned, row, new_key = load_chat(
                cursor,
                self.using,
                chat_id,
                before=[rows.lock_sql(chat_id)] if locking else (),
                new_key=rows.new_chat_key_sql if locking else None,
            )
        return LockedChat(chat_id, tombstoned, row, new_key=new_key)

    def read_many(self, chat_ids: Sequence[str]) -> dict[str, LockedChat]:
        """``read`` for several chats in two statements (``verify`` reads a batch at once)."""
        return self._load(list(chat_ids)) if chat_ids else {}

    def lock_many(self, chat_ids: Sequence[str]) -> dict[str, LockedChat]:
        """``lock`` for several chats in a few statements (locks taken in the order given)."""
        with connections[self.using].cursor() as cursor:
            self.backend.rows.lock_chats(cursor, chat_ids)
        return self._load(chat_ids)

    def _load(self, chat_ids: Sequence[str]) -> dict[str, LockedChat]:
        db = self.using
        if len(chat_ids) == 1:
            return {chat_ids[0]: self._load_one(chat_ids[0], locking=False)}
        tombstones = Tombstone.objects.using(db).filter(chat_id__in=chat_ids)
        found = set(tombstones.values_list("chat_id", flat=True))
        rows = {chat.chat_id: chat for chat in Chat.objects.using(db).filter(chat_id__in=chat_ids)}
        return {
            chat_id: LockedChat(chat_id, chat_id in found, rows.get(chat_id))
            for chat_id in chat_ids
        }

    # writing

    def write(self, locked: LockedChat, chat: PreparedChat, *, rewrite: bool = False) -> Chat:
        """Write ``chat`` over what ``locked`` read: rows whose digest is unchanged stay
        (their terms are never extracted again); ``rewrite`` rewrites every row and the
        scope lookup rows (verify's repair); the lock's ``sets_revision``, when given, is
        set with the row. Returns the chat row."""
        db = self.using
        rows = get_search_rows(db)
        row = locked.row
        unchanged: dict[int, bool] = {}  # kept rows: {position: has_terms}
        if row is not None:
            unchanged = self._drop_changed_rows(rows, row, chat, rewrite_all=rewrite)
        fresh = [m for m in chat.prepared if m.index not in unchanged]
        fields = {
            "scope": dict(chat.scope),
            "updated_at": to_db_datetime(chat.updated_at),
            "is_indexed": True,
            "indexed_count": sum(unchanged.values()) + sum(1 for m in fresh if m.terms),
            "message_count": len(chat.prepared),
            "tenant": conf.tenant_of(chat.scope),
        }
        if locked.sets_revision is not None:
            fields["revision"] = locked.sets_revision
        # the chat row's statements go in the round trip of the message rows' INSERT
        statements: list[Statement] = []
        with connections[db].cursor() as cursor:
            if row is None and locked.new_key is not None:
                row, insert = new_chat_sql(db, {"chat_id": chat.chat_id, **fields}, locked.new_key)
                statements += [insert, *scope_rows_sql(db, [row])]
            elif row is None:
                row = insert_chat(cursor, db, {"chat_id": chat.chat_id, **fields})
                insert_scope_rows(cursor, [row])
            else:
                scope_changed = row.scope != fields["scope"]  # a new tenant rewrote every row
                statements.append(update_chat_sql(db, row, fields))
                if scope_changed or rewrite:
                    statements += scope_rows_sql(db, [row], replace=True)
            if fresh:
                statements.append(record_form_sql())
            rows.insert(cursor, [_new_rows(row, fresh, rows.keeps_search_text)], before=statements)
        _wrote(self.using, locked)
        return row

    def appended(self, row: Chat, new: ChatRecord) -> PreparedChat:
        """``new``'s messages prepared as the next ones of stored chat ``row``: positions
        after the stored messages' (their last position and visible position, from the
        chat's btrees), ids filled as ``write_chat`` of the whole chat fills them, looking
        up only the stored ids that could take one. One statement, unless an id the new
        messages would take is held (a suffixed id is looked up then)."""
        rows = chat_messages(self.using, row)
        given = new.message_ids or [None] * len(new.messages)
        # the ids a new message may take, with its position as the chat row counts them
        wanted = {m for m in given if m} | {
            f"{row.chat_id}:{row.message_count + i}" for i in range(len(given))
        }
        every = len(wanted) > _IDS_LOOKED_UP  # a long append reads every stored id instead
        last_position, last_visible, held = self._last_and_held(row, wanted, every=every)
        first = 0 if last_position is None else last_position + 1

        def stored(message_id: str) -> bool:
            """Whether a stored message holds ``message_id`` (one not looked up: asked now)."""
            if not every and message_id not in wanted:
                wanted.add(message_id)
                held.update(rows.filter(message_id=message_id).values_list("message_id", flat=True))
            return message_id in held

        tail = PreparedChat.from_checked(
            new,
            fill_ids(row.chat_id, given, first=first, stored=stored),
            first_index=first,
            first_visible=0 if last_visible is None else last_visible + 1,
        )
        return replace(tail, scope=dict(row.scope))  # no second validation of ``new``

    def _last_and_held(
        self, row: Chat, wanted: set[str], *, every: bool
    ) -> tuple[int | None, int | None, set[str]]:
        """The chat's last position and last visible position (each a max read from its
        btree), and which of ``wanted`` its messages hold (``every``: all its ids), in one
        round trip."""
        of_chat = f"FROM {table(Message)} m WHERE m.tenant = %s AND m.chat_id = %s"
        chat: list[Any] = [row.tenant, row.pk]
        ids = sorted(wanted)
        sql = (
            f"SELECT NULL, (SELECT max(m.position) {of_chat}), "
            f"(SELECT max(m.visible_position) {of_chat})"
        )
        params = [*chat, *chat]
        if every:
            sql += f" UNION ALL SELECT m.message_id, NULL, NULL {of_chat}"
            params += chat
        elif ids:
            sql += (
                f" UNION ALL SELECT m.message_id, NULL, NULL {of_chat} "
                f"AND m.message_id IN ({', '.join(['%s'] * len(ids))})"
            )
            params += [*chat, *ids]
        with connections[self.using].cursor() as cursor:
            cursor.execute(sql, params)
            found = cursor.fetchall()
        last = next(r for r in found if r[0] is None)
        return last[1], last[2], {r[0] for r in found if r[0] is not None}

    def append(self, locked: LockedChat, tail: PreparedChat) -> Chat:
        """Write ``tail`` (``appended``) after the stored, indexed chat ``locked``: its rows,
        and the chat row's counts, ``updated_at`` and the lock's ``sets_revision``; no
        stored row is read or written."""
        row = locked.row
        revision = locked.sets_revision
        if row is None or revision is None:
            raise ValueError(f"chat {locked.chat_id!r} has no row or revision to append to")
        fresh = tail.prepared
        fields = {
            "updated_at": to_db_datetime(tail.updated_at),
            "indexed_count": row.indexed_count + sum(1 for m in fresh if m.terms),
            "message_count": fresh[0].index + len(fresh) if fresh else row.message_count,
            "revision": revision,
        }
        rows = get_search_rows(self.using)
        statements = [update_chat_sql(self.using, row, fields)]
        if fresh:
            statements.append(record_form_sql())
        with connections[self.using].cursor() as cursor:
            rows.insert(cursor, [_new_rows(row, fresh, rows.keeps_search_text)], before=statements)
        _wrote(self.using, locked)
        return row

    def insert_new(self, chats: Sequence[PreparedChat]) -> None:
        """Write chats that have no row yet in a few statements for all (backfill's fast
        path). The caller holds every chat's lock and found no tombstone and no row."""
        db = self.using
        search_rows = self.backend.rows
        with connections[db].cursor() as cursor:
            rows = insert_chats(
                cursor,
                db,
                [
                    {
                        "chat_id": chat.chat_id,
                        "scope": dict(chat.scope),
                        "updated_at": to_db_datetime(chat.updated_at),
                        "is_indexed": True,
                        "indexed_count": chat.indexed_count,
                        "message_count": len(chat.prepared),
                        "tenant": conf.tenant_of(chat.scope),
                    }
                    for chat in chats
                ],
            )
            insert_scope_rows(cursor, rows)
            if any(chat.prepared for chat in chats):
                record_form(cursor)
            search_rows.insert_new_chats(
                cursor,
                [
                    _new_rows(row, chat.prepared, search_rows.keeps_search_text)
                    for row, chat in zip(rows, chats, strict=True)
                ],
            )

    def set_revision(self, chat_id: str, revision: int) -> None:
        with connections[self.using].cursor() as cursor:
            cursor.execute(
                f"UPDATE {table(Chat)} SET revision = %s WHERE chat_id = %s", [revision, chat_id]
            )

    def _drop_changed_rows(
        self, search_rows: SearchRows, row: Chat, chat: PreparedChat, *, rewrite_all: bool
    ) -> dict[int, bool]:
        """Delete rows whose message changed; return the positions kept as they are,
        each with its ``has_terms`` (the digest covers everything the terms come from)."""
        rewrite_all = (
            rewrite_all
            or row.scope != dict(chat.scope)
            or row.tenant != conf.tenant_of(chat.scope)
            or not row.is_indexed
        )
        digests = [message.digest for message in chat.prepared]
        unchanged: dict[int, bool] = {}
        stale: list[int] = []
        # a rewrite reads the chat's rows whatever their tenant (rows another TENANT_KEY
        # wrote are replaced too); otherwise the tenant finds them in one partition
        rows = (
            Message.objects.using(self.using).filter(chat=row)
            if rewrite_all
            else chat_messages(self.using, row)
        )
        # the stored terms only of the rows that go: an append to a long chat keeps them all
        for pk, position, digest, has_terms in rows.values_list(
            "pk", "position", "digest", "has_terms"
        ):
            if not rewrite_all and position < len(digests) and digests[position] == digest:
                unchanged[position] = has_terms
            else:
                stale.append(pk)
        if stale:
            if row.is_indexed:  # rows of a removed chat have no search data left
                texts: list[StoredRow] = []
                if search_rows.keeps_search_text:
                    going = set(stale)
                    indexed = rows.filter(has_terms=True)
                    if len(stale) <= _STALE_BY_PK:  # else every row of the chat, once
                        indexed = indexed.filter(pk__in=stale)
                    texts = [
                        StoredRow(pk, search_text, role)
                        for pk, search_text, role in indexed.values_list(
                            "pk", "search_text", "role"
                        )
                        if search_text and pk in going
                    ]
                with connections[self.using].cursor() as cursor:
                    search_rows.delete(cursor, row, texts)
            rows.filter(pk__in=stale).delete()
        return unchanged

    def purge(self, locked: LockedChat, *, keep_content: bool = False) -> None:
        """Delete a chat's search data, and its rows unless ``keep_content`` and a store
        owns them (revision > 0)."""
        row = locked.row
        if row is None:
            return
        keep = keep_content and row.revision > 0
        if row.is_indexed:
            search_rows = self.backend.rows
            texts = chat_messages(self.using, row).filter(has_terms=True)
            rows = [
                StoredRow(pk, text, role)
                for pk, text, role in texts.values_list("pk", "search_text", "role")
            ]
            with connections[self.using].cursor() as cursor:
                (search_rows.clear if keep else search_rows.delete)(cursor, row, rows)
        if keep:
            row.is_indexed = False
            row.indexed_count = 0
            row.save(using=self.using, update_fields=["is_indexed", "indexed_count"])
        else:
            chat_messages(self.using, row).delete()  # by tenant: one partition, one shard
            row.delete(using=self.using)

    # reading back

    def differences(
        self,
        row: Chat,
        chat: PreparedChat,
        rows: Sequence[StoredMessage] | None = None,
        scope_rows: Mapping[str, str] | None = None,
        *,
        keeps_search_text: bool | None = None,
    ) -> list[str]:
        """``stored_differences`` of the chat's rows as they are in the database now
        (``rows``: its message rows in position order, ``scope_rows`` its ``ChatScope``
        rows, when the caller has read them; ``keeps_search_text``: the backend's, when
        the caller has looked it up for many chats)."""
        if keeps_search_text is None:
            keeps_search_text = self.backend.rows.keeps_search_text
        if rows is None:
            rows = list(chat_messages(self.using, row).order_by("position"))
        if scope_rows is None:
            scope_rows = dict(
                ChatScope.objects.using(self.using).filter(chat=row).values_list("key", "value")
            )
        return stored_differences(
            row,
            rows,
            scope_rows,
            chat,
            keeps_search_text=keeps_search_text,
        )

    def is_current(self, locked: LockedChat, chat: PreparedChat) -> bool:
        """Whether writing ``chat`` would change nothing (a backfill skips it)."""
        row = locked.row
        return row is not None and row.is_indexed and not self.differences(row, chat)
