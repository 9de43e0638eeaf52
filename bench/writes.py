"""Write cost, appends, search during writes, size of search data, and the backfill command."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from typing import Any

from django.db import connection, transaction

from deuz_transcripts.models import Chat, ChatScope, LegacyChat, Message
from deuz_transcripts.records import ChatRecord
from deuz_transcripts.stores import DjangoConditionalChatStore

from . import measures, native_writes
from .corpus import BIG_USER, Corpus, CorpusChat
from .processes import largest_rss

__all__ = [
    "append_cost",
    "backfill",
    "chat_record",
    "delete_cost",
    "legacy_row",
    "pending_list",
    "plain_bulk",
    "plain_write",
    "run_backfill_command",
    "size",
    "write_cost",
]


def chat_record(chat: CorpusChat, chat_id: str, user: str) -> ChatRecord:
    """``chat`` as the store takes it, under ``chat_id`` in user ``user``'s scope."""
    return ChatRecord(chat_id, {"userId": user}, chat.messages, None, chat.updated_at_ms)


def plain_write(chat: CorpusChat, chat_id: str, user: str) -> None:
    """The same chat and message rows, in one transaction, without any search data."""
    with transaction.atomic():
        row = Chat.objects.create(
            chat_id=chat_id,
            scope={"userId": user},
            revision=1,
            updated_at=time.strftime("%Y-%m-%dT%H:%M:%SZ"),
            is_indexed=False,
            message_count=len(chat.messages),
        )
        ChatScope.objects.create(chat=row, key="userId", value=user)
        Message.objects.bulk_create(plain_messages(row, chat, chat_id))


def plain_messages(row: Chat, chat: CorpusChat, chat_id: str) -> list[Message]:
    """The message rows of ``chat`` as the store keeps them, without search data."""
    return [
        Message(
            chat=row,
            position=i,
            message_id=f"{chat_id}:{i}",
            role=m["role"],
            payload=json.dumps(m, ensure_ascii=False, separators=(",", ":")),
            digest="",
        )
        for i, m in enumerate(chat.messages)
    ]


def write_cost(store: DjangoConditionalChatStore, seed: int, quick: bool) -> dict[str, Any]:
    """``write_chat`` (rows + search data) against the same rows written plain (the ORM,
    no search data) and by plain ``INSERT`` into tables whose search data the engine fills
    itself (``native_writes``), interleaved chat by chat."""
    corpus = Corpus(500 if quick else 20_000, 20, seed + 100)
    kinds = ["write_chat", "plain", "native"]
    timing = dict.fromkeys(kinds, 0.0)
    count = 0
    native_writes.create_tables()
    for n, chat in enumerate(corpus.chats()):
        for kind in kinds[n % 3 :] + kinds[: n % 3]:
            start = time.perf_counter()
            if kind == "plain":
                plain_write(chat, f"pb-{chat.chat_id}", "plainbench")
            elif kind == "native":
                native_writes.native_write(chat, f"nb-{chat.chat_id}", "nativebench")
            else:
                store.write_chat(
                    chat_record(chat, f"wb-{chat.chat_id}", "wbench"), expected_revision=0
                )
            timing[kind] += time.perf_counter() - start
        count += len(chat.messages)
    native_writes.drop_tables()
    # Left in place (their own scopes): deleting 1,000+ chats one by one is a measure of its
    # own (``delete_cost``), far slower than these writes on SQLite.
    return {
        "messages": count,
        "write_chat_msgs_per_s": round(count / timing["write_chat"], 1),
        "plain_msgs_per_s": round(count / timing["plain"], 1),
        "native_msgs_per_s": round(count / timing["native"], 1),
        "overhead_ratio": round(timing["write_chat"] / timing["plain"], 2),
        "native_ratio": round(timing["write_chat"] / timing["native"], 2),
    }


def append_cost(store: DjangoConditionalChatStore, seed: int, quick: bool) -> dict[str, Any]:
    """Appending one message to a 1,000-message chat against appending to a 10-message chat,
    by ``write_chat`` of the whole record and by ``append_messages`` of the new message,
    interleaved (since 2026-12-06; ``ratio_p50`` stays ``write_chat``'s)."""
    corpus = Corpus(3_000, 5, seed + 200)
    pool: list[dict[str, Any]] = []
    for chat in corpus.chats():
        pool.extend(m for m in chat.messages if m["role"] != "system")
        if len(pool) >= 1_100:
            break
    appends = 3 if quick else 40
    long_msgs, short_msgs = pool[:1000], pool[1000:1010]
    extra = pool[1010 : 1010 + appends]
    start = time.perf_counter()
    store.write_chat(
        ChatRecord("append-long", {"userId": "append"}, long_msgs), expected_revision=0
    )
    full_write_ms = (time.perf_counter() - start) * 1000
    for name, messages in (
        ("short", short_msgs),
        ("api-long", long_msgs),
        ("api-short", short_msgs),
    ):
        store.write_chat(
            ChatRecord(f"append-{name}", {"userId": "append"}, messages), expected_revision=0
        )
    before = set(Message.objects.filter(chat__chat_id="append-long").values_list("pk", flat=True))
    samples: dict[str, list[float]] = {"long": [], "short": [], "api-long": [], "api-short": []}
    for i in range(appends):
        for kind, base in (("long", long_msgs), ("short", short_msgs)):
            record = ChatRecord(f"append-{kind}", {"userId": "append"}, base + extra[: i + 1])
            start = time.perf_counter()
            store.write_chat(record, expected_revision=i + 1)
            samples[kind].append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            store.append_messages(f"append-api-{kind}", [extra[i]], expected_revision=i + 1)
            samples[f"api-{kind}"].append((time.perf_counter() - start) * 1000)
    after = set(Message.objects.filter(chat__chat_id="append-long").values_list("pk", flat=True))
    stats = {kind: measures.summarize(values) for kind, values in samples.items()}
    return {
        "appends": appends,
        "full_1000_write_ms": round(full_write_ms, 1),
        "append_to_1000_ms": stats["long"],
        "append_to_10_ms": stats["short"],
        "ratio_p50": round(stats["long"]["p50"] / stats["short"]["p50"], 2),
        "append_messages_to_1000_ms": stats["api-long"],
        "append_messages_to_10_ms": stats["api-short"],
        "append_messages_ratio_p50": round(stats["api-long"]["p50"] / stats["api-short"]["p50"], 2),
        "existing_rows_kept": before <= after,
        "rows_rewritten": len(before - after),
    }


def pending_list(sql: measures.SqlEngines, corpus: Corpus, budget: float) -> dict[str, Any]:
    """Big-user common-term search while writes fill GIN's pending list, then after a clean."""
    queries = measures.query_classes(corpus, BIG_USER, 10, 7)["1-common"]
    store = sql.store
    during: list[float] = []
    extra = Corpus(3_000, 5, 99)
    chats = list(extra.chats())[:60]
    for i, chat in enumerate(chats):
        store.write_chat(chat_record(chat, f"pl-{chat.chat_id}", BIG_USER), expected_revision=0)
        start = time.perf_counter()
        sql.deuz(BIG_USER, queries[i % len(queries)])
        during.append((time.perf_counter() - start) * 1000)
    with connection.cursor() as cursor:
        cursor.execute("SELECT gin_clean_pending_list('deuz_message_vector'::regclass)")
        cleaned = cursor.fetchone()[0]
    after = measures.run_cell(
        {"deuz": sql.deuz}, BIG_USER, queries, rounds=3, budget_s=budget, seed=3
    )["deuz"]
    return {
        "writes": len(chats),
        "during_writes": measures.summarize(during),
        "max_during_ms": round(max(during), 2),
        "pending_pages_cleaned": cleaned,
        "after_clean": after,
    }


def delete_cost(store: DjangoConditionalChatStore, quick: bool) -> dict[str, Any]:
    """``delete_chat`` of small chats written by ``write_cost`` (scope ``wbench``)."""
    ids = list(
        Chat.objects.filter(chat_id__startswith="wb-")
        .order_by("chat_id")
        .values_list("chat_id", flat=True)[: 3 if quick else 10]
    )
    samples = []
    for chat_id in ids:
        start = time.perf_counter()
        store.delete_chat(chat_id)
        samples.append((time.perf_counter() - start) * 1000)
    return {"deleted": len(ids), "delete_chat_ms": measures.summarize(samples)}


def size(indexed_bytes: int) -> dict[str, Any]:
    """Bytes of search data per byte of indexed text (the first 256 KiB of each message)."""
    out: dict[str, Any] = {"indexed_text_bytes": indexed_bytes}
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT pg_relation_size('deuz_message_vector'), "
                "(SELECT coalesce(sum(pg_column_size(search_vector)), 0) "
                " FROM deuz_transcripts_message), "
                "pg_total_relation_size('deuz_transcripts_message'), "
                "pg_total_relation_size('deuz_transcripts_termcount') "
                "+ pg_total_relation_size('deuz_transcripts_countedterm')"
            )
            gin, column, total, counts = cursor.fetchone()
            out |= {
                "gin_index_bytes": gin,
                "tsvector_column_bytes": int(column),
                "message_table_total_bytes": total,
                "term_count_bytes": int(counts),
            }
            search_bytes = gin + int(column) + int(counts)
        else:
            try:
                cursor.execute(
                    "SELECT name, sum(pgsize) FROM dbstat "
                    "WHERE name LIKE 'deuz_transcripts_fts%' GROUP BY name"
                )
                tables = {name: int(n) for name, n in cursor.fetchall()}
                out["method"] = "dbstat"
            except Exception:
                tables = {}
                out["method"] = "dbstat unavailable"
            cursor.execute(
                "SELECT coalesce(sum(length(CAST(search_text AS BLOB))), 0) "
                "FROM deuz_transcripts_message"
            )
            text = int(cursor.fetchone()[0])
            out |= {"fts5_shadow_tables": tables, "search_text_column_bytes": text}
            search_bytes = sum(tables.values()) + text
    out["search_bytes"] = search_bytes
    out["ratio"] = round(search_bytes / indexed_bytes, 3) if indexed_bytes else None
    return out


def legacy_row(chat: CorpusChat, chat_id: str) -> LegacyChat:
    """A ``deuz_chats`` row (the legacy store's form) of a corpus chat, ids left to fill."""
    return LegacyChat(
        chat_id=chat_id,
        scope=chat.scope,
        payload=json.dumps({"messages": chat.messages}, ensure_ascii=False),
        updated_at=datetime.fromtimestamp(chat.updated_at_ms / 1000, UTC),
    )


# the command's progress lines: "legacy: 500/56083 chats", "legacy (worker 1/2): 0/320 chats"
_PROGRESS = re.compile(r"(legacy|stored)( \(worker \d+/\d+\))?: ")


def run_backfill_command(workers: int = 1) -> dict[str, Any]:
    """``manage.py backfill_transcripts --source legacy`` in a child process: wall time, peak RSS.

    With ``workers`` > 1 the command forks that many workers (``--workers``); the peak RSS
    is then the largest of any one process of the command, not their sum.
    """
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="bench.settings")
    command = [sys.executable, "-m", "django", "backfill_transcripts", "--source", "legacy"]
    if workers > 1:
        command += ["--workers", str(workers)]
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as output:
        proc = subprocess.Popen(
            command,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            text=True,
        )
        peak = _peak_rss(proc)
        elapsed = time.perf_counter() - start
        output.seek(0)
        text = output.read()
    kept = [line for line in text.splitlines() if not _PROGRESS.match(line)]
    return {
        "status": "ok" if proc.returncode == 0 else f"exit {proc.returncode}",
        "seconds": elapsed,
        "peak_rss_mb": round(peak / 2**20, 1) if peak else None,
        "summary": "\n".join(kept)[-800:],
    }


def backfill(args: argparse.Namespace, quick: bool) -> dict[str, Any]:
    """``manage.py backfill_transcripts`` over legacy rows of a corpus of their own."""
    count = min(args.backfill_messages or args.messages, 2_000 if quick else 1_000_000)
    legacy = Corpus(count, max(5, args.users // 10), args.seed + 300)
    rows: list[LegacyChat] = []
    written = 0
    for chat in legacy.chats():
        rows.append(legacy_row(chat, f"lg-{chat.chat_id}"))
        written += len(chat.messages)
        if len(rows) >= 500:
            LegacyChat.objects.bulk_create(rows)
            rows = []
    LegacyChat.objects.bulk_create(rows)
    plain = plain_bulk(legacy)
    result = run_backfill_command(args.backfill_workers)
    return {
        **result,
        "legacy_messages": written,
        "seconds": round(result["seconds"], 1),
        "msgs_per_s": round(written / result["seconds"], 1),
        "plain_bulk_create_msgs_per_s": plain,
    }


def plain_bulk(legacy: Corpus, limit: int | None = None) -> float:
    """``bulk_create`` of the same chat and message rows without search data, then deleted.

    Chats and messages go 200 chats per statement pair, in one transaction: the
    fastest plain ORM load, so the ratio against backfill is not flattered.
    """
    start = time.perf_counter()
    count = 0
    pending: list[CorpusChat] = []

    def flush() -> None:
        chats = Chat.objects.bulk_create(
            Chat(
                chat_id=f"bp-{chat.chat_id}",
                scope=chat.scope,
                revision=1,
                updated_at=datetime.fromtimestamp(chat.updated_at_ms / 1000, UTC),
                is_indexed=False,
                message_count=len(chat.messages),
            )
            for chat in pending
        )
        Message.objects.bulk_create(
            message
            for row, chat in zip(chats, pending, strict=True)
            for message in plain_messages(row, chat, chat.chat_id)
        )
        pending.clear()

    with transaction.atomic():
        for chat in legacy.chats():
            pending.append(chat)
            count += len(chat.messages)
            if len(pending) >= 200:
                flush()
            if limit is not None and count >= limit:
                break
        flush()
    elapsed = time.perf_counter() - start
    Chat.objects.filter(chat_id__startswith="bp-").delete()
    return round(count / elapsed, 1)


def _peak_rss(proc: subprocess.Popen[str]) -> int:
    """Poll the RSS of the process and of its children every 0.1 s until it exits."""
    peak = 0
    while proc.poll() is None:
        peak = max(peak, largest_rss(proc.pid))
        time.sleep(0.1)
    proc.wait()
    return peak
