"""``SEARCH_DATABASE`` and ``search_using`` on any engine: which alias reads, the settings'
rules, and a search database that cannot be reached (error or fall-back by setting).

The real standby (lag, read-your-writes, recovery conflicts) is tests/test_replica.py.
Here the "replica" of ``default`` is the suite's ``other`` database, which holds other
rows: a search that finds only what ``other`` holds proves where it read.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import DatabaseError, connections
from django.db.utils import load_backend
from django.test import override_settings

from deuz_transcripts import ChatRecord, MemorySourceRef, ReplicaUnavailable, TranscriptError
from deuz_transcripts.backends.postgresql import wal
from deuz_transcripts.checks import check_search_database, check_settings
from deuz_transcripts.conf import conf
from deuz_transcripts.sql import replica
from deuz_transcripts.stores import DjangoConditionalChatStore, DjangoTranscriptIndex

pytestmark = pytest.mark.django_db(databases=["default", "other"])


def chat(chat_id: str, word: str) -> ChatRecord:
    return ChatRecord(chat_id, {"userId": "ada"}, [{"role": "user", "content": f"about {word}"}])


def found(index: DjangoTranscriptIndex, word: str) -> list[str]:
    return [hit.chat_id for hit in index.search({"userId": "ada"}, word)]


@pytest.fixture
def two_databases() -> tuple[DjangoConditionalChatStore, DjangoConditionalChatStore]:
    """The same chat id with different words: "primary" on default, "stale" on other."""
    primary, other = DjangoConditionalChatStore("default"), DjangoConditionalChatStore("other")
    primary.write_chat(chat("c1", "primary"), expected_revision=0)
    other.write_chat(chat("c1", "stale"), expected_revision=0)
    return primary, other


def test_searches_read_the_search_database_and_writes_stay_on_the_primary(two_databases):
    store = DjangoConditionalChatStore("default", search_using="other")
    assert store.transcript.search_database == "other"
    assert found(store.transcript, "stale") == ["c1"] and found(store.transcript, "primary") == []
    assert [r.messages[0]["content"] for r in store.list_chats({"userId": "ada"})] == [
        "about stale"
    ]
    ref = MemorySourceRef(kind="user", chat_id="c1", message_id="c1:0", digest="x")
    assert store.transcript.resolve_source({"userId": "ada"}, ref).message["content"] == (
        "about stale"
    )
    # revision checks and loads read the primary
    assert store.write_chat(chat("c1", "newer"), expected_revision=1) == 2
    assert store.load_chat("c1")[0].messages[0]["content"] == "about newer"
    assert found(DjangoTranscriptIndex("default"), "newer") == ["c1"]


def test_the_setting_names_the_search_database_of_default_only(two_databases):
    with override_settings(DEUZ_TRANSCRIPTS={"SEARCH_DATABASE": "other"}):
        assert found(DjangoTranscriptIndex("default"), "stale") == ["c1"]
        assert DjangoTranscriptIndex("other").search_database == "other"
        # an explicit search_using wins over the setting
        assert found(DjangoTranscriptIndex("default", search_using="default"), "primary") == ["c1"]
    with override_settings(DEUZ_TRANSCRIPTS={"SEARCH_DATABASE": {"other": "default"}}):
        assert conf.search_database("default") == "default"
        assert found(DjangoTranscriptIndex("other"), "primary") == ["c1"]


@pytest.mark.parametrize(
    ("key", "value", "check_id"),
    [
        ("SEARCH_DATABASE", "replica-typo", "deuz_transcripts.E013"),
        ("SEARCH_DATABASE", {"default": "nowhere"}, "deuz_transcripts.E013"),
        ("SEARCH_DATABASE", {}, "deuz_transcripts.E013"),
        ("SEARCH_DATABASE", ["other"], "deuz_transcripts.E013"),
        ("REPLICA_WAIT_MS", -1, "deuz_transcripts.E014"),
        ("REPLICA_WAIT_MS", 60_001, "deuz_transcripts.E014"),
        ("REPLICA_FALLBACK", "replica", "deuz_transcripts.E015"),
    ],
)
def test_nonsense_is_refused_by_a_system_check(key, value, check_id):
    with override_settings(DEUZ_TRANSCRIPTS={key: value}):
        assert [str(m.id) for m in check_settings()] == [check_id]
        assert conf.search_database("default") == "default"  # never a bad alias


def test_a_search_database_of_another_engine_is_refused(monkeypatch):
    with override_settings(DEUZ_TRANSCRIPTS={"SEARCH_DATABASE": "other"}):
        assert check_search_database() == []
        vendor = "sqlite" if connections["default"].vendor == "postgresql" else "postgresql"
        monkeypatch.setattr(connections["other"], "vendor", vendor)
        [error] = check_search_database()
        assert error.id == "deuz_transcripts.E016" and "'other'" in error.msg


@pytest.fixture
def unreachable() -> Any:
    """An alias whose database cannot be reached (a file in no directory; a closed port)."""
    default = connections.settings["default"]
    if default["ENGINE"].endswith("sqlite3"):
        wanted = {**default, "NAME": "/nonexistent-deuz-dir/replica.sqlite3", "TEST": {}}
    else:
        wanted = {**default, "PORT": "1", "TEST": {}}
    configured = connections.configure_settings({"default": dict(default), "down": wanted})
    alias = "down_replica"
    connections[alias] = load_backend(wanted["ENGINE"]).DatabaseWrapper(configured["down"], alias)
    yield alias
    connections[alias].close()
    del connections[alias]


def test_an_unreachable_search_database_fails_clearly_or_falls_back(two_databases, unreachable):
    index = DjangoTranscriptIndex("default", search_using=unreachable)
    with override_settings(DEUZ_TRANSCRIPTS={"REPLICA_FALLBACK": "error"}):
        with pytest.raises(ReplicaUnavailable) as caught:
            index.search({"userId": "ada"}, "primary")
        assert (caught.value.alias, caught.value.reason) == (unreachable, "unreachable")
        assert isinstance(caught.value, TranscriptError)
    with override_settings(DEUZ_TRANSCRIPTS={"REPLICA_FALLBACK": "primary"}):
        assert found(index, "primary") == ["c1"]
        assert index.search_page({"userId": "ada"}, "primary").total == 1


@pytest.mark.django_db(transaction=True, databases=["default", "other"])
@override_settings(DEUZ_TRANSCRIPTS={"REPLICA_FALLBACK": "error", "REPLICA_WAIT_MS": 200})
def test_without_a_wal_position_a_write_never_waits():
    """SQLite has no WAL position; PostgreSQL remembers one only for a search database
    elsewhere, after the commit."""
    replica.forget_writes()
    store = DjangoConditionalChatStore("default", search_using="default")
    store.write_chat(chat("c2", "words"), expected_revision=0)
    assert replica.written_position("default") is None
    store = DjangoConditionalChatStore("default", search_using="other")
    store.write_chat(chat("c3", "words"), expected_revision=0)
    remembered = replica.written_position("default")
    assert (remembered is not None) == (connections["default"].vendor == "postgresql")
    assert remembered != replica.UNKNOWN_POSITION
    # "other" is no standby (not in recovery): read at once, then forgotten
    assert found(store.transcript, "words") == []
    assert replica.written_position("default") is None


def _static_replay_position(execute: Any, sql: str, *args: Any) -> Any:
    """The replay position a server keeps after its last recovery ended, far behind."""
    return execute(sql.replace("pg_last_wal_replay_lsn()", "'0/1'::pg_lsn"), *args)


@pytest.mark.django_db(transaction=True, databases=["default", "other"])
@override_settings(DEUZ_TRANSCRIPTS={"REPLICA_FALLBACK": "error", "REPLICA_WAIT_MS": 200})
def test_a_search_database_out_of_recovery_is_read_at_once():
    """A primary that went through crash recovery at start, or a standby promoted after a
    failover, still reports where that recovery ended: a position no write reaches. Not
    being in recovery is what says it is no standby; the read must not wait on it."""
    if connections["default"].vendor != "postgresql":
        pytest.skip("a WAL replay position is PostgreSQL's")
    replica.forget_writes()
    store = DjangoConditionalChatStore("default", search_using="other")
    store.write_chat(chat("c3", "words"), expected_revision=0)
    assert replica.written_position("default") is not None
    with connections["other"].execute_wrapper(_static_replay_position):
        assert found(store.transcript, "words") == []  # read on "other", no wait, no error
    assert replica.written_position("default") is None


def test_lsn_text_round_trips():
    for text in ("0/0", "1/425EABE8", "FFFFFFFF/FFFFFFFF"):
        assert wal.format_lsn(wal.parse_lsn(text)) == text
    assert wal.parse_lsn("1/0") > wal.parse_lsn("0/FFFFFFFF")


@pytest.mark.django_db(transaction=True, databases="__all__")  # "replica" may not exist
@override_settings(DEUZ_TRANSCRIPTS={"SEARCH_DATABASE": "replica", "REPLICA_FALLBACK": "error"})
def test_the_replica_alias_of_the_test_project_reads_a_callers_write_at_once():
    """On SQLite "replica" is a second connection to the same database: no WAL position,
    no wait, the write is there."""
    if connections["default"].vendor != "sqlite":
        pytest.skip("on PostgreSQL 'replica' is a standby: tests/test_replica.py")
    store = DjangoConditionalChatStore()
    store.write_chat(chat("c1", "lisbon"), expected_revision=0)
    assert found(store.transcript, "lisbon") == ["c1"]
    assert [record.chat_id for record in store.list_chats({"userId": "ada"})] == ["c1"]
    assert replica.written_position("default") is None
    connections["replica"].close()


@pytest.fixture
def replica_down(unreachable: str, monkeypatch: pytest.MonkeyPatch, settings: Any) -> str:
    """Every index's searches read the unreachable alias; the fall-back is "error"."""
    monkeypatch.setattr(DjangoTranscriptIndex, "search_database", property(lambda _: unreachable))
    settings.DEUZ_TRANSCRIPTS = {**settings.DEUZ_TRANSCRIPTS, "REPLICA_FALLBACK": "error"}
    return unreachable


@pytest.mark.usefixtures("fast_passwords", "two_databases", "replica_down")
def test_every_entry_point_says_the_search_database_is_unavailable(django_user_model, client):
    from django.core.management import CommandError, call_command
    from django.urls import reverse

    from deuz_transcripts.agent_tool import run_search_tool

    user = django_user_model.objects.create_user("ada", password="pw")
    client.force_login(user)
    response = client.get("/transcripts/search/", {"q": "primary"})
    assert response.status_code == 503
    assert "cannot be reached" in response.json()["error"]["message"]

    answer = run_search_tool(DjangoTranscriptIndex(), {"userId": "ada"}, {"query": "primary"})
    assert "unavailable" in answer

    with pytest.raises(CommandError, match="cannot be reached"):
        call_command("search_transcripts", "primary", "--scope", "userId=ada")

    django_user_model.objects.create_superuser("root", password="pw")
    client.force_login(django_user_model.objects.get(username="root"))
    page = client.get(reverse("admin:deuz_transcripts_search"), {"q": "primary"})
    assert page.status_code == 200 and b"cannot be reached" in page.content


def test_a_write_position_past_a_page_header_is_the_page_boundary():
    """A standby's replay position reaches a page boundary, never the header after it."""
    block, segment = 8192, 16 * 1024 * 1024
    page = wal.parse_lsn("3/105C000")
    assert wal.record_end(page + 24, block, segment) == page
    assert wal.record_end(page + 48, block, segment) == page + 48
    assert wal.record_end(3 * 2**32 + segment + 40, block, segment) == 3 * 2**32 + segment
    assert wal.record_end(page, block, segment) == page


@pytest.mark.django_db(transaction=True, databases=["default", "other"])
def test_a_write_whose_position_is_unknown_sends_one_read_to_the_primary(monkeypatch):
    """The position is read after the commit; if that fails the write still stands, and the
    next read does not trust the search database, once."""
    if connections["default"].vendor != "postgresql":
        pytest.skip("SQLite writes have no WAL position")
    replica.forget_writes()
    store = DjangoConditionalChatStore("default", search_using="other")

    def position_lost(*args: Any) -> int:
        raise DatabaseError("the connection broke after the commit")

    with monkeypatch.context() as patched:
        patched.setattr(wal, "record_end", position_lost)
        store.write_chat(chat("c1", "primary"), expected_revision=0)
    assert store.load_chat("c1")[1] == 1  # the write stands
    assert replica.written_position("default") == replica.UNKNOWN_POSITION
    with override_settings(DEUZ_TRANSCRIPTS={"REPLICA_FALLBACK": "error"}):
        with pytest.raises(ReplicaUnavailable, match="unknown"):
            store.transcript.search({"userId": "ada"}, "primary")
        assert found(store.transcript, "primary") == []  # "other": no wait any more
