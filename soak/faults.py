"""The faults a soak injects, at seeded random moments: ``kill -9`` of any worker process
(the supervisor restarts it), ``pg_terminate_backend`` of the app's connections, PostgreSQL
restarts (``-m fast`` and ``-m immediate``), the standby restarted while searches read it,
a lock held past the statement timeouts, and a writer killed while it holds the write lock
(the only lock of SQLite)."""

from __future__ import annotations

import json
import os
import random
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .cluster import Cluster
    from .supervisor import Supervisor

__all__ = ["Injector", "schedule"]


def schedule(
    rng: random.Random, seconds: float, *, postgres: bool, standby: bool
) -> list[tuple[float, str]]:
    """``(second, kind)`` of every fault of a run, sorted; at least one of each kind, more
    in longer runs, all between 10% and 85% of the run (the load is up, recovery has time)."""
    minutes = max(1.0, seconds / 60)
    counts = {"kill9": 3, "kill9_holding_lock": 1}
    if postgres:
        counts |= {
            "terminate_backends": 2,
            "pg_restart_fast": 1,
            "pg_restart_immediate": 1,
            "lock_timeout": 1,
        }
        if standby:
            counts["standby_restart"] = 1
    else:
        counts |= {"kill9": 4, "kill9_holding_lock": 2}
    plan = [
        (rng.uniform(0.1 * seconds, 0.85 * seconds), kind)
        for kind, count in counts.items()
        for _ in range(max(1, round(count * minutes)))
    ]
    return sorted(plan)


class Injector:
    """Runs one fault and records it in the harness's own ledger."""

    def __init__(
        self,
        supervisor: Supervisor,
        cluster: Cluster | None,
        rng: random.Random,
        record: Callable[[dict[str, Any]], None],
        run_start: float,
    ) -> None:
        self.supervisor = supervisor
        self.cluster = cluster
        self.rng = rng
        self.record = record
        self.run_start = run_start

    def inject(self, kind: str) -> None:
        t0 = time.time()
        detail: dict[str, Any] = getattr(self, kind)()
        if detail.get("skipped"):
            return
        self.record(
            {
                "op": "fault",
                "kind": kind,
                "t0": t0,
                "t1": time.time(),
                "run_start": self.run_start,
                **detail,
            }
        )

    def kill9(self) -> dict[str, Any]:
        targets = self.supervisor.killable()
        if not targets:
            return {"skipped": True}
        name, pid = self.rng.choice(sorted(targets.items()))
        os.kill(pid, signal.SIGKILL)
        return {"target": name, "pid": pid}

    def kill9_holding_lock(self) -> dict[str, Any]:
        """Waits (up to 20 s) until the lock holder has written its chat inside its open
        transaction, then kills it there."""
        deadline = time.time() + 20
        while time.time() < deadline:
            holder = self.supervisor.running("lockholder")
            if holder is not None:
                name, pid = holder
                if _last_op(self.supervisor.directory / "ledger" / f"{name}.jsonl") == "hold":
                    os.kill(pid, signal.SIGKILL)
                    return {"target": name, "pid": pid}
            time.sleep(0.05)
        return {"skipped": True}

    def terminate_backends(self) -> dict[str, Any]:
        assert self.cluster is not None
        return {"terminated": self.cluster.terminate_app_backends()}

    def pg_restart_fast(self) -> dict[str, Any]:
        assert self.cluster is not None
        return {"ready_s": self.cluster.restart("fast")}

    def pg_restart_immediate(self) -> dict[str, Any]:
        assert self.cluster is not None
        return {"ready_s": self.cluster.restart("immediate")}

    def standby_restart(self) -> dict[str, Any]:
        assert self.cluster is not None
        return {"ready_s": self.cluster.restart("fast", standby=True)}

    def lock_timeout(self) -> dict[str, Any]:
        """The message table locked for 4 s: past the writes' statement timeout (3 s) and
        the searches' SEARCH_TIMEOUT_MS (2 s)."""
        assert self.cluster is not None
        self.cluster.hold_lock("deuz_transcripts_message", 4.0)
        return {"held_s": 4.0}


def _last_op(path: Path) -> str | None:
    try:
        with path.open("rb") as ledger:
            ledger.seek(max(0, path.stat().st_size - 4096))
            lines = ledger.read().decode("utf-8", "replace").splitlines()
        return json.loads(lines[-1]).get("op") if lines else None
    except (OSError, ValueError):
        return None
