"""Settings of the demo/test project.

The database comes from ``DATABASE_URL`` (django-environ syntax), so the same test suite runs
on SQLite (the default, a file next to manage.py) and on PostgreSQL, e.g.
``DATABASE_URL=postgres://postgres@127.0.0.1:5432/test``.

``DEUZ_SQLITE_MODULE=pysqlite3`` (or ``sqlean``...) runs SQLite through that drop-in module
instead of the standard library's ``sqlite3`` (e.g. SQLite 3.51 from ``pysqlite3-binary``
where the system has 3.40): it is put in ``sys.modules["sqlite3"]`` here, before Django
imports its SQLite backend (``from sqlite3 import dbapi2``).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import environ

env = environ.Env()

if _sqlite_module := env("DEUZ_SQLITE_MODULE", default=""):
    sys.modules["sqlite3"] = importlib.import_module(_sqlite_module)

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = env("SECRET_KEY", default="insecure-testproject-key")
DEBUG = env.bool("DEBUG", default=True)
ALLOWED_HOSTS = ["*"]  # demo project only

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "deuz_transcripts",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # the demo's `curl -u ada:ada` (README, "The JSON search endpoint")
    "testproject.basic_auth.BasicAuthMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "testproject.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "testproject" / "templates"],  # the end users' sign-in page
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "testproject.wsgi.application"
ASGI_APPLICATION = "testproject.asgi.application"

DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}")}

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Write transactions take SQLite's lock up front (BEGIN IMMEDIATE, Django 5.1+), so
    # concurrent writers wait for it (up to `timeout` seconds) instead of failing on upgrade.
    _sqlite_options = DATABASES["default"].setdefault("OPTIONS", {})
    _sqlite_options["transaction_mode"] = "IMMEDIATE"
    _sqlite_options["timeout"] = 20
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    DATABASES["default"]["TEST"] = {
        "NAME": env("TEST_DATABASE_NAME", default="test_deuz_transcripts"),
    }

# A second database of the same engine: the suite proves that every store and index
# honours ``using=`` and nothing assumes "default".
DATABASES["other"] = {
    **DATABASES["default"],
    "NAME": str(BASE_DIR / "other.sqlite3")
    if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3"
    else DATABASES["default"]["NAME"],
    "TEST": {"NAME": env("OTHER_TEST_DATABASE_NAME", default="test_deuz_transcripts_other")}
    if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"
    else {},
}

# A read replica of "default" (tests/test_replica.py). On PostgreSQL, REPLICA_DATABASE_URL
# names a hot standby of the server DATABASE_URL names (.ci/pg_replica.sh makes one on
# 127.0.0.1:5433); without it there is no "replica" alias. On SQLite it is a second
# connection to the same database. Either way it is a test MIRROR of "default": the test
# runner creates no database for it and points it at default's test database (NAME), which
# the standby receives by replication (it is read-only: nothing could be created there).
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["replica"] = {**DATABASES["default"], "TEST": {"MIRROR": "default"}}
elif _replica_url := env("REPLICA_DATABASE_URL", default=""):
    DATABASES["replica"] = {
        **env.db_url_config(_replica_url),
        "TEST": {"MIRROR": "default"},
        # a stopped standby is found out at once, not after the OS's connect timeout
        "OPTIONS": {"connect_timeout": 3},
    }

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# End users sign in at /accounts/login/ and land on their own search (the JSON endpoint).
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/transcripts/search/?q=izmir&around=1"

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

DEUZ_TRANSCRIPTS = {
    "SQLITE_BACKEND": env("DEUZ_SQLITE_BACKEND", default="auto"),
    "SEARCH_SCOPE": "testproject.scopes.user_scope",
    # The scope key whose value fills the tenant columns (.ci/run's partitioned leg sets
    # DEUZ_TENANT_KEY=userId with DEUZ_TEST_PARTITIONS).
    "TENANT_KEY": env("DEUZ_TENANT_KEY", default=None),
    # Chinese, Japanese and Thai searched by bigrams (`make run CJK_BIGRAMS=1`).
    "CJK_BIGRAMS": env.bool("DEUZ_CJK_BIGRAMS", default=False),
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "WARNING"},
}
