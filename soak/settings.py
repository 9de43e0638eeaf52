"""Django settings of the soak's processes (workers, gunicorn, the final check).

The database comes from the environment the harness sets: ``SOAK_DATABASE_URL`` (its own
PostgreSQL cluster, or a SQLite file of the run), ``SOAK_REPLICA_URL`` (the standby that
searches read, PostgreSQL only) and ``SOAK_PROCESS`` (the ``application_name`` of the
process's connections, so faults terminate the soak's own backends and nobody else's).
"""

from __future__ import annotations

import os

from testproject.settings import *  # noqa: F403 - the demo project, on the soak's database
from testproject.settings import env

_process = os.environ.get("SOAK_PROCESS", "soak")
DATABASES = {"default": env.db("SOAK_DATABASE_URL")}
_default = DATABASES["default"]
if _default["ENGINE"] == "django.db.backends.postgresql":
    _default["OPTIONS"] = {
        "application_name": _process,
        "connect_timeout": 3,
        # a write waiting on a lock (a fault holds one) is stopped, as in production
        "options": "-c statement_timeout=3000",
    }
    if _replica := os.environ.get("SOAK_REPLICA_URL"):
        DATABASES["replica"] = {
            **env.db_url_config(_replica),
            "OPTIONS": {"application_name": _process, "connect_timeout": 3},
        }
else:
    # one writer at a time: the others wait for the lock a few seconds, then give up
    _default["OPTIONS"] = {"transaction_mode": "IMMEDIATE", "timeout": 5}

DEUZ_TRANSCRIPTS = {
    "SEARCH_SCOPE": "testproject.scopes.user_scope",
    "TENANT_KEY": "userId",
    "SEARCH_TIMEOUT_MS": 2_000,
    "LOCK_RETRIES": 3,
    "SEARCH_DATABASE": "replica" if "replica" in DATABASES else None,
    "REPLICA_WAIT_MS": 1_000,
    "REPLICA_FALLBACK": "primary",
}
DEBUG = False
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "WARNING"},
}
