"""``python -m bench --db sqlite|postgres --messages N --users N --json PATH``.

Sets up a database of its own (PostgreSQL ``deuz_bench``, or a SQLite file under
``bench/out/``), loads a deterministic corpus through the public store API, times
search, writes, size and growth against baselines of the same run, prints a table
and writes JSON. See ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from .marker import OUT, check_reusable, marker_path
from .pg_admin import admin_execute

#: Measure phases after the load, in the order they run (``--phases``).
PHASES = ("search", "cjk", "filters", "writes")


def _phases(value: str) -> list[str]:
    chosen = [p.strip() for p in value.split(",") if p.strip()]
    unknown = sorted(set(chosen) - set(PHASES))
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"phases are a comma list of {', '.join(PHASES)}")
    return [p for p in PHASES if p in chosen]


def _policy_change(value: str) -> tuple[str, int]:
    name, sep, number = value.partition("=")
    if not sep or not number.strip().lstrip("-").isdigit():
        raise argparse.ArgumentTypeError("a policy change is NAME=INTEGER, e.g. small_read_rows=0")
    return name.strip(), int(number)


def _share(value: str) -> float:
    share = float(value)
    if not 0.0 <= share < 1.0:
        raise argparse.ArgumentTypeError("a share is >= 0 and < 1")
    return share


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, default=None, help="where to write the JSON results")
    parser.add_argument("--quick", action="store_true", help="few queries, short budgets")
    parser.add_argument("--no-peers", action="store_true", help="skip watson/modelsearch/tantivy")
    parser.add_argument(
        "--skip-peer",
        action="append",
        choices=["watson", "modelsearch", "tantivy"],
        default=[],
        help="skip one peer (repeatable); e.g. watson, whose build is slowest",
    )
    parser.add_argument(
        "--peer-cap",
        type=int,
        default=200_000,
        help="peers index at most this many messages (the measured users always included)",
    )
    parser.add_argument(
        "--load",
        choices=["backfill", "write_chat"],
        default="backfill",
        help="how the corpus is indexed: backfill_transcripts over legacy rows, or write_chat",
    )
    parser.add_argument(
        "--backfill-messages", type=int, default=None, help="legacy messages (default: --messages)"
    )
    parser.add_argument(
        "--backfill-workers",
        type=int,
        default=1,
        help="backfill_transcripts --workers for the load and the backfill measure (default 1)",
    )
    parser.add_argument("--pg-name", default="deuz_bench", help="PostgreSQL database (recreated)")
    parser.add_argument("--sqlite-path", type=Path, default=None)
    parser.add_argument(
        "--budget", type=float, default=None, help="seconds per engine and query class"
    )
    parser.add_argument(
        "--cjk-share",
        type=_share,
        default=0.0,
        help="share of user/assistant prose in Japanese, Chinese or Thai (default 0: the corpus "
        "is unchanged); > 0 turns CJK_BIGRAMS on and adds the cjk-1/cjk-2 query classes",
    )
    parser.add_argument(
        "--phases",
        type=_phases,
        default=list(PHASES),
        help=f"measures to run after the load, a comma list of {','.join(PHASES)} (default all)",
    )
    parser.add_argument(
        "--tenant-key",
        default=None,
        help="TENANT_KEY of the run (e.g. userId: the measured searches then test the tenant "
        "column); part of the corpus a --reuse-db run must match",
    )
    parser.add_argument(
        "--partitions",
        type=int,
        default=0,
        help="PostgreSQL: hash-partition the message table by tenant into this many partitions "
        "after the load (or before a --reuse-db run measures, unless it is partitioned already)",
    )
    parser.add_argument(
        "--policy",
        type=_policy_change,
        action="append",
        default=[],
        metavar="NAME=INTEGER",
        help="run with one policy threshold changed in every engine that has it (repeatable): the ablation of a "
        "threshold is the same run with it at an extreme (bench/RESULTS.md)",
    )
    parser.add_argument(
        "--reuse-db",
        action="store_true",
        help="measure the database an earlier run of the same --db/--messages/--users/--seed/"
        "--cjk-share loaded (no load, no peers; not with the writes phase)",
    )
    args = parser.parse_args(argv)
    if args.phases == ["cjk"] and args.cjk_share == 0:
        parser.error("the cjk phase needs --cjk-share > 0")
    if args.partitions and args.db != "postgres":
        parser.error("--partitions is PostgreSQL's")
    if args.reuse_db and "writes" in args.phases:
        if args.phases == list(PHASES):  # the default: drop what a reused database cannot do
            args.phases.remove("writes")
        else:
            parser.error("--reuse-db cannot run the writes phase (it adds chats to the database)")
    args.marker = marker_path(args)
    return args


def prepare_database(args: argparse.Namespace) -> str:
    """Create a fresh database for this run (or name the reused one); the ``BENCH_DB`` value."""
    if args.reuse_db:
        check_reusable(args)
        if args.db == "postgres":
            return f"postgres:{args.pg_name}"
        return f"sqlite:{args.sqlite_path or OUT / f'bench-{args.messages}.sqlite3'}"
    args.marker.unlink(missing_ok=True)
    if args.db == "postgres":
        admin_execute(
            f'DROP DATABASE IF EXISTS "{args.pg_name}" WITH (FORCE)',
            f'CREATE DATABASE "{args.pg_name}"',
        )
        return f"postgres:{args.pg_name}"
    path = args.sqlite_path or OUT / f"bench-{args.messages}.sqlite3"
    path.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return f"sqlite:{path}"


def setup_django(args: argparse.Namespace) -> dict[str, str]:
    """Configure Django in-process with the peers that are installed; migrate."""
    from .peers import available_peers

    peers, skipped = ([], {}) if args.no_peers else available_peers(args.db)
    if args.no_peers or args.reuse_db:
        skipped = dict.fromkeys(
            ("watson", "modelsearch", "tantivy"), "--reuse-db" if args.reuse_db else "--no-peers"
        )
        peers = []
    for name in args.skip_peer:
        skipped[name] = "--skip-peer"
    peers = [name for name in peers if name not in skipped]
    os.environ["BENCH_DB"] = prepare_database(args)
    os.environ["BENCH_PEERS"] = ",".join(peers)
    os.environ["BENCH_CJK_BIGRAMS"] = "1" if args.cjk_share > 0 else ""
    os.environ["BENCH_TENANT_KEY"] = args.tenant_key or ""
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", run_syncdb=True, verbosity=0)
    return skipped


def apply_policy(changes: list[tuple[str, int]]) -> None:
    """Every engine's policy with ``changes`` where it has them, for the whole run."""
    from deuz_transcripts.backends import forced_policies, policy

    try:
        forced = forced_policies(**dict(changes))
    except ValueError as error:
        raise SystemExit(f"--policy: {error}") from None
    if changes:
        policy.FORCED = forced
    if "scan_scope_max" in dict(changes):  # a setting too, which FTS5's policy reads
        from django.conf import settings

        settings.DEUZ_TRANSCRIPTS = {
            **settings.DEUZ_TRANSCRIPTS,
            "SQLITE_SCAN_SCOPE_MAX": dict(changes)["scan_scope_max"],
        }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.time()
    skipped = setup_django(args)
    from .run import Run

    apply_policy(args.policy)
    run = Run(args, skipped)
    results: dict[str, Any] = run.execute()
    results["meta"]["policy"] = dict(args.policy)
    results["meta"]["wall_seconds"] = round(time.time() - started, 1)
    results["meta"]["load_avg_end"] = os.getloadavg()
    from .report import print_table, write_json

    print_table(results, sys.stdout)
    if args.json:
        write_json(results, args.json)
        print(f"\nJSON written to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
