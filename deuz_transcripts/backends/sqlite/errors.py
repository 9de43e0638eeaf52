"""What a SQLite error's result code says about its cause, never its message text."""

from __future__ import annotations

import sqlite3

__all__ = ["is_lock_conflict"]

#: Primary result codes of a lock held by another connection (SQLITE_BUSY) or by another
#: statement or shared-cache connection (SQLITE_LOCKED); extended codes (e.g.
#: SQLITE_BUSY_SNAPSHOT) carry them in their low byte.
_SQLITE_BUSY, _SQLITE_LOCKED = 5, 6


def is_lock_conflict(error: sqlite3.Error) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED)
