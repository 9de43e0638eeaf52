"""What the soak writes: tenants, chat ids and messages whose words it can account for.

Every message holds one token of its own (``q`` and ten base-36 characters, one search
term) among common words, so a token names exactly one message of one write: finding it,
or not, says whether that write is searchable. A chat id starts with its tenant, so a hit
names the scope it came from.
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "BIG_TENANTS",
    "COMMON_WORDS",
    "ROLES",
    "SHARED_CHATS",
    "TOKEN_RE",
    "chat_tenant",
    "messages_with_tokens",
    "new_token",
    "pick_tenant",
    "scope_of",
    "tenants",
    "tokens_in",
]

TOKEN_RE = re.compile(r"\bq[0-9a-z]{10}\b")
_ALPHABET = string.ascii_lowercase + string.digits
COMMON_WORDS = [
    "invoice",
    "flight",
    "hotel",
    "deploy",
    "refund",
    "meeting",
    "report",
    "budget",
    "travel",
    "airport",
    "schedule",
    "contract",
    "review",
    "server",
    "backup",
    "release",
    "ticket",
    "payment",
    "customer",
    "order",
]
ROLES = ("user", "assistant", "tool")
#: Chats every writer and appender writes: revision conflicts are the rule there.
SHARED_CHATS = ("t001.shared.0", "t001.shared.1")
#: The tenants that get most of the writes (a few big ones among many small).
BIG_TENANTS = 3


def tenants(count: int) -> list[str]:
    return [f"t{number:03d}" for number in range(count)]


def pick_tenant(rng: random.Random, count: int) -> str:
    """Half the writes go to the few big tenants, the rest spread over every tenant."""
    if rng.random() < 0.5:
        return f"t{rng.randrange(min(BIG_TENANTS, count)):03d}"
    return f"t{rng.randrange(count):03d}"


def scope_of(tenant: str) -> dict[str, str]:
    return {"userId": tenant}


def chat_tenant(chat_id: str) -> str:
    return chat_id.split(".", 1)[0]


def new_token(rng: random.Random) -> str:
    return "q" + "".join(rng.choice(_ALPHABET) for _ in range(10))


def messages_with_tokens(rng: random.Random, count: int) -> tuple[list[dict[str, Any]], list[str]]:
    """``count`` messages, each holding one new token and a few common words."""
    messages: list[dict[str, Any]] = []
    tokens: list[str] = []
    for _ in range(count):
        token = new_token(rng)
        words = [*rng.sample(COMMON_WORDS, 3), token]
        rng.shuffle(words)
        messages.append({"role": rng.choice(ROLES), "content": " ".join(words)})
        tokens.append(token)
    return messages, tokens


def tokens_in(messages: Iterable[Mapping[str, Any]]) -> list[str]:
    """The soak tokens of stored messages, in message order."""
    found: list[str] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            found.extend(TOKEN_RE.findall(content))
    return found
