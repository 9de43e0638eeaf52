"""The migration operation that creates vendor-specific search storage.

It decides from ``schema_editor.connection.vendor`` when it runs (not at import
time), so one migration serves PostgreSQL, SQLite with FTS5 and SQLite without;
the DDL itself belongs to each backend. Databases the routers keep this app off
get nothing, as for the app's models.
"""

from __future__ import annotations

from typing import Any

from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.operations.base import Operation
from django.db.migrations.state import ProjectState

__all__ = [
    "AddRoleTokens",
    "AddScopeLexemes",
    "CapFolds",
    "CountBigTenantsTerms",
    "CountTermDeltas",
    "CountTerms",
    "CountTermsByOwner",
    "CreateSearchStorage",
    "ReplaceTermCounts",
    "VendorStorageOperation",
]


class VendorStorageOperation(Operation):
    """Runs the vendor's steps of the search-storage change ``change``."""

    reversible = True
    reduces_to_sql = True
    change = ""

    def state_forwards(self, app_label: str, state: Any) -> None:
        """Invisible to the ORM: no model state changes."""

    def _step(
        self,
        app_label: str,
        schema_editor: BaseDatabaseSchemaEditor,
        state: ProjectState,
        index: int,
    ) -> None:
        from .backends import storage_steps

        connection = schema_editor.connection
        if not self.allow_migrate_model(
            connection.alias, state.apps.get_model(app_label, "Message")
        ):
            return
        steps = storage_steps(connection.vendor, self.change)
        if steps is not None:  # other vendors: nothing to create (the app refuses them at use)
            steps[index](schema_editor)

    def database_forwards(
        self,
        app_label: str,
        schema_editor: BaseDatabaseSchemaEditor,
        from_state: ProjectState,
        to_state: ProjectState,
    ) -> None:
        self._step(app_label, schema_editor, to_state, 0)

    def database_backwards(
        self,
        app_label: str,
        schema_editor: BaseDatabaseSchemaEditor,
        from_state: ProjectState,
        to_state: ProjectState,
    ) -> None:
        self._step(app_label, schema_editor, from_state, 1)


class CreateSearchStorage(VendorStorageOperation):
    """tsvector + GIN on PostgreSQL; an FTS5 table on SQLite when FTS5 is there."""

    change = "create"

    def describe(self) -> str:
        return "Create the vendor's transcript search storage (tsvector+GIN or FTS5)"

    @property
    def migration_name_fragment(self) -> str:
        return "search_storage"


class AddScopeLexemes(VendorStorageOperation):
    """PostgreSQL: existing vectors get their scope and chat lexemes (SQLite: nothing)."""

    change = "scope_lexemes"

    def describe(self) -> str:
        return "Add scope and chat lexemes to the stored tsvectors (PostgreSQL)"

    @property
    def migration_name_fragment(self) -> str:
        return "scope_lexemes"


class AddRoleTokens(VendorStorageOperation):
    """Existing search data gets each message's role token (PostgreSQL: a lexeme added to
    every vector; SQLite FTS5: the table refilled from the message rows), so the ``roles``
    filter is counted in the index."""

    change = "role_lexemes"

    def describe(self) -> str:
        return "Add role tokens to the stored search data (tsvector or FTS5)"

    @property
    def migration_name_fragment(self) -> str:
        return "role_tokens"


class CountTerms(VendorStorageOperation):
    """PostgreSQL: triggers that keep ``TermCount`` true for every message write, and the
    counts of the rows already there (SQLite: nothing; FTS5 counts)."""

    change = "term_counts"

    def describe(self) -> str:
        return "Keep per-tenant term counts by triggers on the message table (PostgreSQL)"

    @property
    def migration_name_fragment(self) -> str:
        return "term_counts"


class ReplaceTermCounts(VendorStorageOperation):
    """PostgreSQL, backwards only (the migration replaces ``TermCount`` next): the
    counts of migration 0005 again, every tenant's own, no role (SQLite: nothing)."""

    change = "replace_term_counts"

    def describe(self) -> str:
        return "Backwards: keep every tenant's term counts again (PostgreSQL)"

    @property
    def migration_name_fragment(self) -> str:
        return "replace_term_counts"


class CountBigTenantsTerms(VendorStorageOperation):
    """PostgreSQL: term counts by role, the big tenants' (``CountedTenant``) on their
    own and every other message's under tenant ``""``, counted again from the rows
    (SQLite: nothing)."""

    change = "tenant_counts"

    def describe(self) -> str:
        return "Keep own term counts for the big tenants only (PostgreSQL)"

    @property
    def migration_name_fragment(self) -> str:
        return "counted_tenants"


class CountTermDeltas(VendorStorageOperation):
    """PostgreSQL: triggers that append ``TermCountDelta`` rows instead of updating the
    counts under a lock, each count's shards summed into one row; backwards, the deltas
    added into their counts and the locked triggers again (SQLite: nothing)."""

    change = "term_count_deltas"

    def describe(self) -> str:
        return "Keep term counts by appended deltas, without a lock between writers (PostgreSQL)"

    @property
    def migration_name_fragment(self) -> str:
        return "term_count_deltas"


class CountTermsByOwner(VendorStorageOperation):
    """PostgreSQL: triggers that append each delta under its message's own tenant, and
    folds that add it to its tenant's count or tenant ``""``'s and choose the counted
    terms and tenants as the data grows; backwards, every delta added into its count and
    migration 0009's triggers again (SQLite: nothing)."""

    change = "owner_deltas"

    def describe(self) -> str:
        return "Append term count deltas by owner; folds choose the counted terms (PostgreSQL)"

    @property
    def migration_name_fragment(self) -> str:
        return "owner_deltas"


class CapFolds(VendorStorageOperation):
    """PostgreSQL: the folds' function again, a fold of every key claiming at most
    ``FOLD_CLAIM_MAX`` deltas, so it takes at most that many advisory locks (SQLite:
    nothing)."""

    change = "capped_folds"

    def describe(self) -> str:
        return "Fold at most a claim of term count deltas at a time (PostgreSQL)"

    @property
    def migration_name_fragment(self) -> str:
        return "capped_folds"
