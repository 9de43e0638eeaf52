"""A driver's error, told apart by engine: each engine's module reads its own codes."""

from __future__ import annotations

import sqlite3

from django.db import DatabaseError

from .postgresql import errors as postgresql
from .sqlite import errors as sqlite

__all__ = ["driver_error", "is_lock_conflict", "lock_conflict_name"]


def driver_error(exc: BaseException) -> BaseException:
    """The driver's own exception: Django's wrapper keeps it as ``__cause__``."""
    cause = exc.__cause__
    return cause if isinstance(exc, DatabaseError) and cause is not None else exc


def is_lock_conflict(exc: BaseException) -> bool:
    """Whether ``exc`` (Django's or the driver's) says another transaction's locks
    stopped this one: SQLite busy or locked; PostgreSQL deadlock, serialization failure,
    lock not available."""
    return lock_conflict_name(exc) is not None


def lock_conflict_name(exc: BaseException) -> str | None:
    """What stopped the transaction, in words, when another one's locks did; else ``None``."""
    error = driver_error(exc)
    if isinstance(error, sqlite3.Error):
        return "locked by another writer" if sqlite.is_lock_conflict(error) else None
    return postgresql.lock_conflict_name(error)
