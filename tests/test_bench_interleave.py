"""``python -m bench.interleave``: sides timed query by query on one loaded database.

Not a timing assertion: a tiny SQLite corpus loaded by the bench, then two sides of this
checkout (one with a threshold at an extreme) run every query; the run reports both and
finds the same hits on both.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.interleave import Side, _check_hits, parse_side

ROOT = Path(__file__).resolve().parent.parent


def _python(*args: str) -> subprocess.CompletedProcess[str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL")
    }
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_a_side_names_a_checkout_and_its_threshold_changes() -> None:
    side = parse_side("no-walk=.:small_read_rows=0,few_terms=9")
    assert (side.name, side.tree, side.policy) == (
        "no-walk",
        Path(".").resolve(),
        {"small_read_rows": 0, "few_terms": 9},
    )
    assert parse_side("old=../old").policy == {}
    with pytest.raises(argparse.ArgumentTypeError, match="NAME=INTEGER"):
        parse_side("x=.:small_read_rows=many")
    with pytest.raises(argparse.ArgumentTypeError):
        parse_side("just-a-name")


def test_a_side_with_other_hits_is_reported() -> None:
    base, same, other = (Side(name, ROOT, {}) for name in ("base", "same", "other"))
    answers = {"base": (1.0, ["m1:1.0"]), "same": (2.0, ["m1:1.0"]), "other": (1.0, ["m2:1.0"])}
    _check_hits([base, same, other], answers, "small 1-rare 'word'")
    assert (same.mismatches, other.mismatches) == ([], ["small 1-rare 'word'"])


def test_two_sides_run_every_query_on_a_loaded_database(tmp_path: Path) -> None:
    db = tmp_path / "bench.sqlite3"
    size = ["--db", "sqlite", "--messages", "1000", "--users", "5", "--sqlite-path", str(db)]
    load = _python("bench", *size, "--quick", "--no-peers", "--phases", "search")
    assert load.returncode == 0, load.stderr[-3000:]
    out = tmp_path / "interleave.json"
    sides = ["--side", "base=.", "--side", "no-walk=.:small_read_rows=1000000000"]
    proc = _python(
        "bench.interleave", *size, *sides, "--per-class", "1", "--rounds", "1", "--json", str(out)
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(out.read_text())
    assert results["mismatches"] == {"no-walk": []}
    assert results["meta"]["sides"]["no-walk"]["policy"] == {"small_read_rows": 1_000_000_000}
    row = results["classes"]["big 5-mixed"]
    assert row["base"]["n"] == row["no-walk"]["n"] == 1
    assert row["no-walk"]["p50_ratio"] > 0
    assert {key.split()[0] for key in results["classes"]} == {"small", "big", "unscoped"}
    # a user near a size, each query asking its exact total too
    near = ["--scopes", "near100", "--classes", "2-common,8-common", "--exact-total"]
    proc = _python(
        "bench.interleave",
        *size,
        *sides,
        *near,
        "--per-class",
        "1",
        "--rounds",
        "1",
        "--json",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(out.read_text())
    assert results["mismatches"] == {"no-walk": []} and results["meta"]["exact_total"]
    assert set(results["classes"]) == {"near100 2-common", "near100 8-common"}
    # every search of every side with roles: the same hits on both sides
    roles = tmp_path / "roles.json"
    proc = _python(
        "bench.interleave", *size, *sides, "--per-class", "1", "--rounds", "1",
        "--scopes", "big", "--classes", "1-common", "--roles", "user", "--json", str(roles),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(roles.read_text())
    assert results["meta"]["roles"] == "user"
    assert results["mismatches"] == {"no-walk": []}
    assert list(results["classes"]) == ["big 1-common"]


def test_a_database_of_another_corpus_is_refused(tmp_path: Path) -> None:
    proc = _python(
        "bench.interleave",
        "--db",
        "sqlite",
        "--sqlite-path",
        str(tmp_path / "none.sqlite3"),
        "--side",
        "a=.",
        "--side",
        "b=.",
    )
    assert proc.returncode != 0
    assert "load the database with a run first" in proc.stderr
