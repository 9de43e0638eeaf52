"""Escaping in the admin: hostile text, ids, scopes, roles, parts and queries stay text.

Every page is checked against a chat built of XSS payloads in every position, and the
highlighting is checked to be structurally safe (only balanced ``<mark>`` tags added) for
any text and query.
"""

from __future__ import annotations

import html as html_lib
from html.parser import HTMLParser
from typing import Any

import pytest
from django.urls import reverse
from hypothesis import given, settings
from hypothesis import strategies as st

from deuz_transcripts import ChatRecord
from deuz_transcripts.highlight import highlighted_excerpt, highlighted_snippet, render_spans
from deuz_transcripts.models import Chat
from deuz_transcripts.spans import highlight_spans, match_spans, snippet
from tests.admin_support import SEARCH, make_client, record, search, write

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]


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


# hostile chats on every page


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
        "search-bad-filters": support.get(
            reverse(SEARCH),
            {
                "q": query,
                "scope": scope,
                "role": PAYLOADS[0],
                "other_roles": PAYLOADS[2],
                "updated_after": PAYLOADS[1],
                "updated_before": PAYLOADS[0],
                "cursor": PAYLOADS[2],
            },
        ),
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


# highlighting


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
        highlighted_excerpt(
            text, match_spans(text, terms, substring=substring), limit=20, context=5
        ),
    ):
        plain = rendered.replace("<mark>", "").replace("</mark>", "")
        assert "<" not in plain and ">" not in plain and '"' not in plain
        assert rendered.count("<mark>") == rendered.count("</mark>")
        assert "<mark><mark>" not in rendered
        if rendered is not None and len(text) <= 20:
            assert html_lib.unescape(plain) == text


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from([*PIECES, "\n", "\t  ", "\ud800", " izmir "]), st.text(max_size=4)
        ),
        max_size=40,
    ).map("".join),
    st.lists(st.sampled_from(["izmir", "1", "ss", "i", "x", "b"]), max_size=3),
    st.integers(1, 40),
)
def test_a_highlighted_snippet_is_safe_and_reads_as_the_plain_snippet(text, terms, width):
    """The admin's hit line: only balanced ``<mark>`` tags added, each around a match, and
    without them it is exactly ``spans.snippet`` (escaped)."""
    spans = match_spans(text, terms)
    rendered = highlighted_snippet(text, spans, width=width)
    plain = rendered.replace("<mark>", "").replace("</mark>", "")
    assert "<" not in plain and ">" not in plain and '"' not in plain
    assert rendered.count("<mark>") == rendered.count("</mark>")
    assert "<mark></mark>" not in rendered and "<mark><mark>" not in rendered
    assert html_lib.unescape(plain) == snippet(text, spans, width=width)
