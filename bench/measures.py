"""Timed measures: search engines under test and their baselines, each a ``(scope, q) -> ids``.

Every figure is reported as a ratio against a baseline timed in the same run, in
interleaved order, because the machine is shared and absolute times drift.
"""

from __future__ import annotations

import random
import re
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.db.models import Q

from deuz_transcripts.backends.chat_filter import ChatFilter
from deuz_transcripts.stores import DjangoConditionalChatStore
from deuz_transcripts.text import query_terms, stored_term

from .cjk import query_words
from .corpus import BIG_USER, LOG_WORDS, SMALL_USER, Corpus

__all__ = [
    "CJK_UNSUPPORTED",
    "Engine",
    "cjk_query_classes",
    "query_classes",
    "run_cell",
    "summarize",
]

Engine = Callable[[str | None, str], Sequence[Any]]


def summarize(samples_ms: list[float]) -> dict[str, float]:
    """p50/p95/p99 in ms (nearest rank), and the sample count."""
    if not samples_ms:
        return {"n": 0}
    ordered = sorted(samples_ms)

    def rank(p: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, round(p * len(ordered) + 0.5) - 1))]

    return {
        "n": len(ordered),
        "p50": round(statistics.median(ordered), 3),
        "p95": round(rank(0.95), 3),
        "p99": round(rank(0.99), 3),
    }


class QueryTimeout(Exception):
    """One statement of a baseline ran past the per-query limit."""


@contextmanager
def query_timeout(seconds: float) -> Iterator[None]:
    """Abort any SQL statement running longer than ``seconds`` (a slow peer cannot stall a run)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"SET statement_timeout = {int(seconds * 1000)}")
        try:
            yield
        finally:
            with connection.cursor() as cursor:
                cursor.execute("SET statement_timeout = 0")
        return
    connection.ensure_connection()
    deadline = time.perf_counter() + seconds
    raw = connection.connection
    raw.set_progress_handler(lambda: int(time.perf_counter() > deadline), 10_000)
    try:
        yield
    finally:
        raw.set_progress_handler(None, 0)


def run_cell(
    engines: dict[str, Engine],
    user: str | None,
    queries: list[str],
    *,
    rounds: int,
    budget_s: float,
    seed: int,
    timeout_s: float = 10.0,
) -> dict[str, dict[str, Any]]:
    """Time every engine on the same queries, engines shuffled per query (noise is shared).

    Stops an engine once it has spent ``budget_s`` (after at least 3 samples), so a slow
    baseline (``icontains`` over 1M rows) cannot eat the run.
    """
    rng = random.Random(seed)
    for engine in engines.values():
        prepare = getattr(engine, "prepare", None)
        if prepare is not None:
            for query in queries:
                prepare(user, query)
    if "deuz" in engines:  # warm caches (the folding table is built on first use)
        with suppress(Exception):  # a query that times out is recorded below
            engines["deuz"](user, queries[0])
    samples: dict[str, list[float]] = {name: [] for name in engines}
    spent: dict[str, float] = dict.fromkeys(engines, 0.0)
    hits: dict[str, int] = dict.fromkeys(engines, 0)
    errors: dict[str, str] = {}
    for _ in range(rounds):
        for query in queries:
            names = list(engines)
            rng.shuffle(names)
            for name in names:
                if name in errors or (spent[name] > budget_s and len(samples[name]) >= 3):
                    continue
                start = time.perf_counter()
                try:
                    with query_timeout(timeout_s):
                        found = engines[name](user, query)
                except Exception as exc:  # a peer that cannot run this query is recorded
                    elapsed = time.perf_counter() - start
                    if elapsed >= timeout_s * 0.95:
                        errors[name] = f"timeout: a query ran over {timeout_s} s ({query[:40]!r})"
                    else:
                        errors[name] = f"{type(exc).__name__}: {exc}"[:300]
                    continue
                elapsed = time.perf_counter() - start
                spent[name] += elapsed
                samples[name].append(elapsed * 1000)
                hits[name] = max(hits[name], len(found))
    result: dict[str, dict[str, Any]] = {}
    for name in engines:
        cell: dict[str, Any] = summarize(samples[name])
        cell["max_hits"] = hits[name]
        if name in errors:
            cell["error"] = errors[name]
        result[name] = cell
    return result


# query classes


def query_classes(
    corpus: Corpus, user: str | None, per_class: int, seed: int
) -> dict[str, list[str]]:
    """Queries of 1, 2, 5 and 32 terms: rare, common and mixed words of the user's own text.

    ``2-dump`` pairs a word found in every log dump with a common word, so 30-300 KiB
    tool results are among the matches; the other classes use prose words only.
    ``8-common``, eight distinct common words, is a long query with no rare term: the
    essential-terms plan reads no term cheaply there (``big_read_rows``). It is drawn
    last, so the other classes' queries are those of earlier runs.
    """
    rng = random.Random(f"{seed}:{user}:queries")
    counts = corpus.word_counts[BIG_USER if user is None else user]
    ranked = [w for w, _ in counts.most_common() if w not in LOG_WORDS]
    common = ranked[:30]
    rare_pool = [w for w in ranked if counts[w] <= 2] or ranked[-50:]
    rare = rng.sample(rare_pool, min(len(rare_pool), 200))

    def pick(pool: list[str], k: int) -> list[str]:
        return [rng.choice(pool) for _ in range(k)]

    def mixed(k: int) -> str:
        n_common = max(1, k // 4)
        return " ".join(pick(common, n_common) + pick(rare, k - n_common))

    dump_words = [w for w in LOG_WORDS if corpus.dump_words[w]] or LOG_WORDS
    return {
        "1-rare": [rng.choice(rare) for _ in range(per_class)],
        "1-common": [rng.choice(common) for _ in range(per_class)],
        "2-common": [" ".join(pick(common, 2)) for _ in range(per_class)],
        "2-mixed": [mixed(2) for _ in range(per_class)],
        "5-mixed": [mixed(5) for _ in range(per_class)],
        "32-mixed": [mixed(32) for _ in range(per_class)],
        "2-dump": [f"{rng.choice(dump_words)} {rng.choice(common)}" for _ in range(per_class)],
        "8-common": [" ".join(rng.sample(common, 8)) for _ in range(per_class)],
    }


#: Engines left out of the CJK classes, and why.
CJK_UNSUPPORTED = {
    "watson": "PostgreSQL text search without CJK segmentation: a sentence is one token",
    "modelsearch": "its database backend's tokenizer keeps a sentence as one token",
    "tantivy": "default tokenizer: a run of CJK characters is one token",
}


def cjk_query_classes(
    corpus: Corpus, user: str | None, per_class: int, seed: int
) -> dict[str, list[str]]:
    """``cjk-1`` and ``cjk-2``: one or two CJK words of 2-4 characters the user's text holds.

    Empty without a CJK share (or when the user has no such words yet).
    """
    rng = random.Random(f"{seed}:{user}:cjk-queries")
    words = query_words(corpus.cjk_word_counts[BIG_USER if user is None else user])
    if len(words) < 2:
        return {}
    return {
        "cjk-1": [rng.choice(words) for _ in range(per_class)],
        "cjk-2": [" ".join(rng.sample(words, 2)) for _ in range(per_class)],
    }


# engines of deuz_transcripts and its SQL baselines


def _scope(user: str | None) -> dict[str, str]:
    return {} if user is None else {"userId": user}


@dataclass
class SqlEngines:
    """The public API and the SQL baselines for one database."""

    store: DjangoConditionalChatStore

    @property
    def vendor(self) -> str:
        return connection.vendor

    def deuz(self, user: str | None, q: str) -> list[Any]:
        return self.store.transcript.search(_scope(user), q, limit=20, around=1)

    def replayed(self) -> Replay:
        """The same SQL statements the public API ran for a query, run raw (see ``Replay``)."""
        return Replay(self)

    def _filter(self, user: str | None) -> tuple[str, list[Any]]:
        return ChatFilter(_scope(user), None).chat_pks_sql()

    def raw_lower_bound(self, user: str | None, q: str) -> list[Any]:
        """The bare index lookup: 20 matching ids of the scope, unranked."""
        terms = query_terms(q)
        with connection.cursor() as cursor:
            if self.vendor == "postgresql":
                pks, params = self._filter(user)
                cursor.execute(
                    "SELECT m.id FROM deuz_transcripts_message m "
                    f"WHERE m.chat_id IN ({pks}) AND m.search_vector @@ %s::tsquery LIMIT 20",
                    [*params, _tsquery(terms)],
                )
            else:
                from deuz_transcripts.backends.sqlite.fts5_expressions import match_expression

                cursor.execute(
                    "SELECT rowid FROM deuz_transcripts_fts WHERE deuz_transcripts_fts MATCH %s "
                    "LIMIT 20",
                    [match_expression(ChatFilter(_scope(user), None), terms)],
                )
            return cursor.fetchall()

    def engine_rank(self, user: str | None, q: str) -> list[Any]:
        """The engine's own ranking, top 20: ``ts_rank`` (PostgreSQL) or ``bm25`` (FTS5)."""
        terms = query_terms(q)
        with connection.cursor() as cursor:
            if self.vendor == "postgresql":
                pks, params = self._filter(user)
                cursor.execute(
                    "SELECT m.id FROM deuz_transcripts_message m "
                    f"WHERE m.chat_id IN ({pks}) AND m.search_vector @@ %s::tsquery "
                    "ORDER BY ts_rank(m.search_vector, %s::tsquery) DESC LIMIT 20",
                    [*params, _tsquery(terms), _tsquery(terms)],
                )
            else:
                from deuz_transcripts.backends.sqlite.fts5_expressions import match_expression

                cursor.execute(
                    "SELECT rowid FROM deuz_transcripts_fts WHERE deuz_transcripts_fts MATCH %s "
                    "ORDER BY rank LIMIT 20",
                    [match_expression(ChatFilter(_scope(user), None), terms)],
                )
            return cursor.fetchall()

    def btree_fetch(self, user: str | None, q: str) -> list[Any]:
        """20 of the user's message rows through btrees only (the scope's floor cost)."""
        from deuz_transcripts.models import Message

        rows = Message.objects.all()
        if user is not None:
            rows = rows.filter(chat__scope_fields__key="userId", chat__scope_fields__value=user)
        return list(rows.values_list("id", "chat_id", "position", "payload")[:20])

    def icontains(self, user: str | None, q: str) -> list[Any]:
        """What people write today: OR of ``payload__icontains``, newest chats first."""
        from deuz_transcripts.models import Message

        words = list(dict.fromkeys(q.split()))[:32]
        rows = Message.objects.filter(
            Q.create([("payload__icontains", w) for w in words], connector=Q.OR)
        )
        if user is not None:
            rows = rows.filter(chat__scope_fields__key="userId", chat__scope_fields__value=user)
        rows = rows.order_by("-chat__updated_at", "position")
        return list(rows.values_list("id", "payload")[:20])


#: A statement of its own that begins or ends a transaction (SQLite's search sends its
#: ``BEGIN DEFERRED`` alone; PostgreSQL's travels with a read and is replayed with it).
_TRANSACTION_CONTROL = re.compile(
    r"\s*(BEGIN( DEFERRED| IMMEDIATE| EXCLUSIVE)?|COMMIT|ROLLBACK)\s*;?\s*", re.IGNORECASE
)


class Replay:
    """Replays the statements the public API ran for (user, query) through a plain cursor.

    ``prepare`` captures them once, outside the timed loop; the difference to ``deuz``
    is then the Python cost of the API (request parsing, ORM rows, ``around``, hits).
    """

    def __init__(self, engines: SqlEngines) -> None:
        self.engines = engines
        self.captured: dict[tuple[str | None, str], list[tuple[str, Any]]] = {}
        self.failed: dict[tuple[str | None, str], Exception] = {}

    def prepare(self, user: str | None, q: str) -> None:
        statements: list[tuple[str, Any]] = []

        def wrapper(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
            if not _TRANSACTION_CONTROL.fullmatch(sql):  # the replay runs in its own
                statements.append((sql, params))
            return execute(sql, params, many, context)

        try:
            with connection.execute_wrapper(wrapper):
                self.engines.deuz(user, q)
        except Exception as exc:  # e.g. SearchTimeout: nothing to replay, the replay fails too
            self.failed[(user, q)] = exc
            return
        self.captured[(user, q)] = statements

    def __call__(self, user: str | None, q: str) -> list[Any]:
        if (user, q) in self.failed:
            raise self.failed[(user, q)]
        if (user, q) not in self.captured:
            self.prepare(user, q)
        rows: list[Any] = []
        # in a transaction, as the API's statements ran: they include its SAVEPOINTs
        with transaction.atomic(), connection.cursor() as cursor:
            for sql, params in self.captured[(user, q)]:
                cursor.execute(sql, params)
                if cursor.description is not None:
                    rows = cursor.fetchall()
        return rows


def _tsquery(terms: Sequence[str]) -> str:
    return " | ".join("'" + stored_term(t).replace("'", "''") + "'" for t in terms)


def users_measured() -> dict[str, str | None]:
    return {"small": SMALL_USER, "big": BIG_USER, "unscoped": None}
