"""Which errors a soak expects while faults are injected, and which are defects.

Expected: the outcomes the app documents for contention and for a database that is down,
restarting, terminating the connection or stopping a statement (``RevisionConflict``,
``ChatDeleted``, ``SearchTimeout``, ``ReplicaUnavailable``, a ``TranscriptError`` caused by
the driver's operational error). Unexpected: anything else, above all a raw database error
leaving the public API, or bad input the soak never meant to send.
"""

from __future__ import annotations

from deuz_transcripts import ChatDeleted, InvalidRecord, RevisionConflict, TranscriptError
from deuz_transcripts.errors import ReplicaUnavailable, SearchTimeout

__all__ = ["classify"]

#: Class names, anywhere in an error's chain of causes, of a database that is unavailable
#: for a moment (down, restarting, a terminated backend, a stopped statement, a lock).
_OPERATIONAL = {"OperationalError", "InterfaceError", "QueryCanceled", "AdminShutdown"}


def _causes(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(chain) < 10:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def classify(exc: BaseException) -> tuple[str, bool]:
    """``(kind, expected)`` of an error an operation raised."""
    if isinstance(exc, RevisionConflict):
        return "conflict", True
    if isinstance(exc, ChatDeleted):
        return "deleted", True
    if isinstance(exc, SearchTimeout):
        return "search_timeout", True
    if isinstance(exc, ReplicaUnavailable):
        return "replica_unavailable", True
    if isinstance(exc, InvalidRecord):
        return f"invalid_record:{exc.field}", False
    if isinstance(exc, TranscriptError):
        text = str(exc)
        if "locked" in text:
            return "locked", True
        if "statement timeout" in text or "canceling statement" in text:
            return "statement_timeout", True
        names = {type(cause).__name__ for cause in _causes(exc)}
        if names & _OPERATIONAL:
            return "database_unavailable", True
        return f"transcript_error:{text[:80]}", False
    return f"raw:{type(exc).__name__}:{str(exc)[:80]}", False
