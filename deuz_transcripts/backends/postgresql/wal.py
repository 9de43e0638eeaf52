"""PostgreSQL's WAL positions, which a read on a hot standby waits for (``sql.replica``).

A write's position is the end of the primary's WAL once it commits; a standby has it once
its ``pg_last_wal_replay_lsn()`` reaches that position. Positions are integers here (an
``pg_lsn``'s 64 bits), so the engine-neutral wait compares them without knowing the text.
"""

from __future__ import annotations

from django.db.backends.utils import CursorWrapper

__all__ = [
    "format_lsn",
    "insert_position",
    "parse_lsn",
    "record_end",
    "replay_position",
]


def parse_lsn(text: str) -> int:
    """``'1/425EABE8'`` (PostgreSQL's ``pg_lsn`` text) as a comparable integer."""
    high, _, low = text.partition("/")
    return (int(high, 16) << 32) | int(low, 16)


def format_lsn(position: int) -> str:
    """``parse_lsn``'s inverse."""
    return f"{position >> 32:X}/{position & 0xFFFFFFFF:X}"


#: The WAL page header a position just past it skips: a segment's first page has the long
#: one (``SizeOfXLogLongPHD``), every other page the short one (``SizeOfXLogShortPHD``).
_LONG_PAGE_HEADER, _SHORT_PAGE_HEADER = 40, 24


def record_end(insert_position: int, block_size: int, segment_size: int) -> int:
    """The end of the last WAL record before ``insert_position``.

    ``pg_current_wal_insert_lsn()`` names where the next record will start: when the last
    one ended on a page boundary, that is past the next page's header, a position a
    standby's ``pg_last_wal_replay_lsn()`` (the end of the last record replayed) reaches
    only once another record is written, which on an idle primary may take long. No record
    ends inside a page header, so the boundary is the same point.
    """
    if insert_position % segment_size == _LONG_PAGE_HEADER:
        return insert_position - _LONG_PAGE_HEADER
    if insert_position % block_size == _SHORT_PAGE_HEADER:
        return insert_position - _SHORT_PAGE_HEADER
    return insert_position


def insert_position(cursor: CursorWrapper) -> int | None:
    """The end of the primary's WAL (past the commit record of what this session has
    committed), ``None`` when the server gives no row."""
    cursor.execute(
        "SELECT pg_current_wal_insert_lsn()::text, "
        "current_setting('wal_block_size')::int, "
        "(SELECT setting::bigint FROM pg_settings WHERE name = 'wal_segment_size')"
    )
    row = cursor.fetchone()
    return record_end(parse_lsn(row[0]), row[1], row[2]) if row else None


def replay_position(cursor: CursorWrapper) -> int | None:
    """How far the standby has replayed; ``None`` when the server is no standby.

    A server not in recovery (a primary named as search database, a promoted standby)
    may still report a replay position, the static end of the recovery it once ran (a
    crash recovery at start, the WAL replayed before promotion), which no new write ever
    reaches: it answers ``None``, so nothing waits on it.
    """
    cursor.execute("SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn()::text")
    row = cursor.fetchone()
    if row is None or not row[0] or row[1] is None:
        return None
    return parse_lsn(row[1])
