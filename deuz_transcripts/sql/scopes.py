"""Why a scoped search found nothing: no chat has that scope (a mistyped key or value).

A search for ``user=ada`` or ``userId=ada;agentId=x`` finds nothing, exactly as a search
for a word no chat holds. When a scoped search has no hits, the admin and
``search_transcripts`` ask here, cheaply, whether any chat has the scope at all (one
EXISTS over the scope lookup rows) and, only when none does, which scope keys exist
(one index probe per key, at most ``MAX_KEYS`` of them). Keys are listed, never values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from django.db import connections

from ..backends.chat_filter import ChatFilter
from ..models import ChatScope
from .errors import database_errors

__all__ = ["MAX_KEYS", "UnknownScope", "unknown_scope"]

#: Scope keys listed at most (each is one index probe).
MAX_KEYS = 20


@dataclass(frozen=True)
class UnknownScope:
    """No chat has the scope searched: the keys chats have, and the scope's keys none has."""

    keys: list[str]
    more_keys: bool
    unknown_keys: list[str]
    #: A value holds ``=``: several fields were probably joined by something else than a comma.
    joined_fields: bool

    def sentence(self, scope_text: str) -> str:
        """The notice in English (the admin builds its own, translated)."""
        parts = [f"no chat has the scope {scope_text}"]
        if self.unknown_keys:
            parts.append(f"no chat has the key(s) {', '.join(self.unknown_keys)}")
        parts.append(f"scope keys that exist: {self.keys_text()}")
        text = "; ".join(parts) + "."
        if self.joined_fields:
            text += " Separate scope fields with commas, e.g. userId=ada,agentId=x."
        return text[0].upper() + text[1:]

    def keys_text(self) -> str:
        if not self.keys:
            return "(none: no chat has a scope field)"
        return ", ".join(self.keys) + (", …" if self.more_keys else "")


def _has_key(using: str, key: str) -> bool:
    return ChatScope.objects.using(using).filter(key=key).exists()


def _keys(using: str) -> tuple[list[str], bool]:
    """The first ``MAX_KEYS`` distinct keys, by a loose index scan (``key > last``)."""
    rows = ChatScope.objects.using(using).order_by("key").values_list("key", flat=True)
    keys: list[str] = []
    while len(keys) <= MAX_KEYS:
        key = (rows.filter(key__gt=keys[-1]) if keys else rows).first()
        if key is None:
            break
        keys.append(key)
    return keys[:MAX_KEYS], len(keys) > MAX_KEYS


def unknown_scope(using: str, scope: Mapping[str, str]) -> UnknownScope | None:
    """``None`` when the scope is empty or some chat (searchable or not) has it."""
    if not scope:
        return None
    pks, params = ChatFilter(scope, searchable_only=False).chat_pks_sql()
    with database_errors(using), connections[using].cursor() as cursor:
        cursor.execute(f"SELECT 1 WHERE EXISTS ({pks})", params)
        if cursor.fetchone() is not None:
            return None
    with database_errors(using):
        keys, more = _keys(using)
        unknown = [key for key in sorted(scope) if not _has_key(using, key)]
    joined = any("=" in value for value in scope.values())
    return UnknownScope(keys, more, unknown, joined)
