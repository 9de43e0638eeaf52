"""What the admin tests share: chats to write, the search URL, clients for each kind of user."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from deuz_transcripts import ChatRecord
from deuz_transcripts.stores import DjangoConditionalChatStore
from tests.factories import ChatRecordFactory

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


def chat(chat_id: str, user: str, text: str) -> ChatRecord:
    """A chat of ``user``'s holding one user message."""
    return ChatRecordFactory(chat_id=chat_id, user_id=user, texts=[text])


def search(client: Any, **params: Any) -> Any:
    return client.get(reverse(SEARCH), params)


USERS = ["anonymous", "inactive", "nonstaff_search", "staff", "staff_view", "support", "superuser"]


def make_client(kind: str, django_user_model: Any) -> Client:
    """A client logged in as a user of ``kind`` (one of ``USERS``), with its flags and permission."""
    client = Client()
    if kind == "anonymous":
        return client
    flags = {
        "inactive": dict(is_staff=True, is_superuser=True, is_active=False),
        "nonstaff_search": dict(is_staff=False),
        "staff": dict(is_staff=True),
        "staff_view": dict(is_staff=True),
        "support": dict(is_staff=True),
        "superuser": dict(is_staff=True, is_superuser=True),
    }[kind]
    user = django_user_model.objects.create_user(kind, password="pw", **flags)
    codename = {"nonstaff_search": "search_transcripts", "support": "search_transcripts"}
    codename["staff_view"] = "view_chat"
    if kind in codename:
        user.user_permissions.add(Permission.objects.get(codename=codename[kind]))
    client.force_login(user)
    return client
