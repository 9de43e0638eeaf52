"""What an FTS5 row holds and how a search asks for it.

The FTS5 body of a message is its stored terms, one token per scope field, one for
its chat and one for its role, all separated by spaces. Scope, chat and role tokens
(private-use prefix, never in a term) let FTS5 intersect the scope and the ``roles``
filter inside its own index instead of reading message rows. Every
token of a MATCH expression is quoted, so query text is never FTS5 syntax.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from ...text import stored_term, stored_terms_text
from ..chat_filter import ChatFilter

__all__ = [
    "CHAT_TOKEN_PREFIX",
    "HeldTerms",
    "chat_token",
    "fts_bodies",
    "fts_body",
    "holding_expression",
    "mask_expression",
    "match_expression",
    "phrase",
    "reaching_expression",
    "role_token",
    "scope_tokens",
    "token_expression",
    "word_condition",
]

_SCOPE_PREFIX = "\ue000"
_CHAT_PREFIX = "\ue002"
_ROLE_PREFIX = "\ue003"  # \ue001 is text.py's digest prefix
#: Every chat token starts with this (no term or scope token does).
CHAT_TOKEN_PREFIX = _CHAT_PREFIX


def _token(prefix: str, *parts: str) -> str:
    digest = hashlib.blake2b("\x00".join(parts).encode("utf-8"), digest_size=12).hexdigest()
    return prefix + digest


def scope_tokens(scope: Mapping[str, str]) -> list[str]:
    return [_token(_SCOPE_PREFIX, key, value) for key, value in sorted(scope.items())]


def chat_token(chat_id: str) -> str:
    return _token(_CHAT_PREFIX, chat_id)


@functools.lru_cache(maxsize=1_024)
def role_token(role: str) -> str:
    """Cached: a chat app has a handful of roles, and every written row names one."""
    return _token(_ROLE_PREFIX, role)


def fts_body(search_text: str, scope: Mapping[str, str], chat_id: str, role: str | None) -> str:
    """A message's FTS5 body (``role`` ``None``: the body before migration 0003)."""
    return fts_bodies(scope, chat_id, [(search_text, role)])[0]


def fts_bodies(
    scope: Mapping[str, str], chat_id: str, rows: Iterable[tuple[str, str | None]]
) -> list[str]:
    """``fts_body`` of each ``(search_text, role)`` of one chat; the chat's own tokens are
    made once."""
    chat_tokens = " ".join([*scope_tokens(scope), chat_token(chat_id)])
    return [
        f"{stored_terms_text(search_text)} {chat_tokens}"
        + ("" if role is None else f" {role_token(role)}")
        for search_text, role in rows
    ]


def phrase(token: str) -> str:
    return '"' + token.replace('"', '""') + '"'


def _any(tokens: Iterable[str]) -> str:
    return "(" + " OR ".join(phrase(token) for token in tokens) + ")"


def _filter_parts(chats: ChatFilter) -> list[str]:
    """``scope``, ``(chats)`` and ``(roles)`` (roles when the filter takes them from tokens)."""
    parts = [phrase(token) for token in scope_tokens(chats.scope)]
    if chats.chat_ids is not None:
        parts.append(_any(chat_token(chat_id) for chat_id in sorted(chats.chat_ids)))
    if chats.roles is not None and chats.role_tokens:
        parts.append(_any(role_token(role) for role in sorted(chats.roles)))
    return parts


def _scoped(chats: ChatFilter, expression: str) -> str:
    """``scope AND (chats) AND (roles) AND expression``."""
    return " AND ".join([*_filter_parts(chats), expression])


def token_expression(chats: ChatFilter) -> str:
    """``scope AND (chats) AND (roles)``: every row the filter's tokens admit (a filter
    with roles, so never empty)."""
    return " AND ".join(_filter_parts(chats))


def match_expression(chats: ChatFilter, terms: Sequence[str], *, every: bool = False) -> str:
    """``scope AND (chats) AND (t1 OR t2 ...)`` (``every``: ``t1 AND t2 ...``); every
    token quoted, so never syntax."""
    if every:
        return _scoped(chats, " AND ".join(phrase(stored_term(term)) for term in terms))
    return _scoped(chats, _any(stored_term(term) for term in terms))


def mask_expression(chats: ChatFilter, terms: Sequence[str], mask: int) -> str:
    """``scope AND ((a AND b) NOT (c OR d))``: rows holding exactly the terms of ``mask``."""
    present = [stored_term(term) for bit, term in enumerate(terms) if mask >> bit & 1]
    absent = [stored_term(term) for bit, term in enumerate(terms) if not mask >> bit & 1]
    expression = "(" + " AND ".join(phrase(token) for token in present) + ")"
    return _scoped(chats, f"({expression} NOT {_any(absent)})" if absent else expression)


def reaching_expression(
    chats: ChatFilter, terms: Sequence[str], least: Collection[int], none_of: int
) -> str:
    """``scope AND (((a AND b) OR (c AND d)) NOT (e OR f))``: rows holding every term of
    one of the ``least`` masks and no term of ``none_of``."""
    expression = " OR ".join(
        "("
        + " AND ".join(phrase(stored_term(t)) for bit, t in enumerate(terms) if mask >> bit & 1)
        + ")"
        for mask in sorted(least)
    )
    absent = [stored_term(t) for bit, t in enumerate(terms) if none_of >> bit & 1]
    expression = f"({expression})"
    return _scoped(chats, f"({expression} NOT {_any(absent)})" if absent else expression)


def holding_expression(chats: ChatFilter, wanted: str, skipped: Sequence[str]) -> str:
    """``scope AND (wanted NOT (s1 OR s2 ...))``: rows holding ``wanted``, none of ``skipped``."""
    expression = phrase(stored_term(wanted))
    if skipped:
        expression = f"({expression} NOT {_any(stored_term(term) for term in skipped)})"
    return _scoped(chats, expression)


class HeldTerms:
    """Which query terms a row's ``search_text`` holds, as a mask of their bits (a term
    twice in a query has two): the test of ``word_condition`` (`` term `` in
    `` search_text ``; the text is the row's terms, one space apart), done in Python.
    SQLite's ``instr`` steps a ``memcmp`` per character; one regular expression of the
    query's terms, compiled once per read, finds them in one scan of the text in C,
    where splitting the text builds a string per word (bench/RESULTS.md)."""

    def __init__(self, terms: Sequence[str]) -> None:
        self._bits: dict[str, int] = {}
        for bit, term in enumerate(terms):
            self._bits[term] = self._bits.get(term, 0) | 1 << bit
        # longest first: a term that is another's prefix is tried after it
        alternatives = "|".join(map(re.escape, sorted(self._bits, key=len, reverse=True)))
        self._words = re.compile(f" ({alternatives})(?= )")

    def mask(self, search_text: str | None) -> int:
        mask = 0
        for term in self._words.findall(f" {search_text or ''} "):
            mask |= self._bits[term]
        return mask


def word_condition(alias: str, term: str) -> tuple[str, list[Any]]:
    """True when ``term`` is one of the row's stored terms (whole words of ``search_text``).

    ``search_text`` is the message's distinct terms separated by spaces, so a term
    matches exactly when `` term `` occurs in `` search_text ``: the words FTS5 matches.
    """
    return f"instr(' ' || {alias}.search_text || ' ', %s) > 0", [f" {term} "]
