"""``python -m bench.statements --db sqlite|postgres --json PATH``: what each search sends.

Loads a small deterministic corpus into a database of its own, with the planner's
thresholds scaled down (``--scale``) so that every route a 1M-message database takes
is taken here too (stored counts of the big tenants, walks, essential terms, mask
plans, capped and exact totals, cursor pages, roles and windows). Each search's
statements are recorded with their parameters, and its hits with their scores.

Two runs (two checkouts, the same arguments) are compared with ``--compare A B``:
every case must find the same hits in the same order with the same scores, and the
report lists, per case, the round trips (query strings sent) and the statements (a
query string may hold several, ``BEGIN; SELECT set_config(...); <read>``) of each run,
and whether the reads (every statement but transaction control and session settings)
are the same.
It counts statements, never times them: it runs beside anything.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .marker import OUT

#: Statements that only steer the transaction or the session (not a read of the data).
CONTROL = re.compile(
    r"^\s*(BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE|SET\b|SELECT (set_config|current_setting))",
    re.IGNORECASE,
)

#: Where one query string holds several statements: a ``;`` before the next one.
BETWEEN = re.compile(
    r";\s+(?=(?:BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE|SET|SELECT|WITH)\b)", re.IGNORECASE
)


def split(sql: str) -> list[str]:
    """The statements of one query string."""
    return BETWEEN.split(sql)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.statements", description=__doc__)
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--messages", type=int, default=12_000)
    parser.add_argument("--users", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--scale", type=float, default=0.02, help="factor on every size threshold of the policy"
    )
    parser.add_argument("--pg-name", default="deuz_statements")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    return parser.parse_args(argv)


def setup(args: argparse.Namespace) -> None:
    if args.db == "postgres":
        os.environ["BENCH_DB"] = f"postgres:{args.pg_name}"
        os.environ["BENCH_TENANT_KEY"] = "userId"
    else:
        os.environ["BENCH_DB"] = f"sqlite:{OUT / 'statements.sqlite3'}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    import django

    django.setup()


def recreate(args: argparse.Namespace) -> None:
    from django.core.management import call_command
    from django.db import connection

    if args.db == "postgres":
        import psycopg

        settings = connection.settings_dict
        with psycopg.connect(
            host=settings["HOST"], user=settings["USER"], dbname="postgres", autocommit=True
        ) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{args.pg_name}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{args.pg_name}"')
    else:
        path = OUT / "statements.sqlite3"
        OUT.mkdir(parents=True, exist_ok=True)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    call_command("migrate", verbosity=0)


def scaled_policies(scale: float) -> dict[type[Any], Any]:
    """Every engine's default policy with every size threshold times ``scale`` (term
    counts kept), for ``policy.FORCED``."""
    from deuz_transcripts.backends import engine_policies

    sizes = {
        "single_statement_max",
        "small_read_rows",
        "big_read_rows",
        "lexeme_scope_min",
        "rare_lexeme_scope_min",
        "scan_scope_max",
    }
    scaled = {}
    for kind in engine_policies():
        default = kind()
        own = {field.name for field in fields(kind)}
        changed = {
            name: max(1, int(getattr(default, name) * scale))
            for name in sizes & own
            if getattr(default, name)
        }
        scaled[kind] = replace(default, **changed)
    return scaled


def load(args: argparse.Namespace) -> Any:
    from django.db import connection

    from bench.corpus import Corpus
    from deuz_transcripts import ChatRecord
    from deuz_transcripts.stores import DjangoConditionalChatStore

    store = DjangoConditionalChatStore()
    corpus = Corpus(args.messages, args.users, args.seed)
    for chat in corpus.chats():
        updated = datetime.fromtimestamp(chat.updated_at_ms / 1000, tz=UTC)
        record = ChatRecord(chat.chat_id, chat.scope, chat.messages, None, updated)
        store.write_chat(record, expected_revision=0)
    if connection.vendor == "postgresql":
        from deuz_transcripts.backends.postgresql.counts import refresh

        with connection.cursor() as cursor:
            refresh.refresh_term_counts(
                cursor,
                max(2, int(500 * args.scale * 10)),
                tenant_min_rows=max(2, int(10_000 * args.scale)),
                rebuild=True,
            )
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    return store, corpus


def words_by_frequency(corpus: Any) -> list[str]:
    """The corpus's indexed terms, most frequent first."""
    from deuz_transcripts.text import terms

    counts: dict[str, int] = {}
    for chat in corpus.chats():
        for text in chat.indexed:
            if text:
                for term in set(terms(text)):
                    counts[term] = counts.get(term, 0) + 1
    return sorted(counts, key=lambda term: (-counts[term], term))


def few_chats(corpus: Any, most: int) -> list[str]:
    """The small user's newest chats holding at most ``most`` indexed messages in all: a
    scope under every size that routes a search (the small user of a 1M database)."""
    from bench.corpus import SMALL_USER

    own = [chat for chat in corpus.chats() if chat.user == SMALL_USER]
    own.sort(key=lambda chat: (-chat.updated_at_ms, chat.chat_id))
    chosen, held = [], 0
    for chat in own:
        size = sum(1 for text in chat.indexed if text)
        if held + size > most:
            break
        chosen.append(chat.chat_id)
        held += size
    return chosen


def cases(
    words: list[str], middle: datetime, few: list[str] | None = None
) -> Iterator[tuple[str, dict[str, str], str, dict[str, Any]]]:
    """(name, scope, query, options) of every case; ``few``: the chat ids of the "few"
    scope (the small user's, under the scaled one-statement size)."""
    from bench.corpus import BIG_USER, LOG_WORDS, SMALL_USER

    common = [w for w in words[:40] if w.isalpha()]
    mid = words[len(words) // 50 : len(words) // 50 + 20]
    rare = words[len(words) // 3 : len(words) // 3 + 20]
    queries = {
        "1-common": common[0],
        "1-mid": mid[0],
        "1-rare": rare[0],
        "2-common": f"{common[1]} {common[2]}",
        "rare+common": f"{rare[1]} {common[3]}",
        "log+common": f"{LOG_WORDS[0]} {common[4]}",
        "5-mixed": " ".join([common[5], mid[1], mid[2], rare[2], common[6]]),
        "5-common": " ".join(common[7:12]),
        "8-mixed": " ".join([*common[12:15], *mid[3:6], *rare[3:5]]),
        "32-mixed": " ".join([*common[15:27], *mid[6:16], *rare[5:15]]),
    }
    scopes = {"small": {"userId": SMALL_USER}, "big": {"userId": BIG_USER}, "every": {}}
    narrowed: dict[str, dict[str, Any]] = {name: {} for name in scopes}
    if few:
        scopes["few"] = scopes["small"]
        narrowed["few"] = {"chat_ids": few}
    for scope_name, scope in scopes.items():
        chats = narrowed[scope_name]
        for query_name, query in queries.items():
            base = f"{scope_name}/{query_name}"
            yield f"{base}/search", scope, query, {"mode": "search", **chats}
            yield f"{base}/page", scope, query, {"mode": "page", **chats}
            yield f"{base}/capped", scope, query, {"mode": "page", "total_cap": 50, **chats}
            yield f"{base}/next", scope, query, {"mode": "next", **chats}
            if query_name in ("1-common", "2-common", "5-mixed"):
                roles = {"mode": "search", "roles": ["user"], **chats}
                yield f"{base}/roles", scope, query, roles
                yield (
                    f"{base}/window",
                    scope,
                    query,
                    {"mode": "search", "updated_after": middle, **chats},
                )


@contextmanager
def recorded(statements: list[dict[str, Any]]) -> Iterator[None]:
    """Every statement sent, transaction control included (Django logs BEGIN and COMMIT
    in its debug log), with its parameters as the database received them."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        yield
    statements.extend({"sql": query["sql"]} for query in captured.captured_queries)


def run_case(store: Any, scope: dict[str, str], query: str, options: dict[str, Any]) -> Any:
    options = dict(options)
    mode = options.pop("mode")
    index = store.transcript
    if mode == "search":
        hits = index.search(scope, query, limit=20, **options)
        return [(h.chat_id, h.message_id, round(h.score, 9)) for h in hits], None
    page = index.search_page(scope, query, limit=20, **options)
    if mode == "next":
        if page.next_cursor is None:
            return [], page.total
        chats = {"chat_ids": options["chat_ids"]} if "chat_ids" in options else {}
        page = index.search_page(scope, query, limit=20, cursor=page.next_cursor, **chats)
    return [(h.chat_id, h.message_id, round(h.score, 9)) for h in page.hits], page.total


def measure(args: argparse.Namespace) -> dict[str, Any]:
    setup(args)
    from django.conf import settings
    from django.db import connection

    from deuz_transcripts.backends import get_backend, policy
    from deuz_transcripts.backends.postgresql.policy import PostgresPolicy
    from deuz_transcripts.backends.sqlite.fts5_policy import Fts5Policy

    recreate(args)
    scaled = policy.FORCED = scaled_policies(args.scale)
    scan = scaled[Fts5Policy].scan_scope_max  # FTS5's is the setting's, scaled with the rest
    settings.DEUZ_TRANSCRIPTS = {**settings.DEUZ_TRANSCRIPTS, "SQLITE_SCAN_SCOPE_MAX": scan}
    store, corpus = load(args)
    words = words_by_frequency(corpus)
    times = sorted(chat.updated_at_ms for chat in corpus.chats())
    middle = datetime.fromtimestamp(times[len(times) // 2] / 1000, tz=UTC)
    results: dict[str, Any] = {"db": args.db, "backend": store.transcript.backend_name}
    found: dict[str, Any] = {}
    engine = get_backend("default").source.policy
    mid_size = scaled[PostgresPolicy].rare_lexeme_scope_min  # routes PostgreSQL's mid scopes
    small = min(engine.single_statement_max, mid_size, engine.small_read_rows)
    few = few_chats(corpus, small - 1)
    for name, scope, query, options in cases(words, middle, few):
        run_case(store, scope, query, options)  # warm: caches of the process and the server
        statements: list[dict[str, Any]] = []
        with recorded(statements):
            hits, count = run_case(store, scope, query, options)
        found[name] = {
            "query": query,
            "hits": hits,
            "count": count,
            "statements": statements,
        }
    connection.close()
    results["cases"] = found
    return results


def statements_of(case: dict[str, Any]) -> list[str]:
    return [statement for sent in case["statements"] for statement in split(sent["sql"])]


def reads(case: dict[str, Any]) -> list[str]:
    return [sql for sql in statements_of(case) if not CONTROL.match(sql)]


def compare(before_path: Path, after_path: Path) -> int:
    before = json.loads(before_path.read_text())["cases"]
    after = json.loads(after_path.read_text())["cases"]
    differ = 0
    print(f"{'':<34} {'round trips':>13} {'statements':>13}")
    print(
        f"{'case':<34} {'before':>6} {'after':>6} {'before':>6} {'after':>6} {'reads':>6}  result"
    )
    for name in before:
        old, new = before[name], after.get(name)
        if new is None:
            print(f"{name:<34} missing after")
            differ += 1
            continue
        same_hits = old["hits"] == new["hits"] and old["count"] == new["count"]
        same_reads = reads(old) == reads(new)
        differ += not same_hits
        print(
            f"{name:<34} {len(old['statements']):>6} {len(new['statements']):>6} "
            f"{len(statements_of(old)):>6} {len(statements_of(new)):>6} "
            f"{'same' if same_reads else 'OTHER':>6}  {'same' if same_hits else 'DIFFERENT'}"
        )
    print(f"{differ} cases with other hits")
    return 1 if differ else 0


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.compare:
        sys.exit(compare(*args.compare))
    results = measure(args)
    text = json.dumps(results, indent=1, default=str)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text)
    cases_ = results["cases"]
    for name, case in cases_.items():
        print(
            f"{name:<34} {len(case['statements']):>3} round trips, "
            f"{len(statements_of(case)):>3} statements, {len(reads(case)):>3} reads"
        )


if __name__ == "__main__":
    main()
