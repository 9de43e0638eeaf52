"""Statements the benchmarks send to the PostgreSQL server's maintenance database (creating
and dropping their own databases), on the server ``BENCH_PG_HOST/PORT/USER`` name."""

from __future__ import annotations

import os


def admin_execute(*statements: str) -> None:
    """Run ``statements`` in autocommit on the ``postgres`` database (``CREATE DATABASE``
    cannot run in a transaction)."""
    import psycopg

    with psycopg.connect(
        host=os.environ.get("BENCH_PG_HOST", "127.0.0.1"),
        port=os.environ.get("BENCH_PG_PORT", "5432"),
        user=os.environ.get("BENCH_PG_USER", "postgres"),
        dbname="postgres",
        autocommit=True,
    ) as conn:
        for statement in statements:
            conn.execute(statement)
