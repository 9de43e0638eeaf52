"""What the contract's sections share: scopes, times, record and message builders, shapes.

``chat()`` builds a record whose plain-string messages alternate user/assistant;
``INDEXED_SHAPES`` and ``UNKNOWN_SHAPES`` are the message shapes of SPEC section 3 (and the
OpenAI and Anthropic ones), ``HOSTILE`` the queries that must stay plain text.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import pytest

from deuz_transcripts import ChatRecord, MemorySourceRef, TranscriptHit
from tests.factories import (
    ChatRecordFactory,
    MessageFactory,
    file_part,
    image_part,
    reasoning_part,
    text_part,
    tool_call_part,
    tool_result_part,
)

ADA = {"userId": "ada"}
BOB = {"userId": "bob"}
T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
DIGEST = "sha256:" + "0" * 64
LIMIT = 262_144  # bytes of folded UTF-8 text indexed per message


class IndexFailure(Exception):
    """What a deliberately broken index raises in the rollback tests."""


def idf(total: int, matching: int) -> float:
    """SPEC section 4, written out independently of ``deuz_transcripts.ranking``."""
    return math.log(1 + (total - matching + 0.5) / (matching + 0.5))


def ids(hits: list[TranscriptHit]) -> list[str]:
    return [hit.message_id for hit in hits]


def keys(hits: list[TranscriptHit]) -> list[tuple[str, int]]:
    return [(hit.chat_id, hit.index) for hit in hits]


def user(text: str) -> dict[str, Any]:
    return MessageFactory(text=text)


def assistant(text: str) -> dict[str, Any]:
    return MessageFactory(text=text, assistant=True)


def system(text: str) -> dict[str, Any]:
    return MessageFactory(text=text, system=True)


def image_only() -> dict[str, Any]:
    return {"role": "user", "content": [image_part()]}


def chat(
    chat_id: str,
    *messages: str | dict[str, Any],
    scope: dict[str, str] | None = None,
    message_ids: list[str | None] | None = None,
    updated_at: datetime = T0,
) -> ChatRecord:
    """A record; plain strings become user/assistant messages by position."""
    built = [
        m if isinstance(m, dict) else (assistant(m) if i % 2 else user(m))
        for i, m in enumerate(messages)
    ]
    return ChatRecordFactory(
        chat_id=chat_id,
        scope=dict(ADA if scope is None else scope),
        messages=built,
        message_ids=message_ids,
        updated_at=updated_at,
    )


def filler(nbytes: int) -> str:
    """ASCII words of exactly ``nbytes`` bytes, ending with a space."""
    return ("pad " * (nbytes // 4 + 1))[: nbytes - 1] + " "


def ref(chat_id: str, message_id: str, digest: str = DIGEST) -> MemorySourceRef:
    return MemorySourceRef(kind="user", chat_id=chat_id, message_id=message_id, digest=digest)


# What SPEC section 3 indexes: (message, word, indexed?).
INDEXED_SHAPES = [
    pytest.param(user("plainword"), "plainword", True, id="string-content"),
    pytest.param(
        {"role": "user", "content": [text_part("partword")]}, "partword", True, id="text-part"
    ),
    pytest.param(
        {"role": "assistant", "content": [text_part("firstpart"), text_part("secondpart")]},
        "secondpart",
        True,
        id="second-text-part",
    ),
    pytest.param(
        {"role": "assistant", "content": [reasoning_part("reasonword")]},
        "reasonword",
        False,
        id="reasoning-part",
    ),
    pytest.param(
        {"role": "assistant", "content": [tool_call_part({"query": "inputword"})]},
        "inputword",
        False,
        id="tool-call-input",
    ),
    pytest.param(
        {"role": "assistant", "content": [tool_call_part({}, tool_name="toolnameword")]},
        "toolnameword",
        False,
        id="tool-call-name",
    ),
    pytest.param(
        {"role": "tool", "content": [tool_result_part("resultword")]},
        "resultword",
        True,
        id="tool-result-string",
    ),
    pytest.param(
        {"role": "tool", "content": [tool_result_part({"type": "text", "value": "valueword"})]},
        "valueword",
        True,
        id="tool-result-text-value",
    ),
    pytest.param(
        {
            "role": "tool",
            "content": [tool_result_part({"type": "json", "value": {"k": "jsonword"}})],
        },
        "jsonword",
        False,
        id="tool-result-json",
    ),
    pytest.param(
        {"role": "tool", "content": [tool_result_part({"type": "json", "value": "jsonstring"})]},
        "jsonstring",
        False,
        id="tool-result-json-string",
    ),
    pytest.param(
        {"role": "user", "content": [image_part("https://example.com/imageword.png")]},
        "imageword",
        False,
        id="image-part",
    ),
    pytest.param(
        {"role": "user", "content": [file_part("fileword")]}, "fileword", False, id="file-part"
    ),
    pytest.param(system("systemword"), "systemword", False, id="system-string"),
    pytest.param(
        {"role": "system", "content": [text_part("systempartword")]},
        "systempartword",
        False,
        id="system-text-part",
    ),
    # OpenAI chat-completions shapes.
    pytest.param(
        {"role": "tool", "tool_call_id": "call-1", "content": "openairesult"},
        "openairesult",
        True,
        id="openai-tool-role",
    ),
    pytest.param(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call-1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"q": "openaiargs"}'},
                }
            ],
        },
        "openaiargs",
        False,
        id="openai-tool-calls",
    ),
    pytest.param(
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "openaitext"},
                {"type": "image_url", "image_url": {"url": "https://x.test/openaiimage.png"}},
            ],
        },
        "openaitext",
        True,
        id="openai-text-part",
    ),
    pytest.param(
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": "https://x.test/openaiimage.png"}}
            ],
        },
        "openaiimage",
        False,
        id="openai-image-url",
    ),
    # Anthropic messages shapes.
    pytest.param(
        {
            "role": "assistant",
            "content": [{"type": "thinking", "thinking": "thinkword", "signature": "sig"}],
        },
        "thinkword",
        False,
        id="anthropic-thinking",
    ),
    pytest.param(
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "tu-1", "name": "lookup", "input": {"q": "usageword"}}
            ],
        },
        "usageword",
        False,
        id="anthropic-tool-use",
    ),
    pytest.param(
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "tu-1", "content": "anthroresult"}],
        },
        "anthroresult",
        True,
        id="anthropic-tool-result-string",
    ),
    pytest.param(
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "tu-1",
                    "content": [{"type": "text", "text": "anthroblock"}],
                }
            ],
        },
        "anthroblock",
        True,
        id="anthropic-tool-result-blocks",
    ),
    pytest.param(
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hidden", "signature": "sig"},
                {"type": "text", "text": "anthrotext"},
            ],
        },
        "anthrotext",
        True,
        id="anthropic-text-after-thinking",
    ),
]

UNKNOWN_SHAPES = [
    pytest.param({"role": "user", "content": {"weird": "shapeword"}}, id="mapping-content"),
    pytest.param({"role": "user", "content": 42}, id="number-content"),
    pytest.param({"role": "user", "content": None}, id="null-content"),
    pytest.param({"role": "user"}, id="no-content"),
    pytest.param({"role": "user", "content": [1, "shapeword", None, True]}, id="odd-list"),
    pytest.param(
        {"role": "user", "content": [{"type": "mystery", "text": "shapeword"}]},
        id="unknown-part-type",
    ),
    pytest.param(
        {"role": "narrator", "content": {"text": "shapeword"}, "extra": [1, {"a": None}]},
        id="unknown-role-extra-keys",
    ),
]

HOSTILE = [
    '"',
    "NEAR(",
    "*",
    ":*",
    "!",
    "'",
    "\\",
    "%",
    "_",
    "--",
    "/* */",
    "\x00",
    "OR",
    "AND NOT",
    "^",
    "-",
    "+",
    "( )",
    "{ }",
    ":",
    ";",
    "' OR 1=1 --",
    "'); DROP TABLE deuz_transcripts_message; --",
    "&|!<->",
    "$1",
    "?",
    "\\x00",
]
