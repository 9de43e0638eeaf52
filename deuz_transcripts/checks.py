"""System checks: what ``conf`` finds wrong with the settings, and SQLite without FTS5."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.db import connections, router

from .conf import conf

__all__ = ["check_search_backends", "check_settings", "check_sqlite_transaction_mode"]


@register(Tags.compatibility)
def check_settings(**kwargs: Any) -> list[CheckMessage]:
    return [
        (Error if problem.is_error else Warning)(
            problem.message, hint=problem.hint, id=problem.check_id
        )
        for problem in conf.problems()
    ]


@register(Tags.compatibility)
def check_search_backends(**kwargs: Any) -> list[CheckMessage]:
    """Warns when SQLite searches by LIKE; the FTS5 probe never queries a configured database.

    An invalid ``SQLITE_BACKEND`` is ``check_settings``' to report, once.
    """
    from .backends import backend_name_for

    messages: list[CheckMessage] = []
    for alias in connections:
        connection = connections[alias]
        if connection.vendor not in ("sqlite", "postgresql"):
            messages.append(
                Error(
                    f"Database {alias!r} ({connection.vendor}) is not supported by deuz_transcripts.",
                    hint="Use PostgreSQL or SQLite.",
                    id="deuz_transcripts.E004",
                )
            )
            continue
        if connection.vendor != "sqlite" or conf.problem("SQLITE_BACKEND") is not None:
            continue
        try:
            name = backend_name_for(alias, inspect_database=False)
        except Exception as exc:  # an ImproperlyConfigured reason, shown as a check
            messages.append(Error(str(exc), id="deuz_transcripts.E005"))
            continue
        if name == "sqlite-like":
            messages.append(
                Warning(
                    f"Database {alias!r}: transcript search uses the SQLite LIKE fallback "
                    "(substring matches, scans every message of the scope).",
                    hint="Use an SQLite build with FTS5, set SQLITE_BACKEND to 'auto', "
                    "or use PostgreSQL.",
                    id="deuz_transcripts.W001",
                )
            )
    return messages


@register(Tags.compatibility)
def check_sqlite_transaction_mode(**kwargs: Any) -> list[CheckMessage]:
    """Warns about each SQLite database the app writes to whose transactions are deferred.

    A deferred transaction reads first and asks for the write lock later; two writers
    then fail with "database is locked" at once instead of queueing for the busy timeout.
    """
    from .models import Chat

    messages: list[CheckMessage] = []
    for alias in connections:
        connection = connections[alias]
        if connection.vendor != "sqlite" or not router.allow_migrate_model(alias, Chat):
            continue
        mode = (connection.settings_dict.get("OPTIONS") or {}).get("transaction_mode")
        if isinstance(mode, str) and mode.upper() == "IMMEDIATE":
            continue
        messages.append(
            Warning(
                f"Database {alias!r}: SQLite transactions are deferred "
                f"(transaction_mode is {mode!r}), so concurrent chat writes fail with "
                "'database is locked' instead of waiting for each other.",
                hint=f'Set DATABASES[{alias!r}]["OPTIONS"]["transaction_mode"] = "IMMEDIATE" '
                "(BEGIN IMMEDIATE: writers queue for the lock).",
                id="deuz_transcripts.W003",
            )
        )
    return messages
