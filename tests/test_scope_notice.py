"""A mistyped scope does not look like "no hits": the admin and ``search_transcripts`` say
that no chat has the scope, and which scope keys exist (keys only, never values); the JSON
endpoint says that no chat has the caller's own scope (and nothing of other chats)."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from deuz_transcripts import ChatRecord
from deuz_transcripts.sql.scopes import MAX_KEYS, unknown_scope
from deuz_transcripts.stores import DjangoConditionalChatStore, DjangoTranscriptIndex
from tests.admin_support import search

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]


def write(chat_id: str, scope: dict[str, str], text: str = "Book the flight to Izmir.") -> None:
    DjangoConditionalChatStore().write_chat(
        ChatRecord(chat_id, scope, [{"role": "user", "content": text}]), expected_revision=0
    )


@pytest.fixture
def chats() -> None:
    write("trip", {"userId": "ada", "agentId": "x"})
    write("other", {"userId": "secret-bob"}, "nothing here")


def searched(*args: str) -> str:
    out = io.StringIO()
    call_command("search_transcripts", *args, stdout=out)
    return out.getvalue()


@pytest.mark.usefixtures("chats")
@pytest.mark.parametrize(
    ("scope", "expected"),
    [
        ("userId=ada;agentId=x", "Separate scope fields with commas"),
        ("user=ada", "no chat has the key(s) user"),
        ("userid=ada", "no chat has the key(s) userid"),
        ("userId=adaa", "scope keys that exist: agentId, userId."),
    ],
)
def test_the_command_says_no_chat_has_a_mistyped_scope(scope: str, expected: str) -> None:
    lines = searched("izmir", "--scope", scope).splitlines()
    assert lines[0].startswith("No hits")
    assert lines[1].startswith(f"No chat has the scope {scope}; ")
    assert "scope keys that exist: agentId, userId." in lines[1] and expected in lines[1]
    assert "secret-bob" not in lines[1]
    document = json.loads(searched("izmir", "--scope", scope, "--json"))
    assert document["hits"] == [] and document["notice"] == lines[1]


@pytest.mark.usefixtures("chats")
def test_no_notice_when_some_chat_has_the_scope_or_there_are_hits() -> None:
    assert searched("zanzibar", "--scope", "userId=ada").splitlines() == [
        f"No hits ({DjangoTranscriptIndex().backend_name}); 0 matching message(s)."
    ]
    assert "notice" not in json.loads(searched("zanzibar", "--scope", "userId=ada", "--json"))
    assert "No chat" not in searched("izmir", "--scope", "agentId=x")
    assert "No chat" not in searched("zanzibar", "--all-scopes")


@pytest.mark.usefixtures("chats")
def test_the_admin_says_no_chat_has_a_mistyped_scope(support_client: Any) -> None:
    response = search(support_client, q="izmir", scope="userId=ada;agentId=x")
    notice = response.context["notice"]
    assert notice.startswith("No chat has the scope userId=ada;agentId=x.")
    assert "Scope keys that exist: agentId, userId." in notice
    assert "Separate scope fields with commas" in notice
    assert 'id="search-notice"' in response.content.decode()
    response = search(support_client, q="izmir", scope="user=ada")
    assert "No chat has the key user." in response.context["notice"]
    response = search(support_client, q="zanzibar", scope="userId=ada")
    assert response.context["notice"] == "No message matches this query in this scope."


def test_keys_are_listed_up_to_a_bound_by_index_probes() -> None:
    for number in range(MAX_KEYS + 5):
        write(f"c{number}", {f"k{number:02d}": "v", "userId": "ada"})
    with CaptureQueriesContext(connection) as queries:
        unknown = unknown_scope("default", {"userId": "nobody"})
    assert unknown is not None and unknown.more_keys and unknown.unknown_keys == []
    assert unknown.keys == [f"k{number:02d}" for number in range(MAX_KEYS)]
    assert len(queries) == 1 + MAX_KEYS + 1 + 1  # EXISTS, key probes, one more, userId
    assert unknown_scope("default", {"userId": "ada", "k03": "v"}) is None
    assert unknown_scope("default", {}) is None


def test_an_empty_database_says_no_chat_has_a_scope_field() -> None:
    unknown = unknown_scope("default", {"userId": "ada"})
    assert unknown is not None and unknown.keys == [] and unknown.unknown_keys == ["userId"]
    assert "(none: no chat has a scope field)" in unknown.sentence("userId=ada")


def test_the_endpoint_says_when_no_chat_has_the_callers_scope(
    chats: None, client: Any, django_user_model: Any
) -> None:
    """It answered count 0 alone, as for a word no chat holds (the demo's users own no chat)."""
    client.force_login(django_user_model.objects.create_user("carol"))
    answer = client.get("/transcripts/search/", {"q": "izmir"}).json()
    assert answer["count"] == 0 and answer["hits"] == []
    assert answer["notice"] == (
        "no chat has your scope (userId=carol) yet: no search can find anything"
    )
    assert "agentId" not in json.dumps(answer)  # the admin's list of keys is for staff only
    client.force_login(django_user_model.objects.create_user("ada"))
    assert "notice" not in client.get("/transcripts/search/", {"q": "nothingmatches"}).json()
    assert "notice" not in client.get("/transcripts/search/", {"q": "izmir"}).json()
