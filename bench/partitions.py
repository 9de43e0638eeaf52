"""``--partitions N``: the message table hash-partitioned by tenant before the measures."""

from __future__ import annotations

import time
from typing import Any

__all__ = ["partition"]


def partition(count: int) -> dict[str, Any]:
    """Partition by tenant (``partition_transcripts``), timed; a table an earlier run
    partitioned is measured as it is (the conversion ends with ``VACUUM (ANALYZE)``)."""
    from deuz_transcripts.backends.postgresql.partitions import partition_info, partition_messages

    from .progress import log

    info = partition_info("default")
    start = time.perf_counter()
    if info is None:
        log(f"partitioning the message table into {count}")
        info = partition_messages("default", count)
    return {
        "key": info.key,
        "count": info.partitions,
        "seconds": round(time.perf_counter() - start, 1),
    }
