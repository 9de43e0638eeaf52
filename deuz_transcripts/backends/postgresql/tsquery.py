"""PostgreSQL tsqueries of a search: its terms as quoted lexemes, its filter as scope,
chat and role lexemes (``postgresql.storage``), and the masks and subsets the plans count
and read. Terms are letters and digits only, so no input reaches tsquery syntax."""

from __future__ import annotations

from collections.abc import Sequence

from ...text import stored_term
from ..chat_filter import ChatFilter
from .policy import PostgresPolicy
from .storage import chat_lexeme, role_lexeme, scope_lexeme, tsquery_operand

__all__ = [
    "every_term_tsquery",
    "filter_parts",
    "filtered_tsquery",
    "mask_tsquery",
    "tenant_sql",
    "tsquery_literal",
    "uses_lexemes",
]


def tenant_sql(chats: ChatFilter) -> tuple[str, list[str]]:
    """``" AND m.tenant = %s"`` when the filter tests the tenant, else ``""``: for the
    statements that take no other ``ChatFilter.message_sql`` (GIN counts of tokens alone)."""
    if chats.tenant is None:
        return "", []
    return " AND m.tenant = %s", [chats.tenant]


def uses_lexemes(chats: ChatFilter, policy: PostgresPolicy) -> bool:
    """Whether GIN filters the scope by its lexemes in the tsquery (big or unscoped
    searches, and routed ones: ``PostgresMatches.sized``), else the scope's rows are read."""
    return chats.by_tokens or chats.size is None or chats.size > policy.lexeme_scope_min


def tsquery_literal(term: str) -> str:
    """A query term as a single quoted lexeme."""
    return tsquery_operand(stored_term(term))


def every_term_tsquery(terms: Sequence[str], subset: int) -> str:
    """``'a' & 'c'``: the rows holding at least the terms of ``subset``."""
    return " & ".join(tsquery_literal(t) for bit, t in enumerate(terms) if subset >> bit & 1)


def filter_parts(chats: ChatFilter) -> list[str]:
    """``scope``, ``(chat | chat ...)``, ``(role | role ...)`` (roles when the filter takes
    them from lexemes)."""
    parts = [
        tsquery_operand(scope_lexeme(key, value)) for key, value in sorted(chats.scope.items())
    ]
    if chats.chat_ids is not None:
        tokens = (tsquery_operand(chat_lexeme(chat_id)) for chat_id in sorted(chats.chat_ids))
        parts.append("(" + " | ".join(tokens) + ")")
    if chats.roles is not None and chats.role_tokens:
        roles = (tsquery_operand(role_lexeme(role)) for role in sorted(chats.roles))
        parts.append("(" + " | ".join(roles) + ")")
    return parts


def filtered_tsquery(chats: ChatFilter, query: str) -> str:
    """``scope & (chat | chat ...) & (role | ...) & (query)``: the rows of ``query`` the
    filter admits (rows of a chat out of search have no vector, so none is ever found)."""
    return " & ".join([*filter_parts(chats), f"({query})"])


def mask_tsquery(terms: Sequence[str], mask: int) -> str:
    """``'a' & 'b' & !'c'``: the rows holding exactly the terms of ``mask``."""
    return " & ".join(
        tsquery_literal(term) if mask >> bit & 1 else f"!{tsquery_literal(term)}"
        for bit, term in enumerate(terms)
    )
