"""The migration operation that creates vendor-specific search storage.

It decides from ``schema_editor.connection.vendor`` when it runs (not at import
time), so one migration serves PostgreSQL, SQLite with FTS5 and SQLite without.
"""

from __future__ import annotations

from typing import Any

from django.db.migrations.operations.base import Operation

__all__ = ["CreateSearchStorage"]

MESSAGE_TABLE = "deuz_transcripts_message"


def _postgres_forward(schema_editor: Any) -> None:
    schema_editor.execute(f"ALTER TABLE {MESSAGE_TABLE} ADD COLUMN search_vector tsvector")
    # A small pending list bounds the latency a search pays for fast inserts.
    schema_editor.execute(
        f"CREATE INDEX deuz_message_vector ON {MESSAGE_TABLE} USING gin (search_vector) "
        "WITH (fastupdate = on, gin_pending_list_limit = 256)"
    )


def _postgres_backward(schema_editor: Any) -> None:
    schema_editor.execute("DROP INDEX IF EXISTS deuz_message_vector")
    schema_editor.execute(f"ALTER TABLE {MESSAGE_TABLE} DROP COLUMN IF EXISTS search_vector")


def _sqlite_forward(schema_editor: Any) -> None:
    from .backends.sqlite import FTS_TABLE, forget_probes, fts5_available

    forget_probes()
    if fts5_available():
        schema_editor.execute(
            f"CREATE VIRTUAL TABLE {FTS_TABLE} USING fts5(body, content='', "
            "tokenize='ascii', detail=none, columnsize=0)"
        )


def _sqlite_backward(schema_editor: Any) -> None:
    from .backends.sqlite import FTS_TABLE, forget_probes

    schema_editor.execute(f"DROP TABLE IF EXISTS {FTS_TABLE}")
    forget_probes()


_FORWARD = {"postgresql": _postgres_forward, "sqlite": _sqlite_forward}
_BACKWARD = {"postgresql": _postgres_backward, "sqlite": _sqlite_backward}


class CreateSearchStorage(Operation):
    """tsvector + GIN on PostgreSQL; an FTS5 table on SQLite when FTS5 is there."""

    reversible = True
    reduces_to_sql = True

    def state_forwards(self, app_label: str, state: Any) -> None:
        """Invisible to the ORM: no model state changes."""

    def database_forwards(
        self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any
    ) -> None:
        step = _FORWARD.get(schema_editor.connection.vendor)
        if step is not None:  # other vendors: nothing to create (the app refuses them at use)
            step(schema_editor)

    def database_backwards(
        self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any
    ) -> None:
        step = _BACKWARD.get(schema_editor.connection.vendor)
        if step is not None:
            step(schema_editor)

    def describe(self) -> str:
        return "Create the vendor's transcript search storage (tsvector+GIN or FTS5)"

    @property
    def migration_name_fragment(self) -> str:
        return "search_storage"
