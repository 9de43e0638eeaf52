"""Hostile GET parameters on the admin pages: never a server error.

The transcript search (``q``, ``scope``, ``around``, ``page``), the chat list (its search
box ``q``, filters, ordering, paging) and the chat page (its id in the path, ``scope``,
``messages``) get random query strings, as the API is fuzzed in ``test_hostile_input.py``:
any Unicode, control characters, NUL, lone surrogates and invalid UTF-8 as raw
%-sequences, huge and malformed numbers, scopes of many fields, repeated and unknown
parameters. Every answer is a page, a form error, a redirect or a 4xx; a view that raises
fails the test (the test client re-raises it). ``DEUZ_FUZZ_EXAMPLES`` sets the examples.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import quote

import pytest
from django.test import Client
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deuz_transcripts.models import Chat, Tombstone
from deuz_transcripts.records import MAX_SCOPE_FIELDS
from deuz_transcripts.stores import DjangoConditionalChatStore
from tests.admin_support import SEARCH, izmir_chat, make_client, search, write

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]

EXAMPLES = int(os.environ.get("DEUZ_FUZZ_EXAMPLES", "40"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
KNOWN = ["q", "scope", "around", "page", "messages", "o", "p", "source", "is_indexed__exact"]
KNOWN += ["e", "all", "_changelist_filters", "_popup", "_to_field", "chat_id", "chat_id__regex"]


def escaped(text: str) -> str:
    """Percent-escapes of the text's UTF-8, lone surrogates included (as CESU-like bytes)."""
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


numbers = st.one_of(
    st.integers(min_value=-(10**40), max_value=10**40).map(str),
    st.sampled_from(["1e309", "NaN", "inf", "-0", " 5 ", "0x10", "１", "٣", "2147483648"]),
    st.sampled_from(["9223372036854775808", "1" * 5000, "1_000", "+1", "", "1.5"]),
)
scope_texts = st.lists(
    st.tuples(st.text(max_size=12), st.text(max_size=12)), max_size=MAX_SCOPE_FIELDS + 8
).map(lambda pairs: ",".join(f"{key}={value}" for key, value in pairs))
values = st.one_of(
    st.text(max_size=60).map(escaped),
    st.binary(max_size=40).map(lambda raw: quote(raw, safe="")),
    numbers.map(escaped),
    scope_texts.map(escaped),
    st.sampled_from(["userId%3Dada", "userId=ada", "%00", "%ED%A0%80", "%FF%FE", "%", "%zz"]),
)
keys = st.one_of(st.sampled_from(KNOWN), st.text(min_size=1, max_size=10)).map(escaped)
query_strings = st.lists(st.tuples(keys, values), max_size=6).map(
    lambda pairs: "&".join(f"{key}={value}" for key, value in pairs)
)


@pytest.fixture
def clients(django_user_model: Any) -> dict[str, Client]:
    write(izmir_chat(), izmir_chat("other", user="bob"))
    return {kind: make_client(kind, django_user_model) for kind in ("superuser", "support")}


def get(client: Client, path: str, query: str) -> Any:
    response = client.get(f"{path}?{query}")
    assert response.status_code < 500, (path, query, response.status_code)
    return response


@FUZZ
@given(query=query_strings, user=st.sampled_from(["superuser", "support"]))
def test_search_page_never_fails(clients: dict[str, Client], query: str, user: str) -> None:
    response = get(clients[user], reverse(SEARCH), query)
    assert response.status_code == 200


@FUZZ
@given(query=query_strings, user=st.sampled_from(["superuser", "support"]))
def test_chat_list_never_fails(clients: dict[str, Client], query: str, user: str) -> None:
    get(clients[user], reverse("admin:deuz_transcripts_chat_changelist"), query)


chat_ids = st.one_of(
    st.just("{pk}"),
    st.text(min_size=1, max_size=30).map(escaped),
    numbers.map(escaped),
    st.sampled_from(["0", "-1", "99999999999999999999999", "%00", "%ED%A0%80", "..%2F"]),
)


@FUZZ
@given(query=query_strings, chat_id=chat_ids, user=st.sampled_from(["superuser", "support"]))
def test_chat_page_never_fails(
    clients: dict[str, Client], query: str, chat_id: str, user: str
) -> None:
    pk = str(Chat.objects.get(chat_id="trip").pk)
    url = reverse("admin:deuz_transcripts_chat_change", args=["PK"])
    get(clients[user], url.replace("PK", chat_id.replace("{pk}", pk)), query)


# ---------------------------------------------------------------- what the fuzz pinned


@pytest.mark.parametrize("to_field", ["messages", "scope_fields", "chat_id", "id"])
def test_to_field_of_a_reverse_relation_is_refused_not_a_500(
    clients: dict[str, Client], to_field: str
) -> None:
    """Django's own check read ``primary_key`` of a reverse relation and answered 500."""
    pk = Chat.objects.get(chat_id="trip").pk
    url = reverse("admin:deuz_transcripts_chat_change", args=[pk])
    response = get(clients["superuser"], url, f"_to_field={to_field}")
    assert response.status_code == (200 if to_field == "id" else 400)


def test_scope_box_with_too_many_fields_is_a_form_error(clients: dict[str, Client]) -> None:
    """A scope past ``MAX_SCOPE_FIELDS`` is refused before any SQL (one join per field
    used to stall PostgreSQL for minutes and fail SQLite past 63 fields)."""
    padding = [f"k{number}=v" for number in range(MAX_SCOPE_FIELDS - 1)]
    widest = ",".join(["userId=ada", *padding])
    response = search(clients["support"], q="izmir", scope=widest)
    assert response.status_code == 200
    assert response.context["form"].errors == {}
    too_wide = widest + ",one=more"
    response = search(clients["support"], q="izmir", scope=too_wide)
    assert response.status_code == 200
    assert f"more than {MAX_SCOPE_FIELDS} fields" in str(response.context["form"].errors)
    assert response.context["rows"] == []


@pytest.mark.parametrize("to_field", ["", "chat_id", "nope"])
def test_to_field_on_a_change_page_is_never_a_server_error(
    clients: dict[str, Client], to_field: str
) -> None:
    """``?_to_field=`` (empty) made Django look up a field named '' and answer 500."""
    chat = Chat.objects.get(chat_id="trip")
    page = reverse("admin:deuz_transcripts_chat_change", args=[chat.pk])
    response = clients["superuser"].get(page, {"_to_field": to_field})
    assert response.status_code == (200 if to_field == "" else 400)
    DjangoConditionalChatStore().delete_chat("other")
    tombstone = Tombstone.objects.get()
    page = reverse("admin:deuz_transcripts_tombstone_change", args=[tombstone.pk])
    response = clients["superuser"].get(page, {"_to_field": to_field})
    assert response.status_code == (200 if to_field == "" else 400)


@pytest.mark.parametrize(
    "query",
    ["scope=%00", "scope=userId%3Dada", "chat_id=%00", "chat_id__regex=(", "revision__gt=x"],
)
def test_field_lookups_from_the_query_string_are_refused(
    clients: dict[str, Client], query: str
) -> None:
    """Django let ``?<field>=`` filter the lists on any field: NUL in a JSON or text value,
    or a broken regular expression, reached PostgreSQL raw (a 500). Only the list filters'
    own parameters are taken now; anything else is a 400."""
    for name in ("chat", "tombstone"):
        url = reverse(f"admin:deuz_transcripts_{name}_changelist")
        assert clients["superuser"].get(f"{url}?{query}").status_code == 400


def test_the_list_filters_still_filter(clients: dict[str, Client]) -> None:
    url = reverse("admin:deuz_transcripts_chat_changelist")
    for query, expected in [
        ("source=stored", 2),
        ("source=indexed", 0),
        ("is_indexed__exact=0", 0),
    ]:
        response = clients["superuser"].get(f"{url}?{query}")
        assert response.status_code == 200
        assert len(response.context["cl"].result_list) == expected
