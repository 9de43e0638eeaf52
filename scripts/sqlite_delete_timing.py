"""``delete_chat`` p50/p95 on SQLite at a few corpus sizes, and the write cost of
``PRAGMA secure_delete`` (bench/RESULTS.md, "SQLite delete_chat and secure-delete").

Standalone (not the ``bench`` harness): a file database in WAL mode as bench/settings.py
runs it, filled with ``bench.corpus.Corpus`` chats through ``write_chat``. A copy of the
file is kept at each size in ``--sizes``; every measurement runs on a fresh copy, so the
configurations start from the same bytes. Run it from the repository root::

    python scripts/sqlite_delete_timing.py load --dir /tmp/deltime --sizes 50000 200000
    python scripts/sqlite_delete_timing.py deletes --dir /tmp/deltime --size 200000
    DEUZ_SQLITE_MODULE=pysqlite3 python scripts/sqlite_delete_timing.py deletes ...

``DEUZ_SQLITE_MODULE`` swaps the ``sqlite3`` module as testproject/settings.py does. The
code measured is whatever ``deuz_transcripts`` the path imports (PYTHONPATH may point at
an export of an older commit for a before/after).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

if _module := os.environ.get("DEUZ_SQLITE_MODULE"):
    sys.modules["sqlite3"] = importlib.import_module(_module)


def setup(path: Path, secure: bool, init: str = "") -> None:
    import django
    from django.conf import settings

    settings.configure(
        INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "deuz_transcripts"],
        DATABASES={
            "default": {
                "ENGINE": "django.db.backends.sqlite3",
                "NAME": str(path),
                "OPTIONS": {
                    "transaction_mode": "IMMEDIATE",
                    "timeout": 20,
                    "init_command": f"PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; {init}",
                },
            }
        },
        DEUZ_TRANSCRIPTS={"SQLITE_BACKEND": "fts5", "SQLITE_SECURE_DELETE": secure},
        USE_TZ=True,
    )
    django.setup()


def checkpoint() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()


def load(args: argparse.Namespace) -> None:
    from bench.corpus import Corpus

    args.dir.mkdir(parents=True, exist_ok=True)
    path = args.dir / "work.sqlite3"
    setup(path, secure=True)
    from django.core.management import call_command

    from deuz_transcripts import ChatRecord
    from deuz_transcripts.stores import DjangoConditionalChatStore

    call_command("migrate", verbosity=0)
    store = DjangoConditionalChatStore()
    sizes = sorted(args.sizes)
    written, start = 0, time.perf_counter()
    for chat in Corpus(sizes[-1], max(10, sizes[-1] // 1000)).chats():
        record = ChatRecord(chat.chat_id, chat.scope, chat.messages, None, chat.updated_at_ms)
        store.write_chat(record, expected_revision=0)
        written += len(chat.messages)
        if sizes and written >= sizes[0]:
            checkpoint()
            shutil.copyfile(path, args.dir / f"corpus-{sizes.pop(0)}.sqlite3")
            rate = written / (time.perf_counter() - start)
            print(f"{written} messages, {rate:.0f} msg/s", flush=True)


def deletes(args: argparse.Namespace) -> dict[str, Any]:
    """``delete_chat`` of ``--count`` chats spread over the corpus (every k-th chat)."""
    path = args.dir / f"run-{os.getpid()}.sqlite3"
    shutil.copyfile(args.dir / f"corpus-{args.size}.sqlite3", path)
    setup(path, secure=True)
    import sqlite3

    from deuz_transcripts.models import Chat, Message
    from deuz_transcripts.stores import DjangoConditionalChatStore

    store = DjangoConditionalChatStore()
    ids = list(Chat.objects.order_by("chat_id").values_list("chat_id", flat=True))
    step = max(1, len(ids) // args.count)
    chosen = ids[step // 2 :: step][: args.count]
    sizes = [Message.objects.filter(chat__chat_id=chat_id).count() for chat_id in chosen]
    samples = []
    for chat_id in chosen:
        started = time.perf_counter()
        store.delete_chat(chat_id)
        samples.append((time.perf_counter() - started) * 1000)
    result = {
        "sqlite": sqlite3.sqlite_version,
        "messages": args.size,
        "deleted_chats": len(chosen),
        "messages_per_chat_median": statistics.median(sizes),
        "p50_ms": round(statistics.median(samples), 1),
        "p95_ms": round(statistics.quantiles(samples, n=20, method="inclusive")[-1], 1),
        "max_ms": round(max(samples), 1),
    }
    path.unlink()
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return result


def writes(args: argparse.Namespace) -> dict[str, Any]:
    """``write_chat`` of new chats, ``PRAGMA secure_delete`` on and off for alternate
    chats of one connection (the load of the machine then weighs on both alike)."""
    from bench.corpus import Corpus

    path = args.dir / f"run-{os.getpid()}.sqlite3"
    shutil.copyfile(args.dir / f"corpus-{args.size}.sqlite3", path)
    setup(path, secure=True)
    import sqlite3

    from django.db import connection

    from deuz_transcripts import ChatRecord
    from deuz_transcripts.stores import DjangoConditionalChatStore

    store = DjangoConditionalChatStore()
    seconds = {0: 0.0, 1: 0.0}
    written = {0: 0, 1: 0}
    for number, chat in enumerate(Corpus(args.count, 5, seed=7).chats()):
        secure = (number // 2 + number) % 2  # on, off, off, on, on, off...
        with connection.cursor() as cursor:
            cursor.execute(f"PRAGMA secure_delete = {secure}")
        record = ChatRecord(f"w-{chat.chat_id}", chat.scope, chat.messages, None, 0)
        started = time.perf_counter()
        store.write_chat(record, expected_revision=0)
        seconds[secure] += time.perf_counter() - started
        written[secure] += len(chat.messages)
    path.unlink()
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return {
        "sqlite": sqlite3.sqlite_version,
        "messages": sum(written.values()),
        "msg_per_s_secure_delete_on": round(written[1] / seconds[1]),
        "msg_per_s_secure_delete_off": round(written[0] / seconds[0]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("command", choices=["load", "deletes", "writes"])
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--sizes", type=int, nargs="+", default=[50_000, 200_000])
    parser.add_argument("--size", type=int, default=200_000)
    parser.add_argument("--count", type=int, default=20)
    args = parser.parse_args()
    if args.command == "load":
        load(args)
    else:
        print(json.dumps((deletes if args.command == "deletes" else writes)(args)), flush=True)


if __name__ == "__main__":
    main()
