"""``python -m bench.interleave``: sides of one comparison timed query by query, in one run.

A side is a checkout (a worktree of other code) and, optionally, policy changes (each
engine's policy where it has the threshold: ``backends.forced_policies``):
``--side new=. --side old=../old`` is an A/B of two codes, ``--side base=. --side
no-walk=.:small_read_rows=1000000000`` a threshold's ablation. Each side is a long-lived
worker process of its own checkout's Python, on the database an earlier run loaded
(``--reuse-db``'s marker). Every query goes to every side in a shuffled order, round after
round, so a busy or drifting machine falls on all sides alike: the order of runs, which
moved whole-run A/Bs as much as the code, no longer can. Each side's hits (ids and scores)
are checked against the first side's: a threshold or a refactor must not change a result.

Reports per scope and class each side's p50/p95 and its ratios to the first side's (also
the median of the per-query ratios, which pairs the samples query by query). ``--roles
user``: every search filtered by those roles (SPEC §8), on every side.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from .corpus import SMALL_USER, Corpus
from .marker import check_reusable, marker_path

_WORKER = r"""
import json, os, sys, time
tree = sys.argv[1]
sys.path.insert(0, tree)
os.chdir(tree)
import django
django.setup()
import deuz_transcripts
assert deuz_transcripts.__file__.startswith(tree), deuz_transcripts.__file__
changes = json.loads(sys.argv[2])
if changes:
    from deuz_transcripts.backends import forced_policies, policy
    try:
        policy.FORCED = forced_policies(**changes)
    except ValueError as error:
        raise SystemExit(f"{tree}: {error}") from None
    if "scan_scope_max" in changes:  # a setting too, which FTS5's policy reads
        from django.conf import settings
        settings.DEUZ_TRANSCRIPTS = {
            **settings.DEUZ_TRANSCRIPTS, "SQLITE_SCAN_SCOPE_MAX": changes["scan_scope_max"]
        }
from deuz_transcripts.stores import DjangoConditionalChatStore
store = DjangoConditionalChatStore()
exact = os.environ.get("BENCH_EXACT_TOTAL") == "1"
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    ask = json.loads(line)
    scope = {} if ask["user"] is None else {"userId": ask["user"]}
    start = time.perf_counter()
    try:
        options = {"limit": 20, "around": 1, "roles": ask["roles"]}
        if exact:  # the page with its exact total: the counting routes are timed too
            page = store.transcript.search_page(scope, ask["q"], **options)
            hits, total = page.hits, [f"total {page.total}"]
        else:
            hits, total = store.transcript.search(scope, ask["q"], **options), []
        out = [f"{h.message_id}:{h.score:.9f}" for h in hits] + total
    except Exception as exc:  # a timeout: timed as it is, its hits "error"
        out = [f"error {type(exc).__name__}"]
    ms = (time.perf_counter() - start) * 1000
    print(json.dumps({"ms": ms, "hits": out}), flush=True)
"""


@dataclass
class Side:
    name: str
    tree: Path
    policy: dict[str, int]
    process: subprocess.Popen[str] | None = None
    samples: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    per_query: dict[tuple[str, str, str], list[float]] = field(default_factory=dict)
    mismatches: list[str] = field(default_factory=list)

    def start(self, env: dict[str, str]) -> None:
        # this checkout's side runs on this Python; another checkout's on its own venv's
        here = self.tree == Path(__file__).resolve().parent.parent
        python = Path(sys.executable) if here else self.tree / ".venv" / "bin" / "python"
        self.process = subprocess.Popen(
            [str(python), "-c", _WORKER, str(self.tree), json.dumps(self.policy)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=self.tree,
        )
        assert json.loads(self._read())["ready"]

    def _read(self) -> str:
        assert self.process is not None and self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"side {self.name}: its worker stopped")
        return line

    def search(
        self, user: str | None, q: str, roles: list[str] | None = None
    ) -> tuple[float, list[str]]:
        assert self.process is not None and self.process.stdin is not None
        self.process.stdin.write(json.dumps({"user": user, "q": q, "roles": roles}) + "\n")
        self.process.stdin.flush()
        answer = json.loads(self._read())
        return answer["ms"], answer["hits"]

    def stop(self) -> None:
        if self.process is not None and self.process.stdin is not None:
            self.process.stdin.close()
            self.process.wait(timeout=60)


def parse_side(value: str) -> Side:
    """``NAME=TREE[:threshold=INTEGER,...]``."""
    name, _, rest = value.partition("=")
    tree, _, changes = rest.partition(":")
    if not name or not tree:
        raise argparse.ArgumentTypeError("a side is NAME=TREE[:threshold=INTEGER,...]")
    policy: dict[str, int] = {}
    for change in filter(None, changes.split(",")):
        key, _, number = change.partition("=")
        try:
            policy[key] = int(number)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{change}: a threshold is NAME=INTEGER") from None
    return Side(name, Path(tree).resolve(), policy)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.interleave", description=__doc__)
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="postgres")
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--pg-name", default="deuz_bench")
    parser.add_argument("--sqlite-path", type=Path, default=None)
    parser.add_argument("--tenant-key", default=None, help="the loaded database's TENANT_KEY")
    parser.add_argument("--side", type=parse_side, action="append", required=True)
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per query")
    parser.add_argument("--per-class", type=int, default=12, help="queries per class")
    parser.add_argument(
        "--scopes",
        default="small,big,unscoped",
        help="comma list of small, big, unscoped and nearSIZE (the user whose indexed "
        "messages are nearest SIZE, with the small user's queries, as bench.scope_sizes)",
    )
    parser.add_argument("--classes", default="", help="comma list (default: every class)")
    parser.add_argument(
        "--exact-total",
        action="store_true",
        help="each query asks search_page (the page and its exact total), not search",
    )
    parser.add_argument(
        "--roles", default="", help='comma list: every search with roles=[...] (e.g. "user")'
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    if len(args.side) < 2:
        parser.error("give at least two --side")
    args.cjk_share = 0.0
    args.marker = marker_path(args)
    return args


def worker_env(args: argparse.Namespace) -> dict[str, str]:
    if args.db == "postgres":
        db = f"postgres:{args.pg_name}"
    else:
        db = f"sqlite:{(args.sqlite_path or Path(f'bench/out/bench-{args.messages}.sqlite3')).resolve()}"
    return {
        **os.environ,
        "BENCH_DB": db,
        "BENCH_PEERS": "",
        "BENCH_CJK_BIGRAMS": "",
        "BENCH_TENANT_KEY": args.tenant_key or "",
        "BENCH_EXACT_TOTAL": "1" if args.exact_total else "",
        "DJANGO_SETTINGS_MODULE": "bench.settings",
    }


def run(args: argparse.Namespace, out: TextIO) -> dict[str, Any]:
    check_reusable(args)  # the database holds the corpus the queries are drawn from
    env = worker_env(args)
    os.environ.update(env)  # the query classes import the app: the driver sets it up too
    import django

    django.setup()
    from .measures import query_classes, users_measured

    corpus = Corpus(args.messages, args.users, args.seed)
    for _ in corpus.chats():  # the word counts the queries are drawn from
        pass
    wanted = set(filter(None, args.classes.split(",")))
    scopes = {k: v for k, v in users_measured().items() if k in args.scopes.split(",")}
    near = [label for label in args.scopes.split(",") if label.startswith("near")]
    if near:
        from .scope_sizes import users_near

        chosen = users_near([int(label.removeprefix("near")) for label in near])
        scopes.update((label, user) for label, (user, _) in zip(near, chosen, strict=True))
    sides: list[Side] = args.side
    for side in sides:
        side.start(env)
    roles = [role for role in args.roles.split(",") if role] or None
    rng = random.Random(f"{args.seed}:interleave")
    loads = [os.getloadavg()[0]]
    started = time.time()
    try:
        for label, user in scopes.items():
            # a user near a size has no word counts of its own: the small user's queries
            words_of = SMALL_USER if label.startswith("near") else user
            classes = query_classes(corpus, words_of, args.per_class, args.seed)
            for name, queries in classes.items():
                if wanted and name not in wanted:
                    continue
                for q in queries:
                    for round_ in range(args.rounds + 1):  # round 0 warms every side
                        order = sides[:]
                        rng.shuffle(order)
                        answers = {side.name: side.search(user, q, roles) for side in order}
                        if round_ == 0:
                            _check_hits(sides, answers, f"{label} {name} {q!r}")
                            continue
                        for side in sides:
                            ms = answers[side.name][0]
                            side.samples.setdefault((label, name), []).append(ms)
                            side.per_query.setdefault((label, name, q), []).append(ms)
                loads.append(os.getloadavg()[0])
                print(_line(sides, label, name), file=out, flush=True)
    finally:
        for side in sides:
            side.stop()
    return _results(args, sides, loads, time.time() - started)


def _check_hits(sides: list[Side], answers: dict[str, tuple[float, list[str]]], what: str) -> None:
    base = answers[sides[0].name][1]
    for side in sides[1:]:
        if answers[side.name][1] != base:
            side.mismatches.append(what)


def _ratio(a: float, b: float) -> float:
    return round(a / b, 2) if b else float("nan")


def _paired(side: Side, base: Side, label: str, name: str) -> float:
    ratios = [
        statistics.median(ms) / statistics.median(base.per_query[key])
        for key, ms in side.per_query.items()
        if key[:2] == (label, name) and statistics.median(base.per_query[key]) > 0
    ]
    return round(statistics.median(ratios), 2) if ratios else float("nan")


def summarize(samples: list[float]) -> dict[str, float]:
    from .measures import summarize as measures_summarize

    return measures_summarize(samples)


def _line(sides: list[Side], label: str, name: str) -> str:
    base = summarize(sides[0].samples[(label, name)])
    cells = [f"{label:8} {name:8} {sides[0].name} {base['p50']:.1f}/{base['p95']:.1f}"]
    for side in sides[1:]:
        s = summarize(side.samples[(label, name)])
        cells.append(
            f"{side.name} {s['p50']:.1f}/{s['p95']:.1f} "
            f"x{_ratio(s['p50'], base['p50'])}/x{_ratio(s['p95'], base['p95'])} "
            f"paired x{_paired(side, sides[0], label, name)}"
        )
    return " | ".join(cells) + f"  (load {os.getloadavg()[0]:.1f})"


def _results(
    args: argparse.Namespace, sides: list[Side], loads: list[float], seconds: float
) -> dict[str, Any]:
    base = sides[0]
    table: dict[str, Any] = {}
    for key, samples in base.samples.items():
        row: dict[str, Any] = {base.name: summarize(samples)}
        for side in sides[1:]:
            s = summarize(side.samples[key])
            row[side.name] = {
                **s,
                "p50_ratio": _ratio(s["p50"], row[base.name]["p50"]),
                "p95_ratio": _ratio(s["p95"], row[base.name]["p95"]),
                "paired_ratio": _paired(side, base, *key),
            }
        table[" ".join(key)] = row
    return {
        "meta": {
            "db": args.db,
            "messages": args.messages,
            "tenant_key": args.tenant_key,
            "roles": args.roles or None,
            "rounds": args.rounds,
            "per_class": args.per_class,
            "exact_total": args.exact_total,
            "sides": {s.name: {"tree": str(s.tree), "policy": s.policy} for s in sides},
            "seconds": round(seconds, 1),
            "load_min_max": [min(loads), max(loads)],
        },
        "mismatches": {s.name: s.mismatches for s in sides[1:]},
        "classes": table,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results = run(args, sys.stdout)
    for name, what in results["mismatches"].items():
        print(f"{name}: {len(what)} queries with other hits than {args.side[0].name}", *what[:5])
    print(f"{results['meta']['seconds']} s, load {results['meta']['load_min_max']}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1))
    return 1 if any(results["mismatches"].values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
