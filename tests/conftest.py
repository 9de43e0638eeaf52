"""Shared pytest configuration for the deuz_transcripts suite.

With ``DEUZ_REQUIRE_POSTGRES=1`` (set by ``make test-postgres``) the session stops at once
unless the configured database is a reachable PostgreSQL server, so a PostgreSQL run can
never silently turn into a SQLite run or a wall of per-test connection errors.

Also the fixtures of the modules that log users in: ``fast_passwords`` (used through
``pytest.mark.usefixtures``), and ``support``/``support_client``, a staff user holding only
the app's search permission; and ``span_match_path``, which runs a ``match_spans`` test
once through each of substring matching's two ways of finding spans (which one a text
takes depends on its length and the number of terms; exact matching has one way).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import pytest

# Helper modules (not test modules) whose asserts should still fail with pytest's detailed
# messages: registered before any test module imports them. The contract package is
# registered by the modules that subclass it.
pytest.register_assert_rewrite("tests.sql_support")


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """With ``DEUZ_TEST_PARTITIONS=N`` (.ci/run's partitioned leg, PostgreSQL), the test
    database's message table is hash-partitioned by tenant before any test runs."""
    partitions = os.environ.get("DEUZ_TEST_PARTITIONS")
    if not partitions:
        return
    from django.db import connection

    from deuz_transcripts.backends.postgresql.partitions import partition_messages

    if connection.vendor != "postgresql":
        pytest.exit("DEUZ_TEST_PARTITIONS needs PostgreSQL (DATABASE_URL)", returncode=1)
    with django_db_blocker.unblock():
        partition_messages("default", int(partitions))


@pytest.fixture(scope="session", autouse=True)
def _require_postgres(django_db_blocker):
    if os.environ.get("DEUZ_REQUIRE_POSTGRES") != "1":
        return
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.exit(
            f"DEUZ_REQUIRE_POSTGRES=1 but the database vendor is {connection.vendor!r}; "
            "set DATABASE_URL=postgres://...",
            returncode=1,
        )
    with django_db_blocker.unblock():
        try:
            connection.ensure_connection()
        except Exception as exc:
            pytest.exit(
                f"DEUZ_REQUIRE_POSTGRES=1 but PostgreSQL is unreachable: {exc}", returncode=1
            )
        finally:
            connection.close()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Database contract suites: ``django_db``, transactional for the async twins only.

    An async twin runs its sync method in another thread, on another connection, which
    must see the test's writes; every other test stays in a fast rolled-back transaction.
    """
    for item in items:
        if getattr(getattr(item, "cls", None), "database_contract", False):
            item.add_marker(pytest.mark.django_db(transaction=item.name.startswith("test_async")))


@pytest.fixture
def fast_passwords(settings: Any) -> None:
    """The default hasher costs a second per user; the admin and command tests create many."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def support(django_user_model: Any) -> Any:
    """Staff with only the app's search permission."""
    from django.contrib.auth.models import Permission

    user = django_user_model.objects.create_user("support", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="search_transcripts"))
    return user


@pytest.fixture
def support_client(client: Any, support: Any) -> Any:
    client.force_login(support)
    return client


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The lock-conflict back-off sleeps (one per retry), still slept for real."""
    recorded: list[float] = []
    real_sleep = time.sleep

    def sleep(seconds: float) -> None:
        recorded.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr("deuz_transcripts.sql.errors.time.sleep", sleep)
    return recorded


# span_match settings that send every text down one of substring matching's two paths
# (exact matching has one: the whole folded text)
_SPAN_MATCH_PATHS = {
    "every-segment": {"_SHORT_CAP": sys.maxsize, "_SHORT_CHARS_PER_TERM_SQUARED": sys.maxsize},
    "where-a-term-may-be": {"_SHORT_CAP": -1},
}


@pytest.fixture(params=sorted(_SPAN_MATCH_PATHS))
def span_match_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    from deuz_transcripts import span_match

    for name, value in _SPAN_MATCH_PATHS[request.param].items():
        assert hasattr(span_match, name), name
        monkeypatch.setattr(span_match, name, value)
    return str(request.param)


@pytest.fixture(autouse=True)
def _tenant_sizes_unknown():
    """Each test starts in a process that has found no tenant big (``BIG_TENANTS``, which
    picks a plan, never a result), whatever an earlier test searched."""
    from deuz_transcripts.backends.postgresql.engine import BIG_TENANTS

    BIG_TENANTS.clear()
    yield
    BIG_TENANTS.clear()
