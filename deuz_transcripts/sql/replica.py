"""Searches on a read replica, with read-your-writes: the WAL position of a caller's writes.

An index on ``using`` (the primary: writes, revision checks, locks, tombstones) may read
its searches from another alias, ``DEUZ_TRANSCRIPTS["SEARCH_DATABASE"]``, typically a
PostgreSQL hot standby. A standby replays the primary's WAL a little later, so a caller
that has just written would not find its own chat there. After each write that commits on
a PostgreSQL primary, the end of the primary's WAL (past the write's commit record) is
remembered in a context variable (per thread, per asyncio task; ``sync_to_async`` carries it back to the caller),
and the caller's next read first waits, at most ``REPLICA_WAIT_MS``, until the standby has
replayed that position. Once it has, the position is forgotten and reads from that
context go straight to the standby again. The engine reads the positions
(``EngineMaintenance.written_position`` and ``replayed_position``; PostgreSQL's SQL is in
``backends/postgresql/wal.py``); this module decides when to read, wait and fall back.

Inside the caller's own transaction on the primary (``transaction.atomic()``, a view under
``ATOMIC_REQUESTS``), a write not yet committed is on no standby: once the transaction has
written through a store or index (``note_write``'s on-commit step is pending), its reads
run on the primary, in that transaction, whatever ``REPLICA_FALLBACK`` says; a
transaction that has not written reads the standby as any caller does.

A search database that is down, still behind when the wait ends, or that cancels the
search to replay the primary's changes (a hot-standby recovery conflict, SQLSTATE 40001)
makes the read run on the primary (``REPLICA_FALLBACK = "primary"``, the default) or
raise ``ReplicaUnavailable`` (``"error"``). On SQLite there is no WAL position: the other
alias is read as it is.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from types import MappingProxyType
from typing import TypeVar

from django.db import DatabaseError, connections, transaction

from ..backends import maintenance_for
from ..conf import conf
from ..errors import ReplicaUnavailable, TranscriptError
from .errors import database_errors, describe_database_error

__all__ = [
    "forget_writes",
    "note_write",
    "read_from",
    "written_in_transaction",
    "written_position",
]

T = TypeVar("T")

#: {primary alias: WAL position (an int) of this context's last committed write there}.
_written: ContextVar[MappingProxyType[str, int]] = ContextVar(
    "deuz_transcripts_written_positions", default=MappingProxyType({})
)
#: A write whose position could not be read: the next read does not trust the replica.
UNKNOWN_POSITION = 2**64 - 1


def written_position(using: str) -> int | None:
    """The WAL position this context last wrote on ``using`` and no read has yet seen
    replayed; ``None`` when there is none."""
    return _written.get().get(using)


def forget_writes() -> None:
    """Forget this context's write positions (tests; a worker reused for another user)."""
    _written.set(MappingProxyType({}))


def _remember(using: str, position: int) -> None:
    current = _written.get()
    if current.get(using, -1) < position:
        _written.set(MappingProxyType({**current, using: position}))


def _forget(using: str, position: int) -> None:
    current = _written.get()
    if current.get(using) == position:
        _written.set(MappingProxyType({k: v for k, v in current.items() if k != using}))


def replicated(using: str, search_using: str) -> bool:
    """Whether reads of ``using`` go elsewhere and a write there has a WAL position."""
    return search_using != using and maintenance_for(using).has_log_positions


@dataclass(frozen=True)
class _RememberPosition:
    """The on-commit step of ``note_write``: reads the primary's log position."""

    using: str

    def __call__(self) -> None:
        try:
            position = maintenance_for(self.using).written_position()
        except DatabaseError:  # the write is committed: never fail the caller for this
            position = None
        _remember(self.using, UNKNOWN_POSITION if position is None else position)


def note_write(using: str, search_using: str) -> None:
    """Inside a write's transaction on ``using``: once it commits, remember the primary's
    WAL insert position (past the commit record), so this context's next read waits for
    the search database to replay it. Nothing when reads stay on ``using``; nothing when
    the transaction rolls back; once per transaction (a store's write and its index's)."""
    if not replicated(using, search_using):
        return
    for entry in connections[using].run_on_commit:
        if isinstance(entry[1], _RememberPosition) and entry[1].using == using:
            return
    transaction.on_commit(_RememberPosition(using), using=using)


def written_in_transaction(using: str) -> bool:
    """Whether the caller's open transaction on ``using`` has written through a store or
    index (a ``note_write`` waits for its commit): no standby can have that write yet."""
    connection = connections[using]
    return connection.in_atomic_block and any(
        isinstance(entry[1], _RememberPosition) and entry[1].using == using
        for entry in connection.run_on_commit
    )


def _wait_for_replay(using: str, search_using: str) -> None:
    """Return once ``search_using`` has replayed this context's last write on ``using``;
    ``ReplicaUnavailable("behind")`` when it has not within ``REPLICA_WAIT_MS``."""
    target = written_position(using)
    if target is None:
        return
    engine = maintenance_for(search_using)
    if not engine.has_log_positions:
        _forget(using, target)  # SQLite: nothing to replay, the alias is read as it is
        return
    if target == UNKNOWN_POSITION:
        _forget(using, target)  # this read falls back (or fails); the next ones need not
        raise ReplicaUnavailable(search_using, "behind", "the write's WAL position is unknown")
    deadline = time.monotonic() + conf.REPLICA_WAIT_MS / 1000
    pause = 0.002
    while True:
        replayed = engine.replayed_position()  # None: no standby, nothing will replay
        if replayed is None or replayed >= target:
            _forget(using, target)
            return
        left = deadline - time.monotonic()
        if left <= 0:
            raise ReplicaUnavailable(
                search_using,
                "behind",
                f"it replayed up to {engine.describe_position(replayed)}, "
                f"the write is at {engine.describe_position(target)}",
            )
        time.sleep(min(pause, left))
        pause = min(pause * 2, 0.05)


def _replica_problem(exc: BaseException, search_using: str) -> ReplicaUnavailable | None:
    """``exc`` (an app or Django error) as ``ReplicaUnavailable`` when the search database
    caused it: a recovery conflict or a session it ended; ``None`` otherwise."""
    cause = exc.__cause__ if isinstance(exc, TranscriptError) else exc
    if not isinstance(cause, DatabaseError):
        return None
    problem = maintenance_for(search_using).replica_problem(cause)
    if problem is None:
        return None
    kind, detail = problem
    return ReplicaUnavailable(search_using, kind, detail or describe_database_error(cause))


def read_from(using: str, search_using: str, read: Callable[[str], T]) -> T:
    """``read(alias)`` on ``search_using`` once it has this context's writes; on ``using``
    when it cannot answer and ``REPLICA_FALLBACK`` is ``"primary"``.

    ``read`` runs its statements inside ``database_errors(alias)``; errors of the read
    itself (a timeout, bad input) are raised as they are, wherever it ran. Inside a
    transaction that has written on ``using``, ``read`` runs there (read-your-writes).
    """
    if search_using == using or written_in_transaction(using):
        return read(using)
    try:
        try:
            with database_errors(search_using):
                connections[search_using].ensure_connection()
        except TranscriptError as exc:
            raise ReplicaUnavailable(search_using, "unreachable", str(exc)) from exc.__cause__
        try:
            with database_errors(search_using):
                _wait_for_replay(using, search_using)
            return read(search_using)
        except TranscriptError as exc:
            problem = exc if isinstance(exc, ReplicaUnavailable) else None
            problem = problem or _replica_problem(exc, search_using)
            if problem is None:
                raise
            raise problem from exc.__cause__
    except ReplicaUnavailable:
        if conf.REPLICA_FALLBACK == "error":
            raise
    return read(using)
