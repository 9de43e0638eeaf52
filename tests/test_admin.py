"""The admin: the transcript search view, the read-only chat admin and deletion through the store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.urls import reverse

from deuz_transcripts import ChatRecord
from deuz_transcripts.models import Chat, ChatScope, Message, Tombstone
from deuz_transcripts.stores import DjangoConditionalChatStore
from deuz_transcripts.verify import Verifier

pytestmark = pytest.mark.django_db

SEARCH = "admin:deuz_transcripts_search"
BASE = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def record(
    chat_id: str, messages: list[dict[str, Any]], user: str = "ada", n: int = 0
) -> ChatRecord:
    return ChatRecord(
        chat_id=chat_id,
        scope={"userId": user},
        messages=messages,
        updated_at=BASE + timedelta(minutes=n),
    )


def write(*records: ChatRecord) -> None:
    store = DjangoConditionalChatStore()
    for item in records:
        store.write_chat(item, expected_revision=0)


def izmir_chat(chat_id: str = "trip", user: str = "ada") -> ChatRecord:
    return record(
        chat_id,
        [
            {"role": "system", "content": "You are a travel agent. izmir is secret."},
            {"role": "user", "content": "Which city is warm in May?"},
            {"role": "assistant", "content": "Try the Aegean coast."},
            {"role": "user", "content": "Book the flight to İzmir."},
            {
                "role": "assistant",
                "content": [
                    {"type": "reasoning", "text": "izmir airport is ADB"},
                    {
                        "type": "tool-call",
                        "toolCallId": "c1",
                        "toolName": "book",
                        "input": {"to": "izmir"},
                    },
                    {"type": "text", "text": "Booked."},
                ],
            },
            {"role": "user", "content": [{"type": "image", "image": "https://example.com/x.png"}]},
        ],
        user=user,
    )


@pytest.fixture(autouse=True)
def _fast_passwords(settings: Any) -> None:
    """The default hasher costs a second per user; these tests create many users."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def support(django_user_model: Any) -> Any:
    """Staff with only the app's search permission."""
    user = django_user_model.objects.create_user("support", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="search_transcripts"))
    return user


@pytest.fixture
def support_client(client: Any, support: Any) -> Any:
    client.force_login(support)
    return client


def search(client: Any, **params: Any) -> Any:
    return client.get(reverse(SEARCH), params)


# access


def test_url_name_and_anonymous_is_sent_to_login(client: Any) -> None:
    assert reverse(SEARCH) == "/admin/deuz_transcripts/chat/search/"
    response = search(client, q="izmir", scope="userId=ada")
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


def test_staff_without_the_permission_gets_403(client: Any, django_user_model: Any) -> None:
    user = django_user_model.objects.create_user("clerk", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_chat"))
    client.force_login(user)
    assert search(client, q="izmir", scope="userId=ada").status_code == 403


def test_non_staff_with_the_permission_is_not_let_in(client: Any, django_user_model: Any) -> None:
    user = django_user_model.objects.create_user("outsider", password="pw")
    user.user_permissions.add(Permission.objects.get(codename="search_transcripts"))
    client.force_login(user)
    assert search(client, q="izmir", scope="userId=ada").status_code == 302


def test_form_without_parameters_shows_backend_and_scope_rule(support_client: Any) -> None:
    response = search(support_client)
    assert response.status_code == 200
    html = response.content.decode()
    assert f'<code id="search-backend">{response.context["backend_name"]}</code>' in html
    assert "Only superusers may search every chat" in html
    assert response.context["rows"] == []


# results


def test_hit_is_highlighted_with_around_context_and_chat_link(support_client: Any) -> None:
    write(izmir_chat(), izmir_chat("other-user", user="bob"))
    response = search(support_client, q="IZMIR", scope="userId=ada", around=1)
    assert response.status_code == 200
    rows = response.context["rows"]
    assert [(row.hit.chat_id, row.hit.index) for row in rows] == [("trip", 3)]
    html = response.content.decode()
    assert "Book the flight to <mark>İzmir</mark>." in html
    assert "Try the Aegean coast." in html  # around, before
    assert "Booked." in html  # around, after (its reasoning is not indexed text)
    assert "izmir airport" not in html and "travel agent" not in html
    chat = Chat.objects.get(chat_id="trip")
    link = (
        reverse("admin:deuz_transcripts_chat_change", args=[chat.pk])
        + "?scope=userId%3Dada#message-3"
    )
    assert f'href="{link}"' in html
    assert "score 1.000" in html


def test_empty_scope_is_for_superusers_only(support_client: Any, admin_client: Any) -> None:
    write(izmir_chat(), izmir_chat("other-user", user="bob"))
    response = search(support_client, q="izmir", scope="")
    assert response.context["form"].errors["scope"]
    assert response.context["rows"] == []
    response = search(admin_client, q="izmir", scope="")
    assert {row.hit.chat_id for row in response.context["rows"]} == {"trip", "other-user"}
    assert "Leave empty to search every chat (superusers only)" in response.content.decode()


def test_messages_and_queries_are_escaped(support_client: Any) -> None:
    write(
        record(
            "xss",
            [
                {
                    "role": "user",
                    "content": '<script>alert("izmir")</script><img src=x onerror=1> izmir',
                }
            ],
        )
    )
    response = search(support_client, q='<b>izmir</b>"', scope="userId=ada")
    html = response.content.decode()
    assert len(response.context["rows"]) == 1
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(&quot;<mark>izmir</mark>&quot;)&lt;/script&gt;" in html
    assert 'value="&lt;b&gt;izmir&lt;/b&gt;&quot;"' in html


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"q": "izmir", "scope": "userId"}, "scope"),
        ({"q": "izmir", "scope": "=ada"}, "scope"),
        ({"q": "izmir", "scope": "userId=ada,,x=y"}, "scope"),
        ({"q": "izmir", "scope": "userId=a,userId=b"}, "scope"),
        ({"q": "izmir", "scope": "k=" + "v" * 300}, "scope"),
        ({"q": "izmir", "scope": "userId=ada", "around": "x"}, "around"),
        ({"q": "izmir", "scope": "userId=ada", "around": "11"}, "around"),
        ({"q": "izmir", "scope": "userId=ada", "around": "-1"}, "around"),
        ({"q": "izmir", "scope": "userId=ada", "page": "0"}, "page"),
        ({"q": "izmir", "scope": "userId=ada", "page": "abc"}, "page"),
        ({"q": "izmir", "scope": "userId=ada", "page": "9" * 30}, "page"),
        ({"q": "izmir " * 20_000, "scope": "userId=ada"}, "q"),
        ({"q": "izmir\x00", "scope": "userId=ada"}, "q"),
        ({"q": "izmir", "scope": "userId=a\x00da"}, "scope"),
    ],
)
def test_bad_parameters_are_form_errors(support_client: Any, params: dict, field: str) -> None:
    write(izmir_chat())
    response = search(support_client, **params)
    assert response.status_code == 200
    assert field in response.context["form"].errors
    assert response.context["rows"] == []


def test_a_link_may_fill_in_the_scope(support_client: Any) -> None:
    response = search(support_client, scope="userId=ada")
    assert response.context["form"].is_bound is False
    assert 'value="userId=ada"' in response.content.decode()
    assert response.context["notice"] == ""


def test_empty_query_and_query_without_terms_say_so(support_client: Any) -> None:
    write(izmir_chat())
    assert "Enter a query" in search(support_client, q="  ", scope="userId=ada").content.decode()
    response = search(support_client, q="!!! ...", scope="userId=ada")
    assert "no words to search for" in response.content.decode()
    response = search(support_client, q="zanzibar", scope="userId=ada")
    assert "No message matches" in response.content.decode()


def test_pages(support_client: Any, settings: Any) -> None:
    settings.DEUZ_TRANSCRIPTS = {**settings.DEUZ_TRANSCRIPTS, "ADMIN_PAGE_SIZE": 2}
    write(
        *(
            record(f"c{n}", [{"role": "user", "content": f"deploy number {n}"}], n=n)
            for n in range(5)
        )
    )
    first = search(support_client, q="deploy", scope="userId=ada")
    assert [row.hit.chat_id for row in first.context["rows"]] == ["c4", "c3"]
    assert first.context["previous_url"] is None
    assert "page=2" in first.context["next_url"]
    last = support_client.get(first.context["next_url"].replace("page=2", "page=3"))
    assert [row.hit.chat_id for row in last.context["rows"]] == ["c0"]
    assert last.context["next_url"] is None and "page=2" in last.context["previous_url"]
    beyond = search(support_client, q="deploy", scope="userId=ada", page=40)
    assert "past the last one" in beyond.content.decode()


@pytest.mark.skipif(connection.vendor != "sqlite", reason="the LIKE fallback is SQLite's")
def test_like_fallback_highlights_whole_words_holding_the_substring(
    support_client: Any, settings: Any
) -> None:
    write(izmir_chat())
    settings.DEUZ_TRANSCRIPTS = {**settings.DEUZ_TRANSCRIPTS, "SQLITE_BACKEND": "like"}
    response = search(support_client, q="zmi", scope="userId=ada")
    html = response.content.decode()
    assert response.context["backend_name"] == "sqlite-like"
    assert "Book the flight to <mark>İzmir</mark>." in html
    assert "matches parts of words" in html


def test_long_tool_log_is_shown_as_excerpts(support_client: Any) -> None:
    log = "\n".join(f"line {n} ok" for n in range(15_000)) + "\nline final readiness failed"
    write(
        record(
            "logs",
            [
                {
                    "role": "tool",
                    "content": [
                        {"type": "tool-result", "toolCallId": "c", "toolName": "t", "output": log}
                    ],
                }
            ],
        )
    )
    response = search(support_client, q="readiness", scope="userId=ada")
    html = response.content.decode()
    assert "<mark>readiness</mark>" in html
    assert len(html) < 20_000


# the app index and the chat admin


def test_app_index_links_the_search(support_client: Any) -> None:
    response = support_client.get(reverse("admin:app_list", args=["deuz_transcripts"]))
    assert response.status_code == 200
    assert f'href="{reverse(SEARCH)}"' in response.content.decode()


def test_changelist_columns_filters_and_search_link(admin_client: Any) -> None:
    write(izmir_chat())
    response = admin_client.get(reverse("admin:deuz_transcripts_chat_changelist"))
    html = response.content.decode()
    assert response.status_code == 200
    assert "userId=ada" in html and f'href="{reverse(SEARCH)}"' in html
    stored = admin_client.get(
        reverse("admin:deuz_transcripts_chat_changelist"), {"source": "stored"}
    )
    assert list(stored.context["cl"].result_list) == [Chat.objects.get()]
    only_indexed = admin_client.get(
        reverse("admin:deuz_transcripts_chat_changelist"), {"source": "indexed"}
    )
    assert list(only_indexed.context["cl"].result_list) == []


def test_changelist_search_box_uses_the_index(admin_client: Any, support_client: Any) -> None:
    write(izmir_chat(), record("plain", [{"role": "user", "content": "nothing here"}], n=1))
    url = reverse("admin:deuz_transcripts_chat_changelist")
    found = admin_client.get(url, {"q": "izmir"}).context["cl"].result_list
    assert [chat.chat_id for chat in found] == ["trip"]
    # words that are not indexed (system prompt, reasoning) are not found
    assert list(admin_client.get(url, {"q": "secret"}).context["cl"].result_list) == []
    exact = admin_client.get(url, {"q": "plain"}).context["cl"].result_list
    assert [chat.chat_id for chat in exact] == ["plain"]
    # staff without superuser rights cannot search every user's words here
    assert list(support_client.get(url, {"q": "izmir"}).context["cl"].result_list) == []
    assert len(support_client.get(url, {"q": "trip"}).context["cl"].result_list) == 1


def test_search_only_staff_cannot_browse_every_chat(admin_client: Any, support_client: Any) -> None:
    """Listing all chats would bypass the superuser-only rule for scope-less search."""
    write(izmir_chat(), izmir_chat("other-trip", user="bob"))
    url = reverse("admin:deuz_transcripts_chat_changelist")
    assert list(support_client.get(url).context["cl"].result_list) == []
    assert len(admin_client.get(url).context["cl"].result_list) == 2


def test_chat_page_is_read_only_and_marks_what_is_indexed(admin_client: Any) -> None:
    write(izmir_chat())
    chat = Chat.objects.get()
    url = reverse("admin:deuz_transcripts_chat_change", args=[chat.pk])
    response = admin_client.get(url)
    html = response.content.decode()
    assert response.status_code == 200
    rows = response.context["message_rows"]
    assert [row.index for row in rows] == list(range(6))
    assert [row.indexed for row in rows] == [False, True, True, True, True, False]
    assert rows[0].reason == "system message"
    assert [(p.kind, p.indexed, p.reason) for p in rows[4].parts] == [
        ("reasoning", False, "reasoning"),
        ("tool-call", False, "tool input"),
        ("text", True, ""),
    ]
    assert rows[5].parts[0].reason == "image"
    assert 'id="message-3"' in html and "trip:3" in html
    assert 'name="_save"' not in html
    assert admin_client.post(url, {"chat_id": "changed"}).status_code == 403
    assert admin_client.get(reverse("admin:deuz_transcripts_chat_add")).status_code == 403


def test_search_permission_may_read_a_chat_but_not_delete(support_client: Any) -> None:
    write(izmir_chat())
    chat = Chat.objects.get()
    assert (
        support_client.get(
            reverse("admin:deuz_transcripts_chat_change", args=[chat.pk]), {"scope": "userId=ada"}
        ).status_code
        == 200
    )
    assert (
        support_client.post(
            reverse("admin:deuz_transcripts_chat_delete", args=[chat.pk]), {"post": "yes"}
        ).status_code
        == 403
    )
    assert Chat.objects.filter(pk=chat.pk).exists()


def assert_deleted(chat_id: str) -> None:
    assert Tombstone.objects.filter(chat_id=chat_id).exists()
    assert not Chat.objects.filter(chat_id=chat_id).exists()
    assert not Message.objects.filter(chat__chat_id=chat_id).exists()
    assert not ChatScope.objects.filter(chat__chat_id=chat_id).exists()
    assert DjangoConditionalChatStore().load_chat(chat_id) is None
    assert DjangoConditionalChatStore().transcript.search({}, "izmir") == []


def test_delete_goes_through_the_store(admin_client: Any) -> None:
    write(izmir_chat())
    chat = Chat.objects.get()
    url = reverse("admin:deuz_transcripts_chat_delete", args=[chat.pk])
    confirm = admin_client.get(url)
    assert "a tombstone is kept" in confirm.content.decode()
    assert admin_client.post(url, {"post": "yes"}).status_code == 302
    assert_deleted("trip")
    assert Verifier().run().found == 0  # no search row left behind


def test_bulk_delete_action_goes_through_the_store(admin_client: Any) -> None:
    write(
        izmir_chat(), izmir_chat("second"), record("kept", [{"role": "user", "content": "izmir"}])
    )
    pks = list(Chat.objects.filter(chat_id__in=["trip", "second"]).values_list("pk", flat=True))
    response = admin_client.post(
        reverse("admin:deuz_transcripts_chat_changelist"),
        {"action": "delete_selected", "_selected_action": pks, "post": "yes"},
    )
    assert response.status_code == 302
    assert_deleted_ids = {"trip", "second"}
    assert set(Tombstone.objects.values_list("chat_id", flat=True)) == assert_deleted_ids
    assert [hit.chat_id for hit in DjangoConditionalChatStore().transcript.search({}, "izmir")] == [
        "kept"
    ]
    assert Verifier().run().found == 0


def test_tombstone_admin_is_read_only(admin_client: Any) -> None:
    write(izmir_chat())
    DjangoConditionalChatStore().delete_chat("trip")
    tombstone = Tombstone.objects.get()
    assert (
        admin_client.get(reverse("admin:deuz_transcripts_tombstone_changelist")).status_code == 200
    )
    assert admin_client.get(reverse("admin:deuz_transcripts_tombstone_add")).status_code == 403
    delete = reverse("admin:deuz_transcripts_tombstone_delete", args=[tombstone.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403
    assert Tombstone.objects.exists()


def test_chat_page_escapes_message_text_and_parts(admin_client: Any) -> None:
    write(
        record(
            "xss",
            [
                {"role": "system", "content": "<script>sys()</script>"},
                {"role": "user", "content": "<b>bold</b>"},
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool-call",
                            "toolCallId": "c",
                            "toolName": "t",
                            "input": {"x": "<i>"},
                        }
                    ],
                },
                {"role": "user", "content": None},
            ],
        )
    )
    chat = Chat.objects.get()
    html = admin_client.get(reverse("admin:deuz_transcripts_chat_change", args=[chat.pk])).content
    html = html.decode()
    assert "<script>sys()" not in html and "&lt;script&gt;sys()&lt;/script&gt;" in html
    assert "<b>bold</b>" not in html and "&lt;b&gt;bold&lt;/b&gt;" in html
    assert "&quot;x&quot;: &quot;&lt;i&gt;&quot;" in html
    assert "content of an unknown shape" in html
