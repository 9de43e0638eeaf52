"""PostgreSQL: one search's transaction and server settings, sent with its reads.

A search runs in one transaction of its own (a savepoint in the caller's) with JIT off,
reading one snapshot (``REPEATABLE READ``: a total counted by one statement and the page
read by another see the same rows, however many writes commit between them; in the
caller's transaction, the caller's isolation level decides),
its ``statement_timeout`` (``SearchBudget``) and, around GIN counts, no sequential scan
and an exact bitmap (``bitmap_scans``). None of that costs a round trip of its own:
with Django's default client-side binding, the transaction control and the one
``set_config`` statement a read needs travel in front of it in one query string
(``BEGIN; SELECT set_config(...); <read>``), and the search's last read carries the
end (``; COMMIT``). Settings are only ever ``SET LOCAL`` (``set_config(..., true)``)
inside the search's own transaction or savepoint, so a transaction-pooling pooler
(pgbouncer) never sees one outlive the search. With ``server_side_binding`` a query
string holds one statement: the same statements are sent one by one.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.db import Error, OperationalError, connections, transaction
from django.db.backends.utils import CursorWrapper

from ...errors import SearchTimeout
from ...search_budget import SearchBudget
from ..batched import binds_on_client
from ..search_cursor import SearchCursor
from .errors import QUERY_CANCELED, sqlstate

__all__ = [
    "BEGIN",
    "BITMAP_WORK_MEM",
    "SessionCursor",
    "bitmap_scans",
    "bitmap_scans_free",
    "keep_bitmap_scans",
    "search_session",
]

#: How a search's own transaction begins: every read of it sees one snapshot (a read-only
#: transaction never fails to serialize), as one statement would.
BEGIN = "BEGIN ISOLATION LEVEL REPEATABLE READ"

#: ``work_mem`` of the GIN counts and bitmap reads (``bitmap_scans``): an exact bitmap of
#: 1,000,000 rows fits in a few MB, so counts of common words need no recheck of each row.
BITMAP_WORK_MEM = "64MB"

#: The savepoint a search takes in its caller's transaction.
SAVEPOINT = "deuz_search"


#: ``work_mem`` raised to ``BITMAP_WORK_MEM``, never lowered (params: it twice).
_RAISED_WORK_MEM = (
    "CASE WHEN pg_size_bytes(current_setting('work_mem')) < pg_size_bytes(%s) "
    "THEN %s ELSE current_setting('work_mem') END"
)


@dataclass
class _Settings:
    """One ``SELECT`` of ``set_config`` calls (and the caller's values it reads first)."""

    columns: list[str] = field(default_factory=list)
    params: list[Any] = field(default_factory=list)
    reads_callers: bool = False  # its first two columns: enable_seqscan, work_mem

    def add(self, column: str, *params: Any) -> None:
        self.columns.append(column)
        self.params.extend(params)


class SearchSession:
    """What the server must be told before and after each read of one search.

    ``bitmap`` is the mode the next read wants, ``server_bitmap`` the mode in force: a
    ``set_config`` is sent only where they differ, with the next read, so consecutive
    GIN counts share one and a read outside them runs with the caller's
    ``enable_seqscan`` and ``work_mem`` (read in the search's first statement). The
    search's last read (``last_read_next``: the page's rows by primary key and chat
    position, through btrees either way) keeps the bitmap mode where it is in force, as
    every read does after ``keep_bitmap_scans``: no ``set_config``.
    """

    def __init__(self, inner: CursorWrapper, timeout_ms: int) -> None:
        self.inner = inner
        #: a transaction of its own; else a savepoint in the caller's, rolled back at the
        #: end (a search writes nothing): that puts back every setting at once
        self.own = inner.db.get_autocommit()
        self.inline = binds_on_client(inner)
        self.timeout_ms = timeout_ms
        self.budget = SearchBudget(timeout_ms) if timeout_ms else None
        self.begun = False  # a transaction (savepoint) is open, to be ended
        self.ends_next = False
        self.bitmap = False
        self.server_bitmap = False
        self.callers: tuple[str, str] | None = None  # enable_seqscan, work_mem
        self.kept = False  # the bitmap mode serves every later read (``keep_bitmap_scans``)

    def execute(self, sql: Any, params: Any) -> Any:
        """``sql`` with what must precede it (and, if it is the last read, follow it)."""
        inline = self.inline and not isinstance(params, Mapping)
        before, settings = self._before()
        after = self._end() if self.ends_next and inline else []
        self.begun = True
        if not inline:
            for statement in before:
                self.inner.execute(statement)
            if settings is not None:
                self.inner.execute(_select(settings), settings.params)
                self._read_callers(settings, self.inner.fetchone())
            return self.inner.execute(sql, params)
        if settings is None and not before and not after:
            return self.inner.execute(sql, params)
        if params is None:  # placeholders are parsed once parameters are given
            sql = sql.replace("%", "%%")
        statements = [*before, *([_select(settings)] if settings else []), sql, *after]
        result = self.inner.execute(
            "; ".join(statements), [*(settings.params if settings else []), *(params or [])]
        )
        raw = self.inner.cursor
        for _ in before:
            raw.nextset()
        if settings is not None:
            self._read_callers(settings, raw.fetchone())
            raw.nextset()
        if after:  # ended: a statement after this one would begin again
            self.begun = self.ends_next = self.server_bitmap = False
        return result

    @contextmanager
    def bitmap_scans(self) -> Iterator[None]:
        outer = self.bitmap
        self.bitmap = True
        try:
            yield
        finally:
            self.bitmap = outer

    def close(self, failed: bool) -> None:
        """End what ``execute`` began, if its last read did not: commit (roll back when
        ``failed``) the search's transaction, or roll back to the savepoint. A failure
        here after a failed search is left to the search's own error."""
        if not self.begun:
            return
        self.begun = self.server_bitmap = False
        end = self._end(failed)
        try:
            if self.inline:
                self.inner.execute("; ".join(end))
            else:
                for statement in end:
                    self.inner.execute(statement)
        except Error:  # also a connection already closed (InterfaceError)
            if not failed:
                raise

    def _before(self) -> tuple[list[str], _Settings | None]:
        """The transaction control and the ``set_config`` calls the next read needs."""
        settings = _Settings()
        lowered = self.budget.lowered_limit() if self.budget is not None else None
        before = []
        if not self.begun:
            before.append(BEGIN if self.own else f"SAVEPOINT {SAVEPOINT}")
            settings.reads_callers = True
            settings.add("current_setting('enable_seqscan')")
            settings.add("current_setting('work_mem')")
            settings.add("set_config('jit', 'off', true)")
            if self.timeout_ms:
                lowered = lowered or self.timeout_ms
        if self.bitmap != self.server_bitmap and not (
            self.server_bitmap and (self.ends_next or self.kept)
        ):
            if self.bitmap:
                settings.add("set_config('enable_seqscan', 'off', true)")
                settings.add(
                    f"set_config('work_mem', {_RAISED_WORK_MEM}, true)",
                    BITMAP_WORK_MEM,
                    BITMAP_WORK_MEM,
                )
            else:
                assert self.callers is not None  # read by the search's first statement
                seqscan, work_mem = self.callers
                settings.add("set_config('enable_seqscan', %s, true)", seqscan)
                settings.add("set_config('work_mem', %s, true)", work_mem)
            self.server_bitmap = self.bitmap
        if lowered is not None:
            settings.add("set_config('statement_timeout', %s, true)", f"{lowered}ms")
        return before, settings if settings.columns else None

    def _read_callers(self, settings: _Settings, row: Any) -> None:
        if settings.reads_callers and row is not None:
            self.callers = (str(row[0]), str(row[1]))

    def _end(self, failed: bool = False) -> list[str]:
        if not self.own:
            return [f"ROLLBACK TO SAVEPOINT {SAVEPOINT}", f"RELEASE SAVEPOINT {SAVEPOINT}"]
        return ["ROLLBACK" if failed else "COMMIT"]


def _select(settings: _Settings) -> str:
    return "SELECT " + ", ".join(settings.columns)


class SessionCursor(SearchCursor):
    """A search's cursor on PostgreSQL: each statement goes through its ``session``."""

    def __init__(self, inner: CursorWrapper, session: SearchSession) -> None:
        super().__init__(inner)
        self.session = session

    def execute(self, sql: Any, params: Any = None) -> Any:
        return self.session.execute(sql, params)

    def last_read_next(self) -> None:
        self.session.ends_next = True


@contextmanager
def search_session(alias: str, timeout_ms: int) -> Iterator[SessionCursor]:
    """A cursor whose statements run as one search: one transaction (a savepoint in the
    caller's), JIT off and, unless ``timeout_ms`` is 0, a time budget for all of them
    together (``SearchBudget``); nothing is left set on the session afterwards, and a
    cancelled search leaves the caller's transaction usable.

    JIT: GIN's row estimates for a tsquery are often far too high (47,681 rows for a
    word in 926 at 10M messages), which pushes a statement's estimated cost past
    ``jit_above_cost``, and compiling it then took 151 of its 157 ms (bench/RESULTS.md).
    A search reads a page; it never runs long enough to gain from compiled code.
    """
    with connections[alias].cursor() as inner:
        session = SearchSession(inner, timeout_ms)
        failed = True
        try:
            yield SessionCursor(inner, session)
            failed = False
        except OperationalError as exc:
            if sqlstate(exc) == QUERY_CANCELED:
                raise SearchTimeout(timeout_ms) from exc
            raise
        finally:
            session.close(failed)


@contextmanager
def bitmap_scans(alias: str, cursor: CursorWrapper) -> Iterator[None]:
    """No sequential scan, and ``work_mem`` raised to ``BITMAP_WORK_MEM`` (never
    lowered), for the statements inside; the caller's settings for the ones after.

    A role lexeme is held by a large share of the rows (``user``: ~40%), so the planner
    prefers reading the table for its count; that tests the tsquery on every vector
    (32 ms at 20,000 messages) where the GIN bitmap counts the posting list's rows without
    a test (5 ms). A count of GIN-found rows never gains from a sequential scan. With
    the default 4 MB, the bitmap of a very common word turns lossy and every row of its
    pages is read and tested again (1M messages: 1.35 s for a word in 638,000 rows,
    0.54 s exact).

    In a search (``SessionCursor``) this costs no statement of its own; elsewhere a
    savepoint sets the settings and puts them back.
    """
    if isinstance(cursor, SessionCursor):
        with cursor.session.bitmap_scans():
            yield
        return
    with transaction.atomic(using=alias):
        cursor.execute(
            "SELECT current_setting('enable_seqscan'), current_setting('work_mem'), "
            f"set_config('enable_seqscan', 'off', true), set_config('work_mem', "
            f"{_RAISED_WORK_MEM}, true)",
            [BITMAP_WORK_MEM, BITMAP_WORK_MEM],
        )
        row = cursor.fetchone()
        yield
        if row is not None:
            cursor.execute(
                "SELECT set_config('enable_seqscan', %s, true), set_config('work_mem', %s, true)",
                [row[0], row[1]],
            )


def keep_bitmap_scans(cursor: CursorWrapper) -> None:
    """In a search (``SessionCursor``) in the bitmap mode: every later read keeps it, with
    no ``set_config`` back to the caller's settings. For a search whose first statement
    ran in that mode and whose N says every later read is of a scope of at most
    ``lexeme_scope_min`` messages (or ``single_statement_max``), found through the chat
    btree or GIN, where a sequential scan of the message table never pays."""
    if isinstance(cursor, SessionCursor) and cursor.session.server_bitmap:
        cursor.session.kept = True


def bitmap_scans_free(cursor: CursorWrapper) -> bool:
    """Whether the next read runs in the bitmap mode at no ``set_config`` of its own: in
    a search (``SessionCursor``), its first statement (whose settings go with it anyway)
    or one where the mode is in force."""
    if not isinstance(cursor, SessionCursor):
        return False
    session = cursor.session
    return not session.begun or session.server_bitmap
