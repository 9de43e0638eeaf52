"""A soak's database before the load: migrated, one user and session per tenant for the
JSON endpoint, a base corpus (a few big tenants, many small ones, the shared chats) written
through the store and recorded in the ledger, and on PostgreSQL stored term counts chosen
for this corpus's size, so the triggers keep them under the load and ``--verify`` compares
them at the end."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.models import User
from django.contrib.sessions.backends.db import SessionStore
from django.core.management import call_command
from django.db import connection

from .words import BIG_TENANTS, SHARED_CHATS, tenants

if TYPE_CHECKING:
    from .worker import Worker

__all__ = ["setup"]

#: Stored counts for terms in at least this many messages, and own counts for tenants of
#: at least this many (the app's thresholds, 2,000 and 10,000, scaled to the corpus).
COUNTED_MIN_ROWS = 40
COUNTED_TENANT_MIN_ROWS = 150


def _sessions(count: int) -> dict[str, str]:
    """A signed-in session per tenant: its user's name is the tenant (testproject.scopes)."""
    sessions: dict[str, str] = {}
    for tenant in tenants(count):
        user = User.objects.create_user(username=tenant)
        session = SessionStore()
        session[SESSION_KEY] = str(user.pk)
        session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
        session[HASH_SESSION_KEY] = user.get_session_auth_hash()
        session.create()
        assert session.session_key is not None
        sessions[tenant] = session.session_key
    return sessions


def setup(worker: Worker) -> None:
    if connection.vendor == "sqlite":  # readers never wait for the writer (kept in the file)
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA journal_mode=WAL")
    call_command("migrate", interactive=False, verbosity=0)
    worker.directory.joinpath("sessions.json").write_text(json.dumps(_sessions(worker.tenants)))
    for number, tenant in enumerate(tenants(worker.tenants)):
        for chat in range(60 if number < BIG_TENANTS else 3):
            worker.write(f"{tenant}.base.{chat}", 0, worker.rng.randint(2, 4))
    for shared in SHARED_CHATS:
        worker.write(shared, 0, 2)
    if connection.vendor == "postgresql":
        from deuz_transcripts.backends.postgresql.counts.refresh import refresh_term_counts

        with connection.cursor() as cursor:
            counted = refresh_term_counts(
                cursor, COUNTED_MIN_ROWS, tenant_min_rows=COUNTED_TENANT_MIN_ROWS, rebuild=True
            )
        print(f"setup: {counted} terms with stored counts")
