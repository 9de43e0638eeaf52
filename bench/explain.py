"""Query plans of the main search statements on an already loaded bench database.

``python -m bench.explain --db postgres --messages 100000 --users 200``: regenerates
the corpus' query words (same seed), captures the statements ``search`` runs for a
few query classes, and prints EXPLAIN ANALYZE (PostgreSQL) or EXPLAIN QUERY PLAN
with timings (SQLite) of each, next to the raw lower bound and the engine's ranking.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "out"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.explain")
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="postgres")
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--pg-name", default="deuz_bench")
    parser.add_argument("--classes", default="1-common,5-mixed,32-mixed")
    parser.add_argument("--scopes", default="small,big,unscoped")
    args = parser.parse_args()
    if args.db == "postgres":
        os.environ["BENCH_DB"] = f"postgres:{args.pg_name}"
    else:
        os.environ["BENCH_DB"] = f"sqlite:{OUT / f'bench-{args.messages}.sqlite3'}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    import django

    django.setup()
    from django.db import connection, transaction

    from . import measures
    from .corpus import Corpus

    corpus = Corpus(args.messages, args.users, args.seed)
    for _ in corpus.chats():  # fills the per-user word counts the queries come from
        pass
    from deuz_transcripts.stores import DjangoConditionalChatStore

    sql = measures.SqlEngines(DjangoConditionalChatStore())
    users = measures.users_measured()
    for label in args.scopes.split(","):
        user = users[label]
        classes = measures.query_classes(corpus, user, 1, args.seed)
        for name in args.classes.split(","):
            query = classes[name][0]
            print(f"\n==== {label} / {name}: {query[:80]!r}")
            replay = sql.replayed()
            replay.prepare(user, query)
            sql.deuz(user, query)
            start = time.perf_counter()
            sql.deuz(user, query)
            print(f"public API search: {(time.perf_counter() - start) * 1000:.2f} ms")
            with transaction.atomic():  # the search's SAVEPOINTs and local settings
                for sql_text, params in replay.captured[(user, query)]:
                    _explain(connection, sql_text, params)
            for baseline in ("raw_lower_bound", "engine_rank"):
                statements: list[tuple[str, Any]] = []

                def wrapper(execute: Any, s: str, p: Any, many: bool, ctx: Any) -> Any:
                    statements.append((s, p))  # noqa: B023
                    return execute(s, p, many, ctx)

                with connection.execute_wrapper(wrapper):
                    getattr(sql, baseline)(user, query)
                print(f"-- baseline {baseline}")
                for sql_text, params in statements:
                    _explain(connection, sql_text, params)


def _explain(connection: Any, sql_text: str, params: Any) -> None:
    with connection.cursor() as cursor:
        if not sql_text.lstrip().upper().startswith(("SELECT", "WITH")):
            cursor.execute(sql_text, params)  # SAVEPOINT, RELEASE: run, nothing to explain
            return
        start = time.perf_counter()
        cursor.execute(sql_text, params)
        rows = cursor.fetchall()
        elapsed = (time.perf_counter() - start) * 1000
        print(f"\n-- {elapsed:.2f} ms, {len(rows)} rows: {sql_text[:300]}")
        if connection.vendor == "postgresql":
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + sql_text, params)
        else:
            cursor.execute("EXPLAIN QUERY PLAN " + sql_text, params)
        for row in cursor.fetchall():
            print("   ", " | ".join(str(col) for col in row))


if __name__ == "__main__":
    main()
