"""``backfill_transcripts --workers N``: N processes, each backfilling its own share of chats.

Why: a backfill is one connection taking turns with its database. At 4M messages on
PostgreSQL the server used 58% of a core and the backfill's Python 32%, one waiting for
the other, while the second core idled (bench/RESULTS.md, the 10M attempt). Each worker
takes the chats whose primary key is its number modulo N (``Backfill(share=...)``), so
no two workers ever write the same chat, and each has its own connection and
transactions. Workers are forked, so they run with the settings, the signal receivers
and the callbacks of the command that started them; a platform without ``fork`` runs
one worker.
"""

from __future__ import annotations

import gc
import multiprocessing
import queue
from collections.abc import Callable
from typing import Any

from django.db import connections

from .backfill import Backfill, BackfillStats

__all__ = ["MAX_WORKERS", "WorkerFailed", "can_fork", "run_in_workers"]

#: More processes than this only queue up on the database's locks and cores.
MAX_WORKERS = 16
#: How often the parent looks for a worker that died without a word (seconds).
_POLL_SECONDS = 1.0


class WorkerFailed(Exception):
    """A worker stopped on an error of its own (not a chat's: those are counted)."""


def can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def run_in_workers(
    workers: int,
    source: str,
    backfill: Callable[[tuple[int, int]], Backfill],
    using: str,
) -> BackfillStats:
    """Run ``backfill(share).run(source)`` for each share ``(i, workers)`` in a process of
    its own, on database ``using``; the sum of their counts.

    This process's connection to ``using`` is closed first, so each worker opens its own:
    a forked worker must never speak on its parent's socket. Workers touch no other
    connection they inherit, not even to close it (that would close the parent's).
    """
    context = multiprocessing.get_context("fork")
    connections[using].close()
    results: Any = context.Queue()
    processes = [
        context.Process(target=_work, args=(results, backfill, (index, workers), source, using))
        for index in range(workers)
    ]
    for process in processes:
        process.start()
    total = BackfillStats()
    errors: list[str] = []
    pending = workers
    while pending:
        try:
            kind, value = results.get(timeout=_POLL_SECONDS)
        except queue.Empty:
            dead = [p for p in processes if p.exitcode not in (None, 0)]
            if dead and results.empty():
                errors.extend(f"a worker exited with status {p.exitcode}" for p in dead)
                break
            continue
        pending -= 1
        if kind == "stats":
            total.merge(value)
        else:
            errors.append(value)
    for process in processes:
        process.join()
    if errors:
        raise WorkerFailed("; ".join(errors))
    return total


def _work(
    results: Any,
    backfill: Callable[[tuple[int, int]], Backfill],
    share: tuple[int, int],
    source: str,
    using: str,
) -> None:
    # What the worker inherited (Django, the app, the settings) lives as long as it does:
    # out of the collector's sight, the full collections that a backfill's allocations set
    # off walk only the worker's own objects.
    gc.freeze()
    try:
        results.put(("stats", backfill(share).run(source)))
    except BaseException as exc:  # told to the parent, which reports it once
        results.put(("error", f"worker {share[0] + 1}/{share[1]}: {type(exc).__name__}: {exc}"))
    finally:
        connections[using].close()
