"""Django settings of the benchmark: its own database, the app, and the peers that are installed.

Read from environment variables set by ``bench.__main__`` before ``django.setup()``:
``BENCH_DB`` (``sqlite:PATH`` or ``postgres:NAME``), ``BENCH_PEERS`` (comma list) and
``BENCH_CJK_BIGRAMS`` (non-empty: ``CJK_BIGRAMS`` on) and ``BENCH_TENANT_KEY`` (``TENANT_KEY``).
"""

from __future__ import annotations

import os

_db = os.environ.get("BENCH_DB", "sqlite:bench/out/bench.sqlite3")
_kind, _, _name = _db.partition(":")
PEERS = [p for p in os.environ.get("BENCH_PEERS", "").split(",") if p]

SECRET_KEY = "bench-only"
DEBUG = False  # no query log: it would grow with every statement
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = ["django.contrib.contenttypes", "deuz_transcripts", "bench"]
if "watson" in PEERS:
    INSTALLED_APPS.append("watson")
if "modelsearch" in PEERS:
    INSTALLED_APPS.append("modelsearch")
    MODELSEARCH_BACKENDS = {"default": {"BACKEND": "modelsearch.backends.database"}}

if _kind == "postgres":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": _name,
            "USER": os.environ.get("BENCH_PG_USER", "postgres"),
            "HOST": os.environ.get("BENCH_PG_HOST", "127.0.0.1"),
            "PORT": os.environ.get("BENCH_PG_PORT", "5432"),
        }
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": _name,
            # WAL + synchronous=NORMAL: what a production SQLite deployment runs; with the
            # default rollback journal every write_chat pays a full fsync (~10 ms here).
            "OPTIONS": {
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
        }
    }

# The harness stops any query at 10 s (measures.query_timeout); the app's own budget matches it.
# A corpus with a CJK share (``--cjk-share``) is indexed with CJK and Thai bigrams.
DEUZ_TRANSCRIPTS = {
    "SQLITE_BACKEND": "auto",
    "SEARCH_TIMEOUT_MS": 10_000,
    "CJK_BIGRAMS": bool(os.environ.get("BENCH_CJK_BIGRAMS")),
    "TENANT_KEY": os.environ.get("BENCH_TENANT_KEY") or None,
}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "ERROR"},
}
