"""System checks: what ``conf`` finds wrong with the settings, SQLite without FTS5, and
stored rows written under other settings (``CJK_BIGRAMS``, ``TENANT_KEY``)."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.db import DEFAULT_DB_ALIAS, connections, router
from django.db.models import F

from .conf import conf

__all__ = [
    "check_database_reachable",
    "check_search_api",
    "check_search_backends",
    "check_search_database",
    "check_settings",
    "check_sqlite_transaction_mode",
    "check_tenant_columns",
    "check_text_rules",
]


@register(Tags.compatibility)
def check_settings(**kwargs: Any) -> list[CheckMessage]:
    return [
        (Error if problem.is_error else Warning)(
            problem.message, hint=problem.hint, id=problem.check_id
        )
        for problem in conf.problems()
    ]


def search_api_included() -> bool:
    """Whether the project's URLconf includes ``deuz_transcripts.urls`` or
    ``deuz_transcripts.mcp_urls`` (their namespaces): both take the scope from
    ``SEARCH_SCOPE``."""
    from django.urls import reverse

    for name in ("deuz_transcripts:search", "deuz_transcripts_mcp:endpoint"):
        try:
            reverse(name)
        except Exception:  # NoReverseMatch; a broken URLconf is for Django's own checks
            continue
        return True
    return False


@register(Tags.urls)
def check_search_api(**kwargs: Any) -> list[CheckMessage]:
    """An error when the JSON or MCP endpoint is routed but nothing says whose chats it
    searches.

    A set but unusable ``SEARCH_SCOPE`` is ``check_settings``' to report (E010), once.
    """
    if conf.SEARCH_SCOPE is not None or not search_api_included():
        return []
    if conf.problem("SEARCH_SCOPE") is not None:
        return []
    return [
        Error(
            "The URLconf includes deuz_transcripts.urls (the JSON search endpoint) or "
            "deuz_transcripts.mcp_urls (the MCP endpoint) but "
            "DEUZ_TRANSCRIPTS['SEARCH_SCOPE'] is not set, so it could not tell whose chats "
            "a request may search.",
            hint="Set DEUZ_TRANSCRIPTS['SEARCH_SCOPE'] to the dotted path of a callable "
            "request -> scope dict (or None to refuse), e.g. 'myproject.scopes.user_scope'.",
            id="deuz_transcripts.E011",
        )
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
def check_search_database(**kwargs: Any) -> list[CheckMessage]:
    """An error when a database's searches would read a database of another engine.

    A search database is a replica of the database it reads for: the same engine, the
    same tables. An invalid ``SEARCH_DATABASE`` is ``check_settings``' to report, once.
    Never queries a database.
    """
    if conf.problem("SEARCH_DATABASE") is not None:
        return []
    messages: list[CheckMessage] = []
    for alias in connections:
        search = conf.search_database(alias)
        if search == alias:
            continue
        vendor, search_vendor = connections[alias].vendor, connections[search].vendor
        if vendor != search_vendor:
            messages.append(
                Error(
                    f"DEUZ_TRANSCRIPTS['SEARCH_DATABASE'] sends the searches of database "
                    f"{alias!r} ({vendor}) to {search!r} ({search_vendor}).",
                    hint="Name a replica of the same database (same engine, same tables).",
                    id="deuz_transcripts.E016",
                )
            )
    return messages


@register(Tags.database)
def check_database_reachable(databases: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """An error for a database a command names (``check --database``) that cannot be
    reached: the database checks below then have nothing to read, and "no issues" would
    be a lie."""
    from django.db import DatabaseError

    from .sql.errors import describe_database_error

    messages: list[CheckMessage] = []
    for alias in databases or ():
        try:
            connections[alias].ensure_connection()
        except DatabaseError as exc:
            messages.append(
                Error(
                    f"Database {alias!r}: {describe_database_error(exc)}.",
                    id="deuz_transcripts.E019",
                )
            )
    return messages


@register(Tags.compatibility, Tags.database)
def check_text_rules(databases: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Warns when a database's messages were indexed under other text rules than the
    settings' (``CJK_BIGRAMS``, the stored-form version), or a re-index under them has not
    finished: read from the forms the database records (``sql.stored_forms``), never
    from a sample of rows.

    Runs for the databases a command names (``check --database``, ``migrate``), as
    Django's database checks do, and, with ``DEBUG`` on, for the default database:
    ``runserver`` (which names none, and checks that database's migrations) shows it
    where the operator looks.
    """
    from django.conf import settings

    from .models import StoredForm
    from .sql.stored_forms import stored_form_problem

    if databases is None:
        serving = settings.DEBUG and router.allow_migrate_model(DEFAULT_DB_ALIAS, StoredForm)
        databases = [DEFAULT_DB_ALIAS] if serving else []
    messages: list[CheckMessage] = []
    for alias in databases:
        if connections[alias].vendor not in ("sqlite", "postgresql"):
            continue
        problem = stored_form_problem(alias)
        if problem is not None:
            messages.append(
                Warning(
                    f"Database {alias!r}: {problem}.",
                    hint="Run `manage.py backfill_transcripts` (it re-indexes every stored "
                    "chat under the current rules, then records them).",
                    id="deuz_transcripts.W004",
                )
            )
    return messages


#: Newest chats (and their messages) whose tenant columns are compared with ``TENANT_KEY``.
TENANT_SAMPLE = 50


@register(Tags.database)
def check_tenant_columns(databases: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Warns when the newest chats' tenant columns were written under another
    ``TENANT_KEY``: searches whose scope sets the key then test a stale column and miss
    those chats' messages on PostgreSQL until ``backfill_transcripts`` rewrites them."""
    from django.db import DatabaseError

    from .models import Chat, Message

    messages: list[CheckMessage] = []
    for alias in databases or ():
        if connections[alias].vendor not in ("sqlite", "postgresql"):
            continue
        try:
            chats = list(Chat.objects.using(alias).order_by("-pk")[:TENANT_SAMPLE])
            stale = {chat.pk for chat in chats if chat.tenant != conf.tenant_of(chat.scope)}
            rows = Message.objects.using(alias).filter(chat__in=chats)
            stale.update(rows.exclude(tenant=F("chat__tenant")).values_list("chat_id", flat=True))
        except DatabaseError:  # not migrated yet: nothing stored to compare
            continue
        if stale:
            messages.append(
                Warning(
                    f"Database {alias!r}: {len(stale)} of its {len(chats)} newest chats have "
                    f"tenant columns that TENANT_KEY={conf.TENANT_KEY!r} would not write: "
                    "searches whose scope sets that key miss their messages on PostgreSQL.",
                    hint="Run `manage.py backfill_transcripts` (it rewrites every chat whose "
                    "tenant differs).",
                    id="deuz_transcripts.W005",
                )
            )
    return messages


@register(Tags.database)
def check_search_index(databases: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Warns when PostgreSQL's search index is missing or invalid: a ``backfill_transcripts
    --defer-index`` killed before its end (``deferred_index``) leaves every search reading
    the whole message table until a backfill builds it."""
    from django.db import DatabaseError

    from .backends import maintenance_for

    messages: list[CheckMessage] = []
    for alias in databases or ():
        engine = maintenance_for(alias)
        if not engine.search_index_name:
            continue
        try:
            state = engine.search_index_state()
        except DatabaseError:  # nothing to search yet
            continue
        if state in ("missing", "invalid"):
            messages.append(
                Warning(
                    f"Database {alias!r}: the search index {engine.search_index_name} is "
                    f"{state}: every search reads the whole message table.",
                    hint="Run `manage.py backfill_transcripts` (it builds the index when its "
                    "run ends).",
                    id="deuz_transcripts.W006",
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
