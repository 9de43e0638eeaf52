"""One benchmark run: load the corpus, then every measure, each bounded in time."""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import zlib
from pathlib import Path
from typing import Any

from django.db import connection

from deuz_transcripts.models import LegacyChat
from deuz_transcripts.records import ChatRecord
from deuz_transcripts.stores import DjangoConditionalChatStore
from deuz_transcripts.text import MAX_INDEXED_BYTES, cut_utf8

from . import filters, marker, measures, partitions, peers, writes
from .corpus import BIG_USER, SMALL_USER, Corpus
from .models import PeerDoc
from .processes import memory_gb
from .progress import log

GROWTH_POINTS = (10_000, 100_000, 1_000_000)


def analyze() -> None:
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def count_terms() -> float | None:
    """PostgreSQL: ``backfill_transcripts --count-terms`` after a load (what a deployment
    runs after a bulk load and then from time to time); its seconds, ``None`` elsewhere."""
    if connection.vendor != "postgresql":
        return None
    from deuz_transcripts.backends.postgresql.counts.refresh import refresh_term_counts

    start = time.perf_counter()
    with connection.cursor() as cursor:
        counted = refresh_term_counts(cursor)
    seconds = time.perf_counter() - start
    log(f"count_terms: {counted} terms counted in {seconds:.1f} s")
    return round(seconds, 1)


class Run:
    def __init__(self, args: argparse.Namespace, skipped: dict[str, str]) -> None:
        self.args = args
        self.quick = args.quick
        self.budget = args.budget or (0.15 if args.quick else 3.0)
        self.per_class = 2 if args.quick else 12
        self.rounds = 1 if args.quick else 2
        self.store = DjangoConditionalChatStore()
        self.sql = measures.SqlEngines(self.store)
        self.corpus = Corpus(args.messages, args.users, args.seed, cjk_share=args.cjk_share)
        self.phases: list[str] = args.phases
        self.peer_status: dict[str, Any] = {
            name: {"status": "skipped", "reason": reason} for name, reason in skipped.items()
        }
        self.tantivy: peers.TantivyPeer | None = None
        self.results: dict[str, Any] = {"meta": self.meta(), "peers": self.peer_status}

    def meta(self) -> dict[str, Any]:
        return _meta(self.args)

    def execute(self) -> dict[str, Any]:
        """Each phase saves the JSON so far (a run stopped midway keeps what it measured)."""
        self.results["meta"]["backend"] = self.store.transcript.backend_name
        if self.args.reuse_db:
            self.reuse()
        else:
            self.load()
            analyze()
            self.results["size"] = writes.size(self.results["load"]["indexed_bytes"])
            self.build_peers()
            self.write_marker()
        if self.args.partitions:
            self.results["partitions"] = partitions.partition(self.args.partitions)
        self.save()
        if "search" in self.phases or "cjk" in self.phases:
            log("search measures")
            self.results["search"] = self.search_measures()
            self.save()
        if self.tantivy is not None:
            self.tantivy.close()
        if "filters" in self.phases:
            log("filter measures")
            self.results["filters"] = self.filter_measures()
            self.save()
        if "writes" in self.phases:
            self.write_measures()
        return self.results

    def write_measures(self) -> None:
        """Writes, appends, deletes and backfill (they add chats: the database's last phase)."""
        if self.args.marker.exists():
            loaded = marker.read(self.args)
            marker.write(self.args, {**loaded, "write_measures_ran": True})
        if connection.vendor == "postgresql":
            self.results["pending_list"] = writes.pending_list(self.sql, self.corpus, self.budget)
        log("write measures")
        self.results["write"] = writes.write_cost(self.store, self.args.seed, self.quick)
        self.save()
        self.results["append"] = writes.append_cost(self.store, self.args.seed, self.quick)
        self.results["delete"] = writes.delete_cost(self.store, self.quick)
        self.save()
        if "backfill" in self.results:  # measured by the load
            log("plain bulk_create baseline of the same rows")
            limit = min(self.args.messages, 100_000)
            self.results["backfill"]["plain_bulk_create_msgs_per_s"] = writes.plain_bulk(
                self.corpus, limit
            )
            self.results["backfill"]["plain_bulk_create_messages"] = limit
        else:
            self.results["backfill"] = writes.backfill(self.args, self.quick)
        self.save()

    def write_marker(self) -> None:
        """Names the corpus now in the database, so ``--reuse-db`` can measure it again."""
        loaded = {"corpus": marker.corpus_identity(self.args), "load": self.results["load"]}
        marker.write(self.args, loaded)

    def reuse(self) -> None:
        """The corpus is generated again (not written) for its word counts and queries."""
        loaded = marker.read(self.args)
        log(f"reusing the loaded database ({self.args.marker}); generating the corpus's words")
        start = time.perf_counter()
        for _ in self.corpus.chats():
            pass
        self.results["load"] = {
            **loaded["load"],
            "reused": True,
            "regenerate_seconds": round(time.perf_counter() - start, 1),
            "write_measures_ran_before": bool(loaded.get("write_measures_ran")),
        }

    def save(self) -> None:
        from .report import evaluate_targets, write_json

        self.results["targets"] = evaluate_targets(self.results)
        if self.args.json:
            write_json(self.results, self.args.json)

    # loading

    def peer_subset(self) -> set[str]:
        """Users whose messages the peers index: all, or the measured ones plus others up to a cap."""
        sizes = self.corpus.user_sizes
        chosen = {BIG_USER, SMALL_USER}
        total = sizes[BIG_USER] + sizes[SMALL_USER]
        for user, size in sizes.items():
            if user not in chosen and total + size <= self.args.peer_cap:
                chosen.add(user)
                total += size
        return chosen

    def load(self) -> None:
        """Every chat through ``backfill_transcripts`` (default) or ``write_chat``.

        Backfill: the corpus goes into the legacy ``deuz_chats`` table up to each growth
        point, ``backfill_transcripts`` indexes it in a child process (its wall time and
        peak RSS are the backfill measure), then the indexed legacy rows are dropped.
        """
        args = self.args
        via_backfill = args.load == "backfill"
        want_peers = [n for n in ("watson", "modelsearch") if n not in self.peer_status]
        if "tantivy" not in self.peer_status:
            name = f"tantivy-{args.db}-{args.messages}-{os.getpid()}"
            self.tantivy = peers.TantivyPeer(Path(__file__).parent / "out" / name)
        subset = self.peer_subset() if (want_peers or self.tantivy) else set()
        points = [p for p in GROWTH_POINTS if p < args.messages] + [args.messages]
        growth: list[dict[str, Any]] = []
        counting: list[float | None] = []  # --count-terms seconds at each growth point
        written = indexed_bytes = chats = 0
        write_s = 0.0
        stages: list[dict[str, Any]] = []
        legacy: list[LegacyChat] = []
        docs: list[PeerDoc] = []
        seq = 0
        log(f"loading {args.messages} messages over {args.users} users via {args.load}")
        start = time.perf_counter()
        for chat in self.corpus.chats():
            if via_backfill:
                legacy.append(writes.legacy_row(chat, chat.chat_id))
                if len(legacy) >= 500:
                    LegacyChat.objects.bulk_create(legacy)
                    legacy = []
            else:
                record = ChatRecord(
                    chat.chat_id, chat.scope, chat.messages, None, chat.updated_at_ms
                )
                t0 = time.perf_counter()
                self.store.write_chat(record, expected_revision=0)
                write_s += time.perf_counter() - t0
            chats += 1
            written += len(chat.messages)
            for text in chat.indexed:
                if text is None:
                    continue
                capped = cut_utf8(text, MAX_INDEXED_BYTES)
                indexed_bytes += len(capped.encode("utf-8"))
                seq += 1
                if chat.user in subset:
                    if want_peers:
                        docs.append(PeerDoc(message_pk=seq, user=chat.user, text=capped))
                    if self.tantivy:
                        self.tantivy.add(seq, chat.user, capped)
            if len(docs) >= 2000:
                PeerDoc.objects.bulk_create(docs)
                docs = []
            if points and written >= points[0]:
                points.pop(0)
                if via_backfill:
                    LegacyChat.objects.bulk_create(legacy)
                    legacy = []
                    stage = writes.run_backfill_command(args.backfill_workers)
                    LegacyChat.objects.all().delete()
                    stage["messages"] = written - sum(s["messages"] for s in stages)
                    stages.append(stage)
                    write_s += stage["seconds"]
                    if stage["status"] != "ok":
                        raise RuntimeError(f"backfill failed: {stage['summary']}")
                log(
                    f"{written} messages indexed ({written / write_s:.0f} msg/s); growth checkpoint"
                )
                counting.append(count_terms())
                analyze()
                growth.append(self.growth_point(written))
        if docs:
            PeerDoc.objects.bulk_create(docs)
        how = (
            "legacy deuz_chats rows, indexed by manage.py backfill_transcripts --source legacy "
            "(a child process per growth stage)"
            if via_backfill
            else "every chat through DjangoConditionalChatStore.write_chat(expected_revision=0)"
        )
        self.results["load"] = {
            "how": how,
            "messages": written,
            "chats": chats,
            "users": len(self.corpus.user_sizes),
            "big_user_messages": self.corpus.user_sizes[BIG_USER],
            "small_user_messages": self.corpus.user_sizes[SMALL_USER],
            "indexed_bytes": indexed_bytes,
            "index_seconds": round(write_s, 2),
            "index_msgs_per_s": round(written / write_s, 1),
            "index_indexed_mb_per_s": round(indexed_bytes / write_s / 1e6, 2),
            "wall_seconds": round(time.perf_counter() - start, 1),
            "peer_subset_users": len(subset),
        }
        if via_backfill:
            self.results["load"]["backfill_stages"] = [
                {k: (round(v, 1) if k == "seconds" else v) for k, v in s.items() if k != "summary"}
                for s in stages
            ]
            self.results["backfill"] = {
                "status": "ok",
                "how": "the corpus load itself (see load.backfill_stages)",
                "legacy_messages": written,
                "seconds": round(write_s, 1),
                "msgs_per_s": round(written / write_s, 1),
                "peak_rss_mb": max((s["peak_rss_mb"] or 0) for s in stages) or None,
                "summary": stages[-1]["summary"],
            }
        self.results["growth"] = growth
        self.results["load"]["count_terms_seconds"] = counting

    def growth_point(self, written: int) -> dict[str, Any]:
        """Small-user search p95 vs its btree fetch, at this corpus size."""
        engines = {"deuz": self.sql.deuz, "btree_fetch": self.sql.btree_fetch}
        queries = [
            q
            for qs in measures.query_classes(self.corpus, SMALL_USER, 2, self.args.seed).values()
            for q in qs
        ]
        cell = measures.run_cell(
            engines, SMALL_USER, queries, rounds=self.rounds, budget_s=self.budget * 2, seed=written
        )
        return {"messages": written, **{name: value for name, value in cell.items()}}

    # peers

    def build_peers(self) -> None:
        builders = {"watson": peers.build_watson, "modelsearch": peers.build_modelsearch}
        for name, build in builders.items():
            if name in self.peer_status:
                continue
            log(f"building peer {name}")
            try:
                self.peer_status[name] = build()
            except Exception as exc:
                self.peer_status[name] = {
                    "status": "failed",
                    "reason": f"{type(exc).__name__}: {exc}"[:500],
                }
        if self.tantivy is not None:
            try:
                self.peer_status["tantivy"] = self.tantivy.commit()
            except Exception as exc:
                self.peer_status["tantivy"] = {"status": "failed", "reason": repr(exc)[:500]}
                self.tantivy = None
        subset = self.results["load"]["peer_subset_users"]
        for status in self.peer_status.values():
            if status.get("status") == "ok":
                status["users_indexed"] = subset

    def engines(self, user: str | None) -> dict[str, measures.Engine]:
        sql = self.sql
        engines: dict[str, measures.Engine] = {
            "deuz": sql.deuz,
            "deuz_sql_raw": sql.replayed(),
            "raw_lower_bound": sql.raw_lower_bound,
            "engine_rank": sql.engine_rank,
            "icontains": sql.icontains,
        }
        if user is not None:
            engines["btree_fetch"] = sql.btree_fetch
        if self.peer_status.get("watson", {}).get("status") == "ok":
            engines["watson"] = peers.watson_search
        if self.peer_status.get("modelsearch", {}).get("status") == "ok":
            engines["modelsearch"] = peers.modelsearch_search
        if self.tantivy is not None:
            engines["tantivy"] = self.tantivy.search
        return engines

    def classes(self, user: str | None) -> dict[str, list[str]]:
        """The query classes of the chosen phases: the standard ones, then ``cjk-1``/``cjk-2``."""
        seed = self.args.seed
        out: dict[str, list[str]] = {}
        if "search" in self.phases:
            out.update(measures.query_classes(self.corpus, user, self.per_class, seed))
        if "cjk" in self.phases:
            out.update(measures.cjk_query_classes(self.corpus, user, self.per_class, seed))
        return out

    def search_measures(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for label, user in measures.users_measured().items():
            engines = self.engines(user)
            out[label] = {"user": user, "classes": {}}
            for name, queries in self.classes(user).items():
                log(f"search {label} {name}")
                used, skipped = engines, {}
                if name.startswith("cjk-"):  # named whether or not this run has the peer
                    skipped = measures.CJK_UNSUPPORTED
                    used = {e: fn for e, fn in engines.items() if e not in skipped}
                out[label]["classes"][name] = {
                    "queries": queries[:3],
                    "engines": measures.run_cell(
                        used,
                        user,
                        queries,
                        rounds=self.rounds,
                        budget_s=self.budget,
                        seed=zlib.crc32(f"{label}/{name}".encode()),
                        timeout_s=2.0 if self.quick else 10.0,
                    ),
                }
                if skipped:
                    out[label]["classes"][name]["skipped_engines"] = skipped
        return out

    def filter_measures(self) -> dict[str, Any]:
        """Big user and unscoped: each filter and paging variant against the plain search."""
        out: dict[str, Any] = {"variants": filters.VARIANTS}
        index = self.store.transcript
        for label, user in measures.users_measured().items():
            if label == "small":
                continue
            bounds = filters.windows(user)
            classes = measures.query_classes(self.corpus, user, self.per_class, self.args.seed)
            engines = filters.variant_engines(index, user, bounds)
            for engine in engines.values():  # warm every code path once
                engine(user, classes[filters.FILTER_CLASSES[0]][0])
            out[label] = {
                "user": user,
                "windows": {
                    name: [None if bound is None else bound.isoformat() for bound in pair]
                    for name, pair in bounds.items()
                },
                "classes": {},
            }
            for name in filters.FILTER_CLASSES:
                log(f"filters {label} {name}")
                cell = measures.run_cell(
                    engines,
                    user,
                    classes[name],
                    rounds=self.rounds,
                    budget_s=self.budget,
                    seed=zlib.crc32(f"filters/{label}/{name}".encode()),
                    timeout_s=2.0 if self.quick else 10.0,
                )
                out[label]["classes"][name] = {
                    "queries": classes[name][:3],
                    "variants": cell,
                    "ratio_to_plain": filters.ratios(cell),
                }
        return out


def _meta(args: argparse.Namespace) -> dict[str, Any]:
    import django

    info: dict[str, Any] = {
        "command": "python -m bench " + " ".join(sys.argv[1:]),
        "args": {k: str(v) for k, v in vars(args).items()},
        "python": platform.python_version(),
        "django": django.get_version(),
        "platform": platform.platform(),
        "nproc": os.cpu_count(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }
    info["memory_gb"] = memory_gb()
    info["load_avg"] = os.getloadavg()  # the machine is shared: its load at the start
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SHOW server_version")
            info["database"] = "PostgreSQL " + cursor.fetchone()[0]
        else:
            cursor.execute("SELECT sqlite_version()")
            info["database"] = "SQLite " + cursor.fetchone()[0]
    for package in ("watson", "modelsearch", "tantivy"):
        try:
            from importlib.metadata import version

            dist = {"watson": "django-watson"}.get(package, package)
            info[f"{package}_version"] = version(dist)
        except Exception:
            info[f"{package}_version"] = None
    return info
