"""The figures of a soak, from its ledgers (pure): operations per kind and per second,
faults per kind, errors per kind (expected or not), latency percentiles under load and
during recovery, and the time each restart took to recover."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["figures", "percentile"]

WRITE_OPS = ("write", "append", "delete", "legacy")
#: After a restart (or a writer killed holding the lock), the database counts as recovered
#: once a write and a search succeed.
RESTARTS = ("pg_restart_fast", "pg_restart_immediate", "standby_restart", "kill9_holding_lock")


def percentile(values: list[float], fraction: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _recoveries(
    faults: list[Mapping[str, Any]], oks: list[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    recoveries = []
    for fault in faults:
        if fault["kind"] not in RESTARTS:
            continue
        # ops begun once the server accepted connections again: the first that succeed
        # say when the app served again (an op begun before the restart proves nothing)
        back = fault["t0"] + fault.get("ready_s", 0.0)
        after = [e for e in oks if e["t0"] >= back]
        first_write = min((e["t1"] for e in after if e["op"] in WRITE_OPS), default=None)
        first_search = min((e["t1"] for e in after if e["op"] in ("search", "http")), default=None)
        done = (
            None if first_write is None or first_search is None else max(first_write, first_search)
        )
        recoveries.append(
            {
                "kind": fault["kind"],
                "at_s": round(fault["t0"] - fault.get("run_start", fault["t0"]), 1),
                "server_ready_s": round(fault.get("ready_s", 0.0), 2),
                "first_write_s": None
                if first_write is None
                else round(first_write - fault["t0"], 2),
                "first_search_s": None
                if first_search is None
                else round(first_search - fault["t0"], 2),
                "recovered_s": None if done is None else round(done - fault["t0"], 2),
                "window": (fault["t0"], done if done is not None else fault["t0"] + 60),
            }
        )
    return recoveries


def figures(entries: Iterable[Mapping[str, Any]], start: float, seconds: float) -> dict[str, Any]:
    """The figures of the run that began at ``start`` (the setup's writes are not counted)."""
    entries = [e for e in entries if e.get("t0", e.get("t", start)) >= start]
    faults = [e for e in entries if e.get("op") == "fault"]
    oks = [e for e in entries if e.get("phase") in ("ack", "ok") and "t0" in e]
    fails = [e for e in entries if e.get("phase") == "fail"]
    recoveries = _recoveries(faults, oks)
    windows = [r.pop("window") for r in recoveries]

    def in_recovery(entry: Mapping[str, Any]) -> bool:
        return any(start <= entry["t0"] <= end for start, end in windows)

    latency: dict[str, dict[str, float | None]] = {}
    for label, kinds in (("search", ("search",)), ("http", ("http",)), ("write", WRITE_OPS)):
        for phase, wanted in (("load", False), ("recovery", True)):
            ms = [
                1000 * (e["t1"] - e["t0"])
                for e in oks
                if e["op"] in kinds
                and in_recovery(e) == wanted
                and not str(e.get("proc", "")).startswith("lockholder")  # it sleeps holding
            ]
            latency[f"{label} ({phase})"] = {
                "n": len(ms),
                "p50_ms": _round(percentile(ms, 0.5)),
                "p99_ms": _round(percentile(ms, 0.99)),
            }
    ops = Counter(e["op"] for e in oks)
    backfills = [e for e in entries if e.get("op") == "backfill"]
    return {
        "seconds": round(seconds, 1),
        "ops": dict(sorted(ops.items())),
        "ops_per_second": {op: round(n / seconds, 1) for op, n in sorted(ops.items())},
        "conflicts": sum(1 for e in fails if e.get("error") == "conflict"),
        "backfill_runs": Counter("ok" if e["rc"] == 0 else f"exit {e['rc']}" for e in backfills),
        "faults": dict(Counter(e["kind"] for e in faults)),
        "errors_expected": dict(
            Counter(f"{e['op']}:{e['error']}" for e in fails if e.get("expected_error"))
        ),
        "errors_unexpected": dict(
            Counter(f"{e['op']}:{e['error']}" for e in fails if not e.get("expected_error"))
        ),
        "latency": latency,
        "recoveries": recoveries,
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
