"""``python -m bench.backfill_ab``: a first backfill of the same legacy rows by several codes.

Why: a whole bench run loads in growth stages and measures searches after; comparing two
backfills needs the same rows, a fresh database each run and the sides alternated, so a
busy machine falls on all of them alike. A template database holds the legacy
``deuz_chats`` rows (``Corpus(n, n // 1000, 7)``, written once, ``--keep-template`` to
reuse it); each run copies it (``CREATE DATABASE ... TEMPLATE``) and runs ``manage.py
backfill_transcripts --source legacy --workers N [--defer-index]`` with a side's own
Python and checkout. Reported per run: wall seconds, msg/s, the command's user and system
CPU seconds (its workers included: robust to load, unlike the wall), the largest RSS of
any one of its processes, the load average, and an md5 over every message row, which
must be the same for every side (the same stored rows, vectors and counts).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .pg_admin import admin_execute
from .processes import cpu_seconds, largest_rss

#: The digest of what a backfill stored: every message row (its chat named by ``chat_id``:
#: the chats' keys depend on the order the workers took them) and every chat row.
_CHECKSUM_SQL = (
    "SELECT md5(string_agg(md5(concat_ws('|', c.chat_id, m.position, m.message_id, m.digest, "
    "m.search_vector::text, m.tenant, m.visible_position, m.has_terms, m.role, m.payload)), "
    "'' ORDER BY c.chat_id, m.position)), count(*) "
    "FROM deuz_transcripts_message m JOIN deuz_transcripts_chat c ON c.id = m.chat_id"
)
_CHATS_SQL = (
    "SELECT md5(string_agg(concat_ws('|', chat_id, scope::text, updated_at, is_indexed, "
    "indexed_count, message_count, tenant, revision), E'\\n' ORDER BY chat_id)) "
    "FROM deuz_transcripts_chat"
)
#: The stored counts, each row plus its pending deltas.
_COUNTS_SQL = (
    "SELECT md5(string_agg(concat_ws('|', lexeme, tenant, role, n), ',' "
    "ORDER BY lexeme, tenant, role)) FROM (SELECT lexeme, tenant, role, sum(rows) AS n FROM "
    "(SELECT lexeme, tenant, role, rows FROM deuz_transcripts_termcount UNION ALL "
    "SELECT lexeme, tenant, role, rows FROM deuz_transcripts_termcountdelta) a "
    "GROUP BY lexeme, tenant, role) s"
)


def _env(tree: Path, database: str) -> dict[str, str]:
    return dict(
        os.environ,
        BENCH_DB=f"postgres:{database}",
        BENCH_PEERS="",
        BENCH_CJK_BIGRAMS="",
        BENCH_TENANT_KEY="",
        DJANGO_SETTINGS_MODULE="bench.settings",
        PYTHONPATH=str(tree),
    )


def build_template(tree: Path, name: str, messages: int) -> None:
    """The legacy rows of ``Corpus(messages, messages // 1000, 7)`` in a migrated database."""
    admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}"')
    script = (
        "import django; django.setup()\n"
        "from django.core.management import call_command\n"
        "call_command('migrate', run_syncdb=True, verbosity=0)\n"
        "from bench.corpus import Corpus\n"
        "from bench.writes import legacy_row\n"
        "from deuz_transcripts.models import LegacyChat\n"
        f"corpus = Corpus({messages}, max(5, {messages} // 1000), 7)\n"
        "rows = []\n"
        "for chat in corpus.chats():\n"
        "    rows.append(legacy_row(chat, chat.chat_id))\n"
        "    if len(rows) >= 500:\n"
        "        LegacyChat.objects.bulk_create(rows); rows = []\n"
        "LegacyChat.objects.bulk_create(rows)\n"
        "from django.db import connection\n"
        "with connection.cursor() as c: c.execute('VACUUM ANALYZE deuz_chats')\n"
    )
    python = tree / ".venv" / "bin" / "python"
    subprocess.run([str(python), "-c", script], cwd=tree, env=_env(tree, name), check=True)


def _connect(database: str) -> Any:
    import psycopg

    return psycopg.connect(
        host=os.environ.get("BENCH_PG_HOST", "127.0.0.1"),
        port=os.environ.get("BENCH_PG_PORT", "5432"),
        user=os.environ.get("BENCH_PG_USER", "postgres"),
        dbname=database,
        autocommit=True,
    )


def _watch(proc: subprocess.Popen[bytes], database: str) -> tuple[int, float]:
    """Until the command exits: the largest RSS of any one of its processes, and the CPU
    seconds of the server backends connected to ``database`` (sampled every 0.2 s)."""
    peak = 0
    backends: dict[int, float] = {}
    with _connect("postgres") as admin:
        while proc.poll() is None:
            peak = max(peak, largest_rss(proc.pid))
            pids = admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s", [database]
            ).fetchall()
            for (pid,) in pids:
                seconds = cpu_seconds(pid)
                if seconds is not None:
                    backends[pid] = seconds
            time.sleep(0.2)
    return peak, sum(backends.values())


def checksum(database: str) -> tuple[str, int]:
    with _connect(database) as conn:
        row = conn.execute(_CHECKSUM_SQL).fetchone()
        chats = conn.execute(_CHATS_SQL).fetchone()
        counts = conn.execute(_COUNTS_SQL).fetchone()
    assert row is not None and chats is not None and counts is not None
    return f"rows {row[0]} chats {chats[0]} counts {counts[0]}", int(row[1])


def run_side(tree: Path, template: str, database: str, workers: int, defer: bool) -> dict[str, Any]:
    admin_execute(
        f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)',
        f'CREATE DATABASE "{database}" TEMPLATE "{template}"',
    )
    python = tree / ".venv" / "bin" / "python"
    command = [str(python), "-m", "django", "backfill_transcripts", "--source", "legacy"]
    command += ["--workers", str(workers)] + (["--defer-index"] if defer else [])
    load_before = os.getloadavg()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(
        command,
        cwd=tree,
        env=_env(tree, database),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    peak, server_cpu = _watch(proc, database)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    output = proc.stdout.read().decode() if proc.stdout else ""
    if proc.returncode != 0:
        raise RuntimeError(f"backfill failed in {tree}: {output[-2000:]}")
    digest, rows = checksum(database)
    admin_execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
    return {
        "wall_s": round(wall, 1),
        "messages": rows,
        "msgs_per_s": round(rows / wall),
        "user_cpu_s": round(after.ru_utime - before.ru_utime, 1),
        "sys_cpu_s": round(after.ru_stime - before.ru_stime, 1),
        "server_cpu_s": round(server_cpu, 1),
        "peak_rss_mb": round(peak / 2**20, 1),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "checksum": digest,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.backfill_ab", description=__doc__)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--side", action="append", required=True, metavar="NAME=TREE")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--defer-index", action="store_true")
    parser.add_argument("--pg-name", default="deuz_backfill_ab", help="prefix of the databases")
    parser.add_argument("--keep-template", action="store_true", help="reuse an existing template")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    sides = [
        (name, Path(tree).resolve()) for name, _, tree in (s.partition("=") for s in args.side)
    ]
    template = f"{args.pg_name}_tpl_{args.messages}"
    if not args.keep_template:
        print(f"writing the legacy rows of {args.messages} messages into {template}", flush=True)
        build_template(sides[0][1], template, args.messages)
    results: list[dict[str, Any]] = []
    for round_ in range(args.rounds):
        order = sides if round_ % 2 == 0 else sides[::-1]
        for name, tree in order:
            result = {"round": round_ + 1, "side": name}
            result |= run_side(
                tree, template, f"{args.pg_name}_run", args.workers, args.defer_index
            )
            results.append(result)
            print(json.dumps(result), flush=True)
    checksums = {r["checksum"] for r in results}
    print("identical rows on every side" if len(checksums) == 1 else f"ROWS DIFFER: {checksums}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0 if len(checksums) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
