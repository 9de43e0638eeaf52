"""What commands, checks, the app's signals and reads on a standby ask of an engine
besides searching and writing: one entry point per engine, so nothing outside
``backends`` names an engine's modules or sends its SQL.

``backends.maintenance_for(alias)`` picks the engine's by ``connection.vendor``; an operation the
engine has no use for says so (``Unsupported``) or does nothing, as its docstring says.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connections

from ..errors import ReplicaProblem

__all__ = [
    "MAX_PARTITIONS",
    "EngineMaintenance",
    "PartitionInfo",
    "Unsupported",
]

#: More hash partitions than this only multiplies the planning cost of unscoped searches.
MAX_PARTITIONS = 256


class Unsupported(Exception):
    """An operation this database engine does not have (the message says which)."""


@dataclass(frozen=True)
class PartitionInfo:
    """How the message table is split: by what, into how many partitions."""

    key: str
    partitions: int


class EngineMaintenance:
    """The default: an engine with no search index to build, no stored term counts, no
    partitions and no log position a standby replays (SQLite)."""

    #: Whether a write here has a log position that a standby of this database replays,
    #: so a read there can wait for it (``sql.replica``).
    has_log_positions = False

    def __init__(self, alias: str) -> None:
        self.alias = alias

    @property
    def engine(self) -> str:
        return connections[self.alias].vendor

    def search_index_state(self) -> str:
        """``"ready"``, ``"missing"``, ``"invalid"`` (a build that did not finish), or
        ``"unmigrated"``; an engine whose search data needs no separate index is always
        ``"ready"``."""
        return "ready"

    def drop_search_index(self) -> None:
        """Drop the search index before a bulk load (``backfill_transcripts --defer-index``)."""
        raise Unsupported(f"{self.engine} has no search index to defer")

    def build_search_index(self, *, replace_invalid: bool) -> None:
        """Build the search index (dropping an invalid one first when ``replace_invalid``)."""
        raise Unsupported(f"{self.engine} has no search index to build")

    @property
    def search_index_name(self) -> str:
        return ""

    def refresh_term_counts(self) -> tuple[int, int]:
        """Choose the terms and tenants that get stored counts, count what is new:
        ``(terms counted, the fewest rows a counted term holds)``."""
        raise Unsupported(f"{self.engine} stores no term counts (it counts terms in its index)")

    def partition_info(self) -> PartitionInfo | None:
        """How the message table is split, ``None`` when it is one table."""
        return None

    def partition_messages(self, partitions: int) -> PartitionInfo:
        """Split the message table into ``partitions`` hash partitions of the tenant."""
        raise Unsupported("only PostgreSQL's message table can be partitioned")

    def written_position(self) -> int | None:
        """Where the log ends, past what this connection has committed: the position a
        standby must have replayed to hold it (``None``: the server did not say)."""
        raise Unsupported(f"{self.engine} has no log position")

    def replayed_position(self) -> int | None:
        """How far this database, a standby, has replayed its primary's log; ``None``
        when it is no standby (nothing to wait for)."""
        raise Unsupported(f"{self.engine} has no log position")

    def replica_problem(self, error: BaseException) -> tuple[ReplicaProblem, str | None] | None:
        """Why this database, a standby, failed a read: ``("conflict", detail)`` when it
        cancelled the read to replay its primary's log, ``("unreachable", None)`` when it
        ended or refused the session; ``None`` for an error of the read itself."""
        return None

    def describe_position(self, position: int) -> str:
        """A position as the engine writes it (in messages)."""
        return str(position)
