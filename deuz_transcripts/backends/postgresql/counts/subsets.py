"""PostgreSQL: rows holding every term of each term subset, counted in GIN, and what a
search's exact total and mask histogram take from them.

A count of the rows holding *any* of the terms visits the heap tuple of every match:
two common words of a 200,000-message index, 89,801 rows, 90 ms. Rows holding *both*
are far fewer (12,480, 10 ms), and with each term's own count n_t known (stored, or
already counted for its idf), inclusion-exclusion gives the same total:
``|a or b| = n_a + n_b - |a and b|``. Subsets of more terms cost more counts (``2^k - k
- 1``), so ``subsets_visit_fewer`` compares the rows each way would visit, as if the
terms were independent, and the union is counted when it is the cheaper.

The same counts give the whole mask histogram (what a counted page ranks by and a
cursor's next page splits): one count of ``a and b`` against reading the 7,000 rows of
the rarer of two common words of a 50,000-message tenant (``subsets_beat_reading``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

from django.db.backends.utils import CursorWrapper

from ....models import Message
from ...chat_filter import ChatFilter, table
from ..storage import VECTOR_COLUMN

__all__ = [
    "count_subsets",
    "either_of_two_more_than",
    "gin_count",
    "gin_count_of",
    "gin_rows",
    "subset_visits",
    "subsets_beat_reading",
    "subsets_visit_fewer",
    "union_size",
]

#: A GIN count also decodes the posting list of each of its terms, entry by entry; an
#: entry costs about a 25th of a visited heap tuple (EXPLAIN ANALYZE of ``a & b`` and
#: ``a | b`` counts, bench/RESULTS.md), taken as a 16th to favour the single count.
POSTING_ENTRY_COST = 1 / 16


def gin_rows(chats: ChatFilter, query: str) -> tuple[str, list[Any]]:
    """``FROM ... WHERE ...``: the filter's rows holding ``query`` (a tsquery with the
    filter's lexemes in it), found in GIN."""
    more, more_params = chats.token_sql()  # window filters read the rows
    return f"FROM {table(Message)} m WHERE m.{VECTOR_COLUMN} @@ %s::tsquery{more}", [
        query,
        *more_params,
    ]


def gin_count(chats: ChatFilter, query: str, limit: int | None = None) -> tuple[str, list[Any]]:
    """A scalar SQL expression: the filter's rows holding ``query`` (a tsquery with the
    filter's lexemes in it), counted in GIN (up to ``limit``: the count stops there)."""
    rows, params = gin_rows(chats, query)
    if limit is None:
        return f"(SELECT count(*) {rows})", params
    return f"(SELECT count(*) FROM (SELECT 1 {rows} LIMIT %s) AS probe)", [*params, limit]


def gin_count_of(chats: ChatFilter, query: str) -> tuple[str, list[Any]]:
    """``gin_count`` of a tsquery given as SQL (e.g. a column of ``unnest``), which GIN
    still finds by its value: one subquery to plan for many tsqueries."""
    more, more_params = chats.token_sql()
    return (
        f"(SELECT count(*) FROM {table(Message)} m WHERE m.{VECTOR_COLUMN} @@ {query}{more})",
        more_params,
    )


def either_of_two_more_than(
    cursor: CursorWrapper,
    chats: ChatFilter,
    both: str,
    counts: tuple[tuple[str, list[Any]], tuple[str, list[Any]]],
    cap: int,
) -> bool:
    """Whether more than ``cap`` rows hold either of two terms, in one statement (one
    snapshot). Each term's count (``counts``: scalar SQL, e.g. stored) decides when one
    passes ``cap`` or both together stay within it; in between, ``|a or b| = n_a + n_b -
    |a and b|`` passes ``cap`` exactly when fewer than ``n_a + n_b - cap`` rows hold
    ``both`` (a tsquery with the filter's lexemes), so only those are counted, up to
    there: a big tenant's two common words visit 1,084 rows in 6 ms where the union's
    10,001 took 47 ms (bench/RESULTS.md). The count runs only in between (PostgreSQL
    runs a subquery of a ``CASE`` branch only when the branch is taken)."""
    (first, first_params), (second, second_params) = counts
    rows, rows_params = gin_rows(chats, both)
    cursor.execute(
        f"WITH n AS MATERIALIZED (SELECT {first} AS a, {second} AS b) "
        "SELECT CASE WHEN GREATEST(n.a, n.b) > %s THEN TRUE WHEN n.a + n.b <= %s THEN FALSE "
        f"ELSE (SELECT count(*) FROM (SELECT 1 {rows} "
        "LIMIT (SELECT n.a + n.b - %s FROM n)) AS probe) < n.a + n.b - %s END FROM n",
        [*first_params, *second_params, cap, cap, *rows_params, cap, cap],
    )
    row = cursor.fetchone()
    return bool(row and row[0])


def count_subsets(
    cursor: CursorWrapper, columns: Mapping[int, tuple[str, list[Any]]]
) -> dict[int, int]:
    """``{subset: rows holding every term of it}``, each a scalar SQL expression of
    ``columns`` (``gin_count``, or a stored count), all in one statement: under READ
    COMMITTED each statement has its own snapshot, and counts from two statements may
    disagree by a write committed between them (callers run it inside ``bitmap_scans``)."""
    subsets = list(columns)
    cursor.execute(
        "SELECT " + ", ".join(columns[subset][0] for subset in subsets),
        [param for subset in subsets for param in columns[subset][1]],
    )
    row = cursor.fetchone() or ()
    return {subset: int(count) for subset, count in zip(subsets, row, strict=True)}


def union_size(together: Mapping[int, int], term_count: int) -> int:
    """Rows holding any of the terms, from ``{subset: rows holding every term of it}``
    of every non-empty subset (inclusion-exclusion; never below 0, as counts read in
    different statements may disagree by a concurrent write)."""
    size = 0
    for subset in range(1, 1 << term_count):
        size += together[subset] if subset.bit_count() % 2 else -together[subset]
    return max(size, 0)


def subset_visits(total: int, counts: Sequence[int]) -> float:
    """Heap tuples and posting entries (weighted) that counting every subset of two or
    more terms visits, for terms of ``counts`` rows among ``total``: as if two terms were
    independent (rows holding both never outnumber rows holding either, so a pair never
    costs more than its union); for three or more, each subset at its rarest term's
    rows, the most it can hold (words that go together would otherwise cost each subset
    count as much as the union: 11 counts of 4 words always found together)."""
    shares = [min(count / total, 1.0) for count in counts]
    visits = 0.0
    for size in range(2, len(counts) + 1):
        for chosen in itertools.combinations(range(len(counts)), size):
            if len(counts) == 2:
                visits += total * math.prod(shares[position] for position in chosen)
            else:
                visits += min(counts[position] for position in chosen)
            visits += sum(counts[position] for position in chosen) * POSTING_ENTRY_COST
    return visits


def subsets_visit_fewer(total: int, counts: Sequence[int]) -> bool:
    """Whether counting every subset of two or more terms visits fewer heap tuples and
    posting entries than counting the union once (the estimate only picks the cheaper
    statements; either gives the exact total)."""
    if total <= 0 or len(counts) < 2:
        return False
    union = total * (1.0 - math.prod(1.0 - min(count / total, 1.0) for count in counts))
    return subset_visits(total, counts) < union + sum(counts) * POSTING_ENTRY_COST


def subsets_beat_reading(total: int, counts: Sequence[int]) -> bool:
    """Whether counting every subset of two or more terms visits fewer rows than the
    essential-terms plan reads for a complete histogram: every row of every term but the
    most common (a row read costs more than a row visited, so this is the cautious side)."""
    if total <= 0 or len(counts) < 2:
        return False
    return subset_visits(total, counts) < sum(counts) - max(counts)
