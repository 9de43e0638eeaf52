"""Smoke test of the benchmark harness (``python -m bench``): it runs and writes its JSON.

Not a timing assertion: a tiny SQLite run in a subprocess (the harness configures
Django itself), whichever peers are installed; missing peers are recorded as skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL")
    }
    return subprocess.run(
        [sys.executable, "-m", "bench", "--db", "sqlite", "--quick", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_bench_runs_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = _bench(
        "--messages",
        "1000",
        "--users",
        "5",
        "--json",
        str(out),
        "--sqlite-path",
        str(tmp_path / "bench.sqlite3"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(out.read_text())
    for key in (
        "meta",
        "load",
        "search",
        "write",
        "append",
        "size",
        "growth",
        "peers",
        "backfill",
        "targets",
    ):
        assert key in results, key
    assert results["load"]["messages"] == 1000
    # the default load is backfill_transcripts over legacy rows, which is also the backfill measure
    assert "backfill_transcripts" in results["load"]["how"]
    assert results["backfill"]["status"] == "ok"
    assert results["backfill"]["legacy_messages"] == 1000
    summary = results["backfill"]["summary"]
    assert f"Backfill: {results['load']['chats']} indexed" in summary and " 0 failed." in summary
    assert results["meta"]["backend"] in ("sqlite-fts5", "sqlite-like")
    for label in ("small", "big", "unscoped"):
        classes = results["search"][label]["classes"]
        assert set(classes) >= {"1-rare", "1-common", "2-mixed", "5-mixed", "32-mixed"}
        assert not any(name.startswith("cjk-") for name in classes)  # no CJK share by default
        deuz = classes["1-common"]["engines"]["deuz"]
        assert deuz["n"] >= 1 and deuz["p95"] >= deuz["p50"] > 0
        replayed = classes["1-common"]["engines"]["deuz_sql_raw"]  # the API's statements, raw
        assert "error" not in replayed and replayed["n"] >= 1
    for name in ("watson", "modelsearch", "tantivy"):
        assert results["peers"][name]["status"] in ("ok", "skipped", "failed")
    assert all(t["status"] in ("met", "missed", "n/a") for t in results["targets"])
    assert "| scope | class |" in proc.stdout
    assert set(results["filters"]) == {"variants", "big", "unscoped"}
    assert "| scope | class | plain | roles |" in proc.stdout
    # before -> after of two runs (here the same run twice)
    from bench.compare import table

    compared = table(results, results).splitlines()
    assert compared[0].startswith("| scope | class | p50 before | p50 after")
    assert len(compared) == 2 + sum(len(s["classes"]) for s in results["search"].values())
    # latency across users of several sizes, on the database just loaded
    sizes = tmp_path / "sizes.json"
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE",)}
    arguments = ["--messages", "1000", "--users", "5", "--sizes", "10,400,10"]
    arguments += ["--sqlite-path", str(tmp_path / "bench.sqlite3"), "--json", str(sizes)]
    measured = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.scope_sizes",
            *arguments,
            "--per-class",
            "1",
            "--repeat",
            "2",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert measured.returncode == 0, measured.stderr[-3000:]
    cells = json.loads(sizes.read_text())["results"]
    users = list(dict.fromkeys(cell["user"] for cell in cells))
    assert len(users) == 3  # each size its own user, the nearest left
    assert {cell["class"] for cell in cells} == set(results["search"]["small"]["classes"])
    assert all(cell["n"] == 2 and cell["p95"] >= cell["p50"] > 0 for cell in cells)
    assert "| user (messages) | class | p50 | p95 | hits |" in measured.stdout


def test_bench_cjk_and_filter_phases_then_reuse(tmp_path: Path) -> None:
    """A CJK share, only the cjk and filters phases; then the same database measured again."""
    out, again = tmp_path / "cjk.json", tmp_path / "again.json"
    common = ["--messages", "1000", "--users", "5", "--cjk-share", "0.1", "--no-peers"]
    common += ["--sqlite-path", str(tmp_path / "cjk.sqlite3")]
    proc = _bench(*common, "--phases", "cjk,filters", "--json", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(out.read_text())
    assert "write" not in results and "backfill" in results  # the load is the backfill
    for label in ("small", "big", "unscoped"):
        classes = results["search"][label]["classes"]
        assert set(classes) == {"cjk-1", "cjk-2"}
        for cls in classes.values():
            # every query word is in the user's text: found only if CJK_BIGRAMS is on
            assert cls["engines"]["deuz"]["max_hits"] >= 1, cls["queries"]
            assert all(not q.isascii() for q in cls["queries"])
    for label in ("big", "unscoped"):
        section = results["filters"][label]
        assert set(section["classes"]) == {"1-common", "2-common", "2-mixed", "5-mixed"}
        # newest day, newest 10%, half and 90%, and a closed window two thirds back
        after, before = section["windows"]["window_old_month"]
        assert after <= before <= section["windows"]["window"][0]
        assert section["windows"]["window_day"][1] is None
        for cls in section["classes"].values():
            assert set(cls["variants"]) == set(results["filters"]["variants"])
            assert cls["variants"]["plain"]["n"] >= 1
            ratio = cls["ratio_to_plain"]["roles"]["p50"]
            assert ratio is not None and ratio > 0
            # roles and the window narrow the matches
            for narrower in (
                "roles",
                "window_latest",
                "window_day",
                "window10",
                "window_old_month",
            ):
                assert cls["variants"][narrower]["max_hits"] <= cls["variants"]["plain"]["max_hits"]
    assert any(t["target"].startswith("filters (roles") for t in results["targets"])
    assert "Left out of the cjk-1/cjk-2 classes" in proc.stdout and "- tantivy: " in proc.stdout
    assert "Ratio to `plain`" in proc.stdout and "| cjk-1 |" not in proc.stdout.split("Filters")[1]

    reused = _bench(*common, "--reuse-db", "--phases", "cjk", "--json", str(again))
    assert reused.returncode == 0, reused.stderr[-3000:]
    second = json.loads(again.read_text())
    assert second["load"]["reused"] is True and second["load"]["messages"] == 1000
    for label in ("small", "big", "unscoped"):
        first_cls, second_cls = (r["search"][label]["classes"] for r in (results, second))
        assert {n: c["queries"] for n, c in second_cls.items()} == {
            n: c["queries"] for n, c in first_cls.items()
        }
        assert {n: c["engines"]["deuz"]["max_hits"] for n, c in second_cls.items()} == {
            n: c["engines"]["deuz"]["max_hits"] for n, c in first_cls.items()
        }
    # another corpus than the one loaded is refused
    other = _bench(*common[:-2], "--cjk-share", "0.2", "--sqlite-path", common[-1], "--reuse-db")
    assert other.returncode != 0 and "--reuse-db: the database holds" in other.stderr
