"""Any GET parameters, however hostile, give the admin search and chat pages a 200: bad
values are form errors or page errors, never a 500 (a raw database or overflow error)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deuz_transcripts.models import Chat
from tests.admin_support import SEARCH, izmir_chat, make_client, write

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]

# GET values travel as UTF-8: a lone surrogate cannot be sent at all
plain_text = st.text(st.characters(blacklist_categories=["Cs"]), max_size=40)
hostile = st.sampled_from(
    [
        "",
        " ",
        "\x00",
        "\x1b[31m",
        "\u202e",
        "<script>",
        "9" * 40,
        "-1",
        "1e9",
        "x" * 9_000,
        "userId=ada",
        "user",
        "tool",
        "2025-03-01",
        "2025-03-01 12:00",
        "0001-01-01T00:00+14:00",
        "9999-12-31T23:59:59.999999-14:00",
        "2025-03-01T12:00+99:99",
        "2025-02-29",
        "NaN",
    ]
)
moments = st.datetimes().map(lambda moment: moment.isoformat()) | st.builds(
    lambda moment, sign, hours: f"{moment.isoformat()}{sign}{hours:02d}:00",
    st.datetimes(),
    st.sampled_from("+-"),
    st.integers(0, 30),
)
values = st.one_of(hostile, plain_text, moments, st.integers(-(2**70), 2**70).map(str))
PARAMETERS = [
    "q",
    "scope",
    "role",
    "other_roles",
    "updated_after",
    "updated_before",
    "around",
    "page",
    "cursor",
    "messages",
]
queries = st.dictionaries(
    st.sampled_from(PARAMETERS), st.lists(values, min_size=1, max_size=3), max_size=8
).map(lambda params: {"q": "izmir", **params} if "q" not in params else params)


@pytest.fixture
def clients(django_user_model: Any, settings: Any) -> dict[str, Client]:
    # UTC+14: a naive date near year 1 lies before UTC's first day
    settings.TIME_ZONE = "Pacific/Kiritimati"
    write(izmir_chat())
    return {kind: make_client(kind, django_user_model) for kind in ("support", "superuser")}


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(params=queries)
def test_any_get_parameters_give_the_search_page_a_200(
    clients: dict[str, Client], params: dict[str, list[str]]
) -> None:
    for kind, client in clients.items():
        response = client.get(reverse(SEARCH), params)
        assert response.status_code == 200, (kind, params)
        total = response.context.get("total")
        assert total is None or total >= len(response.context["rows"])


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(params=queries)
def test_any_search_parameters_give_the_chat_page_a_200(
    clients: dict[str, Client], params: dict[str, list[str]]
) -> None:
    url = reverse("admin:deuz_transcripts_chat_change", args=[Chat.objects.get().pk])
    response = clients["superuser"].get(url, params)
    assert response.status_code == 200, params
    back = response.context["search_back_url"]
    assert back is None or len(back) < 60_000
    if back:  # the way back is itself a page that answers
        assert clients["superuser"].get(back).status_code == 200
