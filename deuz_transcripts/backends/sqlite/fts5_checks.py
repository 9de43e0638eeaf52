"""Checks and repairs of the SQLite FTS5 table against the message rows.

The FTS5 table is contentless: it cannot be scanned by rowid, and a row can
only be deleted by giving exactly the tokens it holds. So the chat's token
(every FTS row carries one) finds a chat's rows, an AND query of all of a row's
tokens proves they are there, and an ``fts5vocab`` table (created in the
connection's ``temp`` schema, never in the database) lists what a row really
holds when it has to be deleted or counted.

A full run checks every row in one pass over the vocabulary, grouped by row, merged
with the messages in rowid order (``sweep``); a run for named chats asks per row.

The invariant checked: an FTS row exists exactly for each message with terms
of a searchable chat, and holds ``fts_body(search_text, scope, chat_id, role)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from django.db import connections
from django.db.backends.utils import CursorWrapper

from ...models import Chat, LegacyChat, Message, Tombstone
from ...problems import Problem
from ...text import stored_terms_text
from ..base import SearchDataChecks, StoredMessage
from ..chat_filter import table
from .common import FTS_TABLE
from .fts5_expressions import (
    CHAT_TOKEN_PREFIX,
    chat_token,
    fts_body,
    phrase,
    role_token,
    scope_tokens,
)

__all__ = ["Fts5Checks"]

VOCAB_TABLE = "deuz_fts_vocab"
#: The progress label of a full run's pass over every FTS row (counted in messages).
SWEEP_LABEL = "search data"
_AND_CHUNK = 200  # tokens per AND query
_IN_CHUNK = 500  # rowids per vocabulary scan


def _problem(
    chat_id: str, kind: str, detail: str, rowids: Sequence[int], source: str = "fts"
) -> Problem:
    return Problem(chat_id, kind, detail, source, tuple(rowids))


class Fts5Checks(SearchDataChecks):
    """The FTS5 side of ``Verifier``: per-chat checks, the full sweep, exact repairs."""

    def _cursor(self) -> CursorWrapper:
        return connections[self.alias].cursor()

    def chat_rowids(self, chat: Chat) -> list[int]:
        with self._cursor() as cursor:
            cursor.execute(
                f"SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s",
                [phrase(chat_token(chat.chat_id))],
            )
            return sorted(row[0] for row in cursor.fetchall())

    def _holds_all(self, rowid: int, tokens: Sequence[str]) -> bool:
        with self._cursor() as cursor:
            for start in range(0, len(tokens), _AND_CHUNK):
                expression = " AND ".join(phrase(t) for t in tokens[start : start + _AND_CHUNK])
                cursor.execute(
                    f"SELECT 1 FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s AND rowid = %s",
                    [expression, rowid],
                )
                if cursor.fetchone() is None:
                    return False
        return True

    @staticmethod
    def expected_body(chat: Chat, row: StoredMessage, *, as_written: bool = False) -> str | None:
        """The FTS row the message must have; ``as_written``: whatever ``has_terms`` says."""
        if not (chat.is_indexed and (row.has_terms or as_written) and row.search_text):
            return None
        return fts_body(row.search_text, chat.scope, chat.chat_id, row.role)

    def check_chat(
        self,
        chat: Chat,
        rows: Sequence[StoredMessage],
        expected_terms: Sequence[list[str] | None] | None,
    ) -> list[Problem]:
        """The chat's FTS rows against its message rows (``rows`` unused when not searchable;
        the rows' own ``search_text`` is what FTS must hold)."""
        expected = {}
        for row in rows:
            body = self.expected_body(chat, row)
            if body is not None:
                expected[row.pk] = body
        found = set(self.chat_rowids(chat))
        problems = []
        missing = sorted(set(expected) - found)
        if missing:
            problems.append(
                _problem(chat.chat_id, "missing", f"{len(missing)} FTS row(s) missing", missing)
            )
        extra = sorted(found - set(expected))
        if extra:
            what = "not searchable" if not chat.is_indexed else "no message with terms"
            problems.append(
                _problem(chat.chat_id, "orphaned", f"{len(extra)} FTS row(s) of {what}", extra)
            )
        partial = [
            pk
            for pk in sorted(found & set(expected))
            if not self._holds_all(pk, expected[pk].split(" "))
        ]
        if partial:
            problems.append(
                _problem(chat.chat_id, "stale", f"{len(partial)} FTS row(s) lack tokens", partial)
            )
        return problems

    # the vocabulary: what rows really hold

    def _vocab(self) -> str:
        with self._cursor() as cursor:
            cursor.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{VOCAB_TABLE} "
                f"USING fts5vocab(main, {FTS_TABLE}, instance)"
            )
        return f"temp.{VOCAB_TABLE}"

    def actual_tokens(self, rowids: Sequence[int]) -> dict[int, list[str]]:
        """The tokens FTS holds for each rowid; one scan of the vocabulary per 500 rowids."""
        vocab = self._vocab()
        held: dict[int, list[str]] = {}
        with self._cursor() as cursor:
            for start in range(0, len(rowids), _IN_CHUNK):
                chunk = list(rowids[start : start + _IN_CHUNK])
                cursor.execute(
                    f"SELECT doc, term FROM {vocab} WHERE doc IN ({', '.join(['%s'] * len(chunk))})",
                    chunk,
                )
                for doc, term in cursor.fetchall():
                    held.setdefault(doc, []).append(term)
        return held

    def check_chats(
        self,
        chats: Sequence[tuple[Chat, Sequence[StoredMessage], Sequence[list[str] | None] | None]],
        *,
        full_run: bool = False,
    ) -> list[Problem]:
        """A full run leaves every FTS row to ``sweep``, which checks them all in one pass
        (a per-row AND query costs about a millisecond); chats named by id are checked here."""
        return [] if full_run else super().check_chats(chats)

    def sweep(
        self, batch_size: int, progress: Callable[[str, int, int], None] | None = None
    ) -> Iterator[Problem]:
        """Walk the FTS vocabulary (each row's tokens) and the messages together in rowid
        order: each message with terms of a searchable chat has a row holding exactly its
        tokens, and every other row is reported. Problems are counted per chat and kind."""
        vocab = self._vocab()
        found: dict[tuple[str, str, str], list[int]] = {}
        unowned: list[tuple[int, list[str]]] = []

        def add(chat_id: str, kind: str, what: str, rowid: int) -> None:
            found.setdefault((chat_id, kind, what), []).append(rowid)

        report = progress or (lambda label, done, total: None)
        total = Message.objects.using(self.alias).count()
        report(SWEEP_LABEL, 0, total)
        messages = self._messages(batch_size, lambda done: report(SWEEP_LABEL, done, total))
        current = next(messages, None)
        with self._cursor() as cursor:
            cursor.execute(
                f"SELECT doc, group_concat(term, ' ') FROM {vocab} GROUP BY doc ORDER BY doc"
            )
            while rows := cursor.fetchmany(batch_size):
                for doc, held in rows:
                    while current is not None and current[0] < doc:
                        if current[2] is not None:
                            add(current[1], "missing", "FTS row(s) missing", current[0])
                        current = next(messages, None)
                    if current is None or current[0] != doc:
                        unowned.append((doc, held.split(" ")))
                        continue
                    pk, chat_id, want = current
                    current = next(messages, None)
                    if want is None:
                        add(chat_id, "orphaned", "FTS row(s) of no searchable message", pk)
                        continue
                    if held == " ".join(sorted(want)):
                        continue  # the same tokens (FTS5 lists a row's tokens sorted)
                    have, wanted = set(held.split(" ")), set(want)
                    if not wanted <= have:
                        add(chat_id, "stale", "FTS row(s) lack tokens", pk)
                    elif len(have) != len(wanted):  # a superset of ``wanted``, so more
                        add(chat_id, "stale", "FTS row(s) hold extra tokens", pk)
        while current is not None:
            if current[2] is not None:
                add(current[1], "missing", "FTS row(s) missing", current[0])
            current = next(messages, None)
        owners = self._chat_ids_of(unowned)
        for doc, _ in unowned:
            add(owners.get(doc, ""), "orphaned", "FTS row(s) with no message", doc)
        for (chat_id, kind, what), rowids in sorted(found.items()):
            shown = ", ".join(map(str, rowids[:5])) + (" ..." if len(rowids) > 5 else "")
            detail = f"{len(rowids)} {what} (rowid {shown})"
            yield _problem(chat_id, kind, detail, rowids, "sweep")

    def _chat_ids_of(self, docs: Sequence[tuple[int, Sequence[str]]]) -> dict[int, str]:
        """The chat id whose token each FTS row holds, found among chats, tombstones and
        legacy rows (only for rows no message owns, so rarely); unknown ids are left out."""
        wanted: dict[str, list[int]] = {}
        for doc, tokens in docs:
            for token in tokens:
                if token.startswith(CHAT_TOKEN_PREFIX):
                    wanted.setdefault(token, []).append(doc)
        owners: dict[int, str] = {}
        if not wanted:
            return owners
        for model in (Chat, Tombstone, LegacyChat):
            rows = model.objects.using(self.alias).values_list("chat_id", flat=True)
            for chat_id in rows.iterator(chunk_size=2000):
                for doc in wanted.pop(chat_token(chat_id), ()):
                    owners[doc] = chat_id
                if not wanted:
                    return owners
        return owners

    def _messages(
        self, batch_size: int, done: Callable[[int], None]
    ) -> Iterator[tuple[int, str, list[str] | None]]:
        """``(pk, chat_id, the tokens its FTS row must hold, or None)`` of every message,
        by pk ranges read as plain tuples; each chat's scope and chat tokens are computed
        once per batch, each role's token once."""
        last = 0
        read = 0
        roles: dict[str, str] = {}
        with self._cursor() as cursor:
            while True:
                cursor.execute(
                    f"SELECT id, chat_id, has_terms, search_text, role FROM {table(Message)} "
                    "WHERE id > %s ORDER BY id LIMIT %s",
                    [last, batch_size],
                )
                batch = cursor.fetchall()
                if not batch:
                    return
                chats = {
                    pk: (chat_id, indexed, [*scope_tokens(scope), chat_token(chat_id)])
                    for pk, chat_id, indexed, scope in Chat.objects.using(self.alias)
                    .filter(pk__in={row[1] for row in batch})
                    .values_list("pk", "chat_id", "is_indexed", "scope")
                }
                for pk, chat_pk, has_terms, text, role in batch:
                    chat_id, indexed, tokens = chats[chat_pk]
                    wanted = None
                    if indexed and has_terms and text:
                        role_tok = roles.get(role)
                        if role_tok is None:
                            role_tok = roles[role] = role_token(role)
                        wanted = [*stored_terms_text(text).split(" "), *tokens, role_tok]
                    yield pk, chat_id, wanted
                last = batch[-1][0]
                read += len(batch)
                done(read)

    # repair

    def repair(self, problem: Problem) -> None:
        if problem.source in ("fts", "sweep"):
            self.fix_rowids(problem.rowids)

    def repair_chat(self, chat: Chat) -> None:
        rowids = set(self.chat_rowids(chat))
        rowids.update(
            Message.objects.using(self.alias).filter(chat=chat).values_list("pk", flat=True)
        )
        # As the writer will delete them: it names the tokens of each row with search_text
        # (a row claiming no terms but keeping its text would otherwise be deleted twice,
        # which corrupts the FTS5 index)
        self.fix_rowids(sorted(rowids), as_written=True)

    def fix_rowids(self, rowids: Sequence[int], *, as_written: bool = False) -> int:
        """Make each FTS row hold exactly what its message row says (``as_written``: by the
        writer's rule, a row for each message with search_text, whatever ``has_terms``
        says); returns rows changed."""
        if not rowids:
            return 0
        held = self.actual_tokens(rowids)
        rows = (
            Message.objects.using(self.alias)
            .select_related("chat")
            .only(
                "pk",
                "has_terms",
                "search_text",
                "role",
                "chat__chat_id",
                "chat__scope",
                "chat__is_indexed",
            )
            .in_bulk(list(rowids))
        )
        changed = 0
        with self._cursor() as cursor:
            for rowid in rowids:
                row = rows.get(rowid)
                want = (
                    None
                    if row is None
                    else self.expected_body(row.chat, row, as_written=as_written)
                )
                have = held.get(rowid, [])
                if want is not None and sorted(set(want.split(" "))) == sorted(set(have)):
                    continue
                if not have and want is None:
                    continue
                if have:
                    cursor.execute(
                        f"INSERT INTO {FTS_TABLE} ({FTS_TABLE}, rowid, body) VALUES ('delete', %s, %s)",
                        [rowid, " ".join(have)],
                    )
                if want is not None:
                    cursor.execute(
                        f"INSERT INTO {FTS_TABLE} (rowid, body) VALUES (%s, %s)", [rowid, want]
                    )
                changed += 1
        return changed
