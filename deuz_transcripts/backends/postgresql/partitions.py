"""PostgreSQL: the message table (rows and their search vectors) hash-partitioned by
tenant, converted in place by ``manage.py partition_transcripts``.

A partitioned table imposes the rules a distributed PostgreSQL (Citus) imposes on a
table distributed by a column: every unique key and the primary key hold the partition
key. Migration 0004 made the message unique keys ``(tenant, chat, ...)``; the primary key
becomes ``(id, tenant)`` here (ids still come from one sequence, so ``id`` stays unique
and the ORM keeps using it alone). A search whose scope sets the ``TENANT_KEY`` field
tests ``m.tenant`` in every statement, so the planner reads one partition.

The conversion runs in one transaction holding an ``ACCESS EXCLUSIVE`` lock on the
message table: the rows are copied into the new table, then its keys and indexes are
built (the same names and definitions as before), the term-count triggers created again,
and the old table is dropped. Outside
a transaction of the caller's, a ``VACUUM (ANALYZE)`` follows.
"""

from __future__ import annotations

from django.db import connections, transaction
from django.db.backends.utils import CursorWrapper

from ...errors import InvalidRecord, TranscriptError
from ...models import Message, TermCount
from ..chat_filter import table
from ..maintenance import MAX_PARTITIONS, PartitionInfo
from .counts.stored import create_triggers

__all__ = ["MAX_PARTITIONS", "PartitionInfo", "partition_info", "partition_messages"]

_PRIMARY_KEY = "PRIMARY KEY (id, tenant)"


def partition_info(using: str) -> PartitionInfo | None:
    """``None`` when the message table is a plain table (or not PostgreSQL's)."""
    connection = connections[using]
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_get_partkeydef(p.partrelid), (SELECT count(*) FROM pg_inherits i "
            "WHERE i.inhparent = p.partrelid) FROM pg_partitioned_table p "
            "WHERE p.partrelid = to_regclass(%s)",
            [table(Message)],
        )
        row = cursor.fetchone()
    return None if row is None else PartitionInfo(str(row[0]), int(row[1]))


def _definitions(cursor: CursorWrapper, name: str) -> tuple[list[str], list[str], str]:
    """The table's constraints (``ALTER TABLE ... ADD CONSTRAINT``, primary key left out),
    its indexes that no constraint owns, and its id sequence's next value."""
    cursor.execute(
        "SELECT conname, contype, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid = %s::regclass ORDER BY contype, conname",
        [name],
    )
    constraints = []
    for conname, kind, definition in cursor.fetchall():
        if kind == "p":
            continue
        if kind == "u" and "tenant" not in definition:
            raise TranscriptError(
                f"the unique key {conname} lacks the tenant column: run `manage.py migrate`"
            )
        constraints.append(f'ADD CONSTRAINT "{conname}" {definition}')
    cursor.execute(
        "SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i WHERE i.indrelid = %s::regclass "
        "AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid) "
        "ORDER BY i.indexrelid",
        [name],
    )
    indexes = [str(row[0]) for row in cursor.fetchall()]
    cursor.execute("SELECT COALESCE(max(id), 0) + 1 FROM " + name)
    row = cursor.fetchone()
    return constraints, indexes, str(row[0] if row else 1)


def partition_messages(using: str, partitions: int) -> PartitionInfo:
    """Turn the message table into ``partitions`` hash partitions of ``tenant``."""
    if connections[using].vendor != "postgresql":
        raise TranscriptError("only PostgreSQL's message table can be partitioned")
    if not 2 <= partitions <= MAX_PARTITIONS:
        raise InvalidRecord("partitions", f"must be from 2 to {MAX_PARTITIONS}")
    existing = partition_info(using)
    if existing is not None:
        raise TranscriptError(f"the message table is partitioned already ({existing})")
    # Inside a caller's transaction no VACUUM can follow: the conversion analyzes then.
    nested = connections[using].in_atomic_block
    name, old = table(Message), table(Message) + "_unpartitioned"
    sequence = f"{name}_id_seq"
    with transaction.atomic(using=using), connections[using].cursor() as cursor:
        # deferred foreign-key checks of rows this transaction wrote would block the ALTER
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute(f"LOCK TABLE {name} IN ACCESS EXCLUSIVE MODE")
        constraints, indexes, next_id = _definitions(cursor, name)
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [table(TermCount)])
        has_counts = bool((cursor.fetchone() or (False,))[0])
        cursor.execute("SELECT count(*) FROM pg_constraint WHERE confrelid = %s::regclass", [name])
        if (cursor.fetchone() or (0,))[0]:
            raise TranscriptError(f"another table references {name}: it cannot be partitioned")
        cursor.execute(f"ALTER TABLE {name} RENAME TO {old}")
        cursor.execute(f"ALTER TABLE {old} ALTER COLUMN id DROP IDENTITY IF EXISTS")
        cursor.execute(f"ALTER TABLE {old} ALTER COLUMN id DROP DEFAULT")  # a serial's
        cursor.execute(f"DROP SEQUENCE IF EXISTS {sequence}")
        cursor.execute(f"CREATE TABLE {name} (LIKE {old}) PARTITION BY HASH (tenant)")
        for remainder in range(partitions):
            cursor.execute(
                f"CREATE TABLE {name}_p{remainder} PARTITION OF {name} "
                f"FOR VALUES WITH (MODULUS {partitions}, REMAINDER {remainder})"
            )
        cursor.execute(f"CREATE SEQUENCE {sequence} AS bigint OWNED BY {name}.id")
        cursor.execute("SELECT setval(%s, %s, false)", [sequence, next_id])
        cursor.execute(
            f"ALTER TABLE {name} ALTER COLUMN id SET DEFAULT nextval('{sequence}'::regclass)"
        )
        cursor.execute(f"ALTER TABLE {name} ALTER COLUMN tenant SET DEFAULT ''")
        cursor.execute(f"INSERT INTO {name} SELECT * FROM {old}")
        cursor.execute(f"DROP TABLE {old}")
        cursor.execute(f"ALTER TABLE {name} ADD {_PRIMARY_KEY}")
        if constraints:
            cursor.execute(f"ALTER TABLE {name} " + ", ".join(constraints))
        for index in indexes:
            cursor.execute(index)
        if has_counts:  # the old table's triggers went with it; the copied rows are counted
            create_triggers(cursor)
        if nested:
            cursor.execute(f"ANALYZE {name}")
    if not nested:
        # The copied rows have no hint bits and no visibility map yet: the first searches
        # would set them (writing every page they read) unless a vacuum does it now.
        with connections[using].cursor() as cursor:
            cursor.execute(f"VACUUM (ANALYZE) {name}")
    info = partition_info(using)
    assert info is not None
    return info
