"""What a PostgreSQL error's SQLSTATE says about its cause: decided by the code the
server sent, never by the message text (which a server may translate)."""

from __future__ import annotations

from ...errors import ReplicaProblem

__all__ = [
    "LOCK_CONFLICT_SQLSTATES",
    "QUERY_CANCELED",
    "lock_conflict_name",
    "replica_problem",
    "sqlstate",
]

#: SQLSTATEs of a transaction that lost to another one's locks: running the whole
#: transaction again is the cure.
LOCK_CONFLICT_SQLSTATES = {
    "40P01": "deadlock detected",
    "40001": "serialization failure",
    "55P03": "lock not available",
}
#: A statement cancelled by ``statement_timeout`` (or a cancel request).
QUERY_CANCELED = "57014"
#: SQLSTATEs of a read a hot standby cancelled (or whose session it ended) to replay WAL:
#: 40001 "conflict with recovery" (snapshot, lock, buffer pin, tablespace), 57P04 its
#: database dropped. A standby answers nothing else with them: it runs no serializable
#: transaction and takes no write lock.
RECOVERY_CONFLICT_SQLSTATES = frozenset({"40001", "57P04"})
#: SQLSTATEs of a server that ended or refused the session: shutting down (57P01-57P03);
#: connection exceptions are class 08.
_GONE_SQLSTATES = frozenset({"57P01", "57P02", "57P03"})


def sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE of a PostgreSQL error (psycopg 3 ``sqlstate``, psycopg2 ``pgcode``),
    read from the driver's exception or from Django's wrapper of it (its ``__cause__``)."""
    for error in (exc, exc.__cause__):
        code = getattr(error, "sqlstate", None) or getattr(error, "pgcode", None)
        if isinstance(code, str):
            return code
    return None


def lock_conflict_name(exc: BaseException) -> str | None:
    """How a lock conflict stopped the transaction, in words (``"locked by another
    transaction (deadlock detected, SQLSTATE 40P01)"``); ``None`` for any other error."""
    code = sqlstate(exc)
    if code not in LOCK_CONFLICT_SQLSTATES:
        return None
    return f"locked by another transaction ({LOCK_CONFLICT_SQLSTATES[code]}, SQLSTATE {code})"


def replica_problem(exc: BaseException) -> ReplicaProblem | None:
    """Why a standby failed a read: it cancelled it to replay WAL (``"conflict"``), or it
    ended or refused the session (``"unreachable"``); ``None`` for any other error."""
    code = sqlstate(exc)
    if code in RECOVERY_CONFLICT_SQLSTATES:
        return "conflict"
    if code in _GONE_SQLSTATES or (code or "").startswith("08"):
        return "unreachable"
    return None
