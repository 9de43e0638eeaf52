"""Search backends, one module per engine, picked by ``connection.vendor``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields, replace

from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

from ..conf import conf
from .maintenance import EngineMaintenance
from .policy import Forced, SearchPolicy
from .search_backend import SearchBackend
from .search_rows import SearchRows

__all__ = [
    "SearchBackend",
    "backend_name_for",
    "connect_engine_signals",
    "engine_policies",
    "forced_policies",
    "get_backend",
    "get_search_rows",
    "maintenance_for",
    "storage_steps",
]

StorageStep = Callable[[BaseDatabaseSchemaEditor], None]


def backend_name_for(alias: str, *, inspect_database: bool = True) -> str:
    """``postgresql``, ``sqlite-fts5`` or ``sqlite-like`` for a database alias.

    ``inspect_database=False`` skips looking for the FTS5 table (system checks must
    not query databases).
    """
    vendor = connections[alias].vendor
    if vendor == "postgresql":
        return "postgresql"
    if vendor != "sqlite":
        raise ImproperlyConfigured(
            f"deuz_transcripts supports PostgreSQL and SQLite; database {alias!r} is {vendor}."
        )
    from .sqlite.common import fts5_available, fts_table_exists

    conf.require_valid("SQLITE_BACKEND")
    choice = conf.SQLITE_BACKEND
    if choice == "like":
        return "sqlite-like"
    if fts5_available() and (not inspect_database or fts_table_exists(alias)):
        return "sqlite-fts5"
    if choice == "fts5":
        raise ImproperlyConfigured(
            f"SQLITE_BACKEND is 'fts5' but database {alias!r} has no FTS5 "
            "(library without FTS5, or migrated without it: migrate deuz_transcripts zero, "
            "then migrate again on a build with FTS5)."
        )
    return "sqlite-like"


def _backend_class(alias: str) -> type[SearchBackend]:
    name = backend_name_for(alias)
    if name == "postgresql":
        from .postgresql.backend import PostgresBackend

        return PostgresBackend
    if name == "sqlite-fts5":
        from .sqlite.fts5_backend import SQLiteFts5Backend

        return SQLiteFts5Backend
    from .sqlite.like import SQLiteLikeBackend

    return SQLiteLikeBackend


def engine_policies() -> tuple[type[SearchPolicy], ...]:
    """Every engine's policy type (PostgreSQL, SQLite FTS5, SQLite LIKE)."""
    from .postgresql.policy import PostgresPolicy
    from .sqlite.fts5_policy import Fts5Policy
    from .sqlite.like import LikePolicy

    return PostgresPolicy, Fts5Policy, LikePolicy


def forced_policies(base: Forced | None = None, /, **changes: int) -> Forced:
    """Each engine's default policy (or ``base``'s) with the thresholds of ``changes`` it
    has (for ``policy.FORCED``: tests forcing routes, the bench's ablations); a threshold
    no engine has is an error, not ignored. A change may name a threshold a route reads
    of the shared sizes (a ``SearchPolicy`` property, e.g. ``essential_max_rows``): it
    is forced apart from its size, in a subclass of the engine's policy that holds it."""
    forced: Forced = {}
    known: set[str] = set()
    for kind in engine_policies():
        own = {field.name for field in fields(kind)}
        derived = _route_thresholds()
        known |= own | derived
        start = (base or {}).get(kind) or kind()
        apart = {k: v for k, v in changes.items() if k in derived - own}
        if apart:
            held = {**getattr(type(start), _FORCED_APART, {}), **apart}
            forced_kind = type(f"Forced{kind.__name__}", (kind,), {**held, _FORCED_APART: held})
            start = forced_kind(
                **{field.name: getattr(start, field.name) for field in fields(kind)}
            )
        forced[kind] = replace(start, **{k: v for k, v in changes.items() if k in own})
    unknown = sorted(set(changes) - known)
    if unknown:
        raise ValueError(f"no engine's policy has {', '.join(unknown)} (known: {sorted(known)})")
    return forced


#: A forced policy's class attribute: the route thresholds it holds apart from their sizes.
_FORCED_APART = "_forced_apart"


def _route_thresholds() -> set[str]:
    """What the shared routes read of the shared sizes (``SearchPolicy``'s properties; an
    engine's own derived size, e.g. FTS5's one-statement size, follows its setting)."""
    return {
        name
        for name, value in vars(SearchPolicy).items()
        if isinstance(value, property) and not getattr(value, "__isabstractmethod__", False)
    }


def get_backend(alias: str) -> SearchBackend:
    return _backend_class(alias)(alias)


def get_search_rows(alias: str) -> SearchRows:
    """``get_backend(alias).rows`` without the rest of the backend (its matcher reads
    the search policy): what a write needs, looked up at every write."""
    return _backend_class(alias).rows_class(alias)


def maintenance_for(alias: str) -> EngineMaintenance:
    """The maintenance entry point of database ``alias``'s engine (``maintenance``)."""
    if connections[alias].vendor == "postgresql":
        from .postgresql.maintenance import PostgresMaintenance

        return PostgresMaintenance(alias)
    return EngineMaintenance(alias)


def storage_steps(vendor: str, change: str) -> tuple[StorageStep, StorageStep] | None:
    """The vendor's ``(forward, backward)`` steps of a search-storage ``change`` of the
    migrations (``"create"``, ``"scope_lexemes"``, ``"role_lexemes"``, ``"term_counts"``,
    ``"replace_term_counts"``, ``"tenant_counts"``, ``"term_count_deltas"``,
    ``"owner_deltas"``, ``"capped_folds"``); ``None`` when it has none."""
    if vendor == "postgresql":
        from .postgresql import storage
        from .postgresql.counts import refresh as counts
        from .postgresql.counts import stored as term_counts

        return {
            "create": (storage.create_storage, storage.drop_storage),
            "scope_lexemes": (storage.add_scope_lexemes, storage.drop_scope_lexemes),
            "role_lexemes": (storage.add_role_lexemes, storage.drop_role_lexemes),
            "term_counts": (counts.create_term_counts, term_counts.drop_term_counts),
            "replace_term_counts": (counts.keep_counts, counts.count_every_tenant),
            "tenant_counts": (counts.count_big_tenants_only, counts.keep_counts),
            "term_count_deltas": (counts.count_by_deltas, counts.count_with_locks),
            "owner_deltas": (counts.count_by_owner, counts.count_by_bucket),
            "capped_folds": (counts.cap_folds, counts.keep_counts),
        }[change]
    if vendor == "sqlite":
        from .sqlite import common as sqlite
        from .sqlite import fts5_role_tokens

        # FTS5 rows carry their scope tokens since 0001
        return {
            "create": (sqlite.create_storage, sqlite.drop_storage),
            "role_lexemes": (fts5_role_tokens.add_role_tokens, fts5_role_tokens.drop_role_tokens),
        }.get(change)
    return None


def connect_engine_signals(sender: object) -> None:
    """The engines' handlers of Django's signals (the app's ``ready``): SQLite's
    ``secure_delete`` on every connection, and its FTS5 table emptied after ``flush``."""
    from django.db.backends.signals import connection_created
    from django.db.models.signals import post_migrate

    from .sqlite.common import empty_fts_after_flush, secure_delete_on_connect

    post_migrate.connect(empty_fts_after_flush, sender=sender)
    connection_created.connect(secure_delete_on_connect, dispatch_uid="deuz_secure_delete")
