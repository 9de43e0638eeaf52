"""System checks: settings that are wrong, and SQLite without FTS5."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.db import connections

from .conf import DEFAULTS, SQLITE_BACKENDS, conf

__all__ = ["check_search_backends", "check_settings"]


@register(Tags.compatibility)
def check_settings(**kwargs: Any) -> list[CheckMessage]:
    raw = getattr(settings, "DEUZ_TRANSCRIPTS", {})
    if not isinstance(raw, dict):
        return [Error("DEUZ_TRANSCRIPTS must be a dict.", id="deuz_transcripts.E001")]
    errors: list[CheckMessage] = []
    if conf.SQLITE_BACKEND not in SQLITE_BACKENDS:
        errors.append(
            Error(
                f"DEUZ_TRANSCRIPTS['SQLITE_BACKEND'] is {conf.SQLITE_BACKEND!r}.",
                hint=f"Use one of {', '.join(SQLITE_BACKENDS)}.",
                id="deuz_transcripts.E002",
            )
        )
    for key in ("ADMIN_PAGE_SIZE", "LOCK_RETRIES"):
        value = raw.get(key, DEFAULTS[key])
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            errors.append(
                Error(
                    f"DEUZ_TRANSCRIPTS[{key!r}] must be a positive integer.",
                    id="deuz_transcripts.E003",
                )
            )
    scan = raw.get("SQLITE_SCAN_SCOPE_MAX", DEFAULTS["SQLITE_SCAN_SCOPE_MAX"])
    if isinstance(scan, bool) or not isinstance(scan, int) or scan < 0:
        errors.append(
            Error(
                "DEUZ_TRANSCRIPTS['SQLITE_SCAN_SCOPE_MAX'] must be an integer >= 0.",
                hint="0 sends every SQLite search to FTS5.",
                id="deuz_transcripts.E006",
            )
        )
    for key in conf.unknown_keys():
        errors.append(
            Warning(f"DEUZ_TRANSCRIPTS has an unknown key {key!r}.", id="deuz_transcripts.W002")
        )
    return errors


@register(Tags.compatibility)
def check_search_backends(**kwargs: Any) -> list[CheckMessage]:
    """Warns when SQLite searches by LIKE; the FTS5 probe never queries a configured database."""
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
        if connection.vendor != "sqlite":
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
