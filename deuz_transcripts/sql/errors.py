"""Raw database errors leave the public API as the app's own ``TranscriptError``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress

from django.db import DatabaseError, connections

from ..errors import TranscriptError

__all__ = ["database_errors"]


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
