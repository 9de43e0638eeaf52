"""``backfill_transcripts --defer-index``: PostgreSQL loads without the GIN index and
builds it once at the end; a run that never reached its end is reported (W006) and
mended by the next backfill."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import IntegrityError, connection

from deuz_transcripts.backends.postgresql.storage import VECTOR_INDEX, vector_index_state
from deuz_transcripts.backfill import Backfill
from deuz_transcripts.checks import check_search_index
from deuz_transcripts.models import Message
from tests.test_backfill import found, legacy, record

postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="PostgreSQL's GIN index"
)


def backfill(*args: str) -> str:
    err = io.StringIO()
    call_command("backfill_transcripts", *args, stdout=io.StringIO(), stderr=err)
    return err.getvalue()


def index_state() -> str:
    with connection.cursor() as cursor:
        return vector_index_state(cursor)


def index_definition() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_get_indexdef(to_regclass(%s))", [VECTOR_INDEX])
        return str(cursor.fetchone()[0])


def drop_index() -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX {VECTOR_INDEX}")


@pytest.fixture
def load_states(monkeypatch: Any) -> list[str]:
    """The index's state each time a backfill starts writing."""
    states: list[str] = []
    run = Backfill.run

    def recording(self: Backfill, *args: Any, **kwargs: Any) -> Any:
        states.append(index_state())
        return run(self, *args, **kwargs)

    monkeypatch.setattr(Backfill, "run", recording)
    return states


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_a_deferred_backfill_loads_without_the_index_then_builds_it(load_states):
    legacy(*(record(f"c{n}", f"alpha w{n}", n=n) for n in range(3)))
    before = index_definition()
    report = backfill("--defer-index")
    assert load_states == ["missing"]
    assert index_state() == "ready" and index_definition() == before
    assert "dropped" in report and "built in" in report
    assert len(found("alpha")) == 6
    assert check_search_index(databases=["default"]) == []


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_workers_load_without_the_index_and_the_parent_builds_it():
    legacy(*(record(f"c{n}", f"alpha w{n}", n=n) for n in range(4)))
    report = backfill("--defer-index", "--workers", "2")
    assert "dropped" in report and "built in" in report
    assert index_state() == "ready" and len(found("alpha")) == 8


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_without_the_flag_the_index_stays(load_states):
    legacy(record("c1", "alpha"))
    assert "index" not in backfill()
    assert load_states == ["ready"] and index_state() == "ready"


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_a_failed_deferred_backfill_still_builds_the_index(monkeypatch):
    legacy(record("c1", "alpha"))

    def broken(self: Backfill, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the disk is full")

    monkeypatch.setattr(Backfill, "run", broken)
    with pytest.raises(RuntimeError):
        backfill("--defer-index")
    assert index_state() == "ready"


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_a_run_killed_before_its_end_is_reported_and_mended_by_the_next(load_states):
    legacy(record("c1", "alpha"))
    backfill()
    drop_index()  # what a --defer-index run killed before its end leaves
    (warning,) = check_search_index(databases=["default"])
    assert warning.id == "deuz_transcripts.W006" and "missing" in warning.msg
    assert found("alpha") == [("c1", "c1:1"), ("c1", "c1:2")]  # found, by a scan
    assert "built in" in backfill()  # no flag: the missing index is built all the same
    assert index_state() == "ready"
    assert check_search_index(databases=["default"]) == []


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_an_invalid_index_is_reported_and_built_again():
    legacy(record("c1", "alpha"))
    backfill()
    drop_index()
    messages = Message._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE oid = %s::regclass", [messages])
        if cursor.fetchone()[0] == "p":  # partitioned: an index of the parent alone
            cursor.execute(f"CREATE INDEX {VECTOR_INDEX} ON ONLY {messages} (id)")
        else:  # a concurrent build that fails leaves its index behind, invalid
            with pytest.raises(IntegrityError):
                cursor.execute(
                    f"CREATE UNIQUE INDEX CONCURRENTLY {VECTOR_INDEX} ON {messages} ((1))"
                )
    assert index_state() == "invalid"
    (warning,) = check_search_index(databases=["default"])
    assert "invalid" in warning.msg
    backfill()
    assert index_state() == "ready" and "gin (search_vector)" in index_definition()


@pytest.mark.django_db
@pytest.mark.parametrize("option", [["--dry-run"], ["--verify"], ["--chat-id", "c1"]])
def test_defer_index_is_for_a_bulk_backfill(option):
    with pytest.raises(CommandError, match=f"not with {option[0]}"):
        backfill("--defer-index", *option)


@pytest.mark.django_db
def test_defer_index_is_postgresql_s_and_never_inside_a_transaction():
    legacy(record("c1", "alpha"))
    expected = "inside a transaction" if connection.vendor == "postgresql" else "PostgreSQL's"
    with pytest.raises(CommandError, match=expected):
        backfill("--defer-index")  # the test runs in a transaction
    assert found("alpha") == [] and check_search_index(databases=["default"]) == []
