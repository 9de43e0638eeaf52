"""Which corpus a run loaded into its database, so ``--reuse-db`` measures it again.

A JSON file next to the SQLite file (or under ``bench/out/`` for PostgreSQL), written
after the load; without it, or for another corpus, ``--reuse-db`` refuses to run.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

__all__ = ["OUT", "check_reusable", "corpus_identity", "marker_path", "read", "write"]

OUT = Path(__file__).resolve().parent / "out"


def marker_path(args: argparse.Namespace) -> Path:
    """Where a run records which corpus it loaded into its database (read by ``--reuse-db``)."""
    if args.db == "postgres":
        return OUT / f"pg-{args.pg_name}.corpus.json"
    path = args.sqlite_path or OUT / f"bench-{args.messages}.sqlite3"
    return Path(f"{path}.corpus.json")


def corpus_identity(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "db": args.db,
        "messages": args.messages,
        "users": args.users,
        "seed": args.seed,
        "cjk_share": args.cjk_share,
        "tenant_key": args.tenant_key,
    }


def check_reusable(args: argparse.Namespace) -> dict[str, Any]:
    """The marker of the loaded database, which must name this run's corpus."""
    if not args.marker.exists():
        raise SystemExit(f"--reuse-db: no {args.marker}; load the database with a run first")
    marker = read(args)
    if marker.get("corpus") != corpus_identity(args):
        raise SystemExit(
            f"--reuse-db: the database holds {marker.get('corpus')}, not {corpus_identity(args)}"
        )
    return marker


def read(args: argparse.Namespace) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(args.marker.read_text())
    return data


def write(args: argparse.Namespace, data: dict[str, Any]) -> None:
    args.marker.parent.mkdir(parents=True, exist_ok=True)
    args.marker.write_text(json.dumps(data, indent=2, default=str))
