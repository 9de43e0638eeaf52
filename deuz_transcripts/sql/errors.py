"""Raw database errors leave the public API as the app's own ``TranscriptError``."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.db import DatabaseError, connections

from ..backends.driver_errors import is_lock_conflict, lock_conflict_name
from ..conf import conf
from ..errors import TranscriptError

__all__ = [
    "WorkerThreadRunner",
    "database_errors",
    "describe_database_error",
    "is_lock_conflict",
    "retry_lock_conflicts",
]

T = TypeVar("T")


class WorkerThreadRunner:
    """Async twins of SQL classes run their sync method on Django's worker thread."""

    async def _run(self, method: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await sync_to_async(method, thread_sensitive=True)(*args, **kwargs)


def _lock_message(exc: BaseException) -> str:
    return f"the database is {lock_conflict_name(exc) or 'locked by another writer'}; try again"


@contextmanager
def database_errors(using: str | None = None) -> Iterator[None]:
    """Raw database errors leave the public API as ``TranscriptError``.

    With ``using``, a connection found dead (server restart, ``pg_terminate_backend``,
    network) is closed at once when no transaction is open, so the next call
    reconnects instead of failing until Django's request cycle recycles it.
    """
    try:
        yield
    except DatabaseError as exc:
        if using is not None:
            _close_if_broken(using)
        if is_lock_conflict(exc):
            raise TranscriptError(_lock_message(exc)) from exc
        raise TranscriptError(describe_database_error(exc)) from exc


def retry_lock_conflicts(using: str, write: Callable[[], T]) -> T:
    """Run ``write`` (a whole transaction of its own) and run it again, after a short
    back-off, when another writer's lock stopped it (SQLite busy or locked; PostgreSQL
    deadlock, serialization failure, lock not available), up to ``LOCK_RETRIES`` times in
    all; never inside the caller's transaction, whose earlier work a retry cannot redo.
    Database errors leave as ``TranscriptError`` (``database_errors``)."""
    attempts = 1 if connections[using].in_atomic_block else conf.LOCK_RETRIES
    for attempt in range(attempts):
        try:
            with database_errors(using):
                return write()
        except TranscriptError as exc:
            locked = exc.__cause__ is not None and is_lock_conflict(exc.__cause__)
            if not locked or attempt == attempts - 1:
                raise
            time.sleep(0.05 * 2**attempt)
    raise AssertionError("unreachable")


#: Driver messages (lower case) of a database that has no tables of this app yet.
_NOT_MIGRATED = ("no such table", "no such column", "undefinedtable", "undefinedcolumn")
#: Driver messages (lower case) of a database that cannot be reached or opened.
_UNREACHABLE = (
    "connection refused",
    "could not connect",
    "connection failed",
    "connection to server",
    "unable to open database file",
    "could not translate host name",
    "name or service not known",
    "timeout expired",
    "password authentication failed",
    "no password supplied",
    "server closed the connection",
    "terminating connection",
)
_MAX_DETAIL = 200


def describe_database_error(exc: BaseException) -> str:
    """One line naming the cause of a database error and, when known, the fix.

    Only the driver's first line is kept (a later line may quote row data), cut to
    200 characters; an app table that does not exist means ``migrate`` was not run.
    """
    lines = str(exc).strip().splitlines()
    detail = lines[0].strip() if lines else ""
    if len(detail) > _MAX_DETAIL:
        detail = detail[: _MAX_DETAIL - 1] + "…"
    cause = exc.__cause__
    names = f"{type(exc).__name__} {type(cause).__name__ if cause is not None else ''}"
    lowered = f"{detail} {names}".lower()
    if any(sign in lowered for sign in _NOT_MIGRATED) or (
        "relation" in lowered and "does not exist" in lowered
    ):
        return (
            f"the database is not migrated ({detail}); "
            "run `manage.py migrate` to create the deuz_transcripts tables"
        )
    if any(sign in lowered for sign in _UNREACHABLE):
        return (
            f"cannot reach the database ({detail}); "
            "check DATABASES in the settings and that the database server is running"
        )
    return (
        f"database error: {type(exc).__name__}: {detail}"
        if detail
        else (f"database error: {type(exc).__name__}")
    )


def _close_if_broken(using: str) -> None:
    connection = connections[using]
    if connection.in_atomic_block:
        return  # the caller's transaction: Django closes it when the block ends
    with suppress(DatabaseError):
        connection.close_if_unusable_or_obsolete()
