"""``python -m bench.backfill_ab``: first backfills of one template's legacy rows, side by side.

Not a timing assertion: a tiny template, this checkout as two sides; each run reports its
costs and a checksum of what it stored, the same on both, and leaves no database behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from bench.pg_admin import admin_execute

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="a PostgreSQL template database"
)


def _databases(prefix: str) -> list[str]:
    import psycopg

    with psycopg.connect(host="127.0.0.1", user="postgres", dbname="postgres") as conn:
        rows = conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE %s", [f"{prefix}%"]
        ).fetchall()
    return [name for (name,) in rows]


def test_two_sides_store_the_same_rows(tmp_path: Path) -> None:
    prefix = f"{os.environ.get('TEST_DATABASE_NAME', 'test_deuz')}_backfill_ab"
    out = tmp_path / "ab.json"
    env = {
        k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL")
    }
    command = ["--messages", "2000", "--pg-name", prefix, "--rounds", "1", "--defer-index"]
    command += ["--side", "a=.", "--side", "b=.", "--json", str(out)]
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "bench.backfill_ab", *command],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "identical rows on every side" in proc.stdout
        runs = json.loads(out.read_text())
        assert [run["side"] for run in runs] == ["a", "b"]
        assert {run["messages"] for run in runs} == {2000}
        assert len({run["checksum"] for run in runs}) == 1
        for run in runs:
            assert run["wall_s"] > 0 and run["user_cpu_s"] > 0 and run["peak_rss_mb"] > 0
        assert _databases(prefix) == [f"{prefix}_tpl_2000"]  # each run's copy dropped
    finally:
        admin_execute(f'DROP DATABASE IF EXISTS "{prefix}_tpl_2000" WITH (FORCE)')
