"""The peers, indexing the same messages: django-watson, modelsearch (Wagtail's DB backend), tantivy.

Each peer is optional: a peer that is not importable, or fails to build, is recorded
with its reason and skipped. watson and modelsearch index ``bench.models.PeerDoc``
rows (the same indexed text as deuz_transcripts, per user); tantivy indexes the
same text in-process as the speed reference of a dedicated engine.
"""

from __future__ import annotations

import importlib.util
import shutil
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["TantivyPeer", "available_peers", "build_modelsearch", "build_watson"]


def available_peers(vendor: str) -> tuple[list[str], dict[str, str]]:
    """Django-app peers to install for ``vendor``, and the reasons the others are skipped."""
    chosen: list[str] = []
    skipped: dict[str, str] = {}
    for name in ("watson", "modelsearch"):
        if importlib.util.find_spec(name) is None:
            skipped[name] = f"not installed (pip install -e '.[bench]'): {name} is not importable"
        elif name == "watson" and vendor != "postgres":
            skipped[name] = (
                "django-watson is measured on PostgreSQL only (its SQLite backend is LIKE)"
            )
        else:
            chosen.append(name)
    if importlib.util.find_spec("tantivy") is None:
        skipped["tantivy"] = "not installed: tantivy is not importable"
    return chosen, skipped


def _batches(rows: Iterable[Any], size: int) -> Iterable[list[Any]]:
    batch: list[Any] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def build_watson() -> dict[str, Any]:
    """Register PeerDoc and write watson's search entries in batches (as ``buildwatson`` does)."""
    from django.db import transaction
    from watson import search as watson
    from watson.search import _bulk_save_search_entries

    from .models import PeerDoc

    if not watson.is_registered(PeerDoc):
        watson.register(PeerDoc, fields=("text",), store=())
    engine = watson.default_search_engine
    start = time.perf_counter()
    count = 0
    for batch in _batches(PeerDoc.objects.order_by("pk").iterator(chunk_size=2000), 2000):
        with transaction.atomic():
            entries = [e for obj in batch for e in engine._update_obj_index_iter(obj)]
            _bulk_save_search_entries(entries, batch_size=500)
        count += len(batch)
    elapsed = time.perf_counter() - start
    _analyze()
    return {
        "status": "ok",
        "indexed": count,
        "seconds": round(elapsed, 2),
        "msgs_per_s": round(count / elapsed, 1) if elapsed else None,
    }


def watson_search(user: str | None, q: str) -> list[Any]:
    from watson import search as watson

    from .models import PeerDoc

    rows = PeerDoc.objects.all() if user is None else PeerDoc.objects.filter(user=user)
    return list(watson.filter(rows, q)[:20].values_list("pk", "text"))


def build_modelsearch() -> dict[str, Any]:
    """Index PeerDoc through the backend's ``add_bulk``, as ``rebuild_modelsearch_index`` does."""
    from modelsearch.backends import get_search_backend

    from .models import PeerDoc

    backend = get_search_backend()
    index = backend.get_index_for_model(PeerDoc)
    start = time.perf_counter()
    count = 0
    for batch in _batches(PeerDoc.objects.order_by("pk").iterator(chunk_size=2000), 2000):
        index.add_items(PeerDoc, batch)
        count += len(batch)
    elapsed = time.perf_counter() - start
    _analyze()
    return {
        "status": "ok",
        "indexed": count,
        "seconds": round(elapsed, 2),
        "msgs_per_s": round(count / elapsed, 1) if elapsed else None,
    }


def modelsearch_search(user: str | None, q: str) -> list[Any]:
    from modelsearch.backends import get_search_backend

    from .models import PeerDoc

    rows = PeerDoc.objects.all() if user is None else PeerDoc.objects.filter(user=user)
    return list(get_search_backend().search(q, rows, operator="or")[:20])


def _analyze() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


class TantivyPeer:
    """An on-disk tantivy index of the same text; BM25 top 20 within the user's documents."""

    def __init__(self, path: Path) -> None:
        import tantivy

        self.path = path
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        builder = tantivy.SchemaBuilder()
        builder.add_text_field("text", stored=False, index_option="freq")
        builder.add_text_field("user", stored=False, tokenizer_name="raw", index_option="basic")
        builder.add_integer_field("pk", stored=True)
        self.schema = builder.build()
        self.index = tantivy.Index(self.schema, path=str(path))
        self.writer = self.index.writer(heap_size=200_000_000, num_threads=1)
        self.seconds = 0.0
        self.count = 0
        self.searcher: Any = None

    def add(self, pk: int, user: str, text: str) -> None:
        import tantivy

        start = time.perf_counter()
        self.writer.add_document(tantivy.Document(pk=pk, user=user, text=text))
        self.seconds += time.perf_counter() - start
        self.count += 1

    def close(self) -> None:
        """Remove the on-disk index (one per run, so concurrent runs never share files)."""
        self.searcher = None
        shutil.rmtree(self.path, ignore_errors=True)

    def commit(self) -> dict[str, Any]:
        start = time.perf_counter()
        self.writer.commit()
        self.writer.wait_merging_threads()
        self.index.reload()
        self.searcher = self.index.searcher()
        self.seconds += time.perf_counter() - start
        return {
            "status": "ok",
            "indexed": self.count,
            "seconds": round(self.seconds, 2),
            "msgs_per_s": round(self.count / self.seconds, 1) if self.seconds else None,
        }

    def search(self, user: str | None, q: str) -> list[Any]:
        import tantivy

        Query, Occur = tantivy.Query, tantivy.Occur
        words = list(dict.fromkeys(w.lower() for w in q.split()))[:32]
        terms = Query.boolean_query(
            [(Occur.Should, Query.term_query(self.schema, "text", w)) for w in words]
        )
        query = terms
        if user is not None:
            query = Query.boolean_query(
                [(Occur.Must, Query.term_query(self.schema, "user", user)), (Occur.Must, terms)]
            )
        result = self.searcher.search(query, limit=20, count=False)
        return [self.searcher.doc(address)["pk"][0] for _, address in result.hits]
