"""Admin security: who may do what, CSRF on deletes, escaping everywhere, nothing private logged.

``tests/test_admin.py`` tests the admin's features; this module checks the whole
permission matrix, every page against hostile chat ids, scopes, ids, roles, parts and
queries, that deleting needs a CSRF token, that the highlighting is structurally safe
for any text and query, and that no message text reaches Django's logs or error pages
(with ``DEBUG = False``, the production default).
"""

from __future__ import annotations

import html as html_lib
import logging
from html.parser import HTMLParser
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse
from hypothesis import given, settings
from hypothesis import strategies as st

from deuz_transcripts import ChatRecord
from deuz_transcripts.highlight import highlighted_excerpt, render_spans
from deuz_transcripts.models import Chat, Message, Tombstone
from deuz_transcripts.stores import DjangoConditionalChatStore
from deuz_transcripts.text import highlight_spans

pytestmark = pytest.mark.django_db
SEARCH = "admin:deuz_transcripts_search"
SECRET = "zqprivateword"


@pytest.fixture(autouse=True)
def _fast_passwords(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def write(*records: ChatRecord) -> None:
    store = DjangoConditionalChatStore()
    for record in records:
        store.write_chat(record, expected_revision=0)


def chat(chat_id: str, user: str, text: str) -> ChatRecord:
    return ChatRecord(chat_id, {"userId": user}, [{"role": "user", "content": text}])


USERS = ["anonymous", "inactive", "nonstaff_search", "staff", "staff_view", "support", "superuser"]


def make_client(kind: str, django_user_model: Any) -> Client:
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


LOGIN = "login"
# page -> expected outcome per user kind, in USERS order
MATRIX = {
    "search": [LOGIN, LOGIN, LOGIN, 403, 403, 200, 200],
    "changelist": [LOGIN, LOGIN, LOGIN, 403, 200, 200, 200],
    "change": [LOGIN, LOGIN, LOGIN, 403, 200, 200, 200],
    "delete_get": [LOGIN, LOGIN, LOGIN, 403, 403, 403, 200],
    "delete_post": [LOGIN, LOGIN, LOGIN, 403, 403, 403, 302],
    "action_post": [LOGIN, LOGIN, LOGIN, 403, 200, 200, 302],  # 200: no such action
    "add": [LOGIN, LOGIN, LOGIN, 403, 403, 403, 403],
    "tombstones": [LOGIN, LOGIN, LOGIN, 403, 403, 403, 200],
}


def request_page(client: Client, page: str, pk: int) -> Any:
    change = reverse("admin:deuz_transcripts_chat_change", args=[pk])
    delete = reverse("admin:deuz_transcripts_chat_delete", args=[pk])
    changelist = reverse("admin:deuz_transcripts_chat_changelist")
    if page == "search":
        return client.get(reverse(SEARCH), {"q": "hello", "scope": "userId=ada"})
    if page == "changelist":
        return client.get(changelist)
    if page == "change":  # as a search hit links it: naming the scope searched
        return client.get(change, {"scope": "userId=ada"})
    if page == "delete_get":
        return client.get(delete)
    if page == "delete_post":
        return client.post(delete, {"post": "yes"})
    if page == "action_post":
        return client.post(
            changelist,
            {"action": "delete_selected", "_selected_action": [pk], "post": "yes"},
        )
    if page == "add":
        return client.get(reverse("admin:deuz_transcripts_chat_add"))
    return client.get(reverse("admin:deuz_transcripts_tombstone_changelist"))


@pytest.mark.parametrize("page", MATRIX)
@pytest.mark.parametrize("kind", USERS)
def test_permission_matrix(kind, page, django_user_model):
    """Anonymous, inactive and non-staff users reach only the login page; others as listed."""
    write(chat("c1", "ada", "hello there"))
    pk = Chat.objects.get(chat_id="c1").pk
    client = make_client(kind, django_user_model)
    response = request_page(client, page, pk)
    expected = MATRIX[page][USERS.index(kind)]
    if expected == LOGIN:
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("admin:login"))
    else:
        assert response.status_code == expected
    deleted = not DjangoConditionalChatStore().load_chat("c1")
    assert deleted == (expected == 302)
    if deleted:  # through the store: a tombstone, no message or search row
        assert Tombstone.objects.filter(chat_id="c1").exists()
        assert not Message.objects.exists()
        assert DjangoConditionalChatStore().transcript.search({}, "hello") == []


def test_empty_scope_is_refused_to_staff_and_no_other_scope_leaks(django_user_model):
    write(chat("ada-chat", "ada", f"hello {SECRET}"), chat("bob-chat", "bob", f"hello {SECRET}"))
    support = make_client("support", django_user_model)
    for scope in ("", " ", ",", "userId=bob,"):
        response = support.get(reverse(SEARCH), {"q": SECRET, "scope": scope})
        assert response.status_code == 200
        assert response.context["rows"] == []
        assert SECRET not in _visible_hits(response)
    ada = support.get(reverse(SEARCH), {"q": SECRET, "scope": "userId=ada"})
    assert [row.hit.chat_id for row in ada.context["rows"]] == ["ada-chat"]
    superuser = make_client("superuser", django_user_model)
    everyone = superuser.get(reverse(SEARCH), {"q": SECRET, "scope": ""})
    assert sorted(row.hit.chat_id for row in everyone.context["rows"]) == ["ada-chat", "bob-chat"]


def _visible_hits(response: Any) -> str:
    page = response.content.decode()
    start = page.find('id="search-results"')
    return "" if start < 0 else page[start:]


def test_search_only_staff_cannot_read_chats_by_guessing_their_pk(django_user_model):
    write(chat("bob-chat", "bob", f"hello {SECRET}"))
    support = make_client("support", django_user_model)
    url = reverse("admin:deuz_transcripts_chat_change", args=[Chat.objects.get().pk])
    for scope in (None, "", "userId=ada", "userId", "userId=bob,x=y"):
        response = support.get(url, {} if scope is None else {"scope": scope})
        assert response.status_code == 403
        assert SECRET not in response.content.decode()
    # within the scope they searched (the hit's link names it), they may read it
    assert SECRET in support.get(url, {"scope": "userId=bob"}).content.decode()


# ---------------------------------------------------------------- CSRF


def test_deleting_needs_a_csrf_token(django_user_model):
    write(chat("c1", "ada", "hello"), chat("c2", "ada", "hello"))
    user = django_user_model.objects.create_superuser("root", password="pw")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    changelist = reverse("admin:deuz_transcripts_chat_changelist")
    pk = Chat.objects.get(chat_id="c1").pk
    action = {"action": "delete_selected", "_selected_action": [pk], "post": "yes"}
    delete = reverse("admin:deuz_transcripts_chat_delete", args=[pk])

    assert client.post(changelist, action).status_code == 403
    assert client.post(delete, {"post": "yes"}).status_code == 403
    assert (
        client.post(delete, {"post": "yes", "csrfmiddlewaretoken": "forged" * 8}).status_code == 403
    )
    assert Chat.objects.count() == 2 and not Tombstone.objects.exists()

    client.get(changelist)  # sets the CSRF cookie, as a browser visiting the page would
    token = client.cookies["csrftoken"].value
    response = client.post(changelist, {**action, "csrfmiddlewaretoken": token})
    assert response.status_code == 302
    assert list(Tombstone.objects.values_list("chat_id", flat=True)) == ["c1"]
    assert DjangoConditionalChatStore().transcript.search({}, "hello", limit=5)[0].chat_id == "c2"


# ---------------------------------------------------------------- XSS

MARK = "xss7f3a"
PAYLOADS = [
    f'<script>alert("{MARK}")</script>',
    f"<img src=x onerror=alert('{MARK}')>",
    f'" onmouseover="alert({MARK})" x="',
    f"'><svg/onload=alert({MARK})>",
    f"javascript:alert({MARK})",
]
SCOPE_PAYLOAD = f"<b>{MARK}</b>'\"<i>"  # no "," or "=": it must fit the scope field


def hostile_chat() -> ChatRecord:
    text = " izmir ".join(PAYLOADS)
    return ChatRecord(
        f"<script>{MARK}</script>",
        {f"<k>{MARK}": SCOPE_PAYLOAD},
        [
            {"role": "system", "content": f"system {text}"},
            {"role": "user", "content": f"before {text}"},
            {"role": f"<u>{MARK}</u>", "content": [{"type": "text", "text": f"izmir {text}"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "reasoning", "text": text},
                    {
                        "type": "tool-call",
                        "toolCallId": "c",
                        "toolName": text,
                        "input": {"q": text},
                    },
                    {"type": "image", "image": PAYLOADS[4]},
                ],
            },
            {
                "role": "tool",
                "content": [
                    {
                        "type": "tool-result",
                        "toolCallId": "c",
                        "toolName": "t",
                        "output": f"izmir {text}",
                    },
                    {
                        "type": "tool-result",
                        "toolCallId": "c",
                        "toolName": "t",
                        "output": {"type": "text", "value": f"log {text}"},
                    },
                    {
                        "type": "tool-result",
                        "toolCallId": "c",
                        "toolName": "t",
                        "output": {"type": "json", "value": {"html": text}},
                    },
                ],
            },
            {"role": "user", "content": f"after {text}"},
        ],
        message_ids=[None, f"<i>{MARK}</i>", f'"{MARK}', None, None, None],
    )


class Tags(HTMLParser):
    """Every start tag with its attributes, and the text inside ``<script>`` elements."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.script_text: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.script_text.append(data)


def assert_escaped(page: str) -> None:
    """No payload became markup: no tag, attribute, handler or script of its own."""
    for payload in [*PAYLOADS[:4], SCOPE_PAYLOAD, f"<script>{MARK}", f"<u>{MARK}", f"<i>{MARK}"]:
        assert payload not in page, payload
    parser = Tags()
    parser.feed(page)
    for tag, attrs in parser.tags:
        assert tag not in ("img", "svg", "u", "k") or MARK not in str(attrs), (tag, attrs)
        for name, value in attrs:
            assert not name.startswith("on"), (tag, name, value)
            if name in ("href", "src", "action"):
                assert not (value or "").strip().lower().startswith("javascript:"), value
    assert not any(MARK in text for text in parser.script_text)


def test_every_page_escapes_hostile_text_ids_scopes_and_queries(django_user_model):
    write(hostile_chat())
    pk = Chat.objects.get().pk
    superuser = make_client("superuser", django_user_model)
    support = make_client("support", django_user_model)
    scope = f"<k>{MARK}={SCOPE_PAYLOAD}"
    query = f"izmir {PAYLOADS[0]} {PAYLOADS[2]}"
    pages = {
        "search": support.get(reverse(SEARCH), {"q": query, "scope": scope, "around": 2}),
        "search-all": superuser.get(reverse(SEARCH), {"q": query, "scope": ""}),
        "search-bad-scope": support.get(reverse(SEARCH), {"q": query, "scope": PAYLOADS[1]}),
        "changelist": superuser.get(reverse("admin:deuz_transcripts_chat_changelist")),
        "changelist-search": superuser.get(
            reverse("admin:deuz_transcripts_chat_changelist"), {"q": query}
        ),
        "change": support.get(
            reverse("admin:deuz_transcripts_chat_change", args=[pk]), {"scope": scope}
        ),
        "delete": superuser.get(reverse("admin:deuz_transcripts_chat_delete", args=[pk])),
    }
    for name, response in pages.items():
        assert response.status_code == 200, name
        assert_escaped(response.content.decode())
    search_page = pages["search"].content.decode()
    assert len(pages["search"].context["rows"]) >= 3  # the hostile messages were shown
    assert "<mark>izmir</mark>" in search_page
    assert html_lib.escape(PAYLOADS[0]) in search_page
    assert html_lib.escape(SCOPE_PAYLOAD, quote=True) in pages["change"].content.decode()

    superuser.post(reverse("admin:deuz_transcripts_chat_delete", args=[pk]), {"post": "yes"})
    tombstones = superuser.get(reverse("admin:deuz_transcripts_tombstone_changelist"))
    assert_escaped(tombstones.content.decode())
    assert html_lib.escape(f"<script>{MARK}</script>") in tombstones.content.decode()


PIECES = ["izmir", "İZMİR", "<b>", "</b>", "&amp;", '"', "'", "¼", "ß", "ss", " ", "x<y", "\u0301"]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=3)), max_size=15).map("".join),
    st.lists(st.sampled_from(["izmir", "1", "4", "ss", "i", "<b>", "&amp;", "x"]), max_size=4),
    st.booleans(),
)
def test_highlighting_is_structurally_safe_for_any_text_and_query(text, terms, substring):
    """Only ``<mark>`` tags are added, balanced, and the text reads back exactly."""
    for rendered in (
        render_spans(text, highlight_spans(text, terms, substring=substring)),
        highlighted_excerpt(text, terms, substring=substring, limit=20, context=5),
    ):
        plain = rendered.replace("<mark>", "").replace("</mark>", "")
        assert "<" not in plain and ">" not in plain and '"' not in plain
        assert rendered.count("<mark>") == rendered.count("</mark>")
        assert "<mark><mark>" not in rendered
        if rendered is not None and len(text) <= 20:
            assert html_lib.unescape(plain) == text


# ---------------------------------------------------------------- logs and error pages


class Boom(Exception):
    pass


def test_no_message_text_or_query_in_logs_or_error_pages(django_user_model, caplog, monkeypatch):
    caplog.set_level(logging.DEBUG)  # every logger, every level
    write(chat("c1", "ada", f"hello {SECRET}"), chat("c2", "bob", f"bye {SECRET}"))
    pk = Chat.objects.get(chat_id="c1").pk
    superuser = make_client("superuser", django_user_model)
    staff = make_client("staff", django_user_model)
    anonymous = make_client("anonymous", django_user_model)
    responses = [
        superuser.get(reverse(SEARCH), {"q": SECRET, "scope": "userId=ada", "around": 1}),
        superuser.get(reverse("admin:deuz_transcripts_chat_changelist"), {"q": SECRET}),
        superuser.get(reverse("admin:deuz_transcripts_chat_change", args=[pk])),
        staff.get(reverse(SEARCH), {"q": SECRET, "scope": "userId=ada"}),  # 403
        anonymous.get(reverse(SEARCH), {"q": SECRET, "scope": "userId=ada"}),  # to login
        superuser.get(reverse("admin:deuz_transcripts_chat_change", args=[pk + 999])),  # gone
        superuser.get("/no/such/page/", {"q": SECRET}),  # 404
        superuser.post(reverse("admin:deuz_transcripts_chat_delete", args=[pk]), {"post": "yes"}),
    ]
    monkeypatch.setattr(
        "deuz_transcripts.sql.index.DjangoTranscriptIndex.search",
        lambda *args, **kwargs: (_ for _ in ()).throw(Boom("search failed")),
    )
    failing = Client(raise_request_exception=False)
    failing.force_login(django_user_model.objects.get(username="superuser"))
    error = failing.get(reverse(SEARCH), {"q": SECRET, "scope": "userId=bob"})
    assert error.status_code == 500
    assert [r.status_code for r in responses[:5]] == [200, 200, 200, 403, 302]
    for response in [*responses[3:], error]:  # pages that are not the search's own results
        assert SECRET not in response.content.decode()
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    logged = "\n".join(formatter.format(record) for record in caplog.records)
    assert "Internal Server Error" in logged  # the failure was logged...
    assert SECRET not in logged  # ...without the query or any message text
