"""PostgreSQL's maintenance entry point: the GIN search index (dropped and built around a
first load), the stored term counts, the message table's hash partitions, and the WAL
positions a read on a hot standby waits for."""

from __future__ import annotations

from django.db import connections, transaction

from ...errors import ReplicaProblem
from ..maintenance import EngineMaintenance, PartitionInfo
from .counts.refresh import refresh_term_counts
from .counts.stored import COUNTED_MIN_ROWS
from .errors import replica_problem, sqlstate
from .partitions import partition_info, partition_messages
from .storage import VECTOR_INDEX, vector_index_sql, vector_index_state
from .wal import format_lsn, insert_position, replay_position

__all__ = ["PostgresMaintenance"]


class PostgresMaintenance(EngineMaintenance):
    has_log_positions = True

    @property
    def search_index_name(self) -> str:
        return VECTOR_INDEX

    def search_index_state(self) -> str:
        with connections[self.alias].cursor() as cursor:
            return vector_index_state(cursor)

    def drop_search_index(self) -> None:
        with transaction.atomic(using=self.alias), connections[self.alias].cursor() as cursor:
            cursor.execute(f"DROP INDEX IF EXISTS {VECTOR_INDEX}")

    def build_search_index(self, *, replace_invalid: bool) -> None:
        with transaction.atomic(using=self.alias), connections[self.alias].cursor() as cursor:
            if replace_invalid:  # left by a failed build (CREATE INDEX CONCURRENTLY, say)
                cursor.execute(f"DROP INDEX IF EXISTS {VECTOR_INDEX}")
            cursor.execute(vector_index_sql())

    def refresh_term_counts(self) -> tuple[int, int]:
        with transaction.atomic(using=self.alias), connections[self.alias].cursor() as cursor:
            return refresh_term_counts(cursor), COUNTED_MIN_ROWS

    def partition_info(self) -> PartitionInfo | None:
        return partition_info(self.alias)

    def partition_messages(self, partitions: int) -> PartitionInfo:
        return partition_messages(self.alias, partitions)

    def written_position(self) -> int | None:
        with connections[self.alias].cursor() as cursor:
            return insert_position(cursor)

    def replica_problem(self, error: BaseException) -> tuple[ReplicaProblem, str | None] | None:
        problem = replica_problem(error)
        if problem == "conflict":
            return problem, f"SQLSTATE {sqlstate(error)}"
        if problem == "unreachable" or (
            sqlstate(error) is None and connections[self.alias].connection is None
        ):
            return "unreachable", None  # no code, and the session is gone
        return None

    def replayed_position(self) -> int | None:
        with connections[self.alias].cursor() as cursor:
            return replay_position(cursor)

    def describe_position(self, position: int) -> str:
        return format_lsn(position)
