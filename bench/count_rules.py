"""``python -m bench.count_rules --turns 8``: one write's time under migration 0009's count
triggers and folds (``deltas``: each delta filed under its count's tenant, the counted
tenants chosen by a command) against 0010's (``owner_deltas``: each delta under its
message's tenant, the folds choosing the counted terms and tenants), in one PostgreSQL
database whose functions are swapped between turns (the pending deltas added into their
counts at each swap), the rules alternating, so the machine's load falls on both.

The database (``--pg-name``, created and dropped) is preloaded with a counted tenant of
900 chats of 13 messages and 900 small chats of 6 messages over 300 tenants (words
drawn Pareto, so a dozen are common), counted as ``--count-terms`` does, and analyzed.
Each turn writes ``--chats`` chats of 13 messages, alternately to the counted tenant and
to a new small tenant, with ``write_chat``; the report gives p50 and mean per rule and
layout and their ratios, and an empty fold of every key's time under each rule (what a
write past a multiple of ``FOLD_EVERY`` pays besides its deltas).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from datetime import UTC, datetime
from typing import Any

from .pg_admin import admin_execute

RULES = ("deltas", "owner_deltas")
WORDS = [f"w{i}" for i in range(3000)]


def _text(rnd: random.Random) -> str:
    return " ".join(WORDS[min(int(rnd.paretovariate(0.6)) - 1, 2999)] for _ in range(12))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--chats", type=int, default=120, help="per turn")
    parser.add_argument("--pg-name", default="deuz_bench_count_rules")
    args = parser.parse_args()
    admin_execute(
        f'DROP DATABASE IF EXISTS "{args.pg_name}" WITH (FORCE)',
        f'CREATE DATABASE "{args.pg_name}"',
    )
    os.environ["BENCH_DB"] = f"postgres:{args.pg_name}"
    os.environ["BENCH_TENANT_KEY"] = "userId"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    try:
        _run(args)
    finally:
        from django.db import connections

        connections.close_all()
        admin_execute(f'DROP DATABASE IF EXISTS "{args.pg_name}" WITH (FORCE)')


def _run(args: argparse.Namespace) -> None:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection, transaction

    from deuz_transcripts.backends.postgresql.counts.refresh import refresh_term_counts
    from deuz_transcripts.backends.postgresql.counts.stored import absorb_deltas, replace_function
    from deuz_transcripts.records import ChatRecord
    from deuz_transcripts.stores import DjangoConditionalChatStore

    rnd = random.Random(7)
    when = datetime(2025, 1, 1, tzinfo=UTC)

    def record(chat_id: str, user: str, messages: int = 13) -> ChatRecord:
        return ChatRecord(
            chat_id,
            {"userId": user},
            [
                {"role": "user" if k % 2 else "assistant", "content": _text(rnd)}
                for k in range(messages)
            ],
            updated_at=when,
        )

    store = DjangoConditionalChatStore()
    call_command("migrate", verbosity=0)
    for i in range(900):
        store.write_chat(record(f"big{i}", "big"), expected_revision=0)
        store.write_chat(record(f"s{i}", f"small{i % 300}", 6), expected_revision=0)
    with connection.cursor() as cursor:
        terms = refresh_term_counts(cursor, 2000, tenant_min_rows=10_000)
        cursor.execute("ANALYZE deuz_transcripts_message")
    print(f"preloaded: 16,200 messages, {terms} counted terms, one counted tenant")

    def switch(rule: Any) -> None:
        with connection.cursor() as cursor, transaction.atomic():
            cursor.execute("LOCK TABLE deuz_transcripts_message IN SHARE MODE")
            absorb_deltas(cursor)
            replace_function(cursor, rule=rule)

    def empty_fold() -> float:
        with connection.cursor() as cursor, transaction.atomic():
            started = time.perf_counter()
            cursor.execute("SELECT deuz_fold_term_counts(NULL, NULL, NULL)")
            return (time.perf_counter() - started) * 1000

    times: dict[tuple[str, str], list[float]] = {}
    folds: dict[str, list[float]] = {rule: [] for rule in RULES}
    written = 0
    for turn in range(args.turns):
        for rule in RULES if turn % 2 == 0 else RULES[::-1]:
            switch(rule)
            folds[rule].extend(empty_fold() for _ in range(5))
            for k in range(args.chats):
                written += 1
                user = "big" if k % 2 == 0 else f"new{written}"
                chat = record(f"ab{written}", user)
                started = time.perf_counter()
                store.write_chat(chat, expected_revision=0)
                layout = "counted" if user == "big" else "small"
                times.setdefault((rule, layout), []).append((time.perf_counter() - started) * 1000)
    switch("owner_deltas")
    print("| rule | layout | writes | p50 ms | mean ms |")
    print("|---|---|---:|---:|---:|")
    for (rule, layout), values in sorted(times.items()):
        print(
            f"| {rule} | {layout} | {len(values)} | {statistics.median(values):.2f} "
            f"| {statistics.mean(values):.2f} |"
        )
    for layout in ("counted", "small"):
        old, new = times[("deltas", layout)], times[("owner_deltas", layout)]
        print(
            f"{layout}: owner_deltas / deltas p50 "
            f"{statistics.median(new) / statistics.median(old):.2f}, "
            f"mean {statistics.mean(new) / statistics.mean(old):.2f}"
        )
    for rule, values in folds.items():
        print(f"empty fold of every key, {rule}: p50 {statistics.median(values):.2f} ms")


if __name__ == "__main__":
    main()
