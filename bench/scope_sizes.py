"""Public-API search latency across users of several sizes, on a loaded bench database.

The main run measures two users (250 and 50,000 messages at 1M); a plan's thresholds lie
between them (``SQLITE_SCAN_SCOPE_MAX``, the walk's 2,048 rows, ``single_statement_max``),
and no class's cost should jump at one. This picks, for each ``--sizes`` entry, the user
whose indexed messages are nearest to it, and times the small user's query classes
(their words are the corpus' prose, found in every user's text) in each user's scope,
``--repeat`` times each, interleaved:

    .venv/bin/python -m bench.scope_sizes --db sqlite --sqlite-path bench/out/bench-1000000.sqlite3
    .venv/bin/python -m bench.scope_sizes --db postgres --pg-name deuz_bench --tenant-key userId

Run it from a checkout of another revision (a git worktree) on the same database for a
before/after; never beside another benchmark.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

DEFAULT_SIZES = "250,500,1000,1900,2100,5000,20000"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.scope_sizes")
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--sqlite-path", default="bench/out/bench-1000000.sqlite3")
    parser.add_argument("--pg-name", default="deuz_bench")
    parser.add_argument("--tenant-key", default="", help="the database's TENANT_KEY, if any")
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sizes", default=DEFAULT_SIZES, help="indexed messages, comma list")
    parser.add_argument("--per-class", type=int, default=3, help="queries per class")
    parser.add_argument("--repeat", type=int, default=15, help="timed runs of each query")
    parser.add_argument("--json", help="where to write the results")
    args = parser.parse_args()
    where = f"postgres:{args.pg_name}" if args.db == "postgres" else f"sqlite:{args.sqlite_path}"
    os.environ["BENCH_DB"] = where
    os.environ["BENCH_TENANT_KEY"] = args.tenant_key
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    import django

    django.setup()
    from deuz_transcripts.stores import DjangoConditionalChatStore

    from .corpus import SMALL_USER, Corpus
    from .measures import query_classes, summarize

    corpus = Corpus(args.messages, args.users, args.seed)
    for _ in corpus.chats():  # fills the small user's word counts the queries come from
        pass
    classes = query_classes(corpus, SMALL_USER, args.per_class, args.seed)
    users = users_near([int(size) for size in args.sizes.split(",")])
    search = DjangoConditionalChatStore().transcript.search
    results: list[dict[str, Any]] = []
    print("| user (messages) | class | p50 | p95 | hits |\n|---|---|---|---|---|")
    for user, size in users:
        for name, queries in classes.items():
            samples: list[float] = []
            hits = 0
            for query in queries:
                search({"userId": user}, query, limit=20, around=1)  # warm
            for _ in range(args.repeat):
                for query in queries:
                    start = time.perf_counter()
                    hits = max(hits, len(search({"userId": user}, query, limit=20, around=1)))
                    samples.append((time.perf_counter() - start) * 1000)
            cell = summarize(samples)
            results.append({"user": user, "messages": size, "class": name, **cell})
            print(
                f"| {user} ({size:,}) | {name} | {cell['p50']:.2f} | {cell['p95']:.2f} | {hits} |"
            )
    if args.json:
        Path(args.json).write_text(json.dumps({"db": where, "results": results}, indent=1))


def users_near(sizes: list[int]) -> list[tuple[str, int]]:
    """For each size, the user whose indexed messages are nearest to it (each user once)."""
    from django.db import connection

    from deuz_transcripts.backends.chat_filter import table
    from deuz_transcripts.models import Chat, ChatScope

    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT s.value, SUM(c.indexed_count) FROM {table(ChatScope)} s "
            f"JOIN {table(Chat)} c ON c.id = s.chat_id WHERE s.key = 'userId' AND c.is_indexed "
            "GROUP BY s.value"
        )
        counts = {user: int(count) for user, count in cursor.fetchall()}
    chosen: list[tuple[str, int]] = []
    for size in sizes:
        left = {user: count for user, count in counts.items() if user not in dict(chosen)}
        user = min(left, key=lambda u: (abs(left[u] - size), u))
        chosen.append((user, left[user]))
    return chosen


if __name__ == "__main__":
    main()
