"""PostgreSQL's maintenance entry point: the GIN search index (dropped and built around a
first load), the stored term counts, and the message table's hash partitions."""

from __future__ import annotations

from django.db import connections, transaction

from ..maintenance import EngineMaintenance, PartitionInfo
from .counts.refresh import refresh_term_counts
from .counts.stored import COUNTED_MIN_ROWS
from .partitions import partition_info, partition_messages
from .storage import VECTOR_INDEX, vector_index_sql, vector_index_state

__all__ = ["PostgresMaintenance"]


class PostgresMaintenance(EngineMaintenance):
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
