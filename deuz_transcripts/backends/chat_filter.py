"""``ChatFilter``: the one place SQL filters chats by scope (and by chat id), and
messages by the search's other filters (roles, the ``updated_at`` window).

Searches, ``N``, the walks and ``list_chats`` all take their chats from here, so the
scope rule (every field set in the filter is equal in the chat's scope) is written
once for SQL, as ``records.scope_matches`` writes it once for Python.

Paths that find rows by scope and chat tokens alone (PostgreSQL's lexemes, FTS5's
MATCH) add ``token_sql()``; paths that read rows of ``chat_pks_sql()`` add
``message_sql()``. Both are empty unless a tenant, role, window or cursor filter is set.
With ``role_tokens`` (FTS5 and PostgreSQL: every row's search data holds a token of
its role, migration 0003) the roles are tokens too, so ``token_sql()`` leaves them out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from django.conf import settings
from django.db import connections, models

from ..conf import conf
from ..models import Chat, ChatScope, Message
from ..paging import HitKey, from_micros

if TYPE_CHECKING:
    from ..search_request import SearchRequest

__all__ = [
    "JOINED_SCOPE_FIELDS",
    "RARITY_CAP",
    "After",
    "ChatFilter",
    "Window",
    "after_key",
    "request_filter",
    "table",
]

#: A scope of at most this many fields is joined field by field (the planner orders so
#: few exhaustively and fast); a wider one is driven by its rarest field
#: (``ChatFilter._scope_rows``).
JOINED_SCOPE_FIELDS = 4
#: How far the rows of each field of a wide scope are counted to find the rarest one.
RARITY_CAP = 1_000


def table(model: type[models.Model]) -> str:
    return model._meta.db_table


def db_datetime(value: datetime | None, alias: str) -> Any:
    """An aware datetime as database ``alias`` compares it with ``Chat.updated_at``
    (SQLite: Django's sortable text in UTC)."""
    if value is None:
        return None
    if not settings.USE_TZ:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return connections[alias].ops.adapt_datetimefield_value(value)


class Window(NamedTuple):
    """Only chats whose ``updated_at`` is strictly after / before these (database values;
    ``None``: unbounded on that side)."""

    after: Any
    before: Any

    @classmethod
    def of(cls, after: Any, before: Any) -> Window | None:
        return None if after is None and before is None else cls(after, before)


class After(NamedTuple):
    """A cursor's last hit in tie order (database values), its chat id compared by the SQL
    ``chat_id_sql`` (code point order)."""

    updated_at: Any
    chat_id: str
    position: int
    chat_id_sql: str = "c.chat_id"


@dataclass(frozen=True)
class ChatFilter:
    """The chats a search may return: scope fields, an optional chat id list, and
    (``searchable_only``, the default) only chats that are in search."""

    scope: Mapping[str, str]
    chat_ids: frozenset[str] | None = None
    searchable_only: bool = True
    #: N, the indexed messages these chats hold, once counted (backends pick plans by it).
    size: int | None = None
    #: Only messages of these roles (``None``: every role).
    roles: frozenset[str] | None = None
    #: Only chats whose ``updated_at`` is strictly after / before these (database values).
    window: Window | None = None
    #: Only rows after this hit in tie order (a cursor's last hit).
    after: After | None = None
    #: Whether token searches take ``roles`` from role tokens (the backend's search data
    #: holds one per row) rather than from the rows' ``role`` column.
    role_tokens: bool = False
    #: The tenant column's value every admitted row has (the scope's ``TENANT_KEY`` field),
    #: tested by every statement so a partitioned or distributed schema reads one
    #: partition (shard); ``None``: not tested.
    tenant: str | None = None
    #: Whether the index filters these chats by their scope tokens whatever N (PostgreSQL:
    #: a mid-size scope whose words' posting lists are short, ``PostgresMatches.sized``).
    by_tokens: bool = False

    @property
    def windowed(self) -> bool:
        """Whether an ``updated_at`` window narrows the chats."""
        return self.window is not None

    def without_window(self) -> ChatFilter:
        """This filter without its ``updated_at`` window (and without its N): the search
        whose N and n_t score a windowed one (a window filters hits only)."""
        return replace(self, window=None, size=None)

    def without_roles(self) -> ChatFilter:
        """This filter without its roles: every role's rows, of which the roles' are a
        part (its N kept: their rows are found as the roles' are, by the same route)."""
        return replace(self, roles=None)

    @property
    def tenant_only(self) -> bool:
        """Whether the scope is exactly the ``TENANT_KEY`` field, tested as ``tenant``, so
        the tenant column alone says which chats it admits (not for ``""``: chats without
        the field have that tenant too)."""
        return bool(self.tenant) and set(self.scope) == {conf.TENANT_KEY}

    @property
    def tokens_suffice(self) -> bool:
        """Whether scope, chat (and role) tokens alone say which rows are admitted."""
        return (
            (self.roles is None or self.role_tokens) and self.window is None and self.after is None
        )

    def _window(self) -> tuple[list[str], list[Any]]:
        conditions, params = [], []
        window = self.window or Window(None, None)
        if window.after is not None:
            conditions.append("c.updated_at > %s")
            params.append(window.after)
        if window.before is not None:
            conditions.append("c.updated_at < %s")
            params.append(window.before)
        if self.after is not None:  # chats from the cursor's on, in tie order
            moment, chat_id, _position, chat_id_sql = self.after
            conditions.append(f"(c.updated_at < %s OR (c.updated_at = %s AND {chat_id_sql} >= %s))")
            params.extend([moment, moment, chat_id])
        return conditions, params

    def message_sql(self, alias: str = "m", *, with_roles: bool = True) -> tuple[str, list[Any]]:
        """``" AND ..."``: what message row ``alias`` must satisfy besides its chat
        (its role unless ``with_roles`` is false; in the cursor's chat, a position after its
        hit); ``""`` without such a filter."""
        conditions: list[str] = []
        params: list[Any] = []
        if self.tenant is not None:
            conditions.append(f"{alias}.tenant = %s")
            params.append(self.tenant)
        if self.roles is not None and with_roles:
            roles = sorted(self.roles)
            conditions.append(f"{alias}.role IN ({', '.join(['%s'] * len(roles))})")
            params.extend(roles)
        if self.after is not None:  # in the cursor's own chat, the messages after its hit
            moment, chat_id, position, _chat_id_sql = self.after
            conditions.append(
                f"({alias}.position > %s OR {alias}.chat_id NOT IN (SELECT c.id "
                f"FROM {table(Chat)} c WHERE c.chat_id = %s AND c.updated_at = %s))"
            )
            params.extend([position, chat_id, moment])
        return "".join(f" AND {condition}" for condition in conditions), params

    def token_sql(self, alias: str = "m", *, few: bool = False) -> tuple[str, list[Any]]:
        """``message_sql`` plus the chat conditions tokens cannot say (the ``updated_at``
        window, the cursor's place), for rows found by tokens alone (roles left out when
        they are tokens). ``few``: the rows are known to be few, so each one's chat is
        checked by one primary-key probe; as ``IN (chats)``, PostgreSQL hashes and SQLite
        collects every chat the window or cursor admits, whatever the rows (15 and 43 ms
        for the few rows after a cursor, at 1M messages)."""
        window, params = self._window()
        sql = ""
        if window and few:
            sql = (
                f" AND (SELECT {' AND '.join(window)} FROM {table(Chat)} c "
                f"WHERE c.id = {alias}.chat_id)"
            )
        elif window:
            sql = f" AND {alias}.chat_id IN (SELECT c.id FROM {table(Chat)} c WHERE " + (
                " AND ".join(window) + ")"
            )
        more, more_params = self.message_sql(alias, with_roles=not self.role_tokens)
        return sql + more, [*params, *more_params]

    def chat_pks_sql(self) -> tuple[str, list[Any]]:
        """``SELECT chat pk ...`` of the chats this filter admits.

        A scoped filter starts from the ``(key, value)`` btree of ``ChatScope`` and
        checks each chat by a scalar subquery, one primary-key probe per scope row (as
        a join, PostgreSQL hashes it and reads the whole chat table for a big scope),
        so its cost follows the scope, never the table.
        """
        check, check_params = self._chat_check()
        if not self.scope:
            return f"SELECT c.id FROM {table(Chat)} c WHERE {check}", check_params
        rows, params = self._scope_rows()
        if check == "TRUE":
            return f"SELECT s0.chat_id {rows}", params
        return (
            f"SELECT s0.chat_id {rows} "
            f"AND (SELECT {check} FROM {table(Chat)} c WHERE c.id = s0.chat_id)",
            [*params, *check_params],
        )

    def _scope_rows(self) -> tuple[str, list[Any]]:
        """``FROM ... WHERE ...`` of the scope's ``ChatScope`` rows, one per chat (``s0``).

        Up to ``JOINED_SCOPE_FIELDS`` fields are joined: the planner orders so few
        exhaustively, from the most selective. A wider scope is driven by its rarest field
        instead — the one whose ``(key, value)`` btree holds the fewest rows, counted up to
        ``RARITY_CAP`` — and each chat of that field is checked by one count of its own
        scope rows matching the scope. Neither plan grows with the field count: one join
        per field made PostgreSQL's planning explode (seconds at 32 fields) and SQLite fail
        past 63 fields.
        """
        fields = sorted(self.scope.items())
        if len(fields) > JOINED_SCOPE_FIELDS:
            return self._rarest_field_rows(fields)
        joins, params = [], []
        for number, (key, value) in enumerate(fields[1:], start=1):
            joins.append(
                f"JOIN {table(ChatScope)} s{number} ON s{number}.chat_id = s0.chat_id "
                f"AND s{number}.key = %s AND s{number}.value = %s"
            )
            params.extend([key, value])
        return (
            f"FROM {table(ChatScope)} s0 {' '.join(joins)} WHERE s0.key = %s AND s0.value = %s",
            [*params, *fields[0]],
        )

    def _rarest_field_rows(self, fields: list[tuple[str, str]]) -> tuple[str, list[Any]]:
        """Each field's rows are counted by its own ``(key, value)`` values (so the planner
        reads their statistics), in the btree's order (so an index scan stops at the cap
        where a bitmap scan would read every row of a common field); the rarest field's
        rows are ``s0``, and each of its chats is checked against every field."""
        scopes = table(ChatScope)
        counted = " UNION ALL ".join(
            f"SELECT %s AS k, %s AS v, (SELECT count(*) FROM (SELECT 1 FROM {scopes} x "
            "WHERE x.key = %s AND x.value = %s ORDER BY x.chat_id "
            f"LIMIT {RARITY_CAP}) AS q) AS n"
            for _ in fields
        )
        matches = " OR ".join(["(r.key = %s AND r.value = %s)"] * len(fields))
        # (chat, key) is unique: the count reaches len(fields) only when every field holds
        return (
            f"FROM (SELECT f.k, f.v FROM ({counted}) AS f ORDER BY f.n, f.k LIMIT 1) AS d "
            f"JOIN {scopes} s0 ON s0.key = d.k AND s0.value = d.v "
            f"WHERE (SELECT count(*) FROM {scopes} r WHERE r.chat_id = s0.chat_id "
            f"AND ({matches})) = {len(fields)}",
            [
                *(part for key, value in fields for part in (key, value, key, value)),
                *(part for pair in fields for part in pair),
            ],
        )

    def _chat_check(self) -> tuple[str, list[Any]]:
        """What chat row ``c`` itself must satisfy: searchable, and one of ``chat_ids``."""
        conditions = ["c.is_indexed"] if self.searchable_only else []
        params: list[Any] = []
        if self.tenant is not None:
            conditions.append("c.tenant = %s")
            params.append(self.tenant)
        window, window_params = self._window()
        conditions.extend(window)
        params.extend(window_params)
        if self.chat_ids is not None:
            ids = sorted(self.chat_ids)
            conditions.append(f"c.chat_id IN ({', '.join(['%s'] * len(ids))})")
            params.extend(ids)
        return " AND ".join(conditions) or "TRUE", params

    def chat_condition(self) -> tuple[str, list[Any]]:
        """SQL true when chat row ``c`` is admitted.

        Without a scope it tests ``c`` itself: ``c.id IN (every indexed chat)`` would
        make the engine list the whole chat table before using any row of it. So does a
        scope that is exactly the tested tenant (``c.tenant`` says it): as a list of the
        tenant's chats, PostgreSQL hashed all of them before walking newest first (704 ms
        for the 50,000-message user at 1M, against 1.4 ms testing each chat walked).
        """
        if self.scope and not self.tenant_only:
            pks, params = self.chat_pks_sql()
            return f"c.id IN ({pks})", params
        return self._chat_check()

    def total_sql(self) -> tuple[str, list[Any]]:
        """N: the number of indexed messages the search may return (one probe per chat;
        with roles, the chats' indexed messages of those roles are counted)."""
        if self.roles is not None:
            pks, pks_params = self.chat_pks_sql()
            roles, roles_params = self.message_sql()
            return (
                f"SELECT count(*) FROM {table(Message)} m "
                f"WHERE m.chat_id IN ({pks}) AND m.has_terms{roles}",
                [*pks_params, *roles_params],
            )
        check, check_params = self._chat_check()
        if not self.scope:
            return (
                f"SELECT COALESCE(SUM(c.indexed_count), 0) FROM {table(Chat)} c WHERE {check}",
                check_params,
            )
        counts, params = self.chat_counts_sql()
        return f"SELECT COALESCE(SUM(n), 0) FROM ({counts}) AS counts", params

    def chat_counts_sql(self) -> tuple[str, list[Any]]:
        """``SELECT n ...``: each chat of a scope (no roles) and its indexed messages (NULL
        for a chat the filter does not admit), one primary-key probe per scope row."""
        check, check_params = self._chat_check()
        rows, params = self._scope_rows()
        probe = f"SELECT c.indexed_count FROM {table(Chat)} c WHERE c.id = s0.chat_id AND {check}"
        return f"SELECT ({probe}) AS n {rows}", [*check_params, *params]


def request_filter(
    request: SearchRequest, alias: str, *, role_tokens: bool = False, tenant: str | None = None
) -> ChatFilter:
    """The filter of a search's scope, chat ids, roles and window (``tenant``: the value
    statements test the tenant column against)."""
    return ChatFilter(
        request.scope,
        request.chat_ids,
        roles=request.roles,
        window=Window.of(
            db_datetime(request.updated_after, alias), db_datetime(request.updated_before, alias)
        ),
        role_tokens=role_tokens,
        tenant=tenant,
    )


def after_key(chats: ChatFilter, key: HitKey, alias: str, chat_id_sql: str) -> ChatFilter:
    """``chats``, keeping only rows after ``key`` in tie order (chat ids compared by the
    SQL ``chat_id_sql``)."""
    moment = db_datetime(from_micros(key.updated_micros), alias)
    return replace(chats, after=After(moment, key.chat_id, key.index, chat_id_sql))
