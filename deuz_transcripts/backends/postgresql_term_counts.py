"""PostgreSQL: the number of indexed messages per tenant holding each common term, kept
by triggers.

Exact idf needs n_t, the rows of the search's scope holding term t. GIN finds those rows
but cannot count them without visiting each one: a rare term costs little, a common one
its every row (438 ms for one word of an unscoped search at 1M messages). So the terms in
at least ``COUNTED_MIN_ROWS`` indexed messages (``CountedTerm``, chosen by
``refresh_term_counts``: the migration, ``backfill_transcripts --count-terms``) have their
counts stored per tenant in ``TermCount``, with lexeme ``""`` for N. Statement-level
``AFTER`` triggers on the message table add each inserted vector's counted terms and take
each deleted one's off (an UPDATE: the rows whose vector, tenant or chat changed, old off
and new on) in the writing transaction, so every path that changes message rows (ORM
cascades, raw SQL, a partition conversion) keeps them true; a ``TRUNCATE`` of the message
table does not fire them (``backfill_transcripts --fix`` rebuilds). Only common terms:
counting every term per tenant took 30 rows a message (a tenant's rare words).

A search of one tenant (scope ``{TENANT_KEY: value}``) or of every chat reads N and the
counted terms' n_t with a few index lookups and counts the others in GIN (each holds
fewer than ``COUNTED_MIN_ROWS`` rows once chosen; a term that became common since is
counted in GIN, exactly, until the next refresh).

Tenant ``""`` (every chat while ``TENANT_KEY`` is unset) splits its counts over
``SHARDS`` rows per term (the chat's pk modulo ``SHARDS``); other tenants use one. Each
statement first takes a transaction-scoped advisory lock per (tenant, shard) it touches,
in one order: writers of one shard queue instead of deadlocking on count rows, writers of
other shards and tenants run on.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.backends.utils import CursorWrapper

from ..models import CountedTerm, Message, TermCount
from ..text import stored_term
from .chat_filter import table
from .postgresql_storage import tsquery_operand

__all__ = [
    "COUNTED_MIN_ROWS",
    "SHARDS",
    "count_drift",
    "create_term_counts",
    "create_triggers",
    "drop_term_counts",
    "rebuild_term_counts",
    "refresh_term_counts",
    "stored_term_counts",
    "stored_total",
]

#: Terms in at least this many indexed messages get stored counts (fewer: GIN counts
#: them at about the cost of a page walk's probe).
COUNTED_MIN_ROWS = 2_000
#: Tenant ``""``'s counts are split over this many rows per term.
SHARDS = 8
_LOCK_NAMESPACE = 733_121  # the app's key space for count locks (733_120: chat locks)
_FUNCTION = "deuz_count_terms"
_TRIGGERS = {
    "INSERT": "REFERENCING NEW TABLE AS deuz_new",
    "DELETE": "REFERENCING OLD TABLE AS deuz_old",
    "UPDATE": "REFERENCING OLD TABLE AS deuz_old NEW TABLE AS deuz_new",
}
_SHARD = f"(CASE WHEN r.tenant = '' THEN mod(r.chat_id, {SHARDS}) ELSE 0 END)::smallint"
_TERMS = "unnest(tsvector_to_array(r.search_vector))"
#: Scope, chat and role lexemes (a private-use first character) are never terms.
_IS_TERM = "left(l.lexeme, 1) NOT IN (E'\\uE000', E'\\uE002', E'\\uE003')"


def _counted(rows: str, sign: int) -> str:
    """``(tenant, shard, lexeme, n)`` of the vectors of ``rows``: each counted term, and
    ``""`` for every row with a vector."""
    counted = table(CountedTerm)
    return (
        f"SELECT r.tenant, {_SHARD} AS shard, l.lexeme, {sign} AS n "
        f"FROM {rows} r CROSS JOIN LATERAL {_TERMS} AS l(lexeme) "
        f"WHERE r.search_vector IS NOT NULL AND l.lexeme IN (SELECT lexeme FROM {counted}) "
        f"UNION ALL SELECT r.tenant, {_SHARD}, '', {sign} "
        f"FROM {rows} r WHERE r.search_vector IS NOT NULL"
    )


def _shards(rows: str) -> str:
    """``(tenant, shard)`` of the rows of ``rows`` that have a vector (others count nothing)."""
    return f"SELECT r.tenant, {_SHARD} AS shard FROM {rows} r WHERE r.search_vector IS NOT NULL"


def _apply(shards: str, changes: str, *, removes: bool) -> str:
    """The statements that lock the (tenant, shard) pairs of ``shards`` and add the sums
    of ``changes`` to their counts; with ``removes``, counts that reach 0 are deleted, and
    a counted term left with no count at all stops being counted, so no term held only by
    deleted messages stays behind in either table (docs/guarantees.md)."""
    counts = table(TermCount)
    upsert = f"""
        INSERT INTO {counts} (lexeme, tenant, shard, rows)
        SELECT c.lexeme, c.tenant, c.shard, sum(c.n) FROM ({changes}) c
        GROUP BY c.lexeme, c.tenant, c.shard HAVING sum(c.n) <> 0
        ORDER BY c.lexeme, c.tenant, c.shard
        ON CONFLICT (lexeme, tenant, shard) DO UPDATE SET rows = {counts}.rows + EXCLUDED.rows"""
    locks = f"""
        PERFORM count(pg_advisory_xact_lock({_LOCK_NAMESPACE}, s.k)) FROM (
            SELECT DISTINCT hashtext(c.tenant || '/' || c.shard) AS k FROM ({shards}) c
            ORDER BY 1) s;"""
    if not removes:
        return f"{locks}{upsert};"
    return f"""{locks}
        WITH up AS ({upsert} RETURNING lexeme, tenant, shard, rows)
        SELECT array_agg(up.lexeme), array_agg(up.tenant), array_agg(up.shard)
        INTO gone_lexemes, gone_tenants, gone_shards FROM up WHERE up.rows = 0;
        IF gone_lexemes IS NOT NULL THEN
            DELETE FROM {counts} t USING unnest(gone_lexemes, gone_tenants, gone_shards)
                AS z(lexeme, tenant, shard)
            WHERE t.lexeme = z.lexeme AND t.tenant = z.tenant AND t.shard = z.shard
                AND t.rows = 0;
            DELETE FROM {table(CountedTerm)} k WHERE k.lexeme = ANY(gone_lexemes)
                AND NOT EXISTS (SELECT 1 FROM {counts} t WHERE t.lexeme = k.lexeme);
        END IF;"""


def _function_sql() -> str:
    changed = (
        "(SELECT o.* FROM deuz_old o JOIN deuz_new w ON w.id = o.id "
        "WHERE o.search_vector IS DISTINCT FROM w.search_vector "
        "OR o.tenant <> w.tenant OR o.chat_id <> w.chat_id)"
    )
    changed_new = changed.replace("SELECT o.*", "SELECT w.*")
    inserted = _apply(_shards("deuz_new"), _counted("deuz_new", 1), removes=False)
    deleted = _apply(_shards("deuz_old"), _counted("deuz_old", -1), removes=True)
    updated = _apply(
        f"{_shards(changed)} UNION ALL {_shards(changed_new)}",
        f"{_counted(changed, -1)} UNION ALL {_counted(changed_new, 1)}",
        removes=True,
    )
    return f"""
        CREATE OR REPLACE FUNCTION {_FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $body$
        DECLARE
            gone_lexemes text[];
            gone_tenants text[];
            gone_shards smallint[];
        BEGIN
            IF TG_OP = 'INSERT' THEN {inserted}
            ELSIF TG_OP = 'DELETE' THEN {deleted}
            ELSE {updated}
            END IF;
            RETURN NULL;
        END
        $body$"""


def _trigger_name(event: str) -> str:
    return f"deuz_count_terms_{event.lower()}"


def create_triggers(cursor_or_editor: CursorWrapper | BaseDatabaseSchemaEditor) -> None:
    """The function and the message table's three triggers (again after the table is
    replaced: ``partition_messages``)."""
    cursor_or_editor.execute(_function_sql())
    for event, referencing in _TRIGGERS.items():
        cursor_or_editor.execute(
            f"CREATE TRIGGER {_trigger_name(event)} AFTER {event} ON {table(Message)} "
            f"{referencing} FOR EACH STATEMENT EXECUTE FUNCTION {_FUNCTION}()"
        )


def create_term_counts(schema_editor: BaseDatabaseSchemaEditor) -> None:
    """The migration's PostgreSQL step: the triggers, then the terms to count and their
    counts from the rows already there."""
    create_triggers(schema_editor)
    with schema_editor.connection.cursor() as cursor:
        refresh_term_counts(cursor, rebuild=True)


def drop_term_counts(schema_editor: BaseDatabaseSchemaEditor) -> None:
    for event in _TRIGGERS:
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {_trigger_name(event)} ON {table(Message)}")
    schema_editor.execute(f"DROP FUNCTION IF EXISTS {_FUNCTION}()")


def rebuild_term_counts(cursor: CursorWrapper) -> None:
    """The counted terms' counts again from the vectors (after a ``TRUNCATE``, or a drift
    ``verify`` found), in one transaction holding off message writers (not searches); a
    counted term no row holds any more stops being counted."""
    with transaction.atomic(using=cursor.db.alias):
        cursor.execute(f"LOCK TABLE {table(Message)} IN SHARE MODE")
        cursor.execute(f"DELETE FROM {table(TermCount)}")
        cursor.execute(
            f"INSERT INTO {table(TermCount)} (lexeme, tenant, shard, rows) "
            f"SELECT c.lexeme, c.tenant, c.shard, sum(c.n) "
            f"FROM ({_counted(table(Message), 1)}) c GROUP BY c.lexeme, c.tenant, c.shard"
        )
        # a counted term no row holds (its messages deleted) is not kept either
        cursor.execute(
            f"DELETE FROM {table(CountedTerm)} k WHERE NOT EXISTS "
            f"(SELECT 1 FROM {table(TermCount)} t WHERE t.lexeme = k.lexeme)"
        )


def refresh_term_counts(
    cursor: CursorWrapper, min_rows: int = COUNTED_MIN_ROWS, *, rebuild: bool = False
) -> int:
    """Choose the terms to count (those in at least ``min_rows`` indexed messages) and
    count the newly chosen ones; the number of terms counted.

    The choice is one pass over every vector taken before any lock, so message writers
    go on meanwhile (a term's count there only decides whether it is counted). Then,
    holding off message writers (not searches): the terms no longer common stop being
    counted, the newly common ones are counted from the rows holding them, and the
    others keep the counts the triggers kept exact. The lock lasts as long as counting
    the new terms takes, not a pass over the table. ``rebuild`` (the migration, on rows
    written before the triggers existed) counts every chosen term and N again instead.
    """
    common = _common_terms(cursor, min_rows)
    with transaction.atomic(using=cursor.db.alias):
        cursor.execute(f"LOCK TABLE {table(Message)} IN SHARE MODE")
        if rebuild:
            cursor.execute(f"DELETE FROM {table(CountedTerm)}")
            cursor.execute(
                f"INSERT INTO {table(CountedTerm)} (lexeme) SELECT unnest(%s::text[])",
                [sorted(common)],
            )
            rebuild_term_counts(cursor)
        else:
            _refresh_chosen(cursor, common)
        cursor.execute(f"SELECT count(*) FROM {table(CountedTerm)}")
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def _refresh_chosen(cursor: CursorWrapper, common: dict[str, int]) -> None:
    """Under the lock: stop counting the terms no longer common, count the new ones."""
    cursor.execute(f"SELECT lexeme FROM {table(CountedTerm)}")
    counted = {str(row[0]) for row in cursor.fetchall()}
    dropped = sorted(counted - common.keys())
    if dropped:
        for model in (TermCount, CountedTerm):
            cursor.execute(
                f"DELETE FROM {table(model)} WHERE lexeme IN (SELECT unnest(%s::text[]))",
                [dropped],
            )
    added = sorted(common.keys() - counted)
    if added:
        # each term's rows through GIN, unless together they outnumber the table's rows
        one_pass = sum(common[lexeme] for lexeme in added) > stored_total(cursor, None)
        _count_new_terms(cursor, added, one_pass=one_pass)


def _common_terms(cursor: CursorWrapper, min_rows: int) -> dict[str, int]:
    """The terms in at least ``min_rows`` indexed messages, with those numbers (one pass
    over every vector)."""
    cursor.execute(
        f"SELECT l.lexeme, count(*) FROM {table(Message)} r "
        f"CROSS JOIN LATERAL {_TERMS} AS l(lexeme) "
        f"WHERE r.search_vector IS NOT NULL AND {_IS_TERM} "
        "GROUP BY l.lexeme HAVING count(*) >= %s",
        [min_rows],
    )
    return {str(lexeme): int(rows) for lexeme, rows in cursor.fetchall()}


def _count_new_terms(cursor: CursorWrapper, lexemes: list[str], *, one_pass: bool) -> None:
    """Count ``lexemes`` (not counted until now) and start counting those some row holds
    (one no row holds any more, its rows deleted since the choice, is not kept: no word
    of a deleted message stays behind). Each term's rows as GIN finds them (a tenant
    count per term: 154,479 counts of 100 terms at 2.7M messages in 1.7 s, against 23.7 s
    for unnesting every vector holding any of them), or ``one_pass`` over every vector
    (the first refresh, many new terms)."""
    if one_pass:
        counts = (
            f"SELECT l.lexeme, r.tenant, {_SHARD}, count(*) "
            f"FROM {table(Message)} r CROSS JOIN LATERAL {_TERMS} AS l(lexeme) "
            "WHERE r.search_vector IS NOT NULL "
            "AND l.lexeme IN (SELECT unnest(%s::text[])) GROUP BY 1, 2, 3"
        )
        params: list[list[str]] = [lexemes]
    else:
        counts = (
            "SELECT t.lexeme, c.tenant, c.shard, c.n "
            "FROM unnest(%s::text[], %s::tsquery[]) AS t(lexeme, query) CROSS JOIN LATERAL "
            f"(SELECT r.tenant, {_SHARD} AS shard, count(*) AS n FROM {table(Message)} r "
            "WHERE r.search_vector @@ t.query GROUP BY 1, 2) c"
        )
        params = [lexemes, [tsquery_operand(lexeme) for lexeme in lexemes]]
    # the terms that got a count row are the ones counted from now on
    cursor.execute(
        f"WITH counted AS (INSERT INTO {table(TermCount)} (lexeme, tenant, shard, rows) "
        f"{counts} RETURNING lexeme) "
        f"INSERT INTO {table(CountedTerm)} (lexeme) SELECT DISTINCT lexeme FROM counted",
        params,
    )


def count_drift(cursor: CursorWrapper, limit: int = 20) -> list[tuple[str, str, int, int]]:
    """``(tenant, lexeme, stored, actual)`` of counts that differ from the vectors (at
    most ``limit``): empty when every count is true. Reads every vector."""
    cursor.execute(
        f"WITH actual AS (SELECT c.tenant, c.lexeme, sum(c.n) AS n "
        f"FROM ({_counted(table(Message), 1)}) c GROUP BY c.tenant, c.lexeme), "
        f"stored AS (SELECT tenant, lexeme, sum(rows) AS n FROM {table(TermCount)} "
        "GROUP BY tenant, lexeme) "
        "SELECT COALESCE(s.tenant, a.tenant), COALESCE(s.lexeme, a.lexeme), "
        "COALESCE(s.n, 0), COALESCE(a.n, 0) FROM stored s FULL JOIN actual a "
        "ON a.tenant = s.tenant AND a.lexeme = s.lexeme "
        "WHERE COALESCE(s.n, 0) <> COALESCE(a.n, 0) ORDER BY 1, 2 LIMIT %s",
        [limit],
    )
    return [(str(t), str(lexeme), int(s), int(a)) for t, lexeme, s, a in cursor.fetchall()]


def stored_term_counts(
    cursor: CursorWrapper, terms: Sequence[str], tenant: str | None
) -> list[int | None]:
    """Each term's indexed messages in ``tenant`` (``None``: every tenant), or ``None``
    for a term whose counts are not stored."""
    where, params = ("AND t.tenant = %s", [tenant]) if tenant is not None else ("", [])
    cursor.execute(
        f"SELECT EXISTS (SELECT 1 FROM {table(CountedTerm)} k WHERE k.lexeme = q.lexeme), "
        f"COALESCE((SELECT sum(t.rows) FROM {table(TermCount)} t "
        f"WHERE t.lexeme = q.lexeme {where}), 0) "
        "FROM unnest(%s::text[]) WITH ORDINALITY AS q(lexeme, n) ORDER BY q.n",
        [*params, [stored_term(term) for term in terms]],
    )
    return [int(count) if counted else None for counted, count in cursor.fetchall()]


def stored_total(cursor: CursorWrapper, tenant: str | None) -> int:
    """N: the indexed messages of ``tenant`` (``None``: of every tenant)."""
    where, params = (" AND tenant = %s", [tenant]) if tenant is not None else ("", [])
    cursor.execute(
        f"SELECT COALESCE(sum(rows), 0) FROM {table(TermCount)} WHERE lexeme = ''{where}",
        params,
    )
    row = cursor.fetchone()
    return int(row[0]) if row else 0
