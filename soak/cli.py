"""``python -m soak --db postgres|sqlite --seconds 60``: set up, load, inject faults,
stop, check every invariant, print the figures; exit status 1 on any broken invariant."""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from .faults import Injector, schedule
from .figures import figures
from .invariants import Observed, ObservedChat, check
from .ledger import Ledger, read_ledgers
from .supervisor import ROOT, Supervisor

__all__ = ["main"]


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m soak", description=__doc__)
    parser.add_argument("--db", choices=("postgres", "sqlite"), required=True)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tenants", type=int, default=40)
    parser.add_argument(
        "--pace",
        type=float,
        default=0.05,
        help="seconds each worker rests between operations (about)",
    )
    parser.add_argument(
        "--no-standby",
        action="store_true",
        help="PostgreSQL: no standby (searches read the primary)",
    )
    parser.add_argument("--port", type=int, default=5440, help="the soak cluster's port")
    parser.add_argument("--standby-port", type=int, default=5441)
    parser.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="where the run's ledgers, logs and report go (emptied first)",
    )
    return parser.parse_args(argv)


def _manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def _observed(path: Path) -> Observed:
    raw = json.loads(path.read_text())
    return Observed(
        chats={c: ObservedChat(v["revision"], tuple(v["tokens"])) for c, v in raw["chats"].items()},
        tombstones=set(raw["tombstones"]),
        legacy_rows=set(raw["legacy_rows"]),
        hits=[(s, c, tuple(t)) for s, c, t in raw["hits"]],
        problems=[(k, d) for k, d in raw["problems"]],
    )


def run(args: argparse.Namespace) -> int:
    directory = args.dir or ROOT / "bench" / "out" / f"soak-{args.db}"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "soak.settings",
        "SOAK_DIR": str(directory),
        "SOAK_SEED": str(args.seed),
        "SOAK_TENANTS": str(args.tenants),
        "SOAK_PACE": str(args.pace),
    }
    cluster = None
    if args.db == "postgres":
        from .cluster import Cluster

        cluster = Cluster(
            port=args.port, standby_port=None if args.no_standby else args.standby_port
        )
        cluster.ensure()
        cluster.recreate_database()
        env["SOAK_DATABASE_URL"] = cluster.url()
        if not args.no_standby:
            env["SOAK_REPLICA_URL"] = cluster.url(standby=True)
    else:
        env["SOAK_DATABASE_URL"] = f"sqlite:///{directory / 'soak.sqlite3'}"
    print(f"soak: {args.db}, {args.seconds:.0f} s, seed {args.seed}, in {directory}", flush=True)
    setup_env = {**env, "SOAK_PROCESS": "soak-setup"}
    subprocess.run(
        [sys.executable, "-m", "soak.worker", "setup", "setup"], cwd=ROOT, env=setup_env, check=True
    )

    own = Ledger(directory / "ledger", "harness")
    record_lock = threading.Lock()

    def record(entry: dict[str, Any]) -> None:
        with record_lock:
            own.write(entry)

    supervisor = Supervisor(directory, env, record)
    supervisor.start_server()
    supervisor.start_workers()
    supervisor.wait_started()
    start = time.time()
    rng = random.Random(args.seed)
    plan = schedule(
        rng,
        args.seconds,
        postgres=cluster is not None,
        standby=cluster is not None and not args.no_standby,
    )
    injector = Injector(supervisor, cluster, rng, record, start)

    def faults() -> None:
        for second, kind in plan:
            time.sleep(max(0.0, start + second - time.time()))
            try:
                injector.inject(kind)
            except Exception as exc:  # the harness's own failure: say so, fail the run
                record({"op": "violation", "kind": "harness", "detail": f"{kind}: {exc!r}"})

    thread = threading.Thread(target=faults, daemon=True)
    thread.start()
    while time.time() < start + args.seconds or thread.is_alive():
        supervisor.poll()
        time.sleep(0.2)
    supervisor.stop()
    elapsed = time.time() - start
    if cluster is not None:
        cluster.wait_ready()

    problems: list[list[str]] = []
    final_env = {k: v for k, v in env.items() if k != "SOAK_REPLICA_URL"}
    final_env["SOAK_PROCESS"] = "soak-final"
    done = _manage(final_env, "backfill_transcripts", "--source", "legacy")
    if done.returncode != 0:
        problems.append(
            ["backfill", f"the final backfill exited {done.returncode}: {done.stderr[-500:]}"]
        )
    verify = _manage(final_env, "backfill_transcripts", "--verify")
    if verify.returncode != 0:
        problems.append(
            [
                "verify",
                f"--verify exited {verify.returncode}: {verify.stdout[-500:]} {verify.stderr[-500:]}",
            ]
        )
    subprocess.run(
        [sys.executable, "-m", "soak.worker", "observe", "observe"],
        cwd=ROOT,
        env=final_env,
        check=True,
    )
    observed = _observed(directory / "observed.json")
    observed.problems.extend((kind, detail) for kind, detail in problems)
    entries = list(read_ledgers(directory / "ledger"))
    verdict = check(entries, observed)
    report = {
        "db": args.db,
        "standby": cluster is not None and not args.no_standby,
        "seed": args.seed,
        "start": start,
        "figures": figures(entries, start, elapsed),
        "lost": verdict.count("lost"),
        "leaked": verdict.count("leaked"),
        "violations": {
            kind: details[:20] for kind, details in verdict.violations.items() if details
        },
        "verify": (verify.stdout + verify.stderr).strip().splitlines()[-3:],
    }
    (directory / "report.json").write_text(json.dumps(report, indent=2))
    _print(report)
    print(
        f"soak: {args.db}: {'PASSED' if verdict.ok else 'FAILED'} (lost = {report['lost']}, "
        f"leaked = {report['leaked']}; report in {directory / 'report.json'})",
        flush=True,
    )
    return 0 if verdict.ok else 1


def _print(report: dict[str, Any]) -> None:
    fig = report["figures"]
    print(
        f"soak: {fig['seconds']} s; ops: "
        + ", ".join(f"{op} {n} ({fig['ops_per_second'][op]}/s)" for op, n in fig["ops"].items())
    )
    print(
        f"soak: revision conflicts {fig['conflicts']}; backfill runs {dict(fig['backfill_runs'])}"
    )
    print(f"soak: faults: {fig['faults']}")
    print(f"soak: expected errors: {fig['errors_expected']}")
    print(f"soak: unexpected errors: {fig['errors_unexpected']}")
    for label, values in fig["latency"].items():
        print(
            f"soak: latency {label}: n={values['n']} p50={values['p50_ms']} ms p99={values['p99_ms']} ms"
        )
    for recovery in fig["recoveries"]:
        print(f"soak: recovery: {recovery}")
    for kind, details in report["violations"].items():
        for detail in details:
            print(f"soak: VIOLATION {kind}: {detail}")


def main(argv: list[str] | None = None) -> None:
    sys.exit(run(_arguments(argv)))
