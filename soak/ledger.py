"""The harness's own record of what it did: one JSON-lines file per process, fsynced.

A process appends an ``intent`` before each write and an ``ack`` once the app returned,
each line flushed and fsynced before the process goes on, so a ``kill -9`` loses at most
the line being written (a torn last line is skipped on reading): an acknowledged write is
always in the ledger, and a write the ledger has no intent for was never made by the soak.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["DeletedChats", "Ledger", "read_ledgers"]


class Ledger:
    """Appends entries to ``<directory>/<name>.jsonl``; ``durable`` entries are fsynced."""

    def __init__(self, directory: Path, name: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"{name}.jsonl"
        self.name = name
        self._file = self.path.open("a", encoding="utf-8")

    def write(self, entry: dict[str, Any], *, durable: bool = True) -> None:
        self._file.write(json.dumps({"proc": self.name, **entry}, ensure_ascii=True) + "\n")
        self._file.flush()
        if durable:
            os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()


def read_ledgers(directory: Path) -> Iterator[dict[str, Any]]:
    """Every complete entry of every ledger in ``directory`` (a torn last line is skipped)."""
    for path in sorted(directory.glob("*.jsonl")):
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                if not line.endswith("\n"):
                    break  # the process was killed while writing this line
                yield json.loads(line)


class DeletedChats:
    """The chats whose delete other processes acknowledged, and when: read as the run goes
    (each ledger from where the last read stopped), so a reader can check that no hit of
    a deleted chat ever comes back."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.when: dict[str, float] = {}
        self._offsets: dict[Path, int] = {}

    def refresh(self) -> dict[str, float]:
        for path in self.directory.glob("deleter-*.jsonl"):
            with path.open("rb") as ledger:
                ledger.seek(self._offsets.get(path, 0))
                chunk = ledger.read()
            complete = chunk[: chunk.rfind(b"\n") + 1]
            self._offsets[path] = self._offsets.get(path, 0) + len(complete)
            for line in complete.decode("utf-8").splitlines():
                entry = json.loads(line)
                if entry.get("op") == "delete" and entry.get("phase") == "ack":
                    self.when[entry["chat"]] = entry["t1"]
        return self.when
