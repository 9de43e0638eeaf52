"""PostgreSQL: which terms and which tenants get stored counts (``postgresql.counts.stored``),
chosen again from every vector by the migrations and ``backfill_transcripts
--count-terms`` (a repair: the writes' folds choose them as the data grows, ``choice``).

The terms are chosen by one pass over every vector taken before any lock, so message
writers go on meanwhile (a term's count there only decides whether it is counted). The
rest holds off message writers (not searches) for as long as its changes take, not a
pass over the table: the terms no longer common stop being counted, the tenants that
became big (or small) have their counts moved from (or back to) tenant ``""``, the newly
common terms are counted from the rows holding them, and every other count is the one
the triggers kept exact.
"""

from __future__ import annotations

from django.db import transaction
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.backends.utils import CursorWrapper

from ....models import Chat, CountedTenant, CountedTerm, Message, TermCount, TermCountDelta
from ...chat_filter import table
from ..storage import tsquery_operand
from .deltas import fold_function_sql, sequence_name
from .stored import (
    COUNTED_MIN_ROWS,
    COUNTED_TENANT_MIN_ROWS,
    IS_TERM,
    TERMS,
    absorb_deltas,
    bucket_sql,
    create_triggers,
    has_deltas,
    rebuild_term_counts,
    replace_function,
    stored_total,
)

__all__ = [
    "cap_folds",
    "count_big_tenants_only",
    "count_by_bucket",
    "count_by_deltas",
    "count_by_owner",
    "count_every_tenant",
    "count_with_locks",
    "create_term_counts",
    "keep_counts",
    "refresh_term_counts",
]


def create_term_counts(schema_editor: BaseDatabaseSchemaEditor) -> None:
    """Migration 0005's PostgreSQL step: the triggers (counting every tenant's terms),
    then the terms to count and their counts from the rows already there."""
    create_triggers(schema_editor, rule="every_tenant")
    with schema_editor.connection.cursor() as cursor:
        common = _common_terms(cursor, COUNTED_MIN_ROWS)
        with transaction.atomic(using=cursor.db.alias):
            cursor.execute(f"LOCK TABLE {table(Message)} IN SHARE MODE")
            _replace(cursor, CountedTerm, "lexeme", sorted(common))
            rebuild_term_counts(cursor, legacy=True)


def count_big_tenants_only(schema_editor: BaseDatabaseSchemaEditor) -> None:
    """Migration 0006's PostgreSQL step on its new ``TermCount``: own term counts for the
    big tenants only, by role."""
    replace_function(schema_editor, rule="sharded")
    with schema_editor.connection.cursor() as cursor:
        refresh_term_counts(
            cursor, COUNTED_MIN_ROWS, tenant_min_rows=COUNTED_TENANT_MIN_ROWS, rebuild=True
        )


def count_every_tenant(schema_editor: BaseDatabaseSchemaEditor) -> None:
    """Migration 0006 backwards, on 0005's ``TermCount`` again: every tenant's term
    counts on its own, no role."""
    replace_function(schema_editor, rule="every_tenant")
    with schema_editor.connection.cursor() as cursor:
        rebuild_term_counts(cursor, legacy=True)


def count_by_deltas(schema_editor: BaseDatabaseSchemaEditor) -> None:
    """Migration 0009's PostgreSQL step, on its new ``TermCountDelta``: the serial's
    sequence, each count's shards summed into one row (shard 0), and the triggers that
    append deltas. Holds off message writers for as long as that takes (no pass over
    the messages)."""
    counts, deltas = table(TermCount), table(TermCountDelta)
    sequence = sequence_name()
    schema_editor.execute(f"CREATE SEQUENCE {sequence} AS bigint OWNED BY {deltas}.serial")
    schema_editor.execute(
        f"ALTER TABLE {deltas} ALTER COLUMN serial SET DEFAULT nextval('{sequence}'::regclass)"
    )
    with schema_editor.connection.cursor() as cursor, transaction.atomic(using=cursor.db.alias):
        cursor.execute(f"LOCK TABLE {table(Message)} IN SHARE MODE")
        cursor.execute(
            f"WITH moved AS (DELETE FROM {counts} WHERE shard <> 0 "
            "RETURNING lexeme, tenant, role, rows) "
            f"INSERT INTO {counts} (lexeme, tenant, role, shard, rows) "
            "SELECT lexeme, tenant, role, 0, sum(rows) FROM moved GROUP BY 1, 2, 3 "
            "ON CONFLICT (lexeme, tenant, role, shard) "
            f"DO UPDATE SET rows = {counts}.rows + EXCLUDED.rows"
        )
        cursor.execute(f"DELETE FROM {counts} WHERE rows = 0")
        replace_function(cursor, rule="deltas")


def count_with_locks(schema_editor: BaseDatabaseSchemaEditor) -> None:
    """Migration 0009 backwards (its ``TermCountDelta`` is dropped next): every delta
    added into its count, and 0006's locked triggers again."""
    with schema_editor.connection.cursor() as cursor, transaction.atomic(using=cursor.db.alias):
        cursor.execute(f"LOCK TABLE {table(Message)} IN SHARE MODE")
        absorb_deltas(cursor)
        replace_function(cursor, rule="sharded")


def count_by_owner(schema_editor: BaseDatabaseSchemaEditor) -> None:
    """Migration 0010's PostgreSQL step: triggers that append deltas under the message's
    own tenant, folds that choose the counted terms and tenants (``choice``). Pending
    deltas stay valid (each names a count's own tenant, or ``""``, whose counts live
    there); no lock, no pass over the messages."""
    with schema_editor.connection.cursor() as cursor:
        replace_function(cursor)


def count_by_bucket(schema_editor: BaseDatabaseSchemaEditor) -> None:
    """Migration 0010 backwards (its ``CountingTerm`` is dropped next): every delta added
    into the count of its tenant's counts, and 0009's triggers again."""
    with schema_editor.connection.cursor() as cursor, transaction.atomic(using=cursor.db.alias):
        cursor.execute(f"LOCK TABLE {table(Message)} IN SHARE MODE")
        absorb_deltas(cursor)
        replace_function(cursor, rule="deltas")


def cap_folds(schema_editor: BaseDatabaseSchemaEditor) -> None:
    """Migration 0011's PostgreSQL step: the folds' function again, a fold of every key
    taking at most ``FOLD_CLAIM_MAX`` deltas (and so locks); backwards nothing, the
    capped function serving 0010 as well."""
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(fold_function_sql())


def keep_counts(schema_editor: BaseDatabaseSchemaEditor) -> None:
    """Nothing: the other direction of a step whose table the migration replaces next."""


def refresh_term_counts(
    cursor: CursorWrapper,
    min_rows: int = COUNTED_MIN_ROWS,
    *,
    tenant_min_rows: int = COUNTED_TENANT_MIN_ROWS,
    rebuild: bool = False,
) -> int:
    """Choose the terms to count (those in at least ``min_rows`` indexed messages) and
    the tenants that count them on their own (at least ``tenant_min_rows``), and count
    what is newly chosen; the number of terms counted.

    ``rebuild`` (a migration: rows may have been written under another rule) chooses
    the tenants from the rows too and counts everything again instead.
    """
    common = _common_terms(cursor, min_rows)
    big = _tenants_in_rows(cursor, tenant_min_rows) if rebuild else []
    with transaction.atomic(using=cursor.db.alias):
        cursor.execute(f"LOCK TABLE {table(Message)} IN SHARE MODE")
        if has_deltas(cursor):  # the counts below are read and changed in their rows
            absorb_deltas(cursor)
        if rebuild:
            _replace(cursor, CountedTerm, "lexeme", sorted(common))
            _replace(cursor, CountedTenant, "tenant", big)
            rebuild_term_counts(cursor)
        else:
            added = _drop_and_find_new_terms(cursor, common)
            _move_tenants(cursor, tenant_min_rows)
            if added:
                # each term's rows through GIN, unless together they outnumber the table's
                one_pass = sum(common[lexeme] for lexeme in added) > stored_total(cursor, None)
                _count_new_terms(cursor, added, one_pass=one_pass)
        cursor.execute(f"SELECT count(*) FROM {table(CountedTerm)}")
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def _replace(
    cursor: CursorWrapper, model: type[CountedTerm | CountedTenant], column: str, values: list[str]
) -> None:
    cursor.execute(f"DELETE FROM {table(model)}")
    cursor.execute(f"INSERT INTO {table(model)} ({column}) SELECT unnest(%s::text[])", [values])


def _common_terms(cursor: CursorWrapper, min_rows: int) -> dict[str, int]:
    """The terms in at least ``min_rows`` indexed messages, with those numbers (one pass
    over every vector)."""
    cursor.execute(
        f"SELECT l.lexeme, count(*) FROM {table(Message)} r "
        f"CROSS JOIN LATERAL {TERMS} AS l(lexeme) "
        f"WHERE r.search_vector IS NOT NULL AND {IS_TERM} "
        "GROUP BY l.lexeme HAVING count(*) >= %s",
        [min_rows],
    )
    return {str(lexeme): int(rows) for lexeme, rows in cursor.fetchall()}


def _tenants_in_rows(cursor: CursorWrapper, min_rows: int) -> list[str]:
    """The tenants (not ``""``) with at least ``min_rows`` indexed messages, counted from
    the rows (a rebuild: their stored N may follow another rule)."""
    cursor.execute(
        f"SELECT tenant FROM {table(Message)} WHERE search_vector IS NOT NULL "
        "AND tenant <> '' GROUP BY tenant HAVING count(*) >= %s ORDER BY tenant",
        [min_rows],
    )
    return [str(row[0]) for row in cursor.fetchall()]


def _drop_and_find_new_terms(cursor: CursorWrapper, common: dict[str, int]) -> list[str]:
    """Under the lock: stop counting the terms no longer common; the new ones."""
    cursor.execute(f"SELECT lexeme FROM {table(CountedTerm)}")
    counted = {str(row[0]) for row in cursor.fetchall()}
    dropped = sorted(counted - common.keys())
    if dropped:
        for model in (TermCount, CountedTerm):  # no delta is pending (absorbed)
            cursor.execute(
                f"DELETE FROM {table(model)} WHERE lexeme IN (SELECT unnest(%s::text[]))",
                [dropped],
            )
    return sorted(common.keys() - counted)


def _move_tenants(cursor: CursorWrapper, min_rows: int) -> None:
    """Under the lock: the tenants whose stored N reached ``min_rows`` get their own term
    counts (taken off tenant ``""``), those below it (or gone) give theirs back. Each
    moved tenant's rows are read through its chats (``Chat.tenant``): a message whose
    tenant differs from its chat's, which only raw SQL makes and ``--verify`` reports as
    stale, is not moved (``--fix`` rebuilds)."""
    cursor.execute(
        f"SELECT tenant FROM {table(TermCount)} WHERE lexeme = '' AND tenant <> '' "
        "GROUP BY tenant HAVING sum(rows) >= %s",
        [min_rows],
    )
    big = {str(row[0]) for row in cursor.fetchall()}
    cursor.execute(f"SELECT tenant FROM {table(CountedTenant)}")
    counted = {str(row[0]) for row in cursor.fetchall()}
    grown, shrunk = sorted(big - counted), sorted(counted - big)
    if not (grown or shrunk):
        return
    tenants = [*grown, *shrunk]
    signs = [1] * len(grown) + [-1] * len(shrunk)
    # each term of each moved row: +1 on its own count and -1 on tenant "" (or back)
    cursor.execute(
        f"INSERT INTO {table(TermCount)} (lexeme, tenant, role, shard, rows) "
        "SELECT l.lexeme, b.tenant, r.role, b.shard, sum(b.n) "
        "FROM unnest(%s::text[], %s::int[]) AS s(tenant, sign) "
        f"JOIN {table(Chat)} c ON c.tenant = s.tenant "
        f"JOIN {table(Message)} r ON r.chat_id = c.id AND r.tenant = s.tenant "
        f"CROSS JOIN LATERAL {TERMS} AS l(lexeme) "
        "CROSS JOIN LATERAL (VALUES (r.tenant, 0::smallint, s.sign), "
        "('', 0::smallint, -s.sign)) AS b(tenant, shard, n) "
        "WHERE r.search_vector IS NOT NULL "
        f"AND l.lexeme IN (SELECT lexeme FROM {table(CountedTerm)}) "
        "GROUP BY 1, 2, 3, 4 HAVING sum(b.n) <> 0 "
        "ON CONFLICT (lexeme, tenant, role, shard) DO UPDATE "
        f"SET rows = {table(TermCount)}.rows + EXCLUDED.rows "
        "RETURNING lexeme, tenant, role, shard, rows",
        [tenants, signs],
    )
    emptied = [key for *key, rows in cursor.fetchall() if rows == 0]
    if emptied:
        lexemes, owners, roles, shards = (list(column) for column in zip(*emptied, strict=True))
        cursor.execute(
            f"DELETE FROM {table(TermCount)} t USING unnest(%s::text[], %s::text[], "
            "%s::text[], %s::smallint[]) AS z(lexeme, tenant, role, shard) "
            "WHERE t.lexeme = z.lexeme AND t.tenant = z.tenant AND t.role = z.role "
            "AND t.shard = z.shard AND t.rows = 0",
            [lexemes, owners, roles, shards],
        )
    if shrunk:
        cursor.execute(
            f"DELETE FROM {table(CountedTenant)} WHERE tenant IN (SELECT unnest(%s::text[]))",
            [shrunk],
        )
    if grown:
        cursor.execute(
            f"INSERT INTO {table(CountedTenant)} (tenant) SELECT unnest(%s::text[])", [grown]
        )


def _count_new_terms(cursor: CursorWrapper, lexemes: list[str], *, one_pass: bool) -> None:
    """Count ``lexemes`` (not counted until now) and start counting those some row holds
    (one no row holds any more, its rows deleted since the choice, is not kept: no word
    of a deleted message stays behind). Each term's rows as GIN finds them (a tenant
    count per term: 154,479 counts of 100 terms at 2.7M messages in 1.7 s, against 23.7 s
    for unnesting every vector holding any of them), or ``one_pass`` over every vector
    (the first refresh, many new terms)."""
    tenant, shard = bucket_sql()
    if one_pass:
        counts = (
            f"SELECT l.lexeme, {tenant}, r.role, {shard}, count(*) "
            f"FROM {table(Message)} r CROSS JOIN LATERAL {TERMS} AS l(lexeme) "
            "WHERE r.search_vector IS NOT NULL "
            "AND l.lexeme IN (SELECT unnest(%s::text[])) GROUP BY 1, 2, 3, 4"
        )
        params: list[list[str]] = [lexemes]
    else:
        counts = (
            "SELECT t.lexeme, c.tenant, c.role, c.shard, c.n "
            "FROM unnest(%s::text[], %s::tsquery[]) AS t(lexeme, query) CROSS JOIN LATERAL "
            f"(SELECT {tenant} AS tenant, r.role, {shard} AS shard, count(*) AS n "
            f"FROM {table(Message)} r WHERE r.search_vector @@ t.query GROUP BY 1, 2, 3) c"
        )
        params = [lexemes, [tsquery_operand(lexeme) for lexeme in lexemes]]
    # the terms that got a count row are the ones counted from now on
    cursor.execute(
        f"WITH counted AS (INSERT INTO {table(TermCount)} (lexeme, tenant, role, shard, rows) "
        f"{counts} RETURNING lexeme) "
        f"INSERT INTO {table(CountedTerm)} (lexeme) SELECT DISTINCT lexeme FROM counted",
        params,
    )
