"""The readable table (markdown, pasted into RESULTS.md), the JSON file, and the targets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TextIO

__all__ = ["evaluate_targets", "print_table", "write_json"]

ENGINES = [
    "deuz",
    "deuz_sql_raw",
    "raw_lower_bound",
    "btree_fetch",
    "engine_rank",
    "icontains",
    "watson",
    "modelsearch",
    "tantivy",
]
COMMON = ("1-common", "2-common")
#: The filtered variants judged against the plain search (the paging ones are reported only).
FILTERED = (
    "roles",
    "window_latest",
    "window_day",
    "window10",
    "window",
    "window90",
    "window_old_month",
    "roles+window",
)
#: "No more than the plain search": the same cost within the noise of a shared machine.
FILTER_NOISE = 1.1


def _cells(results: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    out = []
    for label, section in results.get("search", {}).items():
        for name, cls in section["classes"].items():
            out.append((label, name, cls["engines"]))
    return out


def _get(cell: dict[str, Any], engine: str, key: str) -> float | None:
    value = cell.get(engine, {}).get(key)
    return float(value) if value is not None else None


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if value < 100 else f"{value:.0f}"


def print_table(results: dict[str, Any], out: TextIO) -> None:
    meta = results["meta"]
    load = results.get("load", {})
    out.write(f"\n## deuz_transcripts bench: {meta.get('backend')} on {meta.get('database')}\n")
    out.write(
        f"{load.get('messages')} messages, {load.get('chats')} chats, {load.get('users')} users "
        f"(big user {load.get('big_user_messages')}, small user {load.get('small_user_messages')}); "
        f"nproc {meta.get('nproc')}, {meta.get('memory_gb')} GB\n\n"
    )
    out.write("Search latency, ms p50/p95 (limit 20, around 1):\n\n")
    present = [e for e in ENGINES if any(e in cell for _, _, cell in _cells(results))]
    out.write("| scope | class | " + " | ".join(present) + " |\n")
    out.write("|---|---|" + "---|" * len(present) + "\n")
    for label, name, cell in _cells(results):
        values = []
        for engine in present:
            if engine not in cell:
                values.append("")
            elif "error" in cell[engine] and not cell[engine].get("n"):
                values.append("timeout" if "timeout" in cell[engine]["error"] else "error")
            elif "error" in cell[engine]:
                mark = ">T" if "timeout" in cell[engine]["error"] else "err"
                values.append(f"{_fmt(_get(cell, engine, 'p50'))}/{mark}")
            else:
                values.append(
                    f"{_fmt(_get(cell, engine, 'p50'))}/{_fmt(_get(cell, engine, 'p95'))}"
                )
        out.write(f"| {label} | {name} | " + " | ".join(values) + " |\n")
    out.write(
        "\nRatios (deuz p95 / btree p95 for small; deuz p95 / engine_rank p95; deuz p50 / raw "
        "SQL p50; baseline p50 / deuz p50):\n\n"
    )
    out.write(
        "| scope | class | /btree p95 | /rank p95 | API/SQL p50 | icontains x | watson x | "
        "modelsearch x | deuz/tantivy p50 |\n|---|---|---|---|---|---|---|---|---|\n"
    )
    for label, name, cell in _cells(results):
        d50, d95 = _get(cell, "deuz", "p50"), _get(cell, "deuz", "p95")

        def ratio(a: float | None, b: float | None) -> str:
            return f"{a / b:.2f}" if a and b else "-"

        out.write(
            f"| {label} | {name} | {ratio(d95, _get(cell, 'btree_fetch', 'p95'))} "
            f"| {ratio(d95, _get(cell, 'engine_rank', 'p95'))} "
            f"| {ratio(d50, _get(cell, 'deuz_sql_raw', 'p50'))} "
            f"| {ratio(_get(cell, 'icontains', 'p50'), d50)} "
            f"| {ratio(_get(cell, 'watson', 'p50'), d50)} "
            f"| {ratio(_get(cell, 'modelsearch', 'p50'), d50)} "
            f"| {ratio(d50, _get(cell, 'tantivy', 'p50'))} |\n"
        )
    _skipped_for_cjk(results, out)
    print_filters(results, out)
    out.write("\nOther measures:\n\n```\n")
    for key in (
        "load",
        "write",
        "append",
        "delete",
        "pending_list",
        "size",
        "backfill",
        "growth",
        "peers",
    ):
        if key in results:
            out.write(f"{key}: {json.dumps(results[key], default=str)}\n")
    out.write("```\n\nTargets:\n\n")
    for target in results.get("targets", []):
        out.write(f"- [{target['status']}] {target['target']}: {target['detail']}\n")


def _skipped_for_cjk(results: dict[str, Any], out: TextIO) -> None:
    skipped: dict[str, str] = {}
    for section in results.get("search", {}).values():
        for cls in section["classes"].values():
            skipped.update(cls.get("skipped_engines", {}))
    if skipped:
        out.write("\nLeft out of the cjk-1/cjk-2 classes (when this run has them at all):\n\n")
        for engine, why in sorted(skipped.items()):
            out.write(f"- {engine}: {why}\n")


def print_filters(results: dict[str, Any], out: TextIO) -> None:
    """Each filter and paging variant, ms p50/p95, and its ratio to the plain search."""
    data = results.get("filters")
    if not data:
        return
    variants = list(data["variants"])
    out.write("\nFilters and pages (same queries, interleaved), ms p50/p95:\n\n")
    for name, what in data["variants"].items():
        out.write(f"- `{name}`: `{what}`\n")
    scopes = [(label, section) for label, section in data.items() if label != "variants"]
    for label, section in scopes:
        bounds = ", ".join(
            f"{name} {after or '-'} .. {before or '-'}"
            for name, (after, before) in section.get("windows", {}).items()
        )
        out.write(f"- {label}: {bounds}\n")
    out.write("\n| scope | class | " + " | ".join(variants) + " |\n")
    out.write("|---|---|" + "---|" * len(variants) + "\n")
    for label, section in scopes:
        for name, cls in section["classes"].items():
            cells = []
            for variant in variants:
                stats = cls["variants"].get(variant, {})
                if "error" in stats:
                    cells.append("timeout" if "timeout" in stats["error"] else "error")
                else:
                    cells.append(f"{_fmt(stats.get('p50'))}/{_fmt(stats.get('p95'))}")
            out.write(f"| {label} | {name} | " + " | ".join(cells) + " |\n")
    others = [v for v in variants if v != "plain"]
    out.write(
        f"\nRatio to `plain`, p50 / p95 (target for roles/window/both: <= {FILTER_NOISE}, "
        "the same cost within a shared machine's noise; paging is reported only):\n\n"
    )
    out.write("| scope | class | " + " | ".join(others) + " |\n")
    out.write("|---|---|" + "---|" * len(others) + "\n")
    for label, section in scopes:
        for name, cls in section["classes"].items():
            cells = []
            for variant in others:
                ratio = cls["ratio_to_plain"].get(variant, {})
                cells.append(f"{_fmt(ratio.get('p50'))} / {_fmt(ratio.get('p95'))}")
            out.write(f"| {label} | {name} | " + " | ".join(cells) + " |\n")


def write_json(results: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, default=str, ensure_ascii=False))


def _verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("met" if ok else "missed")


def evaluate_targets(results: dict[str, Any]) -> list[dict[str, str]]:
    """The issue's targets, each met/missed/n/a with the worst figure that decides it."""
    cells = _cells(results)
    targets: list[dict[str, str]] = []

    def add(target: str, ok: bool | None, detail: str) -> None:
        targets.append({"target": target, "status": _verdict(ok), "detail": detail})

    def check(name: str, items: list[tuple[str, float]], limit: float, *, above: bool) -> None:
        """``above``: the ratio must stay <= limit; else it must be >= limit."""
        if not items:
            add(name, None, "not measured")
            return
        key = (lambda kv: kv[1]) if above else (lambda kv: -kv[1])
        label, value = max(items, key=key)
        ok = value <= limit if above else value >= limit
        add(name, ok, f"worst {value:.2f} ({label}); limit {'<=' if above else '>='} {limit}")

    def ratios(
        a_engine: str,
        a_key: str,
        b_engine: str,
        b_key: str,
        scopes: tuple[str, ...],
        classes: tuple[str, ...] | None = None,
    ) -> list[tuple[str, float]]:
        items = []
        for label, name, cell in cells:
            if label not in scopes or (classes and name not in classes):
                continue
            a, b = _get(cell, a_engine, a_key), _get(cell, b_engine, b_key)
            if a and b:
                items.append((f"{label}/{name}", a / b))
        return items

    check(
        "small user p95 <= 2x btree fetch of 20 rows",
        ratios("deuz", "p95", "btree_fetch", "p95", ("small",)),
        2.0,
        above=True,
    )
    check(
        "big user common terms p95 <= 0.5x engine ranking top-20 (ts_rank / bm25)",
        ratios("deuz", "p95", "engine_rank", "p95", ("big",), COMMON),
        0.5,
        above=True,
    )
    check(
        "public API p50 <= 1.3x the same SQL run raw",
        ratios("deuz", "p50", "deuz_sql_raw", "p50", ("small", "big", "unscoped")),
        1.3,
        above=True,
    )
    for peer in ("icontains", "watson", "modelsearch"):
        check(
            f"faster than {peer} (p50) on every class",
            ratios(peer, "p50", "deuz", "p50", ("small", "big", "unscoped")),
            1.0,
            above=False,
        )
    check(
        ">= 20x faster than icontains for big user and unscoped (p50)",
        ratios("icontains", "p50", "deuz", "p50", ("big", "unscoped")),
        20.0,
        above=False,
    )
    check(
        "within 5x of tantivy p50",
        ratios("deuz", "p50", "tantivy", "p50", ("small", "big", "unscoped")),
        5.0,
        above=True,
    )
    filtered = [
        (f"{label}/{name}/{variant} {key}", value)
        for label, section in results.get("filters", {}).items()
        if label != "variants"
        for name, cls in section["classes"].items()
        for variant, ratio in cls["ratio_to_plain"].items()
        if variant in FILTERED
        for key, value in ratio.items()
        if value is not None
    ]
    check(
        "filters (roles, updated_after (newest half, 90%), both) cost no more than the "
        f"unfiltered search of the same scope: p50 and p95 <= {FILTER_NOISE}x plain",
        filtered,
        FILTER_NOISE,
        above=True,
    )
    write = results.get("write", {})
    if write:
        ratio = write["overhead_ratio"]
        add("write_chat <= 1.5x the same write without search data", ratio <= 1.5, f"{ratio:.2f}x")
        native = write.get("native_ratio")
        if native is not None:
            add(
                "write_chat <= 2x a plain INSERT whose search data the engine fills "
                "(tsvector + GIN / FTS5 by trigger)",
                native <= 2.0,
                f"{native:.2f}x",
            )
    append = results.get("append", {})
    if append:
        # judged by the API for appends where the run has it (write_chat takes whole chats)
        ratio = append.get("append_messages_ratio_p50", append["ratio_p50"])
        ok = append["rows_rewritten"] == 0 and ratio <= 3.0
        add(
            "append costs O(new messages): no row rewritten, p50 <= 3x an append to a 10-message chat",
            ok,
            f"{append['rows_rewritten']} rows rewritten, append_messages {ratio}x "
            f"(write_chat of the whole record {append['ratio_p50']}x)",
        )
    pending = results.get("pending_list")
    if pending and pending["after_clean"].get("p95"):
        ratio = pending["during_writes"]["p95"] / pending["after_clean"]["p95"]
        add(
            "no latency spikes from the GIN pending list (p95 during writes <= 2x after clean)",
            ratio <= 2.0,
            f"{ratio:.2f}x, max {pending['max_during_ms']} ms",
        )
    backfill = results.get("backfill", {})
    if backfill.get("status") == "ok":
        ok = backfill["msgs_per_s"] >= 10_000 and (backfill["peak_rss_mb"] or 0) < 300
        add(
            "backfill >= 10,000 msg/s, peak RSS < 300 MB",
            ok,
            f"{backfill['msgs_per_s']} msg/s, {backfill['peak_rss_mb']} MB over "
            f"{backfill['legacy_messages']} messages",
        )
    else:
        add(
            "backfill >= 10,000 msg/s, peak RSS < 300 MB",
            None,
            backfill.get("reason", backfill.get("status", "not measured")),
        )
    size = results.get("size", {})
    if size.get("ratio") is not None:
        add("search data <= 2x indexed text", size["ratio"] <= 2.0, f"{size['ratio']:.2f}x")
    growth = results.get("growth", [])
    if len(growth) >= 2:
        first, last = growth[0], growth[-1]
        a, b = first["deuz"].get("p95"), last["deuz"].get("p95")
        if a and b:
            add(
                "small-user p95 flat as the corpus grows (last <= 2x first)",
                b / a <= 2.0,
                f"{first['messages']}: {a} ms -> {last['messages']}: {b} ms ({b / a:.2f}x)",
            )
    return targets
