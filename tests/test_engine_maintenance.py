"""The maintenance entry point each engine gives commands, checks and signals
(``backends.maintenance_for``): what it reports and what it refuses, per engine."""

from __future__ import annotations

import pytest
from django.db import connection

from deuz_transcripts.backends import maintenance_for
from deuz_transcripts.backends.maintenance import Unsupported

pytestmark = pytest.mark.django_db


def test_the_search_index_is_reported_by_the_engine_that_has_one():
    engine = maintenance_for("default")
    if connection.vendor == "postgresql":
        assert engine.search_index_name == "deuz_message_vector"
        assert engine.search_index_state() == "ready"
    else:  # FTS5 (or LIKE) needs no separate index
        assert engine.search_index_name == ""
        assert engine.search_index_state() == "ready"
        with pytest.raises(Unsupported, match="no search index"):
            engine.drop_search_index()


def test_term_counts_and_partitions_are_postgresql_s():
    engine = maintenance_for("default")
    if connection.vendor == "postgresql":
        counted, min_rows = engine.refresh_term_counts()
        assert counted >= 0 and min_rows > 1
        return
    with pytest.raises(Unsupported, match="stores no term counts"):
        engine.refresh_term_counts()
    assert engine.partition_info() is None
    with pytest.raises(Unsupported, match="only PostgreSQL"):
        engine.partition_messages(4)
