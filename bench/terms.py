"""``python -m bench.terms [--tree DIR ...]``: term extraction alone, MB/s of indexed text.

Times ``text_terms`` over the indexed text of the bench corpus (``--messages 20000`` as in
RESULTS.md), one core, in a fresh process per pass so each tree (a checkout, e.g. a
worktree of the old code) starts cold; trees alternate round by round. "cold" is the
first pass of a process (every cache empty), "warm" the best of the next passes.
CPU time (``process_time``) is reported beside wall time: on a shared machine it is the
steadier of the two.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from .corpus import Corpus

_CHILD = """
import json, pickle, sys, time
sys.path.insert(0, sys.argv[1])
from deuz_transcripts import text
assert text.__file__.startswith(sys.argv[1]), text.__file__
texts = pickle.load(open(sys.argv[2], "rb"))
text.use_cjk_bigrams(sys.argv[4] == "1")
size = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
extract = text.text_terms
out = []
for _ in range(int(sys.argv[3]) + 1):
    wall, cpu = time.perf_counter(), time.process_time()
    for value in texts:
        extract(value)
    out.append((size / (time.perf_counter() - wall) / 1e6, size / (time.process_time() - cpu) / 1e6))
print(json.dumps(out))
"""


def indexed_texts(messages: int, users: int, cjk_share: float) -> list[str]:
    corpus = Corpus(messages=messages, users=users, cjk_share=cjk_share)
    return [t for chat in corpus.chats() for t in chat.indexed if t is not None]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.terms", description=__doc__)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--cjk-share", type=float, default=0.0)
    parser.add_argument("--bigrams", action="store_true", help="CJK_BIGRAMS on")
    parser.add_argument("--rounds", type=int, default=3, help="processes per tree")
    parser.add_argument("--passes", type=int, default=3, help="warm passes per process")
    parser.add_argument("--tree", action="append", type=Path, default=[])
    args = parser.parse_args(argv)
    trees = [t.resolve() for t in args.tree] or [Path(__file__).resolve().parent.parent]
    texts = indexed_texts(args.messages, args.users, args.cjk_share)
    size = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
    print(f"{len(texts)} indexed texts, {size / 1e6:.1f} MB; load {os.getloadavg()}")
    results: dict[Path, list[list[tuple[float, float]]]] = {tree: [] for tree in trees}
    with tempfile.NamedTemporaryFile(suffix=".pickle") as data:
        pickle.dump(texts, data)
        data.flush()
        for _ in range(args.rounds):
            for tree in trees:
                argv_child = [str(tree), data.name, str(args.passes), "1" if args.bigrams else "0"]
                run = subprocess.run(
                    [sys.executable, "-c", _CHILD, *argv_child],
                    check=True,
                    capture_output=True,
                    text=True,
                )
                results[tree].append(json.loads(run.stdout))
    print(f"load after {os.getloadavg()}")
    for tree, runs in results.items():
        row: dict[str, object] = {"tree": str(tree)}
        for name, index in (("wall", 0), ("cpu", 1)):
            cold = [run[0][index] for run in runs]
            warm = [max(p[index] for p in run[1:]) for run in runs]
            row[f"cold_{name}"] = _best_median(cold)
            row[f"warm_{name}"] = _best_median(warm)
        print(json.dumps(row))


def _best_median(values: list[float]) -> str:
    return f"{max(values):.1f} best / {statistics.median(values):.1f} median MB/s"


if __name__ == "__main__":
    main()
