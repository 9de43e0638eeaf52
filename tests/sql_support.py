"""Helpers for tests of the SQL stores under threads, faults and deletes; no tests here.

- ``sqlite_file_database``: a throw-away SQLite *file* database under its own alias. The
  suite's SQLite test database is an in-memory shared-cache one, which locks per table
  and answers ``database table is locked`` at once, so SQLite's real file locking (and its
  busy timeout) is only observable on a file.
- ``run_threads``: start N threads at once behind a barrier, collect results or exceptions.
- ``rows_holding``: every row of every table of the app (the legacy ``deuz_chats``, the
  FTS5 table and its shadow tables, the tsvector column...) whose raw value holds a word.
- ``assert_consistent``: the index agrees with the stored chats and FTS5 is not corrupt.
"""

from __future__ import annotations

import atexit
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, connections
from django.db.migrations.executor import MigrationExecutor
from django.db.utils import load_backend
from django.test import override_settings

from deuz_transcripts.backends.sqlite.common import FTS_TABLE, fts_table_exists
from deuz_transcripts.verify import Verifier

__all__ = [
    "FileDatabase",
    "assert_consistent",
    "fts_integrity_check",
    "rows_holding",
    "run_threads",
    "sqlite_file_database",
]

_templates: dict[str, Path] = {}


@dataclass
class FileDatabase:
    """A SQLite file under an alias that only the threads which ``attach()`` it know.

    The alias is not added to ``settings.DATABASES``: Django's test case forbids
    connections to configured aliases a test did not declare, but allows ones made
    on the fly, so each thread creates its own connection wrapper.
    """

    alias: str
    path: Path
    settings: dict[str, Any]

    def attach(self) -> str:
        if not hasattr(connections._connections, self.alias):
            backend = load_backend(self.settings["ENGINE"])
            connections[self.alias] = backend.DatabaseWrapper(self.settings, self.alias)
        return self.alias

    def detach(self) -> None:
        if hasattr(connections._connections, self.alias):
            connections[self.alias].close()
            del connections[self.alias]


def _file_database(path: Path, options: dict[str, Any]) -> FileDatabase:
    configured = connections.configure_settings(
        {
            "default": dict(connections.settings["default"]),
            "file": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(path), "OPTIONS": options},
        }
    )
    return FileDatabase(f"scratch_{uuid.uuid4().hex[:8]}", path, configured["file"])


def _template(tmp_dir: Path) -> Path:
    """A migrated database file, built once per session and copied for each test."""
    if "template" not in _templates:
        database = _file_database(tmp_dir / f"template-{uuid.uuid4().hex}.sqlite3", {})
        database.attach()
        try:
            executor = MigrationExecutor(connections[database.alias])
            targets = [
                node for node in executor.loader.graph.leaf_nodes() if node[0] == "deuz_transcripts"
            ]
            executor.migrate(targets)
        finally:
            database.detach()
        _templates["template"] = database.path
    return _templates["template"]


@contextmanager
def sqlite_file_database(
    tmp_path: Path,
    *,
    timeout: float = 20.0,
    transaction_mode: str | None = "IMMEDIATE",
    init_command: str | None = None,
) -> Iterator[FileDatabase]:
    """A fresh, migrated SQLite file database, attached to the calling thread."""
    path = _scratch_dir(tmp_path) / f"db-{uuid.uuid4().hex}.sqlite3"
    shutil.copyfile(_template(tmp_path.parent), path)
    options: dict[str, Any] = {"timeout": timeout}
    if transaction_mode:
        options["transaction_mode"] = transaction_mode
    if init_command:
        options["init_command"] = init_command
    database = _file_database(path, options)
    database.attach()
    try:
        yield database
    finally:
        database.detach()
        for suffix in ("", "-journal", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)


def _scratch_dir(tmp_path: Path) -> Path:
    """RAM-backed ``/dev/shm`` when there is one: same locking, no fsync cost per commit."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        scratch = shm / f"deuz-tests-{os.getpid()}"
        if not scratch.is_dir():
            scratch.mkdir()
            atexit.register(shutil.rmtree, scratch, ignore_errors=True)
        return scratch
    return tmp_path


def run_threads(
    count: int,
    work: Callable[[int], Any],
    *,
    timeout: float = 120,
    attach: tuple[FileDatabase, ...] = (),
) -> list[Any]:
    """Start ``count`` threads at once; return each one's result or exception."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count

    def target(number: int) -> None:
        try:
            for database in attach:
                database.attach()
            barrier.wait()
            results[number] = work(number)
        except BaseException as exc:
            results[number] = exc
        finally:
            for database in attach:
                database.detach()
            connections.close_all()

    threads = [threading.Thread(target=target, args=(n,), daemon=True) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)
    assert not any(thread.is_alive() for thread in threads), "a thread hung (deadlock?)"
    return results


def app_tables(using: str = "default") -> list[str]:
    """Every table of the app: its models, ``deuz_chats``, the FTS5 table and its shadows."""
    with connections[using].cursor() as cursor:
        names = connections[using].introspection.table_names(cursor)
    return sorted(name for name in names if name.startswith("deuz_"))


def rows_holding(word: str, using: str = "default") -> dict[str, int]:
    """``{table: rows}`` whose raw content holds ``word`` (any column, blobs included).

    PostgreSQL casts each whole row to text (tsvector lexemes, JSON, every column);
    SQLite reads every value, text case-insensitively and blobs byte for byte.
    """
    found: dict[str, int] = {}
    connection = connections[using]
    needle = word.lower()
    with connection.cursor() as cursor:
        for name in app_tables(using):
            quoted = connection.ops.quote_name(name)
            if name == FTS_TABLE:
                continue  # a contentless FTS5 table cannot be scanned: its shadows are
            if connection.vendor == "postgresql":
                cursor.execute(
                    f"SELECT count(*) FROM {quoted} AS t WHERE strpos(lower(t::text), %s) > 0",
                    [needle],
                )
                count = cursor.fetchone()[0]
            else:
                cursor.execute(f"SELECT * FROM {quoted}")
                count = sum(1 for row in cursor.fetchall() if _holds(row, needle))
            if count:
                found[name] = count
    return found


def _holds(row: tuple[Any, ...], needle: str) -> bool:
    for value in row:
        if isinstance(value, str) and needle in value.lower():
            return True
        if isinstance(value, bytes | memoryview) and needle.encode() in bytes(value):
            return True
    return False


def fts_integrity_check(using: str = "default") -> None:
    """FTS5's own check of its segments (works on contentless tables); raises if corrupt."""
    connection = connections[using]
    if connection.vendor != "sqlite" or not fts_table_exists(using):
        return
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}, rank) VALUES ('integrity-check', 0)")


def assert_consistent(using: str = "default") -> None:
    """Search data matches the stored rows exactly (``backfill_transcripts --verify``)."""
    fts_integrity_check(using)
    assert [str(problem) for problem in Verifier(using).problems()] == []


@contextmanager
def backend_settings(name: str) -> Iterator[None]:
    """The database's own backend, or (``"like"``) the SQLite LIKE fallback."""
    if name == "like":
        if connection.vendor != "sqlite":
            pytest.skip("the LIKE fallback is SQLite's")
        with override_settings(DEUZ_TRANSCRIPTS={"SQLITE_BACKEND": "like"}):
            yield
    else:
        yield


def other_connection() -> Any:
    """A plain psycopg connection to the test database, outside Django (autocommit)."""
    import psycopg
    from django.db import connection

    settings = connection.settings_dict
    return psycopg.connect(
        host=settings["HOST"] or None,
        port=settings["PORT"] or None,
        user=settings["USER"] or None,
        password=settings["PASSWORD"] or None,
        dbname=settings["NAME"],
        autocommit=True,
    )


def vectors_holding_lexemes(prefix: str, using: str = "default") -> int:
    """PostgreSQL: how many message vectors hold a lexeme starting with ``prefix`` (the
    private-use prefixes of scope, chat and role lexemes). Raw SQL, so it answers while the
    schema is migrated back to a state the current models do not describe."""
    with connections[using].cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM deuz_transcripts_message m WHERE EXISTS (SELECT 1 FROM "
            "unnest(tsvector_to_array(m.search_vector)) AS l WHERE left(l, 1) = %s)",
            [prefix],
        )
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def spy_search_parts(
    monkeypatch: pytest.MonkeyPatch, backend: Any, names: Iterable[str]
) -> list[str]:
    """The names among ``names`` of the class methods of ``backend``'s row source (else of
    its counts) as the search calls them (a name neither has is a part of another engine:
    never called here)."""
    calls: list[str] = []
    for name in names:
        part_class = type(backend.source)
        if not hasattr(part_class, name):
            part_class = type(backend.counts)
        if not hasattr(part_class, name):
            continue
        original = getattr(part_class, name)

        def spy(
            self: Any, *args: Any, _name: str = name, _original: Any = original, **kwargs: Any
        ) -> Any:
            calls.append(_name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(part_class, name, spy)
    return calls


def spy_tiers(monkeypatch: pytest.MonkeyPatch, backend: Any) -> list[Any]:
    """The tiers of masks (``MaskTier``) whose rows ``backend``'s row source reads."""
    from deuz_transcripts.backends.base import MaskTier

    tiers: list[Any] = []
    part_class = type(backend.source)
    original = part_class.mask_candidates

    def spy(self: Any, cursor: Any, chats: Any, terms: Any, masks: Any, *args: Any) -> Any:
        if isinstance(masks, MaskTier):
            tiers.append(masks)
        return original(self, cursor, chats, terms, masks, *args)

    monkeypatch.setattr(part_class, "mask_candidates", spy)
    return tiers
