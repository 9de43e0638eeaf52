"""PostgreSQL: which terms and tenants have stored counts, chosen by the writes' folds as
the data grows, with no periodic chore (``backfill_transcripts --count-terms`` repairs).

Tenants. Every delta names its message's own tenant and a fold adds it where the
tenant's counts live when it folds (``deltas.fold_function_sql``). A fold of every key
that raised a tenant's N past ``COUNTED_TENANT_MIN_ROWS`` gives it its own counts: the
tenant's rows holding each counted term, less what its own rows and deltas already hold,
appended as deltas (``+`` under the tenant, ``-`` under ``""``), and the tenant joins
``CountedTenant``, in one transaction. Writers never need to know: whatever they append
meanwhile names the tenant and goes where the tenant's counts live when folded. Only
folds must not read ``CountedTenant`` on both sides of the change, so folds hold
``CHOICE_LOCK`` shared (taken before the statement that reads it) and a choice takes it
exclusively, both with ``try`` (whoever misses it skips: no writer waits).

Terms. A writer decides which terms it counts when its trigger runs; one that decided
before a term became counted and commits after the term's rows were counted would be
missed. So a term is counted in two steps, like ``CREATE INDEX CONCURRENTLY``: marked
(``CountingTerm``: writers append its deltas from then on, searches do not read them),
seen by a later transaction, which stamps it with a fresh transaction id (a
subtransaction's), and, once no transaction of the database older than that stamp is
running or holds a snapshot (no writer that missed the mark is still running), counted
from its rows through GIN less what its rows and deltas hold, appended per count as
deltas, and moved to ``CountedTerm``. Candidates come from the planner's statistics of
the vector column (``pg_stats.most_common_elems``, kept by autovacuum's ``ANALYZE``),
an estimate that only nominates: the count itself is exact. They are read by the first
fold after each ANALYZE only (reading them costs a few milliseconds). The terms past the
threshold that the statistics leave out are marked by the searches that count them in
GIN (``notes``), and go through the same steps from their mark on.
"""

from __future__ import annotations

from ....models import (
    Chat,
    CountedTenant,
    CountedTerm,
    CountingTerm,
    Message,
    TermCount,
    TermCountDelta,
)
from ...chat_filter import table
from ..storage import VECTOR_COLUMN

__all__ = [
    "CHOICE_LOCK",
    "CHOOSE_FUNCTION",
    "COUNTED_MIN_ROWS",
    "COUNTED_TENANT_MIN_ROWS",
    "FINALIZE_EVERY",
    "IS_TERM",
    "choice_call",
    "choose_functions_sql",
    "drop_choice_sql",
    "forget_sql",
]

#: Terms in at least this many indexed messages get stored counts (fewer: GIN counts
#: them at about the cost of a page walk's probe).
COUNTED_MIN_ROWS = 2_000
#: Tenants with at least this many indexed messages get their own term counts (fewer:
#: GIN counts a term's rows in the tenant in a few milliseconds).
COUNTED_TENANT_MIN_ROWS = 10_000
#: Terms a choice counts at most (each a GIN count of its rows), so one write pays little.
FINALIZE_EVERY = 4
#: Scope, chat and role lexemes (a private-use first character) are never terms.
IS_TERM = "left(l.lexeme, 1) NOT IN (E'\\uE000', E'\\uE002', E'\\uE003')"
#: The advisory lock (key pair) of the counted tenants and terms: folds share it, a
#: choice holds it alone; both only ``try`` it.
CHOICE_LOCK = "733123, 0"
CHOOSE_FUNCTION = "deuz_choose_counts"
_CANDIDATES = "deuz_new_common_terms"
#: The ANALYZE runs of the message table (and its partitions) a choice last read the
#: statistics after: a sequence, so writing it takes no row lock and no transaction.
_ANALYZED = "deuz_choice_analyzed_seq"
_UINT32 = 4_294_967_296


def _after(later: str, earlier: str) -> str:
    """Whether 32-bit transaction id ``later`` follows ``earlier`` (both SQL bigints),
    compared modulo 2^32 as PostgreSQL compares them."""
    return f"mod({later} - {earlier} + {_UINT32}, {_UINT32}) BETWEEN 1 AND 2147483647"


def _past(alias: str) -> str:
    """Whether row ``alias`` was last written by a transaction older than every one still
    running in this database and than every snapshot one holds there (a ``REPEATABLE
    READ`` writer's, taken before a mark, may get its transaction id after the stamp):
    each backend's ``backend_xid`` and ``backend_xmin`` (autovacuum's aside: it writes no
    message; so is the caller's own, whose count sees its own rows), and each prepared
    transaction's id. A snapshot's ``xmin`` is the oldest transaction running on the
    whole server, so another database's long transaction delays a count while this
    one's backends take snapshots, as it delays ``CREATE INDEX CONCURRENTLY``. Callers
    clear the transaction's cached activity first (``pg_stat_clear_snapshot``)."""
    stamp = f"{alias}.xmin::text::bigint"
    xid, xmin = "a.backend_xid::text::bigint", "a.backend_xmin::text::bigint"
    return (
        "(NOT EXISTS (SELECT 1 FROM pg_stat_activity a "
        "WHERE a.datname = current_database() AND a.pid <> pg_backend_pid() "
        "AND a.backend_type IS DISTINCT FROM 'autovacuum worker' "
        f"AND ((a.backend_xid IS NOT NULL AND NOT ({_after(xid, stamp)})) "
        f"OR (a.backend_xmin IS NOT NULL AND NOT ({_after(xmin, stamp)})))) "
        "AND NOT EXISTS (SELECT 1 FROM pg_prepared_xacts p "
        "WHERE p.database = current_database() "
        f"AND NOT ({_after('p.transaction::text::bigint', stamp)})))"
    )


def _bucket(alias: str) -> str:
    """Where a term count of tenant ``alias.tenant`` lives: its own, or ``""``."""
    return (
        f"(CASE WHEN {alias}.tenant IN (SELECT tenant FROM {table(CountedTenant)}) "
        f"THEN {alias}.tenant ELSE '' END)"
    )


def _parts() -> str:
    columns = "lexeme, tenant, role, rows"
    return (
        f"(SELECT {columns} FROM {table(TermCount)} "
        f"UNION ALL SELECT {columns} FROM {table(TermCountDelta)})"
    )


def _actionable() -> str:
    """Whether a marked term waits for a choice: to be seen, or to be counted."""
    return (
        f"EXISTS (SELECT 1 FROM {table(CountingTerm)} c WHERE "
        f"(NOT c.observed AND c.marked_by <> pg_current_xact_id()::text::bigint) "
        f"OR (c.observed AND {_past('c')}))"
    )


def _analyze_runs() -> str:
    """The ANALYZE runs (manual and autovacuum's) of the message table and its
    partitions: what changes the statistics the candidates come from."""
    message = table(Message)
    return (
        "(SELECT COALESCE(sum(pg_stat_get_analyze_count(r.oid) "
        "+ pg_stat_get_autoanalyze_count(r.oid)), 0) FROM pg_class r "
        f"WHERE r.oid = '{message}'::regclass OR r.oid IN (SELECT i.inhrelid "
        f"FROM pg_inherits i WHERE i.inhparent = '{message}'::regclass))"
    )


def choice_call(grown_tenants: str, grown: str, analyzed: str, waiting: str) -> str:
    """PL/pgSQL statements for a fold of every key: the first of ``grown_tenants`` (the
    uncounted tenants whose N it raised) past the threshold into ``grown``, and a choice
    when there is something to choose and ``CHOICE_LOCK`` is free. The statistics are
    read again only after an ANALYZE (``analyzed``: a bigint variable), the backends'
    activity only while terms are being counted (``waiting``: a boolean variable)."""
    return f"""
        {grown} := ARRAY(SELECT g.tenant FROM unnest({grown_tenants}) AS g(tenant)
            WHERE (SELECT COALESCE(sum(p.rows), 0) FROM {_parts()} p
                WHERE p.lexeme = '' AND p.tenant = g.tenant) >= {COUNTED_TENANT_MIN_ROWS}
            ORDER BY 1 LIMIT 1);
        {analyzed} := {_analyze_runs()};
        IF {analyzed} = (SELECT last_value FROM {_ANALYZED}) THEN
            {analyzed} := NULL;
        ELSIF NOT EXISTS (SELECT 1 FROM {_CANDIDATES}()) THEN
            PERFORM setval('{_ANALYZED}', {analyzed});
            {analyzed} := NULL;
        END IF;
        {waiting} := FALSE;
        IF EXISTS (SELECT 1 FROM {table(CountingTerm)}) THEN
            PERFORM pg_stat_clear_snapshot();  -- the backends' activity as it is now
            {waiting} := {_actionable()};
        END IF;
        IF cardinality({grown}) > 0 OR {analyzed} IS NOT NULL OR {waiting} THEN
            IF pg_try_advisory_xact_lock({CHOICE_LOCK}) THEN
                PERFORM {CHOOSE_FUNCTION}({grown}, {analyzed});
            END IF;
        END IF;"""


def _quoted_operand(lexeme: str) -> str:
    """SQL of ``lexeme`` as a quoted tsquery operand (``storage.tsquery_operand``)."""
    return (
        f"('''' || replace(replace({lexeme}, E'\\\\', E'\\\\\\\\'), '''', '''''') || '''')::tsquery"
    )


def forget_sql(lexemes: str) -> str:
    """PL/pgSQL statements for a fold that took terms ``lexemes`` (a text[] variable)
    down: those being counted that no message holds any more stop being counted, with
    the count rows of them no other fold holds (``SKIP LOCKED``: none waits), so a word
    only deleted messages held leaves the tables with them."""
    counts = table(TermCount)
    return f"""
        WITH gone AS (
            DELETE FROM {table(CountingTerm)} c WHERE c.lexeme = ANY({lexemes})
                AND NOT EXISTS (SELECT 1 FROM {table(Message)} r
                    WHERE r.{VECTOR_COLUMN} @@ {_quoted_operand("c.lexeme")})
            RETURNING c.lexeme
        )
        DELETE FROM {counts} t WHERE t.ctid IN (SELECT x.ctid FROM {counts} x
            WHERE x.lexeme IN (SELECT lexeme FROM gone) FOR UPDATE SKIP LOCKED);"""


def _candidates_sql() -> str:
    """The terms not counted nor being counted whose estimated rows (the planner's most
    common elements of the vector column, per partition on a partitioned table) reach
    ``COUNTED_MIN_ROWS``."""
    message = table(Message)
    return f"""
        CREATE OR REPLACE FUNCTION {_CANDIDATES}() RETURNS SETOF text
        LANGUAGE sql STABLE AS $body$
            SELECT l.lexeme FROM pg_class r
            JOIN pg_namespace n ON n.oid = r.relnamespace
            JOIN pg_stats s ON s.schemaname = n.nspname AND s.tablename = r.relname
                AND s.attname = '{VECTOR_COLUMN}' AND NOT s.inherited
            CROSS JOIN LATERAL unnest(s.most_common_elems::text::text[],
                s.most_common_elem_freqs) AS l(lexeme, freq)
            WHERE (r.oid = '{message}'::regclass OR r.oid IN (SELECT i.inhrelid
                    FROM pg_inherits i WHERE i.inhparent = '{message}'::regclass))
                AND l.lexeme IS NOT NULL AND {IS_TERM}
                AND l.lexeme NOT IN (SELECT lexeme FROM {table(CountedTerm)})
                AND l.lexeme NOT IN (SELECT lexeme FROM {table(CountingTerm)})
            GROUP BY l.lexeme
            HAVING sum(l.freq * GREATEST(r.reltuples, 0) * (1 - s.null_frac))
                >= {COUNTED_MIN_ROWS}
        $body$"""


def _choose_sql() -> str:
    message, deltas = table(Message), table(TermCountDelta)
    counting, counted = table(CountingTerm), table(CountedTerm)
    return f"""
        CREATE OR REPLACE FUNCTION {CHOOSE_FUNCTION}(grown text[], analyzed bigint)
        RETURNS void
        LANGUAGE plpgsql SET jit = off AS $body$
        DECLARE
            me bigint := pg_current_xact_id()::text::bigint;
            k text;
            t text;
        BEGIN
            PERFORM pg_stat_clear_snapshot();
            -- seen marks whose every older transaction has ended: counted from the rows
            FOR k IN SELECT c.lexeme FROM {counting} c WHERE c.observed AND {_past("c")}
                ORDER BY c.lexeme LIMIT {FINALIZE_EVERY}
            LOOP
                DELETE FROM {counting} WHERE lexeme = k;
                IF NOT EXISTS (SELECT 1 FROM {message} r
                    WHERE r.{VECTOR_COLUMN} @@ {_quoted_operand("k")}) THEN
                    -- its messages went meanwhile: its partial counts go too (no fold runs)
                    DELETE FROM {table(TermCount)} WHERE lexeme = k;
                    DELETE FROM {deltas} WHERE lexeme = k;
                    CONTINUE;
                END IF;
                INSERT INTO {deltas} (lexeme, tenant, role, rows)
                SELECT k, v.bucket, v.role, sum(v.n) FROM (
                    SELECT {_bucket("r")} AS bucket, r.role, count(*) AS n FROM {message} r
                    WHERE r.{VECTOR_COLUMN} @@ {_quoted_operand("k")} GROUP BY 1, 2
                    UNION ALL
                    SELECT {_bucket("p")}, p.role, -sum(p.rows) FROM {_parts()} p
                    WHERE p.lexeme = k GROUP BY 1, 2
                ) v GROUP BY v.bucket, v.role HAVING sum(v.n) <> 0;
                INSERT INTO {counted} (lexeme) VALUES (k) ON CONFLICT DO NOTHING;
            END LOOP;
            -- marks another transaction committed: stamped by a fresh transaction id (a
            -- subtransaction's: the block's handler makes one), younger than any writer
            -- that could have missed them
            IF EXISTS (SELECT 1 FROM {counting} c WHERE NOT c.observed AND c.marked_by <> me)
            THEN
                BEGIN
                    UPDATE {counting} SET observed = TRUE WHERE NOT observed AND marked_by <> me;
                EXCEPTION WHEN OTHERS THEN
                    RAISE;
                END;
            END IF;
            IF analyzed IS NOT NULL THEN  -- statistics newer than the last choice read
                INSERT INTO {counting} (lexeme, marked_by, observed)
                SELECT c.lexeme, me, FALSE FROM {_CANDIDATES}() AS c(lexeme)
                ON CONFLICT DO NOTHING;
                PERFORM setval('{_ANALYZED}', analyzed);
            END IF;
            -- a tenant past its threshold: its rows of each counted term, less what its own
            -- rows and deltas hold, move from tenant "" to its own counts
            FOREACH t IN ARRAY grown LOOP
                CONTINUE WHEN EXISTS (SELECT 1 FROM {table(CountedTenant)} o WHERE o.tenant = t);
                INSERT INTO {deltas} (lexeme, tenant, role, rows)
                SELECT m.lexeme, b.tenant, m.role, b.sign * m.n FROM (
                    SELECT v.lexeme, v.role, sum(v.n) AS n FROM (
                        SELECT l.lexeme, r.role, count(*) AS n FROM {table(Chat)} c
                        JOIN {message} r ON r.chat_id = c.id AND r.tenant = t
                        CROSS JOIN LATERAL unnest(tsvector_to_array(r.{VECTOR_COLUMN}))
                            AS l(lexeme)
                        WHERE c.tenant = t AND r.{VECTOR_COLUMN} IS NOT NULL
                            AND l.lexeme IN (SELECT lexeme FROM {counted})
                        GROUP BY 1, 2
                        UNION ALL
                        SELECT p.lexeme, p.role, -sum(p.rows) FROM {_parts()} p
                        WHERE p.tenant = t AND p.lexeme IN (SELECT lexeme FROM {counted})
                        GROUP BY 1, 2
                    ) v GROUP BY 1, 2 HAVING sum(v.n) <> 0
                ) m CROSS JOIN (VALUES (t, 1), ('', -1)) AS b(tenant, sign);
                INSERT INTO {table(CountedTenant)} (tenant) VALUES (t) ON CONFLICT DO NOTHING;
            END LOOP;
        END
        $body$"""


def choose_functions_sql() -> list[str]:
    """The statements creating the candidates' and the choice's functions and the
    sequence of the ANALYZE runs read (thresholds read when called, so a test may lower
    them)."""
    return [
        f"CREATE SEQUENCE IF NOT EXISTS {_ANALYZED} AS bigint MINVALUE 0 START 0",
        _candidates_sql(),
        _choose_sql(),
    ]


def drop_choice_sql() -> list[str]:
    return [
        f"DROP FUNCTION IF EXISTS {CHOOSE_FUNCTION}(text[], bigint)",
        f"DROP FUNCTION IF EXISTS {CHOOSE_FUNCTION}(text[])",
        f"DROP FUNCTION IF EXISTS {_CANDIDATES}()",
        f"DROP SEQUENCE IF EXISTS {_ANALYZED}",
    ]
