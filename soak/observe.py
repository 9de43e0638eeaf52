"""The database at the end of a soak, for ``invariants.check``: run in a process of its
own once the load has stopped and the database is back (``python -m soak.worker observe``).

Reads the primary, not the standby: what was acknowledged must be in the source of truth.
Writes ``observed.json`` in the soak's directory.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from deuz_transcripts.models import Chat, ChatScope, LegacyChat, Message, Tombstone
from deuz_transcripts.stores import DjangoTranscriptIndex

from .ledger import read_ledgers
from .words import TOKEN_RE, chat_tenant, scope_of, tokens_in

__all__ = ["observe"]

#: Tokens per search: a query uses at most its first 32 distinct terms.
BATCH = 32


def _stored() -> dict[str, dict[str, object]]:
    chats: dict[str, dict[str, object]] = {}
    payloads: dict[int, list[dict[str, object]]] = defaultdict(list)
    for chat_pk, payload in Message.objects.order_by("chat_id", "position").values_list(
        "chat_id", "payload"
    ):
        payloads[chat_pk].append(json.loads(payload))
    for pk, chat_id, revision in Chat.objects.values_list("pk", "chat_id", "revision"):
        chats[chat_id] = {"revision": revision, "tokens": tokens_in(payloads.get(pk, []))}
    return chats


def _hits(tokens_by_tenant: dict[str, list[str]]) -> tuple[list[object], list[list[str]]]:
    """Every token searched in its tenant's scope (and each batch once in another
    tenant's, which must find nothing); the hits, and count mismatches."""
    index = DjangoTranscriptIndex("default", search_using="default")
    hits: list[object] = []
    problems: list[list[str]] = []
    tenants = sorted(tokens_by_tenant)
    for position, tenant in enumerate(tenants):
        tokens = sorted(tokens_by_tenant[tenant])
        other = tenants[(position + 1) % len(tenants)]
        for start in range(0, len(tokens), BATCH):
            query = " ".join(tokens[start : start + BATCH])
            for scope_tenant in (tenant, other) if other != tenant else (tenant,):
                found, cursor, total = 0, None, None
                while True:
                    page = index.search_page(
                        scope_of(scope_tenant), query, limit=100, cursor=cursor
                    )
                    total = page.total if total is None else total
                    for hit in page.hits:
                        text = hit.message.get("content")
                        words = TOKEN_RE.findall(text) if isinstance(text, str) else []
                        hits.append([scope_tenant, hit.chat_id, words])
                        found += 1
                    cursor = page.next_cursor
                    if cursor is None:
                        break
                if found != total:
                    problems.append(
                        ["count", f"{scope_tenant}: {found} hits for a count of {total}"]
                    )
    return hits, problems


def observe(directory: Path) -> None:
    tokens_by_tenant: dict[str, set[str]] = defaultdict(set)
    for entry in read_ledgers(directory / "ledger"):
        if entry.get("phase") == "intent" and "tokens_after" in entry:
            tokens_by_tenant[chat_tenant(entry["chat"])].update(entry["tokens_after"])
    chats = _stored()
    for chat_id, chat in chats.items():  # words stored that no ledger names are searched too
        tokens_by_tenant[chat_tenant(chat_id)].update(chat["tokens"])  # type: ignore[arg-type]
    hits, problems = _hits({tenant: sorted(tokens) for tenant, tokens in tokens_by_tenant.items()})
    scope_rows = ChatScope.objects.count()
    if scope_rows != len(chats):  # one scope field (userId) per chat
        problems.append(["leaked", f"{scope_rows} scope rows for {len(chats)} chats"])
    observed = {
        "chats": chats,
        "tombstones": sorted(Tombstone.objects.values_list("chat_id", flat=True)),
        "legacy_rows": sorted(LegacyChat.objects.values_list("chat_id", flat=True)),
        "hits": hits,
        "problems": problems,
    }
    (directory / "observed.json").write_text(json.dumps(observed))
