"""Hypothesis strategies for hostile input: all of Unicode, any JSON, any message shape.

``unicode_text`` draws every code point (lone surrogates, NUL, controls, private use, astral
planes), biased towards the characters folding and query parsing care about;
``messages()`` any message (random roles, part types and arbitrary JSON in every
position, NaN and infinities included); ``chat_drafts(number)`` the SDK's JSON for a chat,
which a ``ChatRecord`` may refuse.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from deuz_transcripts import ChatRecord

# Every code point, surrogates and controls included, biased towards the tricky ones.
any_char = st.characters(codec=None, exclude_categories=())
tricky_char = st.sampled_from(
    list(
        "aZ09 _-'\"%*:!\\\x00\x01\x7f\u0085\u00a0İıßẞﬁ½σςΣ東京😀\u0301\u200b\u200d\u202e\ue000\ud800\udfff"
    )
)
unicode_text = st.text(st.one_of(tricky_char, any_char), max_size=40)
tricky_words = st.text(st.sampled_from(list("abcİıßé東")), min_size=1, max_size=5)
wordy_text = st.lists(st.one_of(tricky_words, unicode_text), max_size=6).map(" ".join)

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),  # NaN and infinities: not JSON, must be InvalidRecord
    unicode_text,
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(unicode_text, inner, max_size=3)
    ),
    max_leaves=8,
)
part_types = st.sampled_from(
    [
        "text",
        "reasoning",
        "tool-call",
        "tool-result",
        "tool_result",
        "tool_use",
        "thinking",
        "image",
        "image_url",
        "file",
        "json",
        "error-text",
        "",
        "TEXT",
    ]
)


@st.composite
def parts(draw: st.DrawFn) -> dict[str, Any]:
    part: dict[str, Any] = {"type": draw(part_types)}
    for key in draw(st.sets(st.sampled_from(["text", "output", "content", "value", "input"]))):
        part[key] = draw(
            st.one_of(
                wordy_text,
                json_values,
                st.builds(
                    lambda kind, value: {"type": kind, "value": value},
                    st.sampled_from(["text", "error-text", "json"]),
                    st.one_of(wordy_text, json_values),
                ),
            )
        )
    return part


@st.composite
def messages(draw: st.DrawFn) -> dict[str, Any]:
    role = draw(
        st.one_of(
            st.sampled_from(["user", "assistant", "tool", "system", "developer"]),
            st.text(any_char, min_size=1, max_size=8),
        )
    )
    content = draw(st.one_of(wordy_text, st.lists(parts(), max_size=4), json_values))
    message = {"role": role, "content": content}
    message.update(
        draw(st.dictionaries(st.sampled_from(["name", "tool_calls", "x"]), json_values, max_size=2))
    )
    return message


ids = st.one_of(
    st.none(), st.just(""), st.sampled_from(["m", "m", "dup"]), st.text(any_char, max_size=12)
)


@st.composite
def chat_drafts(draw: st.DrawFn, number: int) -> ChatRecord | dict[str, Any]:
    """A ChatRecord, or the JSON a ChatRecord would refuse (an expected InvalidRecord)."""
    body = draw(st.lists(messages(), min_size=0, max_size=5))
    data = {
        "chatId": f"{draw(st.sampled_from(['a', 'B', 'é', '𝔸', 'chat']))}{number}",
        "scope": draw(
            st.dictionaries(
                st.sampled_from(["userId", "agentId"]),
                st.sampled_from(["ada", "Ada", "bob"]),
                max_size=2,
            )
        ),
        "messages": body,
        "messageIds": draw(
            st.one_of(st.none(), st.lists(ids, min_size=len(body), max_size=len(body)))
        ),
        "updatedAt": draw(st.integers(0, 3)) * 60_000 + 1_700_000_000_000,
    }
    return data
