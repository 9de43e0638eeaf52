"""``python -m bench.concurrency --db postgres|sqlite --json PATH``: writers at once.

N processes (``--writers``, default 1, 2, 8, 16) write new chats with ``write_chat`` (the
store API, one transaction per chat, as ``bench.writes`` times it alone) for a fixed time
(``--seconds``) or number of chats (``--chats``), in these layouts:

- ``counted``: every writer into ONE tenant with stored term counts (``TENANT_KEY=userId``,
  preloaded past ``COUNTED_TENANT_MIN_ROWS`` indexed messages by ``backfill_transcripts``
  over legacy rows, then the terms and tenants chosen as ``backfill_transcripts
  --count-terms`` does): every write adds to that tenant's count rows;
- ``small``: every writer into ONE small tenant (its counts under tenant ``""``);
- ``spread``: each chat into one of MANY small tenants (``--tenants``, default 3,000);
- ``plain``: the same rows without search data (``bench.writes.plain_write``), spread;
- ``native``: the same rows by plain ``INSERT`` into tables whose search data the engine
  fills itself (``bench.native_writes``), spread.

Chats are the bench corpus's (``bench.corpus``) of 5-13 messages, without log dumps. Per
layout and N it reports chats and messages written per second, p50/p99 of one write, and
on PostgreSQL the wait events of the writers' backends (``pg_stat_activity``, sampled
every ``--sample-ms`` by a thread of the parent process), and per N the throughput ratios
of the layouts, all from the same run. Each layout's time at one N is split into
``--turns`` turns, the layouts alternating, so that the shared machine's changing load
falls on all of them; the report gives each turn's rate beside their mean. The JSON
names the commit measured.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import subprocess
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from multiprocessing.synchronize import Event
from pathlib import Path
from queue import Empty
from typing import Any

from .marker import OUT
from .pg_admin import admin_execute
from .progress import log

#: Layouts in the order they take turns within each N.
LAYOUTS = ("counted", "small", "spread", "plain", "native")
COUNTED_TENANT = "counted"
SMALL_TENANT = "small"
#: Wait event types reported as columns (the rest add up under "other").
WAIT_TYPES = ("Lock", "LWLock", "IO", "IPC", "Client", "CPU")
ROOT = Path(__file__).resolve().parent.parent


def _int_list(value: str) -> list[int]:
    try:
        numbers = [int(part) for part in value.split(",") if part.strip()]
    except ValueError:
        numbers = []
    if not numbers or min(numbers) < 1:
        raise argparse.ArgumentTypeError("a comma list of positive integers")
    return numbers


def _layouts(value: str) -> list[str]:
    chosen = [part.strip() for part in value.split(",") if part.strip()]
    if not chosen or set(chosen) - set(LAYOUTS):
        raise argparse.ArgumentTypeError(f"layouts are a comma list of {', '.join(LAYOUTS)}")
    return [layout for layout in LAYOUTS if layout in chosen]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.concurrency", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="postgres")
    parser.add_argument("--writers", type=_int_list, default=[1, 2, 8, 16], help="e.g. 1,2,8,16")
    parser.add_argument(
        "--seconds", type=float, default=25.0, help="per layout and N, over all its turns"
    )
    parser.add_argument(
        "--turns",
        type=int,
        default=2,
        help="each layout and N runs in this many turns, the layouts alternating (default 2)",
    )
    parser.add_argument(
        "--chats",
        type=int,
        default=0,
        help="stop each writer after this many chats per turn (0: --seconds only)",
    )
    parser.add_argument("--layouts", type=_layouts, default=list(LAYOUTS))
    parser.add_argument("--tenants", type=int, default=3_000, help="tenants of the spread layouts")
    parser.add_argument(
        "--counted-rows",
        type=int,
        default=None,
        help="indexed messages that make a tenant counted (default: the app's "
        "COUNTED_TENANT_MIN_ROWS; the term threshold scales with it)",
    )
    parser.add_argument("--sample-ms", type=float, default=10.0, help="wait event sampling")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--pg-name", default="deuz_bench_concurrency")
    parser.add_argument("--sqlite-path", type=Path, default=None)
    parser.add_argument("--drop-db", action="store_true", help="drop the database at the end")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.chats < 0 or args.tenants < 1 or args.turns < 1:
        parser.error("--seconds, --turns and --tenants are positive, --chats is 0 or more")
    if args.counted_rows is not None and args.counted_rows < 2:
        parser.error("--counted-rows is at least 2")
    return args


# set-up


def _sqlite_path(args: argparse.Namespace) -> Path:
    return Path(args.sqlite_path or OUT / "concurrency.sqlite3")


def _remove_sqlite(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def setup_django(args: argparse.Namespace) -> None:
    """A fresh database of its own, ``TENANT_KEY=userId``, migrated."""
    if args.db == "postgres":
        admin_execute(
            f'DROP DATABASE IF EXISTS "{args.pg_name}" WITH (FORCE)',
            f'CREATE DATABASE "{args.pg_name}"',
        )
        os.environ["BENCH_DB"] = f"postgres:{args.pg_name}"
    else:
        path = _sqlite_path(args)
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove_sqlite(path)
        os.environ["BENCH_DB"] = f"sqlite:{path}"
    os.environ["BENCH_PEERS"] = ""
    os.environ["BENCH_CJK_BIGRAMS"] = ""
    os.environ["BENCH_TENANT_KEY"] = "userId"
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def chat_pool(seed: int) -> list[Any]:
    """The corpus's chats of 5-13 messages, none holding a log dump (over 16 KB)."""
    from .corpus import Corpus

    corpus = Corpus(20_000, 20, seed + 500)
    return [
        chat
        for chat in corpus.chats()
        if 5 <= len(chat.messages) <= 13
        and max(len(json.dumps(m, ensure_ascii=False)) for m in chat.messages) < 16_384
    ]


def preload_counted(counted_rows: int | None, seed: int) -> dict[str, Any]:
    """The counted tenant: corpus chats as legacy rows until the tenant holds
    ``counted_rows`` indexed messages, indexed by ``backfill_transcripts --source legacy``
    (a child process), then on PostgreSQL the terms and tenants chosen as
    ``backfill_transcripts --count-terms`` does, with the thresholds scaled when
    ``counted_rows`` is not the app's."""
    from django.db import connection

    # PostgreSQL's thresholds; SQLite (FTS5 counts terms itself) gets a tenant as big
    from deuz_transcripts.backends.postgresql.counts.stored import (
        COUNTED_MIN_ROWS,
        COUNTED_TENANT_MIN_ROWS,
    )
    from deuz_transcripts.models import LegacyChat

    from .corpus import Corpus
    from .writes import legacy_row, run_backfill_command

    wanted = counted_rows or COUNTED_TENANT_MIN_ROWS
    term_min = max(2, COUNTED_MIN_ROWS * wanted // COUNTED_TENANT_MIN_ROWS)
    started = time.perf_counter()
    rows, indexed, messages = [], 0, 0
    corpus = Corpus(int(wanted * 1.3) + 200, 3, seed + 600)
    for chat in corpus.chats():
        if indexed >= wanted:
            break
        own = replace(chat, user=COUNTED_TENANT)
        rows.append(legacy_row(own, f"pre-{chat.chat_id}"))
        indexed += sum(text is not None for text in chat.indexed)
        messages += len(chat.messages)
    if indexed < wanted:
        raise SystemExit(f"the preload corpus holds {indexed} indexed messages, not {wanted}")
    LegacyChat.objects.bulk_create(rows, batch_size=500)
    backfill = run_backfill_command()
    if backfill["status"] != "ok":
        raise SystemExit(f"backfill_transcripts failed: {backfill['summary']}")
    LegacyChat.objects.all().delete()
    out: dict[str, Any] = {
        "chats": len(rows),
        "messages": messages,
        "indexed_rows": _tenant_rows(COUNTED_TENANT),
        "backfill_seconds": round(backfill["seconds"], 1),
        "tenant_min_rows": wanted,
        "term_min_rows": term_min,
    }
    if connection.vendor == "postgresql":
        from deuz_transcripts.backends.postgresql.counts.refresh import refresh_term_counts
        from deuz_transcripts.models import CountedTenant

        with connection.cursor() as cursor:
            out["counted_terms"] = refresh_term_counts(cursor, term_min, tenant_min_rows=wanted)
            cursor.execute("ANALYZE")
        counted = list(CountedTenant.objects.values_list("tenant", flat=True))
        if counted != [COUNTED_TENANT]:
            raise SystemExit(
                f"the preload left counted tenants {counted}, not [{COUNTED_TENANT!r}]"
            )
        out["counted_tenants"] = counted
    out["seconds"] = round(time.perf_counter() - started, 1)
    return out


def _tenant_rows(tenant: str) -> int:
    """The tenant's indexed messages (SQLite: its messages)."""
    from django.db import connection

    from deuz_transcripts.models import Message

    if connection.vendor != "postgresql":
        return Message.objects.filter(tenant=tenant).count()
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM {Message._meta.db_table} "
            "WHERE tenant = %s AND search_vector IS NOT NULL",
            [tenant],
        )
        return int(cursor.fetchone()[0])


# the writers


def _write_function(layout: str) -> Callable[[Any, str, str], None]:
    from deuz_transcripts.stores import DjangoConditionalChatStore

    from . import native_writes
    from .writes import chat_record, plain_write

    if layout == "plain":
        return plain_write
    if layout == "native":
        return native_writes.native_write
    store = DjangoConditionalChatStore()

    def write(chat: Any, chat_id: str, tenant: str) -> None:
        store.write_chat(chat_record(chat, chat_id, tenant), expected_revision=0)

    return write


def _tenant(layout: str, rng: random.Random, tenants: int) -> str:
    if layout == "counted":
        return COUNTED_TENANT
    if layout == "small":
        return SMALL_TENANT
    return f"spread{rng.randrange(tenants):05d}"


def _writer(
    cell: str,
    layout: str,
    index: int,
    options: dict[str, Any],
    pool: list[Any],
    ready: Any,
    go: Event,
    done: Any,
) -> None:
    """One writer process: one warm-up write, its backend's pid, then writes from ``go``
    until the time or the chat count is reached; latencies and counts to ``done``."""
    from django.db import connection

    announced = False
    try:
        write = _write_function(layout)
        rng = random.Random(f"{cell}:{index}")
        write(pool[index % len(pool)], f"{cell}-w{index}-warm", _tenant(layout, rng, 1))
        pid = os.getpid()
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                pid = int(cursor.fetchone()[0])
        ready.put((index, pid, None))
        announced = True
        go.wait()
        latencies: list[float] = []
        errors: Counter[str] = Counter()
        chats = messages = 0
        started = time.perf_counter()
        end = started + options["seconds"]
        n = 0
        while True:
            chat = pool[(index * 7_919 + n) % len(pool)]
            chat_id = f"{cell}-w{index}-{n}"
            n += 1
            before = time.perf_counter()
            try:
                write(chat, chat_id, _tenant(layout, rng, options["tenants"]))
            except Exception as exc:  # counted and reported: a failed write is a result
                errors[type(exc).__name__] += 1
            else:
                latencies.append((time.perf_counter() - before) * 1000)
                chats += 1
                messages += len(chat.messages)
            if time.perf_counter() >= end or (options["chats"] and n >= options["chats"]):
                break
        done.put(
            {
                "index": index,
                "chats": chats,
                "messages": messages,
                "seconds": time.perf_counter() - started,
                "latencies_ms": latencies,
                "errors": dict(errors),
            }
        )
    except BaseException:
        if announced:
            done.put({"index": index, "failed": traceback.format_exc()})
        else:
            ready.put((index, 0, traceback.format_exc()))
    finally:
        connection.close()


class WaitSampler(threading.Thread):
    """``pg_stat_activity``'s wait event of each writer backend every ``interval`` seconds,
    on a connection of its own; the writers' backends are sampled whatever their state
    (``Client:ClientRead`` is a backend waiting for its writer's next statement)."""

    def __init__(self, pids: list[int], interval: float) -> None:
        super().__init__(daemon=True)
        self.pids = pids
        self.interval = interval
        self.counts: Counter[str] = Counter()
        self.rounds = 0
        self.elapsed = 0.0
        self.stop = threading.Event()

    def run(self) -> None:
        import psycopg
        from django.db import connection

        settings = connection.settings_dict
        with psycopg.connect(
            host=settings["HOST"],
            port=settings["PORT"] or "5432",
            user=settings["USER"],
            dbname=settings["NAME"],
            autocommit=True,
        ) as conn:
            tick = started = time.perf_counter()
            while not self.stop.is_set():
                rows = conn.execute(
                    "SELECT wait_event_type, wait_event FROM pg_stat_activity WHERE pid = ANY(%s)",
                    [self.pids],
                ).fetchall()
                self.rounds += 1
                for kind, event in rows:
                    self.counts[f"{kind}:{event}" if kind else "CPU:running"] += 1
                tick += self.interval
                self.stop.wait(max(0.0, tick - time.perf_counter()))
            self.elapsed = time.perf_counter() - started


def _collect(queue: Any, count: int, timeout: float, processes: list[Any]) -> list[Any]:
    items: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(items) < count:
        try:
            items.append(queue.get(timeout=1.0))
        except Empty:
            if time.monotonic() > deadline or not any(p.is_alive() for p in processes):
                raise SystemExit(f"{count - len(items)} writer(s) never answered") from None
    return items


def _stored_chats(layout: str, cell: str) -> int:
    """The chats of the cell found in the database afterwards (the warm-up writes too)."""
    from django.db import connection

    from deuz_transcripts.models import Chat

    if layout != "native":
        return Chat.objects.filter(chat_id__startswith=f"{cell}-").count()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM bench_native_chat WHERE chat_id LIKE %s", [f"{cell}-%"]
        )
        return int(cursor.fetchone()[0])


def run_turn(
    layout: str, writers: int, turn: int, options: dict[str, Any], pool: list[Any]
) -> dict[str, Any]:
    """``writers`` processes writing in ``layout`` at once for one turn: each writer's
    counts and latencies, their backends' wait events, the chats found afterwards."""
    from django.db import connection, connections

    cell = f"{layout}-n{writers}-t{turn}"
    connections.close_all()  # the writers are forked: none may inherit a connection
    context = multiprocessing.get_context("fork")
    ready, done, go = context.Queue(), context.Queue(), context.Event()
    processes = [
        context.Process(target=_writer, args=(cell, layout, i, options, pool, ready, go, done))
        for i in range(writers)
    ]
    for process in processes:
        process.start()
    answers = _collect(ready, writers, 300, processes)
    failed = [problem for _, _, problem in answers if problem]
    if failed:
        go.set()
        raise SystemExit(f"a writer of {cell} failed before the start:\n{failed[0]}")
    pids = [pid for _, pid, _ in answers]
    postgres = connection.vendor == "postgresql"
    sampler = WaitSampler(pids, options["sample_ms"] / 1000) if postgres else None
    if sampler:
        sampler.start()
    go.set()
    results = _collect(done, writers, options["seconds"] + 600, processes)
    if sampler:
        sampler.stop.set()
        sampler.join()
    for process in processes:
        process.join()
    failed = [r["failed"] for r in results if "failed" in r]
    if failed:
        raise SystemExit(f"a writer of {cell} failed:\n{failed[0]}")
    return {
        "writers": results,
        "waits": sampler.counts if sampler else None,
        "wait_rounds": sampler.rounds if sampler else 0,
        "wait_seconds": sampler.elapsed if sampler else 0.0,
        "stored_chats": _stored_chats(layout, cell),
    }


def summarize_cell(layout: str, writers: int, turns: list[dict[str, Any]]) -> dict[str, Any]:
    """One layout and N over its turns: throughput (the mean of the turns', each the sum
    of its writers' own rates, since a writer's last write runs past the time), latency
    percentiles and wait event shares over every write and sample of the turns."""
    from . import measures

    results = [r for turn in turns for r in turn["writers"]]
    rates = [
        sum(r["chats"] / r["seconds"] for r in turn["writers"] if r["seconds"] > 0)
        for turn in turns
    ]
    chats = sum(r["chats"] for r in results)
    messages = sum(r["messages"] for r in results)
    errors: Counter[str] = Counter()
    for r in results:
        errors.update(r["errors"])
    chats_per_s = sum(rates) / len(rates)
    summary = measures.summarize([ms for r in results for ms in r["latencies_ms"]])
    out: dict[str, Any] = {
        "layout": layout,
        "writers": writers,
        "turns": len(turns),
        "chats": chats,
        "messages": messages,
        "seconds": round(sum(max(r["seconds"] for r in t["writers"]) for t in turns), 2),
        "chats_per_s": round(chats_per_s, 1),
        "turn_chats_per_s": [round(rate, 1) for rate in rates],
        "msgs_per_s": round(chats_per_s * messages / chats, 1) if chats else 0.0,
        "p50_ms": summary.get("p50"),
        "p99_ms": summary.get("p99"),
        "errors": dict(errors),
        "stored_chats": sum(turn["stored_chats"] for turn in turns),
    }
    if turns[0]["waits"] is not None:
        waits: Counter[str] = Counter()
        for turn in turns:
            waits.update(turn["waits"])
        total = sum(waits.values())
        by_type: Counter[str] = Counter()
        for key, n in waits.items():
            by_type[key.split(":", 1)[0]] += n
        out["wait_samples"] = total
        out["wait_rounds"] = sum(turn["wait_rounds"] for turn in turns)
        # the sampler is a thread of a busy machine too: the interval it kept
        sampled = sum(turn["wait_seconds"] for turn in turns)
        out["sampled_every_ms"] = round(1000 * sampled / max(1, out["wait_rounds"]), 1)
        out["wait_types"] = {k: round(n / total, 3) for k, n in by_type.most_common()}
        out["wait_events"] = {k: round(n / total, 3) for k, n in waits.most_common()}
    return out


def ratios(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per N, the throughput (chats/s) of one layout over another's, of the same run."""
    pairs = [
        ("counted", "spread"),
        ("counted", "plain"),
        ("spread", "plain"),
        ("counted", "native"),
    ]
    rate = {(c["layout"], c["writers"]): c["chats_per_s"] for c in cells}
    out = []
    for writers in sorted({c["writers"] for c in cells}):
        row: dict[str, Any] = {"writers": writers}
        for top, bottom in pairs:
            a, b = rate.get((top, writers)), rate.get((bottom, writers))
            if a is not None and b:
                row[f"{top}/{bottom}"] = round(a / b, 3)
        out.append(row)
    return out


# the report


def _git(*command: str) -> str:
    proc = subprocess.run(["git", *command], cwd=ROOT, capture_output=True, text=True, check=False)
    return proc.stdout.strip()


def _uptime() -> str:
    proc = subprocess.run(["uptime"], capture_output=True, text=True, check=False)
    return proc.stdout.strip() or f"load average {os.getloadavg()}"


def _waits(cell: dict[str, Any]) -> list[str]:
    """The wait columns of one row: the share of each type, the rest, the top events."""
    types = cell["wait_types"]
    shares = [f"{100 * types.get(t, 0):.0f}%" for t in WAIT_TYPES]
    shares.append(f"{100 * sum(v for k, v in types.items() if k not in WAIT_TYPES):.0f}%")
    idle = ("CPU", "Client")  # running, or waiting for the writer's next statement
    waits = [
        (k, v) for k, v in cell["wait_events"].items() if k.split(":")[0] not in idle and v >= 0.01
    ]
    return [*shares, ", ".join(f"{k} {100 * v:.0f}%" for k, v in waits[:3]) or "-"]


def table(results: dict[str, Any]) -> str:
    """The run as Markdown: one row per layout and N (with the wait events where the
    engine has them), then the ratios per N."""
    meta = results["meta"]
    sampled = any("wait_types" in c for c in results["cells"])
    waits = [*WAIT_TYPES, "other", "top wait events"] if sampled else []
    lines = [
        f"commit `{meta['commit'][:10]}`{' (with uncommitted changes)' if meta['dirty'] else ''}"
        f", {meta['db']}, {meta['seconds']} s per cell in {meta.get('turns', 1)} turns, "
        f"{meta['tenants']:,} spread tenants, counted tenant preloaded with "
        f"{results['preload'].get('indexed_rows', 0):,} indexed messages",
        f"before: {meta['uptime_before']}",
        f"after: {meta['uptime_after']}",
        "",
        "| "
        + " | ".join(
            ["layout", "N", "chats/s", "per turn", "msgs/s", "p50 ms", "p99 ms", *waits, "errors"]
        )
        + " |",
        "|---|"
        + "---:|" * (6 + len(WAIT_TYPES) + 1 if sampled else 6)
        + "---|" * (2 if sampled else 1),
    ]
    for c in results["cells"]:
        cells = [
            c["layout"],
            str(c["writers"]),
            f"{c['chats_per_s']:.1f}",
            " / ".join(f"{r:.0f}" for r in c.get("turn_chats_per_s", [])),
            f"{c['msgs_per_s']:.0f}",
            f"{c['p50_ms'] or 0:.1f}",
            f"{c['p99_ms'] or 0:.1f}",
        ]
        if sampled:
            cells += _waits(c) if "wait_types" in c else ["n/a"] * len(waits)
        cells.append(", ".join(f"{k} {v}" for k, v in c["errors"].items()) or "-")
        lines.append("| " + " | ".join(cells) + " |")
    if results["ratios"]:
        names = [k for k in results["ratios"][0] if k != "writers"]
        lines += [
            "",
            "| N | " + " | ".join(names) + " |",
            "|---:|" + "---:|" * len(names),
        ]
        for row in results["ratios"]:
            lines.append(
                f"| {row['writers']} | "
                + " | ".join(f"{row[k]:.2f}" if k in row else "-" for k in names)
                + " |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    meta: dict[str, Any] = {
        "db": args.db,
        "commit": _git("rev-parse", "HEAD"),
        "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "writers": args.writers,
        "layouts": args.layouts,
        "seconds": args.seconds,
        "turns": args.turns,
        "chats_per_writer_turn": args.chats or None,
        "tenants": args.tenants,
        "sample_ms": args.sample_ms,
        "cpus": os.cpu_count(),
        "uptime_before": _uptime(),
    }
    log(f"concurrency on {args.db}, commit {meta['commit'][:10]}; {meta['uptime_before']}")
    setup_django(args)
    from django.db import connection

    from . import native_writes

    pool = chat_pool(args.seed)
    log(f"{len(pool)} chats of 5-13 messages in the pool")
    preload = preload_counted(args.counted_rows, args.seed) if "counted" in args.layouts else {}
    log(f"preload: {preload}")
    if "native" in args.layouts:
        native_writes.create_tables()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SHOW server_version")
            meta["server"] = f"PostgreSQL {cursor.fetchone()[0]}"
    options = {
        "seconds": args.seconds / args.turns,
        "chats": args.chats,
        "tenants": args.tenants,
        "sample_ms": args.sample_ms,
    }
    cells = []
    layouts = args.layouts
    for step, writers in enumerate(args.writers):
        turns: dict[str, list[dict[str, Any]]] = {layout: [] for layout in layouts}
        for turn in range(args.turns):
            # the layouts take turns; each turn starts with another one
            first = (step + turn) % len(layouts)
            for layout in layouts[first:] + layouts[:first]:
                turns[layout].append(run_turn(layout, writers, turn, options, pool))
        for layout in layouts:
            cell = summarize_cell(layout, writers, turns[layout])
            log(
                f"{layout} N={writers}: {cell['turn_chats_per_s']} chats/s, p50 "
                f"{cell['p50_ms']} ms, p99 {cell['p99_ms']} ms, waits {cell.get('wait_types')}"
            )
            cells.append(cell)
    cells.sort(key=lambda c: (c["writers"], LAYOUTS.index(c["layout"])))
    if "native" in args.layouts:
        native_writes.drop_tables()
    connection.close()
    meta["uptime_after"] = _uptime()
    results = {"meta": meta, "preload": preload, "cells": cells, "ratios": ratios(cells)}
    print(table(results))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1, ensure_ascii=False))
        print(f"\nJSON written to {args.json}")
    if args.drop_db:
        if args.db == "postgres":
            admin_execute(f'DROP DATABASE IF EXISTS "{args.pg_name}" WITH (FORCE)')
        else:
            _remove_sqlite(_sqlite_path(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
