"""PostgreSQL: stored term counts that writers only append to, folded without waiting.

Each message write's trigger statement INSERTs its changes as ``TermCountDelta`` rows,
one per (lexeme, tenant, role) it changes, summed in one ``INSERT ... SELECT ... GROUP
BY``: no writer updates a row another writer may be updating, so writers of one tenant
(every one of them changes its N) never wait for each other. Before, each statement
took an advisory lock per (tenant, shard) held to COMMIT, and the writers of one big
tenant queued on it (bench/RESULTS.md, "Stored counts without a lock").

A count is its ``TermCount`` row plus its deltas, summed in the reader's one statement
(``counts_relation``): a committed fold deletes the deltas and adds them to the row in
one transaction, so every snapshot sees either both before or both after, exactly.

Folds (``deuz_fold_term_counts``) keep the deltas few: a write whose deltas take the
sequence past a multiple of ``FOLD_EVERY`` folds every pending delta, so a count reads
at most about that many rows, with no periodic chore. A fold takes a key only when
``pg_try_advisory_xact_lock`` gets it (held to COMMIT; a key another fold holds is
skipped, not waited for: the next fold takes it), deletes that key's deltas with ``FOR
UPDATE SKIP LOCKED`` and adds their sum to the row (inserting it when new, deleting it
at 0). No fold waits for another, so folds cannot deadlock either. A delete or update
folds the keys it changed at once, so a word only the deleted messages held leaves the
tables in the same transaction (docs/guarantees.md; a key another fold holds then
waits for that fold's next turn). Folds run in READ COMMITTED only: under REPEATABLE
READ a delete of a delta that a fold committed since the snapshot would fail the
writer, so such a writer leaves its deltas for the next fold.
"""

from __future__ import annotations

from ....models import CountedTenant, CountedTerm, CountingTerm, TermCount, TermCountDelta
from ...chat_filter import table
from .choice import CHOICE_LOCK, choice_call, forget_sql

__all__ = [
    "FOLD_CLAIM_MAX",
    "FOLD_EVERY",
    "FOLD_FUNCTION",
    "counts_relation",
    "delta_statements",
    "drop_fold_sql",
    "fold_function_sql",
    "sequence_name",
]

#: A write folds every pending delta when its deltas' serials pass a multiple of this:
#: a count sums at most about this many delta rows besides its own row.
FOLD_EVERY = 1024
#: ... taking at most this many of them (twice what a fold falls due for, so a backlog
#: drains): each key a fold takes is an advisory lock, one entry of the server's shared
#: lock table, which holds ``max_locks_per_transaction`` per connection.
FOLD_CLAIM_MAX = 2 * FOLD_EVERY
FOLD_FUNCTION = "deuz_fold_term_counts"
#: The app's advisory-lock key space for folds (733_120: chat locks; 733_121 was the
#: locked counts' (tenant, shard) space before migration 0009).
_FOLD_LOCKS = 733_122
_KEY = ("lexeme", "tenant", "role")


def sequence_name() -> str:
    return f"{table(TermCountDelta)}_serial_seq"


def counts_relation(*, tenant: bool = True) -> str:
    """A relation of every count's parts ``(lexeme, tenant, role, rows)`` (without
    ``tenant``: a reader of every tenant's, whose statement names no tenant): the stored
    rows and the pending deltas, for readers to sum in one statement (the planner pushes
    their conditions into both branches: an index lookup each)."""
    columns = "lexeme, tenant, role, rows" if tenant else "lexeme, role, rows"
    return (
        f"(SELECT {columns} FROM {table(TermCount)} "
        f"UNION ALL SELECT {columns} FROM {table(TermCountDelta)})"
    )


def delta_statements(changes: str, *, removes: bool) -> str:
    """PL/pgSQL statements that append the sums of ``changes`` (``(tenant, role, shard,
    lexeme, n)`` rows) as deltas, fold every pending delta when their serials pass a
    multiple of ``FOLD_EVERY``, and with ``removes`` fold the keys they changed."""
    fold_own = (
        f"ELSIF keys_lexemes IS NOT NULL THEN "
        f"PERFORM {FOLD_FUNCTION}(keys_lexemes, keys_tenants, keys_roles);"
        if removes
        else ""
    )
    return f"""
        WITH d AS (
            INSERT INTO {table(TermCountDelta)} (lexeme, tenant, role, rows)
            SELECT c.lexeme, c.tenant, c.role, sum(c.n) FROM ({changes}) c
            GROUP BY c.lexeme, c.tenant, c.role HAVING sum(c.n) <> 0
            RETURNING serial, lexeme, tenant, role)
        SELECT COALESCE(bool_or(d.serial % {FOLD_EVERY} = 0), FALSE),
            array_agg(d.lexeme), array_agg(d.tenant), array_agg(d.role)
        INTO due, keys_lexemes, keys_tenants, keys_roles FROM d;
        IF due THEN PERFORM {FOLD_FUNCTION}(NULL, NULL, NULL);
        {fold_own}
        END IF;"""


def fold_function_sql(*, by_owner: bool = True, claim_max: int = FOLD_CLAIM_MAX) -> str:
    """``deuz_fold_term_counts(lexemes, tenants, roles)``: fold the pending deltas of those
    keys (``NULL``: of every key, at most ``claim_max`` delta rows, the next folds taking
    the rest) that no other fold holds; the delta rows folded. A count left at 0 is
    deleted, a counted term no count holds any more stops being counted, and a counted
    tenant with no N left leaves ``CountedTenant``.

    A fold of every key claims its rows first and only then takes their keys' locks, so
    it takes at most ``claim_max`` of them: a tenant given its own counts appends a delta
    per term and role at once (15,918 at 1M), and a fold taking a lock per key of such a
    backlog ran the server out of shared memory, failing the write that folded, and every
    write after it that fell due for a fold.

    Since migration 0010 (``by_owner``) a delta names its message's tenant and the fold
    adds it to that tenant's count when it is counted, else to tenant ``""``'s (N: always
    the tenant's own); a delta of a term neither counted nor being counted is dropped. A
    fold holds the choice lock shared (``choice.CHOICE_LOCK``, taken before the
    statement that reads ``CountedTenant``): a change of the counted tenants, which
    takes it exclusively, never meets a fold that read them before it. A fold of every
    key (a write past a multiple of ``FOLD_EVERY``) then runs ``choice.choose_sql``'s
    function when a tenant it folded passed the threshold, terms wait to be seen or
    counted, or an ANALYZE since the last choice shows new common terms."""
    if not by_owner:
        return _bucket_fold_sql()
    counts, deltas = table(TermCount), table(TermCountDelta)
    counted_tenants = f"SELECT tenant FROM {table(CountedTenant)}"
    counted_terms = f"SELECT lexeme FROM {table(CountedTerm)} UNION ALL SELECT lexeme FROM {table(CountingTerm)}"
    return f"""
        CREATE OR REPLACE FUNCTION {FOLD_FUNCTION}(
            want_lexemes text[], want_tenants text[], want_roles text[])
        RETURNS bigint LANGUAGE plpgsql SET jit = off AS $body$
        DECLARE
            folded bigint;
            zero_lexemes text[]; zero_tenants text[]; zero_roles text[];
            low_lexemes text[]; low_tenants text[]; grown_tenants text[]; grown text[];
            analyzed bigint; waiting boolean;
        BEGIN
            IF current_setting('transaction_isolation') <> 'read committed' THEN
                RETURN 0;
            END IF;
            -- a change of the counted tenants holds it exclusively: skipped, not waited for
            IF NOT pg_try_advisory_xact_lock_shared({CHOICE_LOCK}) THEN
                RETURN 0;
            END IF;
            WITH picked AS MATERIALIZED (
                -- the rows first (a fold of every key: at most a claim of them), their
                -- keys' locks after: a lock per key of a whole backlog filled the
                -- server's shared lock table
                SELECT x.ctid AS row_id, b.bucket, x.role, x.lexeme FROM {deltas} x
                CROSS JOIN LATERAL (SELECT CASE WHEN x.lexeme = ''
                    OR x.tenant IN ({counted_tenants}) THEN x.tenant ELSE '' END AS bucket) b
                WHERE want_lexemes IS NULL OR (x.lexeme, x.tenant, x.role) IN (
                        SELECT * FROM unnest(want_lexemes, want_tenants, want_roles))
                LIMIT CASE WHEN want_lexemes IS NULL THEN {int(claim_max)} END
                FOR UPDATE OF x SKIP LOCKED
            ), claimed AS MATERIALIZED (
                -- a key is the count it goes to, so two folds never update one row
                SELECT p.row_id, p.bucket FROM picked p
                WHERE pg_try_advisory_xact_lock(
                    {_FOLD_LOCKS}, hashtext(p.bucket || '/' || p.role || '/' || p.lexeme))
            ), taken AS (
                DELETE FROM {deltas} d USING claimed c WHERE d.ctid = c.row_id
                RETURNING d.lexeme, c.bucket AS tenant, d.role, d.rows
            ), sums AS MATERIALIZED (
                SELECT t.lexeme, t.tenant, t.role, sum(t.rows) AS n
                FROM taken t WHERE t.lexeme = '' OR t.lexeme IN ({counted_terms})
                GROUP BY t.lexeme, t.tenant, t.role
            ), up AS (
                INSERT INTO {counts} (lexeme, tenant, role, shard, rows)
                SELECT s.lexeme, s.tenant, s.role, 0, s.n FROM sums s WHERE s.n <> 0
                ORDER BY s.lexeme, s.tenant, s.role
                ON CONFLICT (lexeme, tenant, role, shard)
                DO UPDATE SET rows = {counts}.rows + EXCLUDED.rows
                RETURNING lexeme, tenant, role, rows
            )
            SELECT (SELECT count(*) FROM taken),
                z.lexemes, z.tenants, z.roles, w.lexemes, w.tenants, g.tenants
            INTO folded, zero_lexemes, zero_tenants, zero_roles, low_lexemes, low_tenants,
                grown_tenants
            FROM (SELECT array_agg(u.lexeme) AS lexemes, array_agg(u.tenant) AS tenants,
                    array_agg(u.role) AS roles FROM up u WHERE u.rows = 0) z,
                (SELECT array_agg(DISTINCT s.lexeme) AS lexemes,
                    array_agg(DISTINCT s.tenant) FILTER (WHERE s.lexeme = '') AS tenants
                FROM sums s WHERE s.n <= 0) w,
                (SELECT array_agg(DISTINCT s.tenant) AS tenants FROM sums s
                WHERE s.lexeme = '' AND s.n > 0 AND s.tenant <> ''
                    AND s.tenant NOT IN ({counted_tenants})) g;
            IF zero_lexemes IS NOT NULL THEN
                DELETE FROM {counts} t
                USING unnest(zero_lexemes, zero_tenants, zero_roles) AS z(lexeme, tenant, role)
                WHERE t.lexeme = z.lexeme AND t.tenant = z.tenant AND t.role = z.role
                    AND t.shard = 0 AND t.rows = 0;
            END IF;
            IF low_lexemes IS NOT NULL THEN
                -- a word no count holds any more (its messages deleted) is not kept
                DELETE FROM {table(CountedTerm)} k WHERE k.lexeme = ANY(low_lexemes)
                    AND NOT EXISTS (SELECT 1 FROM {counts} t WHERE t.lexeme = k.lexeme)
                    AND NOT EXISTS (SELECT 1 FROM {deltas} d WHERE d.lexeme = k.lexeme);
                DELETE FROM {table(CountedTenant)} o WHERE o.tenant = ANY(low_tenants)
                    AND NOT EXISTS (SELECT 1 FROM {counts} t
                        WHERE t.lexeme = '' AND t.tenant = o.tenant)
                    AND NOT EXISTS (SELECT 1 FROM {deltas} d
                        WHERE d.lexeme = '' AND d.tenant = o.tenant);
                {forget_sql("low_lexemes")}
            END IF;
            IF want_lexemes IS NULL THEN
                {choice_call("grown_tenants", "grown", "analyzed", "waiting")}
            END IF;
            RETURN folded;
        END
        $body$"""


def _bucket_fold_sql() -> str:
    """Migration 0009's fold, of deltas appended under their count's own tenant (the
    message's, or ``""``), kept for migrating back."""
    counts, deltas = table(TermCount), table(TermCountDelta)
    return f"""
        CREATE OR REPLACE FUNCTION {FOLD_FUNCTION}(
            want_lexemes text[], want_tenants text[], want_roles text[])
        RETURNS bigint LANGUAGE plpgsql SET jit = off AS $body$
        DECLARE
            folded bigint;
            zero_lexemes text[]; zero_tenants text[]; zero_roles text[];
            low_lexemes text[]; low_tenants text[];
        BEGIN
            IF current_setting('transaction_isolation') <> 'read committed' THEN
                RETURN 0;
            END IF;
            WITH claimed AS MATERIALIZED (
                -- one pass over the deltas: a key is taken where this transaction gets
                -- its lock (re-entrant, so once per row costs no more than once per key);
                -- a join of the deltas to a list of locked keys ran as a nested loop
                SELECT x.ctid AS row_id FROM {deltas} x
                WHERE (want_lexemes IS NULL OR (x.lexeme, x.tenant, x.role) IN (
                        SELECT * FROM unnest(want_lexemes, want_tenants, want_roles)))
                    AND pg_try_advisory_xact_lock(
                        {_FOLD_LOCKS}, hashtext(x.tenant || '/' || x.role || '/' || x.lexeme))
                FOR UPDATE OF x SKIP LOCKED
            ), taken AS (
                -- by the claimed rows' ctids (locked above, so unmoved): a join, where an
                -- IN over the locking subquery ran it again for every delta row
                DELETE FROM {deltas} d USING claimed c WHERE d.ctid = c.row_id
                RETURNING d.lexeme, d.tenant, d.role, d.rows
            ), sums AS MATERIALIZED (
                SELECT t.lexeme, t.tenant, t.role, sum(t.rows) AS n, count(*) AS parts
                FROM taken t GROUP BY t.lexeme, t.tenant, t.role
            ), up AS (
                INSERT INTO {counts} (lexeme, tenant, role, shard, rows)
                SELECT s.lexeme, s.tenant, s.role, 0, s.n FROM sums s WHERE s.n <> 0
                ORDER BY s.lexeme, s.tenant, s.role
                ON CONFLICT (lexeme, tenant, role, shard)
                DO UPDATE SET rows = {counts}.rows + EXCLUDED.rows
                RETURNING lexeme, tenant, role, rows
            )
            SELECT (SELECT COALESCE(sum(s.parts), 0) FROM sums s),
                z.lexemes, z.tenants, z.roles, w.lexemes, w.tenants
            INTO folded, zero_lexemes, zero_tenants, zero_roles, low_lexemes, low_tenants
            FROM (SELECT array_agg(u.lexeme) AS lexemes, array_agg(u.tenant) AS tenants,
                    array_agg(u.role) AS roles FROM up u WHERE u.rows = 0) z,
                (SELECT array_agg(DISTINCT s.lexeme) AS lexemes,
                    array_agg(DISTINCT s.tenant) FILTER (WHERE s.lexeme = '') AS tenants
                FROM sums s WHERE s.n <= 0) w;
            IF zero_lexemes IS NOT NULL THEN
                DELETE FROM {counts} t
                USING unnest(zero_lexemes, zero_tenants, zero_roles) AS z(lexeme, tenant, role)
                WHERE t.lexeme = z.lexeme AND t.tenant = z.tenant AND t.role = z.role
                    AND t.shard = 0 AND t.rows = 0;
            END IF;
            IF low_lexemes IS NOT NULL THEN
                -- a word no count holds any more (its messages deleted) is not kept
                DELETE FROM {table(CountedTerm)} k WHERE k.lexeme = ANY(low_lexemes)
                    AND NOT EXISTS (SELECT 1 FROM {counts} t WHERE t.lexeme = k.lexeme)
                    AND NOT EXISTS (SELECT 1 FROM {deltas} d WHERE d.lexeme = k.lexeme);
                DELETE FROM {table(CountedTenant)} o WHERE o.tenant = ANY(low_tenants)
                    AND NOT EXISTS (SELECT 1 FROM {counts} t
                        WHERE t.lexeme = '' AND t.tenant = o.tenant)
                    AND NOT EXISTS (SELECT 1 FROM {deltas} d
                        WHERE d.lexeme = '' AND d.tenant = o.tenant);
            END IF;
            RETURN folded;
        END
        $body$"""


def drop_fold_sql() -> str:
    return f"DROP FUNCTION IF EXISTS {FOLD_FUNCTION}(text[], text[], text[])"
