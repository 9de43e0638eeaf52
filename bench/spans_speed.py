"""Micro-benchmark: ``match_spans`` over a page of 20 hits, old against new.

The old implementation is read from a git revision (``--old``, default ``3fc06b4``, the
last one before ``span_match``) and loaded beside the current package, so both run in the
same process, interleaved, on the same texts: the corpus's own 30-300 KiB log dumps, and
chat messages (its mixed-language prose, a few hundred characters) with queries of 1, 5 and
32 of their words. Each page starts as a new search would: no pattern or segment of the
query remembered. Run:

    .venv/bin/python -m bench.spans_speed [--old REV] [--repeat 7]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from types import ModuleType

from deuz_transcripts import folded_spans, span_match, spans
from deuz_transcripts.text import query_terms

from .corpus import Corpus


def _old_spans(revision: str) -> ModuleType:
    """The span finder at ``revision`` (``span_match.py`` where it exists, else
    ``spans.py``), as a module of the current package (its relative imports resolve to
    today's ``text``, ``span_rule`` and ``records``)."""
    for path in ("deuz_transcripts/span_match.py", "deuz_transcripts/spans.py"):
        shown = subprocess.run(
            ["git", "show", f"{revision}:{path}"], capture_output=True, text=True, check=False
        )
        if shown.returncode == 0:
            break
    else:
        raise SystemExit(f"no span finder at {revision}")
    name = "deuz_transcripts._old_spans"
    spec = importlib.util.spec_from_loader(name, loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "deuz_transcripts"
    sys.modules[name] = module
    exec(compile(shown.stdout, f"{revision}:{path}", "exec"), module.__dict__)
    return module


def _forget_queries(old: ModuleType) -> None:
    """What a new search starts from: the compiled patterns and the segments seen by the
    previous query forgotten (per character folds stay: they outlive any query)."""
    re.purge()
    for module in (old, span_match, folded_spans):
        for cache in ("_ascii_word_pattern", "_whole_ascii_word", "_whole_word"):
            if hasattr(module, cache):
                getattr(module, cache).cache_clear()
        if hasattr(module, "_LAST_RULE"):
            module._LAST_RULE.clear()


def _page_ms(
    match: Callable[..., object], texts: Sequence[str], terms: list[str], sub: bool
) -> float:
    started = time.process_time()
    for text in texts:
        match(text, terms, substring=sub)
    return (time.process_time() - started) * 1000


def _compare(
    old: ModuleType, label: str, texts: Sequence[str], terms: list[str], repeat: int
) -> None:
    for sub in (False, True):
        expected = [old.match_spans(text, terms, substring=sub) for text in texts]
        assert [spans.match_spans(text, terms, substring=sub) for text in texts] == expected
        times: dict[str, list[float]] = {"old": [], "new": []}
        for _ in range(repeat):
            _forget_queries(old)
            times["old"].append(_page_ms(old.match_spans, texts, terms, sub))
            times["new"].append(_page_ms(spans.match_spans, texts, terms, sub))
        o, n = times["old"], times["new"]
        print(
            f"{label} | {'substring' if sub else 'exact'} | "
            f"{min(o):.1f}/{statistics.median(o):.1f} | {min(n):.1f}/{statistics.median(n):.1f}"
            f" | {statistics.median(o) / statistics.median(n):.1f}x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--old", default="3fc06b4")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    old = _old_spans(args.old)
    corpus = Corpus(messages=2000, users=10, seed=1)
    rng = random.Random(5)
    dumps = [corpus._dump(rng, "u0000") for _ in range(20)]
    messages = [corpus._prose(rng, "", 2, rng.randint(20, 80)) for _ in range(20)]
    accented = [word for word in corpus.vocabulary[:200] if not word.isascii()]
    queries = [f"error {accented[0]}", accented[3], f"timeout {accented[2]}", "kubelet"]
    print(
        f"20 dumps, {sum(map(len, dumps)):,} characters; 20 messages, "
        f"{sum(map(len, messages)):,}; load average {os.getloadavg()}"
    )
    print("page | query | mode | old ms/20 hits best/median | new best/median | speed-up (median)")
    for query in queries:
        _compare(old, f"dumps | {query!r}", dumps, query_terms(query), args.repeat)
    words = sorted({term for text in messages for term in query_terms(text)})
    for count in (1, 5, 32):
        terms = query_terms(" ".join(rng.sample(words, count)))
        _compare(old, f"messages | {count} of their words", messages, terms, args.repeat)
    print(f"load average at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()
