"""``DEUZ_TRANSCRIPTS``: ``conf`` decides what is valid; the checks report it, once."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.test import override_settings

from deuz_transcripts.backends import backend_name_for
from deuz_transcripts.checks import (
    check_search_backends,
    check_settings,
    check_sqlite_transaction_mode,
)
from deuz_transcripts.conf import conf


def check_ids() -> list[str]:
    return [str(message.id) for message in [*check_settings(), *check_search_backends()]]


def test_valid_settings_have_no_problem():
    with override_settings(DEUZ_TRANSCRIPTS={"SQLITE_SCAN_SCOPE_MAX": 0, "LOCK_RETRIES": 5}):
        assert conf.problems() == []
        assert [i for i in check_ids() if i != "deuz_transcripts.W001"] == []


def test_a_bad_sqlite_backend_is_reported_once_and_refused_at_use():
    with override_settings(DEUZ_TRANSCRIPTS={"SQLITE_BACKEND": "elastic"}):
        assert check_ids().count("deuz_transcripts.E002") == 1
        assert "deuz_transcripts.E005" not in check_ids()
        if connection.vendor == "sqlite":
            with pytest.raises(ImproperlyConfigured, match="'elastic'"):
                backend_name_for("default")


@pytest.mark.parametrize(
    ("key", "value", "check_id"),
    [
        ("ADMIN_PAGE_SIZE", 0, "deuz_transcripts.E003"),
        ("LOCK_RETRIES", "3", "deuz_transcripts.E003"),
        ("SQLITE_SECURE_DELETE", "yes", "deuz_transcripts.E007"),
        ("SQLITE_SCAN_SCOPE_MAX", -1, "deuz_transcripts.E006"),
        ("SEARCH_TOTAL_CAP", 0, "deuz_transcripts.E018"),
        ("SEARCH_TOTAL_CAP", "10000", "deuz_transcripts.E018"),
        ("SEARCH_TOTAL_CAP", 2**31, "deuz_transcripts.E018"),
        ("EXPORT_MAX_HITS", 0, "deuz_transcripts.E020"),
        ("EXPORT_MAX_HITS", None, "deuz_transcripts.E020"),
        ("EXPORT_MAX_HITS", True, "deuz_transcripts.E020"),
    ],
)
def test_each_invalid_value_names_its_key(key, value, check_id):
    with override_settings(DEUZ_TRANSCRIPTS={key: value}):
        [problem] = conf.problems()
        assert (problem.key, problem.check_id) == (key, check_id)
        assert key in problem.message and repr(value) in problem.message
        assert check_ids().count(check_id) == 1


def test_export_max_hits_defaults_to_ten_thousand_and_an_invalid_one_is_the_default():
    assert conf.EXPORT_MAX_HITS == 10_000
    with override_settings(DEUZ_TRANSCRIPTS={"EXPORT_MAX_HITS": 25}):
        assert conf.EXPORT_MAX_HITS == 25
    with override_settings(DEUZ_TRANSCRIPTS={"EXPORT_MAX_HITS": -1}):
        assert conf.EXPORT_MAX_HITS == 10_000


def test_search_total_cap_defaults_to_ten_thousand_and_may_be_none():
    assert conf.SEARCH_TOTAL_CAP == 10_000
    with override_settings(DEUZ_TRANSCRIPTS={"SEARCH_TOTAL_CAP": None}):
        assert (conf.SEARCH_TOTAL_CAP, conf.problems()) == (None, [])


def test_not_a_dict_and_unknown_keys():
    with override_settings(DEUZ_TRANSCRIPTS=["SQLITE_BACKEND"]):
        assert [p.check_id for p in conf.problems()] == ["deuz_transcripts.E001"]
    with override_settings(DEUZ_TRANSCRIPTS={"SQLITE_BAKEND": "like"}):
        [problem] = conf.problems()
        assert (problem.check_id, problem.is_error) == ("deuz_transcripts.W002", False)


@pytest.mark.skipif(connection.vendor != "sqlite", reason="an SQLite option")
@pytest.mark.parametrize(
    ("options", "warned"),
    [
        ({"transaction_mode": "IMMEDIATE"}, False),
        ({"transaction_mode": "immediate"}, False),
        ({}, True),
        ({"transaction_mode": "DEFERRED"}, True),
        ({"transaction_mode": "EXCLUSIVE"}, True),
    ],
)
def test_sqlite_without_immediate_transactions_is_warned(monkeypatch, options, warned):
    """Deferred transactions make concurrent writers fail instead of queueing."""
    from django.db import connections

    for alias in connections:
        monkeypatch.setitem(connections[alias].settings_dict, "OPTIONS", dict(options))
    found = [m for m in check_sqlite_transaction_mode() if m.id == "deuz_transcripts.W003"]
    assert len(found) == (len(list(connections)) if warned else 0)
    if warned:
        assert "'default'" in found[0].msg and "IMMEDIATE" in str(found[0].hint)


@pytest.mark.skipif(connection.vendor != "sqlite", reason="an SQLite option")
def test_sqlite_databases_the_app_never_writes_to_are_not_warned(monkeypatch, settings):
    class OtherAppsOnly:
        def allow_migrate(self, db, app_label, **hints):
            return db == "default" or app_label != "deuz_transcripts"

    from django.db import connections, router

    for alias in connections:
        monkeypatch.setitem(connections[alias].settings_dict, "OPTIONS", {})
    monkeypatch.setattr(router, "routers", [OtherAppsOnly()])
    assert [m.msg.split(":")[0] for m in check_sqlite_transaction_mode()] == ["Database 'default'"]


def test_the_test_project_has_no_transaction_mode_warning():
    assert check_sqlite_transaction_mode() == []
