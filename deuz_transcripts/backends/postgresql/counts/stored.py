"""PostgreSQL: the number of indexed messages holding each common term, kept by triggers.

Exact idf needs n_t, the rows of the search's scope holding term t. GIN finds those rows
but cannot count them without visiting each one: a rare term costs little, a common one
its every row (438 ms for one word of an unscoped search at 1M messages). So the terms in
at least ``COUNTED_MIN_ROWS`` indexed messages (``CountedTerm``) have their counts stored
in ``TermCount``, with lexeme ``""`` for N. Statement-level ``AFTER`` triggers on the
message table add each inserted vector's counted terms and take each deleted one's off
(an UPDATE: the rows whose vector, tenant, role or chat changed, old off and new on) in the
writing transaction, so every path that changes message rows (ORM cascades, raw SQL, a
partition conversion) keeps them true; a ``TRUNCATE`` of the message table does not fire
them (``backfill_transcripts --fix`` rebuilds). Only common terms: counting every term
per tenant took 30 rows a message (a tenant's rare words).

Where the counts go: N per tenant; a term's count per tenant only for the big tenants
(``CountedTenant``, at least ``COUNTED_TENANT_MIN_ROWS`` indexed messages), and for
every other message under tenant ``""``. A search of one big tenant or of every chat
reads N and the counted terms' n_t with a few index lookups; a small tenant's n_t are
counted in GIN, which costs little there (every term holds fewer rows than the tenant).
Counting every tenant's terms made the table grow as tenants x common terms: 18.9M rows
(2.1 GB) for 10,000 tenants at 2.7M messages, about 24 count rows written per message,
and the load fell to 1,000 messages a second (bench/RESULTS.md). The writes' folds
choose both the terms and the tenants as the data grows (``postgresql.counts.choice``,
since migration 0010; searches mark the common terms the planner's statistics leave out,
``postgresql.counts.notes``); ``refresh_term_counts`` (``postgresql.counts.refresh``: the
migrations, ``backfill_transcripts --count-terms``) chooses them again from every vector.

Since migration 0009 the triggers only append ``TermCountDelta`` rows, which readers
add to the ``TermCount`` rows and folds move into them (``postgresql.counts.deltas``):
writers of one tenant no longer queue. Migrations 0005 to 0008's triggers (``RULES``,
kept for migrating back) took an advisory lock per (tenant, shard) held to COMMIT and
updated the count rows in place; tenant ``""`` split its counts over ``SHARDS`` rows per
term so that writers of other shards ran on.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Literal, NamedTuple

from django.db import transaction
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.backends.utils import CursorWrapper

from ....models import (
    CountedTenant,
    CountedTerm,
    CountingTerm,
    Message,
    TermCount,
    TermCountDelta,
)
from ....text import stored_term
from ...chat_filter import table
from .choice import (
    COUNTED_MIN_ROWS,
    COUNTED_TENANT_MIN_ROWS,
    IS_TERM,
    choose_functions_sql,
    drop_choice_sql,
)
from .deltas import counts_relation, delta_statements, drop_fold_sql, fold_function_sql

__all__ = [
    "COUNTED_MIN_ROWS",
    "COUNTED_TENANT_MIN_ROWS",
    "IS_TERM",
    "RULES",
    "SHARDS",
    "TERMS",
    "Rule",
    "StoredCounts",
    "absorb_deltas",
    "bucket_sql",
    "count_drift",
    "create_triggers",
    "drop_term_counts",
    "each_stored_or_null",
    "has_counting",
    "has_deltas",
    "is_stored_sql",
    "lexeme_stored_sql",
    "per_term_array",
    "rebuild_term_counts",
    "replace_function",
    "stored_or",
    "stored_term_counts",
    "stored_total",
    "stored_total_sql",
    "tenant_counted_sql",
]

#: Tenant ``""``'s counts were split over this many rows per term (migrations 0005-0008).
SHARDS = 8
_LOCK_NAMESPACE = 733_121  # the app's key space for count locks (733_120: chat locks)
_FUNCTION = "deuz_count_terms"
_TRIGGERS = {
    "INSERT": "REFERENCING NEW TABLE AS deuz_new",
    "DELETE": "REFERENCING OLD TABLE AS deuz_old",
    "UPDATE": "REFERENCING OLD TABLE AS deuz_old NEW TABLE AS deuz_new",
}
#: Where row ``r``'s N is counted: its tenant (tenant ``""``: sharded by chat).
_SHARD = f"(CASE WHEN r.tenant = '' THEN mod(r.chat_id, {SHARDS}) ELSE 0 END)::smallint"
TERMS = "unnest(tsvector_to_array(r.search_vector))"


#: Which triggers keep the counts: migration 0005's (every tenant's terms on its own, no
#: role, locked), 0006's (the big tenants' own, by role, locked and sharded), 0009's
#: (the same counts, appended as deltas), 0010's (deltas under the message's own tenant,
#: the folds choosing the counted terms and tenants: ``choice``).
Rule = Literal["every_tenant", "sharded", "deltas", "owner_deltas"]
RULES: tuple[Rule, ...] = ("every_tenant", "sharded", "deltas", "owner_deltas")


def bucket_sql(*, legacy: bool = False, sharded: bool = False) -> tuple[str, str]:
    """``(tenant, shard)`` under which row ``r``'s terms are counted: its own tenant's
    when that is a ``CountedTenant`` (``legacy``, migration 0005's rule: any tenant but
    ``""``), else ``""``; shard 0, or (``sharded``, ``legacy``: before migration 0009)
    tenant ``""``'s split by chat."""
    own = "r.tenant <> ''" if legacy else f"r.tenant IN (SELECT tenant FROM {table(CountedTenant)})"
    other = f"mod(r.chat_id, {SHARDS})" if sharded or legacy else "0"
    return (
        f"(CASE WHEN {own} THEN r.tenant ELSE '' END)",
        f"(CASE WHEN {own} THEN 0 ELSE {other} END)::smallint",
    )


#: A count's key: migration 0005's (``legacy``), and since 0006 with the message's role.
_LEGACY_KEY = ("lexeme", "tenant", "shard")
_KEY = ("lexeme", "tenant", "role", "shard")
_ARRAY_TYPES = {"lexeme": "text", "tenant": "text", "role": "text", "shard": "smallint"}


def _key(*, legacy: bool) -> tuple[str, ...]:
    return _LEGACY_KEY if legacy else _KEY


def _counted(
    rows: str, sign: int, *, legacy: bool = False, sharded: bool = False, owner: bool = False
) -> str:
    """``(tenant, role, shard, lexeme, n)`` of the vectors of ``rows`` (``legacy``: no
    role, every tenant's own): each counted term, and ``""`` for every row with a vector.
    ``owner`` (migration 0010's triggers): every term under the message's own tenant (the
    folds decide where it goes), the terms being counted too."""
    tenant, shard = (
        ("r.tenant", "0::smallint") if owner else bucket_sql(legacy=legacy, sharded=sharded)
    )
    role = "" if legacy else "r.role AS role, "
    n_shard = _SHARD if sharded or legacy else "0::smallint"
    terms = f"SELECT lexeme FROM {table(CountedTerm)}"
    if owner:
        terms = f"{terms} UNION ALL SELECT lexeme FROM {table(CountingTerm)}"
    return (
        f"SELECT {tenant} AS tenant, {role}{shard} AS shard, l.lexeme, {sign} AS n "
        f"FROM {rows} r CROSS JOIN LATERAL {TERMS} AS l(lexeme) "
        "WHERE r.search_vector IS NOT NULL "
        f"AND l.lexeme IN ({terms}) "
        f"UNION ALL SELECT r.tenant, {role}{n_shard}, '', {sign} "
        f"FROM {rows} r WHERE r.search_vector IS NOT NULL"
    )


def _shards(rows: str, *, legacy: bool) -> str:
    """``(tenant, shard)`` of every count the rows of ``rows`` with a vector change (rows
    without one count nothing)."""
    tenant, shard = bucket_sql(legacy=legacy, sharded=True)
    return (
        f"SELECT r.tenant, {_SHARD} AS shard FROM {rows} r WHERE r.search_vector IS NOT NULL "
        f"UNION SELECT {tenant}, {shard} FROM {rows} r WHERE r.search_vector IS NOT NULL"
    )


def _apply(shards: str, changes: str, *, removes: bool, legacy: bool) -> str:
    """The statements that lock the (tenant, shard) pairs of ``shards`` and add the sums
    of ``changes`` to their counts; with ``removes``, counts that reach 0 are deleted, and
    a counted term left with no count at all stops being counted, so no term held only by
    deleted messages stays behind in either table (docs/guarantees.md)."""
    counts = table(TermCount)
    key = _key(legacy=legacy)
    columns = ", ".join(key)
    grouped = ", ".join(f"c.{column}" for column in key)
    upsert = f"""
        INSERT INTO {counts} ({columns}, rows)
        SELECT {grouped}, sum(c.n) FROM ({changes}) c
        GROUP BY {grouped} HAVING sum(c.n) <> 0 ORDER BY {grouped}
        ON CONFLICT ({columns}) DO UPDATE SET rows = {counts}.rows + EXCLUDED.rows"""
    locks = f"""
        PERFORM count(pg_advisory_xact_lock({_LOCK_NAMESPACE}, s.k)) FROM (
            SELECT DISTINCT hashtext(c.tenant || '/' || c.shard) AS k FROM ({shards}) c
            ORDER BY 1) s;"""
    if not removes:
        return f"{locks}{upsert};"
    gone = ", ".join(f"gone_{column}s" for column in key)
    same = " AND ".join(f"t.{column} = z.{column}" for column in key)
    # a counted tenant whose last indexed message went leaves CountedTenant with it
    tenant_gone = (
        ""
        if legacy
        else f"""
            DELETE FROM {table(CountedTenant)} o WHERE o.tenant = ANY(gone_tenants)
                AND NOT EXISTS (SELECT 1 FROM {counts} t
                    WHERE t.lexeme = '' AND t.tenant = o.tenant);"""
    )
    return f"""{locks}
        WITH up AS ({upsert} RETURNING {columns}, rows)
        SELECT {", ".join(f"array_agg(up.{column})" for column in key)}
        INTO {gone} FROM up WHERE up.rows = 0;
        IF gone_lexemes IS NOT NULL THEN
            DELETE FROM {counts} t USING unnest({gone}) AS z({columns})
            WHERE {same} AND t.rows = 0;
            DELETE FROM {table(CountedTerm)} k WHERE k.lexeme = ANY(gone_lexemes)
                AND NOT EXISTS (SELECT 1 FROM {counts} t WHERE t.lexeme = k.lexeme);{tenant_gone}
        END IF;"""


def _function_sql(rule: Rule) -> str:
    legacy = rule == "every_tenant"
    changed = (
        "(SELECT o.* FROM deuz_old o JOIN deuz_new w ON w.id = o.id "
        "WHERE o.search_vector IS DISTINCT FROM w.search_vector "
        "OR o.tenant <> w.tenant OR o.chat_id <> w.chat_id OR o.role <> w.role)"
    )
    changed_new = changed.replace("SELECT o.*", "SELECT w.*")
    if rule in ("deltas", "owner_deltas"):
        owner = rule == "owner_deltas"
        inserted = delta_statements(_counted("deuz_new", 1, owner=owner), removes=False)
        deleted = delta_statements(_counted("deuz_old", -1, owner=owner), removes=True)
        updated = delta_statements(
            f"{_counted(changed, -1, owner=owner)} UNION ALL {_counted(changed_new, 1, owner=owner)}",
            removes=True,
        )
        declared = "due boolean; keys_lexemes text[]; keys_tenants text[]; keys_roles text[];"
    else:
        counted = {"legacy": legacy, "sharded": True}
        locked = {"legacy": legacy}
        inserted = _apply(
            _shards("deuz_new", **locked),
            _counted("deuz_new", 1, **counted),
            removes=False,
            **locked,
        )
        deleted = _apply(
            _shards("deuz_old", **locked),
            _counted("deuz_old", -1, **counted),
            removes=True,
            **locked,
        )
        updated = _apply(
            f"{_shards(changed, **locked)} UNION ALL {_shards(changed_new, **locked)}",
            f"{_counted(changed, -1, **counted)} UNION ALL {_counted(changed_new, 1, **counted)}",
            removes=True,
            **locked,
        )
        declared = "".join(f"gone_{c}s {_ARRAY_TYPES[c]}[];" for c in _key(legacy=legacy))
    return f"""
        CREATE OR REPLACE FUNCTION {_FUNCTION}() RETURNS trigger LANGUAGE plpgsql
        SET jit = off AS $body$
        DECLARE {declared}
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


def replace_function(
    cursor_or_editor: CursorWrapper | BaseDatabaseSchemaEditor, *, rule: Rule = "owner_deltas"
) -> None:
    """The triggers' function (with ``deltas`` rules the folds' function, with
    ``owner_deltas`` the choice's too) of ``rule``."""
    owner = rule == "owner_deltas"
    if owner:
        for statement in choose_functions_sql():
            cursor_or_editor.execute(statement)
    if rule in ("deltas", "owner_deltas"):
        cursor_or_editor.execute(fold_function_sql(by_owner=owner))
    cursor_or_editor.execute(_function_sql(rule))
    if rule not in ("deltas", "owner_deltas"):
        cursor_or_editor.execute(drop_fold_sql())
    if not owner:
        for statement in drop_choice_sql():
            cursor_or_editor.execute(statement)


def create_triggers(
    cursor_or_editor: CursorWrapper | BaseDatabaseSchemaEditor, *, rule: Rule = "owner_deltas"
) -> None:
    """The function and the message table's three triggers (again after the table is
    replaced: ``partition_messages``)."""
    replace_function(cursor_or_editor, rule=rule)
    for event, referencing in _TRIGGERS.items():
        cursor_or_editor.execute(
            f"CREATE TRIGGER {_trigger_name(event)} AFTER {event} ON {table(Message)} "
            f"{referencing} FOR EACH STATEMENT EXECUTE FUNCTION {_FUNCTION}()"
        )


def drop_term_counts(schema_editor: BaseDatabaseSchemaEditor) -> None:
    for event in _TRIGGERS:
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {_trigger_name(event)} ON {table(Message)}")
    schema_editor.execute(f"DROP FUNCTION IF EXISTS {_FUNCTION}()")
    schema_editor.execute(drop_fold_sql())
    for statement in drop_choice_sql():
        schema_editor.execute(statement)


def has_deltas(cursor: CursorWrapper) -> bool:
    """Whether the database has migration 0009's ``TermCountDelta`` (a migration before it
    runs the code of today)."""
    return _has_table(cursor, TermCountDelta)


def has_counting(cursor: CursorWrapper) -> bool:
    """Whether the database has migration 0010's ``CountingTerm`` (deltas by owner)."""
    return _has_table(cursor, CountingTerm)


def _has_table(cursor: CursorWrapper, model: type[TermCountDelta | CountingTerm]) -> bool:
    cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [table(model)])
    row = cursor.fetchone()
    return bool(row and row[0])


def _owner_bucket(alias: str) -> str:
    """Where count part ``alias`` (a delta by owner, or a count row) belongs: N and the
    counted tenants' terms under their tenant, every other term under ``""``."""
    return (
        f"(CASE WHEN {alias}.lexeme = '' OR {alias}.tenant IN "
        f"(SELECT tenant FROM {table(CountedTenant)}) THEN {alias}.tenant ELSE '' END)"
    )


def absorb_deltas(cursor: CursorWrapper) -> None:
    """Every pending delta added into its count, without the folds' locks: for callers
    holding off message writers (a ``SHARE`` lock on the message table: no write and no
    fold runs, so every delta is committed and none is held). Since migration 0010 a
    delta goes where its tenant's counts live, and the terms being counted stop being
    counted (their counts and deltas are partial: a refresh or a rebuild counts them
    again, or the folds choose them again)."""
    counts, deltas = table(TermCount), table(TermCountDelta)
    bucket = "tenant"
    if has_counting(cursor):
        for model in (TermCount, TermCountDelta):
            cursor.execute(
                f"DELETE FROM {table(model)} WHERE lexeme IN "
                f"(SELECT lexeme FROM {table(CountingTerm)})"
            )
        cursor.execute(f"DELETE FROM {table(CountingTerm)}")
        # deltas of a term no longer counted (a word whose last rows went) are dropped
        cursor.execute(
            f"DELETE FROM {deltas} d WHERE d.lexeme <> '' AND d.lexeme NOT IN "
            f"(SELECT lexeme FROM {table(CountedTerm)})"
        )
        bucket = _owner_bucket(deltas)
    cursor.execute(
        f"WITH taken AS (DELETE FROM {deltas} RETURNING lexeme, {bucket} AS tenant, role, rows) "
        f"INSERT INTO {counts} (lexeme, tenant, role, shard, rows) "
        "SELECT lexeme, tenant, role, 0, sum(rows) FROM taken GROUP BY 1, 2, 3 "
        "HAVING sum(rows) <> 0 ON CONFLICT (lexeme, tenant, role, shard) "
        f"DO UPDATE SET rows = {counts}.rows + EXCLUDED.rows"
    )
    cursor.execute(f"DELETE FROM {counts} WHERE rows = 0")


def rebuild_term_counts(cursor: CursorWrapper, *, legacy: bool = False) -> None:
    """The counted terms' counts again from the vectors (after a ``TRUNCATE``, or a drift
    ``verify`` found), in one transaction holding off message writers (not searches); a
    counted term no row holds any more stops being counted. ``legacy``: migration
    0005's counts."""
    columns = ", ".join(_key(legacy=legacy))
    grouped = ", ".join(f"c.{column}" for column in _key(legacy=legacy))
    with transaction.atomic(using=cursor.db.alias):
        cursor.execute(f"LOCK TABLE {table(Message)} IN SHARE MODE")
        if not legacy and has_deltas(cursor):
            cursor.execute(f"DELETE FROM {table(TermCountDelta)}")
        if not legacy and has_counting(cursor):  # counted here from the rows, exactly
            cursor.execute(
                f"WITH moved AS (DELETE FROM {table(CountingTerm)} RETURNING lexeme) "
                f"INSERT INTO {table(CountedTerm)} (lexeme) SELECT lexeme FROM moved "
                "ON CONFLICT DO NOTHING"
            )
        cursor.execute(f"DELETE FROM {table(TermCount)}")
        cursor.execute(
            f"INSERT INTO {table(TermCount)} ({columns}, rows) SELECT {grouped}, sum(c.n) "
            f"FROM ({_counted(table(Message), 1, legacy=legacy)}) c GROUP BY {grouped}"
        )
        # a counted term no row holds (its messages deleted) is not kept either
        cursor.execute(
            f"DELETE FROM {table(CountedTerm)} k WHERE NOT EXISTS "
            f"(SELECT 1 FROM {table(TermCount)} t WHERE t.lexeme = k.lexeme)"
        )


def count_drift(cursor: CursorWrapper, limit: int = 20) -> list[tuple[str, str, str, int, int]]:
    """``(tenant, role, lexeme, stored, actual)`` of counts that differ from the vectors
    (at most ``limit``): empty when every count is true. Reads every vector. A count is
    its row plus the deltas of its tenant (since migration 0010, of every uncounted
    tenant for tenant ``""``); a term being counted is not read by searches yet, nor
    checked."""
    owner = has_counting(cursor)
    bucket = _owner_bucket("t") if owner else "t.tenant"
    counted = (
        f" WHERE t.lexeme = '' OR t.lexeme IN (SELECT lexeme FROM {table(CountedTerm)})"
        if owner
        else ""
    )
    cursor.execute(
        f"WITH actual AS (SELECT c.tenant, c.role, c.lexeme, sum(c.n) AS n "
        f"FROM ({_counted(table(Message), 1)}) c GROUP BY c.tenant, c.role, c.lexeme), "
        f"stored AS (SELECT {bucket} AS tenant, t.role, t.lexeme, sum(t.rows) AS n "
        f"FROM {counts_relation()} t{counted} GROUP BY 1, 2, 3) "
        "SELECT COALESCE(s.tenant, a.tenant), COALESCE(s.role, a.role), "
        "COALESCE(s.lexeme, a.lexeme), COALESCE(s.n, 0), COALESCE(a.n, 0) "
        "FROM stored s FULL JOIN actual a "
        "ON a.tenant = s.tenant AND a.role = s.role AND a.lexeme = s.lexeme "
        "WHERE COALESCE(s.n, 0) <> COALESCE(a.n, 0) ORDER BY 1, 2, 3 LIMIT %s",
        [limit],
    )
    return [
        (str(t), str(r), str(lexeme), int(s), int(a)) for t, r, lexeme, s, a in cursor.fetchall()
    ]


class StoredCounts(NamedTuple):
    """Whose stored counts a search reads: a tenant's (``None``: every tenant's), of some
    roles (``None``: every role)."""

    tenant: str | None
    roles: Collection[str] | None


def _where(
    tenant: str | None, roles: Collection[str] | None, alias: str = "t"
) -> tuple[str, list[Any]]:
    """`` AND t.tenant = %s AND t.role = ANY(%s)`` as far as they are set."""
    where, params = "", list[Any]()
    if tenant is not None:
        where, params = f" AND {alias}.tenant = %s", [tenant]
    if roles is not None:
        where, params = f"{where} AND {alias}.role = ANY(%s)", [*params, sorted(roles)]
    return where, params


def stored_term_counts(
    cursor: CursorWrapper,
    terms: Sequence[str],
    tenant: str | None,
    roles: Collection[str] | None = None,
) -> list[int | None]:
    """Each term's indexed messages in ``tenant`` (``None``: every tenant) of ``roles``
    (``None``: any role), or ``None`` for a term whose counts are not stored (in a tenant
    not counted: every term)."""
    own, own_params = "", []
    if tenant is not None:
        own = f" AND EXISTS (SELECT 1 FROM {table(CountedTenant)} o WHERE o.tenant = %s)"
        own_params = [tenant]
    where, params = _where(tenant, roles)
    cursor.execute(
        f"SELECT EXISTS (SELECT 1 FROM {table(CountedTerm)} k WHERE k.lexeme = q.lexeme){own}, "
        f"COALESCE((SELECT sum(t.rows) FROM {counts_relation(tenant=tenant is not None)} t "
        f"WHERE t.lexeme = q.lexeme{where}), 0) "
        "FROM unnest(%s::text[]) WITH ORDINALITY AS q(lexeme, n) ORDER BY q.n",
        [*own_params, *params, [stored_term(term) for term in terms]],
    )
    return [int(count) if counted else None for counted, count in cursor.fetchall()]


def stored_or(
    term: str,
    tenant: str | None,
    roles: Collection[str] | None,
    fallback: tuple[str, list[Any]],
) -> tuple[str, list[Any]]:
    """A scalar SQL expression: ``term``'s stored count (as ``stored_term_counts``) where
    it is counted for ``tenant``, else ``fallback``; each evaluated only when its branch
    is taken, so counts of a statement share its snapshot."""
    counted, counted_params = is_stored_sql(term, tenant)
    where, params = _where(tenant, roles)
    parts = counts_relation(tenant=tenant is not None)
    count = f"COALESCE((SELECT sum(t.rows) FROM {parts} t WHERE t.lexeme = %s{where}), 0)"
    return (
        f"CASE WHEN {counted} THEN {count} ELSE {fallback[0]} END",
        [*counted_params, stored_term(term), *params, *fallback[1]],
    )


def each_stored_or_null(
    terms: Sequence[str], tenant: str | None, roles: Collection[str] | None
) -> tuple[str, list[Any]]:
    """A scalar SQL expression: an array of each term's stored count (as ``stored_or``
    with ``NULL`` for a term not stored), in order (``per_term_array``)."""
    counted, counted_params = lexeme_stored_sql("q.lexeme", tenant)
    where, params = _where(tenant, roles)
    parts = counts_relation(tenant=tenant is not None)
    count = f"COALESCE((SELECT sum(t.rows) FROM {parts} t WHERE t.lexeme = q.lexeme{where}), 0)"
    return (
        per_term_array(counted, count, {"lexeme": "text"}),
        [*counted_params, *params, [stored_term(term) for term in terms]],
    )


def per_term_array(condition: str, value: str, columns: Mapping[str, str]) -> str:
    """A scalar SQL expression: the array of ``value`` where ``condition`` holds (else
    ``NULL``), one element per row of an ``unnest`` of one array parameter per column
    (``columns``: name to SQL type; ``q.<name>`` in both), in order. One subquery to plan
    for any number of terms: PostgreSQL plans every subquery of a statement, run or not,
    which cost a small scope's long query more than the search itself (bench/RESULTS.md)."""
    arrays = ", ".join(f"%s::{kind}[]" for kind in columns.values())
    return (
        f"(SELECT array_agg(CASE WHEN {condition} THEN {value} END ORDER BY q.i) "
        f"FROM unnest({arrays}) WITH ORDINALITY AS q({', '.join(columns)}, i))"
    )


def lexeme_stored_sql(lexeme: str, tenant: str | None) -> tuple[str, list[Any]]:
    """``is_stored_sql`` of a stored term given as SQL (e.g. ``q.lexeme``)."""
    own, own_params = "", list[Any]()
    if tenant is not None:
        own, own_params = tenant_counted_sql(tenant)
        own = f" AND {own}"
    return (
        f"EXISTS (SELECT 1 FROM {table(CountedTerm)} k WHERE k.lexeme = {lexeme}){own}",
        own_params,
    )


def is_stored_sql(term: str, tenant: str | None) -> tuple[str, list[Any]]:
    """A boolean SQL expression: whether ``term``'s count is stored for ``tenant``
    (``None``: every tenant's)."""
    sql, params = lexeme_stored_sql("%s", tenant)
    return sql, [stored_term(term), *params]


def tenant_counted_sql(tenant: str) -> tuple[str, list[Any]]:
    """A boolean SQL expression: whether ``tenant`` has term counts of its own."""
    return f"EXISTS (SELECT 1 FROM {table(CountedTenant)} o WHERE o.tenant = %s)", [tenant]


def stored_total(
    cursor: CursorWrapper, tenant: str | None, roles: Collection[str] | None = None
) -> int:
    """N: the indexed messages of ``tenant`` (``None``: of every tenant) of ``roles``
    (``None``: any role)."""
    cursor.execute(*stored_total_sql(tenant, roles))
    row = cursor.fetchone()
    return int(row[0]) if row else 0


def stored_total_sql(
    tenant: str | None, roles: Collection[str] | None = None
) -> tuple[str, list[Any]]:
    """``stored_total``'s statement."""
    where, params = _where(tenant, roles)
    return (
        f"SELECT COALESCE(sum(t.rows), 0) FROM {counts_relation(tenant=tenant is not None)} t "
        f"WHERE t.lexeme = ''{where}",
        params,
    )
