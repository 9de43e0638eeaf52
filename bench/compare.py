"""``python -m bench.compare BEFORE.json AFTER.json``: deuz search before -> after.

Prints a markdown table of the public API's p50/p95 per scope and query class in two
runs, with each run's ratio to the engine's own ranking (``ts_rank`` / bm25) timed in
that run, so machine noise between the runs shows in the baselines too.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def _cell(run: dict[str, Any], scope: str, name: str) -> dict[str, Any]:
    return run.get("search", {}).get(scope, {}).get("classes", {}).get(name, {}).get("engines", {})


def _ms(stats: dict[str, Any] | None, key: str) -> str:
    if not stats or key not in stats:
        return "-"
    value = stats[key]
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


def _ratio(engines: dict[str, Any]) -> str:
    deuz, rank = engines.get("deuz"), engines.get("engine_rank")
    if not deuz or not rank or "p95" not in deuz or not rank.get("p95"):
        return "-"
    return f"{deuz['p95'] / rank['p95']:.2f}"


def table(before: dict[str, Any], after: dict[str, Any]) -> str:
    lines = [
        "| scope | class | p50 before | p50 after | p95 before | p95 after "
        "| /rank p95 before | /rank p95 after |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for scope, data in after.get("search", {}).items():
        for name in data["classes"]:
            old, new = _cell(before, scope, name), _cell(after, scope, name)
            lines.append(
                f"| {scope} | {name} | {_ms(old.get('deuz'), 'p50')} | "
                f"{_ms(new.get('deuz'), 'p50')} | {_ms(old.get('deuz'), 'p95')} | "
                f"{_ms(new.get('deuz'), 'p95')} | {_ratio(old)} | {_ratio(new)} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.compare")
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args()
    before = json.loads(args.before.read_text())
    after = json.loads(args.after.read_text())
    print(table(before, after))


if __name__ == "__main__":
    main()
