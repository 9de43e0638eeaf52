"""The read-only chat admin: changelist, chat page, deletion through the store, tombstones."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

import deuz_transcripts
from deuz_transcripts.admin_chat_page import MESSAGES_PER_PAGE
from deuz_transcripts.models import Chat, ChatScope, Message, Tombstone
from deuz_transcripts.stores import DjangoConditionalChatStore
from deuz_transcripts.verify import Verifier
from tests.admin_support import SEARCH, izmir_chat, record, write

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]


# changelist


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
    # staff without the view permission are sent to the transcript search
    assert support_client.get(url, {"q": "trip"})["Location"] == reverse(SEARCH)


# the chat page


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


# deleting


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


# the chat page opened from a hit


def test_a_hits_chat_page_marks_the_query_and_leads_back_to_the_results(
    support_client: Any, settings: Any
) -> None:
    settings.DEUZ_TRANSCRIPTS = {**settings.DEUZ_TRANSCRIPTS, "ADMIN_PAGE_SIZE": 1}
    write(izmir_chat(), record("later", [{"role": "user", "content": "izmir again"}], n=5))
    results = support_client.get(
        reverse(SEARCH), {"q": "IZMIR", "scope": "userId=ada", "around": 1, "page": 2}
    )
    [row] = results.context["rows"]
    assert row.hit.chat_id == "trip"
    page = support_client.get(row.chat_url)
    assert page.status_code == 200
    html = page.content.decode()
    assert "Book the flight to <mark>İzmir</mark>." in html
    assert html.count("<mark>") == 1  # reasoning, tool input and system prompt stay unmarked
    back = page.context["search_back_url"]
    assert 'id="back-to-results"' in html
    again = support_client.get(back)
    assert [r.hit.chat_id for r in again.context["rows"]] == ["trip"]
    assert again.context["page"] == 2 and again.context["form"].cleaned_data["around"] == 1


def test_the_chat_pager_keeps_the_search(admin_client: Any) -> None:
    messages = [{"role": "user", "content": f"deploy {n}"} for n in range(MESSAGES_PER_PAGE + 5)]
    write(record("long", messages))
    chat = Chat.objects.get(chat_id="long")
    url = reverse("admin:deuz_transcripts_chat_change", args=[chat.pk])
    html = admin_client.get(url, {"q": "deploy", "scope": "userId=ada"}).content.decode()
    assert "?q=deploy&amp;scope=userId%3Dada&amp;messages=2#messages" in html
    second = admin_client.get(url, {"q": "deploy", "scope": "userId=ada", "messages": 2})
    assert second.content.decode().count("<mark>deploy</mark>") == 5


def test_the_chat_page_marks_words_across_parts(admin_client: Any) -> None:
    parts = [
        {"type": "text", "text": "first izmir"},
        {"type": "reasoning", "text": "izmir thought"},
        {"type": "tool-result", "toolCallId": "c", "toolName": "t", "output": "izmir log"},
    ]
    write(record("parts", [{"role": "assistant", "content": parts}]))
    chat = Chat.objects.get(chat_id="parts")
    url = reverse("admin:deuz_transcripts_chat_change", args=[chat.pk])
    html = admin_client.get(url, {"q": "izmir"}).content.decode()
    assert "first <mark>izmir</mark>" in html and "<mark>izmir</mark> log" in html
    assert "izmir thought" in html  # reasoning: shown, never marked


def test_a_lone_surrogate_in_content_does_not_break_the_chat_page(
    admin_client: Any, support_client: Any
) -> None:
    planted = [
        {"role": "user", "content": "izmir \ud800 trip"},
        {"role": "assistant", "content": [{"type": "text\udfff", "text": "\udfff"}]},
        {"role": "user", "content": [{"type": "tool-call", "input": {"k\ud800": "\ud800"}}]},
        {"role": "system", "content": "\ud800"},
    ]
    write(record("planted", planted))
    chat = Chat.objects.get(chat_id="planted")
    url = reverse("admin:deuz_transcripts_chat_change", args=[chat.pk])
    for client, params in ((admin_client, {}), (support_client, {"scope": "userId=ada"})):
        response = client.get(url, {**params, "q": "izmir"})
        assert response.status_code == 200
        assert "<mark>izmir</mark> \ufffd trip" in response.content.decode()


# styles


def _custom_properties(block: str) -> dict[str, str]:
    return dict(re.findall(r"(--deuz-[\w-]+):\s*([^;]+);", block))


def test_own_colours_follow_the_admins_dark_mode() -> None:
    """The badges kept light colours (dark text on pale green) in dark mode."""
    css = Path(deuz_transcripts.__file__).parent / "static/deuz_transcripts/transcripts.css"
    text = css.read_text()
    light = _custom_properties(text.split('html[data-theme="light"], :root {')[1].split("}")[0])
    media = text.split("@media (prefers-color-scheme: dark) {")[1].split("}\n}")[0]
    dark = _custom_properties(text.split('html[data-theme="dark"] {')[1].split("}")[0])
    assert _custom_properties(media) == dark and set(dark) == set(light)
    assert all(dark[name] != light[name] for name in light)
    used = set(re.findall(r"var\((--deuz-[\w-]+)\)", text))
    assert used == set(light)
    # every other colour is the admin's own variable (its fallback only for old admins)
    rules = re.sub(r"--deuz-[\w-]+:\s*[^;]+;", "", text)
    assert re.findall(r"(?<!, )#[0-9a-fA-F]{3,6}\b", rules) == []
