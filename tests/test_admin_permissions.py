"""Who may see and do what in the admin, and that nothing private leaks to anyone else.

Anonymous, inactive and non-staff users only reach the login page; staff need the app's
search permission to search (and may then read a chat within the scope they searched) or
Django's view permission to browse chats; only superusers may search every chat or
delete. The whole permission matrix is checked page by page, deleting needs a CSRF token,
and no message text or query reaches other scopes, guessed chat pages, Django's logs or
error pages (with ``DEBUG = False``, the production default).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from deuz_transcripts.models import Chat, Message, Tombstone
from deuz_transcripts.stores import DjangoConditionalChatStore
from tests.admin_support import SEARCH, USERS, chat, izmir_chat, make_client, search, write

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]

SECRET = "zqprivateword"


# access to the search


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


def test_search_only_staff_cannot_browse_every_chat(admin_client: Any, support_client: Any) -> None:
    """Listing all chats would bypass the superuser-only rule for scope-less search."""
    write(izmir_chat(), izmir_chat("other-trip", user="bob"))
    url = reverse("admin:deuz_transcripts_chat_changelist")
    response = support_client.get(url)
    assert response.status_code == 302 and response["Location"] == reverse(SEARCH)
    assert len(admin_client.get(url).context["cl"].result_list) == 2


def test_search_only_staff_cannot_learn_a_scope_from_a_chat_id(
    support_client: Any, django_user_model: Any
) -> None:
    """Without the view permission a chat's scope is shown only to whoever named it: typing
    an exact chat id in the list's search box showed its row, scope and link."""
    write(izmir_chat(), izmir_chat("other-trip", user="bob"))
    url = reverse("admin:deuz_transcripts_chat_changelist")
    for params in ({"q": "other-trip"}, {"q": "other-trip", "source": "stored"}):
        response = support_client.get(url, params)
        assert response.status_code == 302 and response["Location"] == reverse(SEARCH)
        assert "userId=bob" not in response.content.decode()
    posted = support_client.post(url + "?q=other-trip", {"action": "delete_selected"})
    assert posted.status_code == 302 and posted["Location"] == reverse(SEARCH)
    # Django's view permission lists chats and finds one by its exact id
    staff_view = make_client("staff_view", django_user_model)
    found = staff_view.get(url, {"q": "other-trip"}).context["cl"].result_list
    assert [chat.chat_id for chat in found] == ["other-trip"]


# the permission matrix


LOGIN = "login"
TO_SEARCH = "redirected to the search"
MATRIX = {
    "search": [LOGIN, LOGIN, LOGIN, 403, 403, 200, 200],
    "changelist": [LOGIN, LOGIN, LOGIN, 403, 200, TO_SEARCH, 200],
    "change": [LOGIN, LOGIN, LOGIN, 403, 200, 200, 200],
    "delete_get": [LOGIN, LOGIN, LOGIN, 403, 403, 403, 200],
    "delete_post": [LOGIN, LOGIN, LOGIN, 403, 403, 403, 302],
    "action_post": [LOGIN, LOGIN, LOGIN, 403, 200, TO_SEARCH, 302],  # 200: no such action
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
    elif expected == TO_SEARCH:
        assert response.status_code == 302 and response["Location"] == reverse(SEARCH)
    else:
        assert response.status_code == expected
    deleted = not DjangoConditionalChatStore().load_chat("c1")
    assert deleted == (expected == 302)
    if deleted:  # through the store: a tombstone, no message or search row
        assert Tombstone.objects.filter(chat_id="c1").exists()
        assert not Message.objects.exists()
        assert DjangoConditionalChatStore().transcript.search({}, "hello") == []


# other scopes


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


def test_a_refused_chat_page_says_why_with_a_403(django_user_model):
    """It was Django's bare "403 Forbidden"; it names the link's scope, never the chat's."""
    write(chat("bob-chat", "bob", f"hello {SECRET}"))
    support = make_client("support", django_user_model)
    url = reverse("admin:deuz_transcripts_chat_change", args=[Chat.objects.get().pk])
    outside = support.get(url, {"scope": "userId=ada"})
    assert outside.status_code == 403
    page = outside.content.decode()
    assert "This chat is not in the scope <code>userId=ada</code> that this link names." in page
    assert "only from a hit of a search whose scope the chat is in" in page
    assert f'href="{reverse(SEARCH)}?scope=userId%3Dada"' in page
    assert "bob" not in page and SECRET not in page
    unnamed = support.get(url)
    assert unnamed.status_code == 403 and "This link names no scope." in unnamed.content.decode()
    # a refused POST, and staff who may not search, keep Django's own 403
    assert support.post(url, {"scope": "userId=ada"}).status_code == 403
    clerk = make_client("staff", django_user_model)
    assert "This link names" not in clerk.get(url).content.decode()


# CSRF


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


# logs and error pages


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
        "deuz_transcripts.sql.index.DjangoTranscriptIndex.search_page",  # what the view runs
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
