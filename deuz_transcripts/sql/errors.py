"""Raw database errors leave the public API as the app's own ``TranscriptError``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.db import DatabaseError, connections

from ..errors import TranscriptError

__all__ = ["WorkerThreadRunner", "database_errors"]

T = TypeVar("T")


class WorkerThreadRunner:
    """Async twins of SQL classes run their sync method on Django's worker thread."""

    async def _run(self, method: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await sync_to_async(method, thread_sensitive=True)(*args, **kwargs)


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
        if "locked" in str(exc):
            raise TranscriptError("the database is locked by another writer; try again") from exc
        raise TranscriptError(f"database error: {type(exc).__name__}") from exc


def _close_if_broken(using: str) -> None:
    connection = connections[using]
    if connection.in_atomic_block:
        return  # the caller's transaction: Django closes it when the block ends
    with suppress(DatabaseError):
        connection.close_if_unusable_or_obsolete()
