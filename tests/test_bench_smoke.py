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


def test_bench_runs_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    env = {
        k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL")
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--db",
            "sqlite",
            "--messages",
            "1000",
            "--users",
            "5",
            "--quick",
            "--json",
            str(out),
            "--sqlite-path",
            str(tmp_path / "bench.sqlite3"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
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
        deuz = classes["1-common"]["engines"]["deuz"]
        assert deuz["n"] >= 1 and deuz["p95"] >= deuz["p50"] > 0
    for name in ("watson", "modelsearch", "tantivy"):
        assert results["peers"][name]["status"] in ("ok", "skipped", "failed")
    assert all(t["status"] in ("met", "missed", "n/a") for t in results["targets"])
    assert "| scope | class |" in proc.stdout
    # before -> after of two runs (here the same run twice)
    from bench.compare import table

    compared = table(results, results).splitlines()
    assert compared[0].startswith("| scope | class | p50 before | p50 after")
    assert len(compared) == 2 + sum(len(s["classes"]) for s in results["search"].values())
