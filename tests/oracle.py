"""A brute-force reading of SPEC sections 2-4, independent of every index.

It scans every message of every chat and ranks them with the formula written
out plainly, so the in-memory index and the SQL backends are checked against
the spec, not against each other.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from deuz_transcripts import ChatRecord
from deuz_transcripts.records import fill_message_ids
from deuz_transcripts.text import message_terms, query_terms


@dataclass(frozen=True)
class OracleHit:
    chat_id: str
    message_id: str
    index: int
    score: float
    around: tuple[str, ...] | None


def search(
    records: Iterable[ChatRecord],
    scope: Mapping[str, str],
    query: str,
    *,
    around: int | None = None,
    limit: int = 20,
    offset: int = 0,
    chat_ids: Iterable[str] | None = None,
    roles: Iterable[str] | None = None,
    updated_after: datetime | None = None,
    updated_before: datetime | None = None,
    substring: bool = False,
) -> list[OracleHit]:
    """SPEC sections 2-4 and the filters of section 8: messages of other chats, chat ids or
    roles are left out before N and n_t are counted; the ``updated_at`` window only
    filters the hits of that ranking (scores, order and the best raw left as they are)."""
    terms = query_terms(query)
    wanted = None if chat_ids is None else set(chat_ids)
    kept_roles = None if roles is None else set(roles)
    chats = [
        r
        for r in records
        if all(r.scope.get(k) == v for k, v in scope.items())
        and (wanted is None or r.chat_id in wanted)
    ]
    rows = []  # (record, index, message terms)
    for record in chats:
        for index, message in enumerate(record.messages):
            if kept_roles is not None and message["role"] not in kept_roles:
                continue
            found = message_terms(message)
            if found:
                rows.append((record, index, found))
    if not terms:
        return []

    def holds(found: list[str], term: str) -> bool:
        return any(term in word for word in found) if substring else term in found

    total = len(rows)
    counts = {t: sum(1 for _, _, found in rows if holds(found, t)) for t in terms}
    weight = {t: math.log(1 + (total - n + 0.5) / (n + 0.5)) for t, n in counts.items()}
    scored = []
    for record, index, found in rows:
        raw = 0.0
        for term in terms:  # query order, as every backend adds
            if holds(found, term):
                raw += weight[term]
        if raw > 0:
            scored.append((raw, record, index))
    if not scored:
        return []
    best = max(raw for raw, _, _ in scored)
    scored = [
        (raw, record, index)
        for raw, record, index in scored
        if (updated_after is None or record.updated_at > updated_after)
        and (updated_before is None or record.updated_at < updated_before)
    ]
    scored.sort(key=lambda s: (-s[0], -s[1].updated_at.timestamp(), s[1].chat_id, s[2]))
    hits = []
    for raw, record, index in scored[offset : offset + limit]:
        ids = fill_message_ids(record)
        neighbours = None
        if around is not None:
            visible = [i for i, m in enumerate(record.messages) if message_terms(m) is not None]
            here = visible.index(index)
            picked = visible[max(0, here - around) : here] + visible[here + 1 : here + 1 + around]
            neighbours = tuple(ids[i] for i in picked)
        hits.append(OracleHit(record.chat_id, ids[index], index, raw / best, neighbours))
    return hits
