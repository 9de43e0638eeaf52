"""Smoke test of the concurrent writers benchmark (``python -m bench.concurrency``).

Not a timing assertion: one and two writers for a second per layout, in a database of its
own on the engine of the test run (PostgreSQL when ``DATABASE_URL`` names one, with its wait
events sampled), a counted tenant of 200 rows; the run must write what it says it wrote.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from bench.concurrency import LAYOUTS, parse_args, ratios, table

ROOT = Path(__file__).resolve().parent.parent


def _engine_args(tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE",)}
    if connection.vendor != "postgresql":
        return ["--db", "sqlite", "--sqlite-path", str(tmp_path / "conc.sqlite3")], env
    settings = connection.settings_dict
    env |= {
        "BENCH_PG_HOST": str(settings["HOST"] or "127.0.0.1"),
        "BENCH_PG_PORT": str(settings["PORT"] or "5432"),
        "BENCH_PG_USER": str(settings["USER"] or "postgres"),
    }
    # beside the test database's own name, so parallel runs of other checkouts never meet
    name = f"{settings['TEST']['NAME'] or 'test_deuz_transcripts'}_concbench"
    return ["--db", "postgres", "--pg-name", name], env


def test_concurrent_writers_run_write_and_report(tmp_path: Path) -> None:
    out = tmp_path / "conc.json"
    engine, env = _engine_args(tmp_path)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.concurrency",
            *engine,
            "--writers",
            "1,2",
            "--seconds",
            "1",
            "--turns",
            "2",
            "--counted-rows",
            "200",
            "--tenants",
            "20",
            "--drop-db",
            "--json",
            str(out),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(out.read_text())
    assert re.fullmatch(r"[0-9a-f]{40}", results["meta"]["commit"])
    assert "load average" in results["meta"]["uptime_before"]
    assert results["preload"]["indexed_rows"] >= 200
    cells = results["cells"]
    assert [(c["layout"], c["writers"]) for c in cells] == [
        (layout, n) for n in (1, 2) for layout in LAYOUTS
    ]
    for cell in cells:
        assert cell["errors"] == {}, cell
        # every timed chat is in the database, with one warm-up write per writer and turn
        assert cell["stored_chats"] == cell["chats"] + 2 * cell["writers"], cell
        assert len(cell["turn_chats_per_s"]) == cell["turns"] == 2
        assert 5 * cell["chats"] <= cell["messages"] <= 13 * cell["chats"]
        assert cell["chats_per_s"] > 0 and cell["p99_ms"] >= cell["p50_ms"] > 0
        if connection.vendor == "postgresql":
            assert cell["wait_samples"] >= cell["writers"]
            assert abs(sum(cell["wait_types"].values()) - 1) < 0.01
            assert cell["sampled_every_ms"] >= 9  # never faster than asked
        else:
            assert "wait_types" not in cell
    if connection.vendor == "postgresql":
        assert results["preload"]["counted_tenants"] == ["counted"]
    assert [row["writers"] for row in results["ratios"]] == [1, 2]
    assert "| layout | N | chats/s |" in proc.stdout
    assert "| N | counted/spread | counted/plain |" in proc.stdout


def _cell(layout: str, writers: int, rate: float) -> dict[str, Any]:
    return {
        "layout": layout,
        "writers": writers,
        "chats_per_s": rate,
        "turn_chats_per_s": [rate - 10, rate + 10],
        "msgs_per_s": rate * 9,
        "p50_ms": 5.0,
        "p99_ms": 9.0,
        "errors": {},
        "wait_types": {"Lock": 0.5, "CPU": 0.25, "Timeout": 0.25},
        "wait_events": {"CPU:running": 0.25, "Lock:advisory": 0.5, "Timeout:SpinDelay": 0.25},
    }


def test_ratios_are_per_writer_count_of_the_same_run():
    cells = [
        _cell("counted", 1, 50.0),
        _cell("spread", 1, 100.0),
        _cell("plain", 1, 200.0),
        _cell("counted", 8, 30.0),
        _cell("spread", 8, 120.0),
    ]
    assert ratios(cells) == [
        {"writers": 1, "counted/spread": 0.5, "counted/plain": 0.25, "spread/plain": 0.5},
        {"writers": 8, "counted/spread": 0.25},
    ]
    meta = {
        "commit": "a" * 40,
        "dirty": False,
        "db": "postgres",
        "seconds": 1,
        "tenants": 3000,
        "uptime_before": "up",
        "uptime_after": "up",
    }
    text = table({"meta": meta, "preload": {}, "cells": cells, "ratios": ratios(cells)})
    # wait types outside the named columns add up under "other"; idle ones are not "top"
    row = "| counted | 1 | 50.0 | 40 / 60 | 450 | 5.0 | 9.0 | 50% | 0% | 0% | 0% | 0% | 25% | 25% |"
    assert row in text
    assert "Lock:advisory 50%, Timeout:SpinDelay 25% |" in text


@pytest.mark.parametrize(
    "argv",
    [
        ["--writers", "0"],
        ["--writers", "x"],
        ["--layouts", "every"],
        ["--seconds", "0"],
        ["--turns", "0"],
    ],
)
def test_bad_options_are_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(argv)
    assert exc.value.code == 2
