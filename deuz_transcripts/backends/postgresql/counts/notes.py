"""PostgreSQL: the terms a search counted in GIN past ``COUNTED_MIN_ROWS``, marked to be
counted by the folds, with no command run.

The folds mark the terms the planner's statistics list as common (``choice``); that list
holds the most common elements of a sample only, so a term past the threshold that it
leaves out would be counted in GIN by every search needing its n_t until an operator ran
``backfill_transcripts --count-terms``. A search that counts such a term in GIN, in a
filter whose stored counts would serve it, notes it (``PostgresStoredCounts.note``); once
the search's transaction has ended it is marked (``CountingTerm``) by one statement in a
transaction of its own, and the folds stamp and count it as they do the planner's
(``choice``): the same two steps, so exact counts stay exact and writers change nothing.

A mark never touches the search's transaction: a search that ran in its own transaction
marks right after its ``COMMIT``; one inside the caller's transaction leaves the mark
to that transaction's commit (``on_commit``; nothing if it rolls back), so no mark is
held uncommitted by a caller nor lost with the search's savepoint. Nothing is written
where nothing can be: on a hot standby or in a read-only session (both reported by the
server with every connection, PostgreSQL 14 and later: no statement to ask), and an
error (a role without ``INSERT``, a server that did not report) skips the marks, never
fails a search. Nobody waits for a mark: it takes the folds' choice lock shared with
``try`` (a choice inserting marks meanwhile holds it alone: the mark is skipped; a
choice finding it held skips, as it does when a fold holds it) and a lock per term with
``try`` (another search marking the same term). Each process notes a term at most once
per ``NOTE_AGAIN_SECONDS`` per database, so a term waiting for its folds costs the
searches that find it no further statement.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from functools import partial

from django.db import Error, connections, transaction

from ....models import CountedTerm, CountingTerm
from ...chat_filter import table
from .choice import CHOICE_LOCK

__all__ = ["NOTE_AGAIN_SECONDS", "forget_notes", "mark_sql", "send_notes"]

#: A process marks a term again (on one database) only this long after it last tried:
#: a term waiting for its folds, or one already counted, costs no statement per search.
NOTE_AGAIN_SECONDS = 600.0
#: The app's advisory-lock key space for a term being marked by a search (733_120: chat
#: locks; 733_121: the counts' locks before migration 0009; 733_122: folds; 733_123:
#: the choice).
_MARK_LOCKS = 733_124
#: Noted terms a process remembers per database before it forgets the expired ones.
_REMEMBERED = 4_096
#: The server's reported settings that make a session read-only.
_READ_ONLY = ("in_hot_standby", "default_transaction_read_only")

#: Per database alias, each term's last try (``time.monotonic``).
_tried: dict[str, dict[str, float]] = {}
#: Per database alias, when marks may be tried again after one failed.
_refused_until: dict[str, float] = {}


def mark_sql() -> str:
    """The statement marking the terms of its one parameter (stored forms) that are
    neither counted nor being counted (a primary-key lookup each); ``try`` locks only."""
    return (
        f"INSERT INTO {table(CountingTerm)} (lexeme, marked_by, observed) "
        "SELECT q.lexeme, pg_current_xact_id()::text::bigint, FALSE "
        "FROM unnest(%s::text[]) AS q(lexeme) "
        f"WHERE pg_try_advisory_xact_lock_shared({CHOICE_LOCK}) "
        f"AND NOT EXISTS (SELECT 1 FROM {table(CountedTerm)} k WHERE k.lexeme = q.lexeme) "
        f"AND NOT EXISTS (SELECT 1 FROM {table(CountingTerm)} c WHERE c.lexeme = q.lexeme) "
        f"AND pg_try_advisory_xact_lock({_MARK_LOCKS}, hashtext(q.lexeme)) "
        "ON CONFLICT DO NOTHING"
    )


def send_notes(alias: str, lexemes: Collection[str]) -> None:
    """Mark ``lexemes`` (stored forms) on ``alias`` after the search's transaction: now
    when it ran in its own, once the caller's commits when it ran in an ``atomic`` block,
    not at all in a transaction managed by hand (autocommit off). Those this process
    tried in the last ``NOTE_AGAIN_SECONDS`` are left out."""
    due = _due(alias, lexemes)
    if not due:
        return
    connection = connections[alias]
    if connection.in_atomic_block:
        transaction.on_commit(partial(_mark, alias, due), using=alias)
    elif connection.get_autocommit():
        _mark(alias, due)
    # else: a transaction the caller manages by hand, whose end nothing reports: skipped


def forget_notes() -> None:
    """Forget which terms this process tried to mark (tests)."""
    _tried.clear()
    _refused_until.clear()


def _due(alias: str, lexemes: Collection[str]) -> list[str]:
    now = time.monotonic()
    if not lexemes or _refused_until.get(alias, now) > now:
        return []
    expired = now - NOTE_AGAIN_SECONDS
    tried = _tried.setdefault(alias, {})
    due = sorted(lexeme for lexeme in lexemes if tried.get(lexeme, expired) <= expired)
    if len(tried) + len(due) > _REMEMBERED:
        for lexeme in [lexeme for lexeme, at in tried.items() if at <= expired]:
            del tried[lexeme]
    tried.update(dict.fromkeys(due, now))
    return due


def _mark(alias: str, lexemes: list[str]) -> None:
    """The marks, in a transaction of their own (the connection is in autocommit)."""
    connection = connections[alias]
    try:
        connection.ensure_connection()
        if _read_only(connection.connection):
            return
        with connection.cursor() as cursor:
            cursor.execute(mark_sql(), [lexemes])
    except Error:  # skipped, never the search's error: tried again after a while
        _refused_until[alias] = time.monotonic() + NOTE_AGAIN_SECONDS


def _read_only(raw: object) -> bool:
    """Whether the server reported the session read-only (a hot standby, or
    ``default_transaction_read_only``): psycopg 3's ``info.parameter_status``,
    psycopg2's ``get_parameter_status``."""
    info = getattr(raw, "info", None)
    status = getattr(info, "parameter_status", None) or getattr(raw, "get_parameter_status", None)
    if status is None:
        return False
    return any(status(name) == "on" for name in _READ_ONLY)
