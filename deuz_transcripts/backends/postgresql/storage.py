"""PostgreSQL's search data: the ``tsvector`` column, its GIN index, and the lexemes a
vector holds besides terms (scope fields, chat, role: a private-use prefix and a hash,
never a term), with the migrations' steps that add or drop them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from functools import lru_cache

from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.backends.utils import CursorWrapper

from ...models import Chat, ChatScope, Message
from ..chat_filter import table

__all__ = [
    "CHAT_TOKEN_SQL",
    "ROLE_TOKEN_SQL",
    "SCOPE_TOKEN_SQL",
    "VECTOR_COLUMN",
    "VECTOR_INDEX",
    "add_role_lexemes",
    "add_scope_lexemes",
    "chat_lexeme",
    "create_storage",
    "drop_role_lexemes",
    "drop_scope_lexemes",
    "drop_storage",
    "role_lexeme",
    "scope_lexeme",
    "scope_lexemes",
    "tsquery_operand",
    "vector_index_sql",
    "vector_index_state",
]

VECTOR_COLUMN = "search_vector"
VECTOR_INDEX = "deuz_message_vector"


def vector_index_sql() -> str:
    """The GIN index every search goes through (the migration's, and a deferred build's)."""
    # A small pending list bounds the latency a search pays for fast inserts.
    return (
        f"CREATE INDEX IF NOT EXISTS {VECTOR_INDEX} ON {table(Message)} "
        f"USING gin ({VECTOR_COLUMN}) WITH (fastupdate = on, gin_pending_list_limit = 256)"
    )


def vector_index_state(cursor: CursorWrapper) -> str:
    """``"ready"``, ``"missing"``, ``"invalid"`` (a build that did not finish), or
    ``"unmigrated"`` (no vector column: nothing to index yet)."""
    cursor.execute(
        "SELECT (SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(%s)), "
        "EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = to_regclass(%s) "
        "AND a.attname = %s AND NOT a.attisdropped)",
        [VECTOR_INDEX, table(Message), VECTOR_COLUMN],
    )
    valid, migrated = cursor.fetchone() or (None, False)
    if not migrated:
        return "unmigrated"
    if valid is None:
        return "missing"
    return "ready" if valid else "invalid"


def create_storage(schema_editor: BaseDatabaseSchemaEditor) -> None:
    """The migration's PostgreSQL step: a tsvector column and its GIN index."""
    schema_editor.execute(f"ALTER TABLE {table(Message)} ADD COLUMN {VECTOR_COLUMN} tsvector")
    schema_editor.execute(vector_index_sql())


def drop_storage(schema_editor: BaseDatabaseSchemaEditor) -> None:
    schema_editor.execute(f"DROP INDEX IF EXISTS {VECTOR_INDEX}")
    schema_editor.execute(f"ALTER TABLE {table(Message)} DROP COLUMN IF EXISTS {VECTOR_COLUMN}")


_SCOPE_PREFIX = "\ue000"
_CHAT_PREFIX = "\ue002"
_ROLE_PREFIX = "\ue003"
#: The same tokens in SQL (the 0002 and 0003 migrations add them to existing vectors).
SCOPE_TOKEN_SQL = (
    "E'\\uE000' || left(encode(sha256(convert_to({key}, 'UTF8') || '\\x00'::bytea "
    "|| convert_to({value}, 'UTF8')), 'hex'), 24)"
)
CHAT_TOKEN_SQL = "E'\\uE002' || left(encode(sha256(convert_to({chat_id}, 'UTF8')), 'hex'), 24)"
ROLE_TOKEN_SQL = "E'\\uE003' || left(encode(sha256(convert_to({role}, 'UTF8')), 'hex'), 24)"


def _token(prefix: str, *parts: str) -> str:
    data = b"\x00".join(part.encode("utf-8") for part in parts)
    return prefix + hashlib.sha256(data).hexdigest()[:24]


def scope_lexeme(key: str, value: str) -> str:
    """The lexeme of one scope field."""
    return _token(_SCOPE_PREFIX, key, value)


def chat_lexeme(chat_id: str) -> str:
    """The lexeme of a chat (the ``chat_ids`` filter is a GIN search)."""
    return _token(_CHAT_PREFIX, chat_id)


def scope_lexemes(scope: Mapping[str, str], chat_id: str) -> list[str]:
    """The lexemes a message of this chat carries besides its terms and role."""
    return [
        *(scope_lexeme(key, value) for key, value in sorted(scope.items())),
        chat_lexeme(chat_id),
    ]


def tsquery_operand(lexeme: str) -> str:
    """A lexeme as a quoted tsquery operand (terms hold no quotes or backslashes; any
    lexeme is escaped anyway)."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


@lru_cache(maxsize=256)
def role_lexeme(role: str) -> str:
    """The lexeme of a message's role (the ``roles`` filter is a GIN search); kept, as a
    write hashes the role of each of its messages and a chat's roles are few."""
    return _token(_ROLE_PREFIX, role)


def add_role_lexemes(schema_editor: BaseDatabaseSchemaEditor) -> None:
    """Migration 0003: give existing vectors their role lexeme (one UPDATE)."""
    role = ROLE_TOKEN_SQL.format(role="role")
    schema_editor.execute(
        f"UPDATE {table(Message)} SET {VECTOR_COLUMN} = {VECTOR_COLUMN} || "
        f"array_to_tsvector(ARRAY[{role}]) WHERE {VECTOR_COLUMN} IS NOT NULL"
    )


def drop_role_lexemes(schema_editor: BaseDatabaseSchemaEditor) -> None:
    _drop_lexemes(schema_editor, [_ROLE_PREFIX])


def _drop_lexemes(schema_editor: BaseDatabaseSchemaEditor, prefixes: Sequence[str]) -> None:
    """Every vector without its lexemes starting with one of ``prefixes``."""
    listed = ", ".join(f"E'\\u{ord(prefix):04X}'" for prefix in prefixes)
    schema_editor.execute(
        f"UPDATE {table(Message)} SET {VECTOR_COLUMN} = array_to_tsvector(ARRAY("
        f"SELECT l FROM unnest(tsvector_to_array({VECTOR_COLUMN})) AS l "
        f"WHERE left(l, 1) NOT IN ({listed}))) "
        f"WHERE {VECTOR_COLUMN} IS NOT NULL"
    )


def add_scope_lexemes(schema_editor: BaseDatabaseSchemaEditor) -> None:
    """Migration 0002: give existing vectors their scope and chat lexemes (one UPDATE)."""
    scope = SCOPE_TOKEN_SQL.format(key="s.key", value="s.value")
    chat = CHAT_TOKEN_SQL.format(chat_id="c.chat_id")
    schema_editor.execute(
        f"UPDATE {table(Message)} m SET {VECTOR_COLUMN} = m.{VECTOR_COLUMN} || t.lexemes "
        f"FROM (SELECT c.id, array_to_tsvector(array_append(ARRAY(SELECT {scope} "
        f"FROM {table(ChatScope)} s WHERE s.chat_id = c.id), {chat})) AS lexemes "
        f"FROM {table(Chat)} c) t WHERE m.chat_id = t.id AND m.{VECTOR_COLUMN} IS NOT NULL"
    )


def drop_scope_lexemes(schema_editor: BaseDatabaseSchemaEditor) -> None:
    _drop_lexemes(schema_editor, [_SCOPE_PREFIX, _CHAT_PREFIX])
