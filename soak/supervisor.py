"""The soak's processes: gunicorn and the workers, restarted when a fault kills them.

A worker that exits by itself with an error (not killed by the soak, not stopped) is a
crash: recorded as a violation with the end of its log, then restarted too.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["ROLES", "Supervisor"]

#: role -> how many processes of it.
ROLES = {
    "writer": 2,
    "appender": 1,
    "deleter": 1,
    "searcher": 2,
    "http": 1,
    "lockholder": 1,
    "legacy": 1,
}
ROOT = Path(__file__).resolve().parent.parent


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` (Linux /proc)."""
    try:
        found = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    return [int(child) for child in found]


class Supervisor:
    def __init__(
        self, directory: Path, env: dict[str, str], record: Callable[[dict[str, Any]], None]
    ) -> None:
        self.directory = directory
        self.env = env
        self.record = record
        self.lock = threading.Lock()
        self.workers: dict[str, tuple[str, subprocess.Popen[bytes]]] = {}  # slot -> (name, proc)
        self.generation: dict[str, int] = {}
        self.server: subprocess.Popen[bytes] | None = None
        self.stopping = False
        (directory / "logs").mkdir(parents=True, exist_ok=True)

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        log = (self.directory / "logs" / f"{name}.log").open("ab")
        env = {**self.env, "SOAK_PROCESS": f"soak-{name}"}
        return subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)

    def start_server(self) -> str:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.server = self._spawn(
            "gunicorn",
            [
                sys.executable,
                "-m",
                "gunicorn",
                "soak.wsgi:application",
                "--workers",
                "2",
                "--bind",
                f"127.0.0.1:{port}",
                "--timeout",
                "30",
                "--graceful-timeout",
                "3",
            ],
        )
        base = f"http://127.0.0.1:{port}"
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                urllib.request.urlopen(f"{base}/transcripts/search/?q=x", timeout=2)
            except urllib.error.HTTPError:
                break  # 403: the server answers (nobody is signed in)
            except OSError:
                time.sleep(0.2)
        else:
            raise RuntimeError("gunicorn did not answer within 60 s")
        (self.directory / "server").write_text(base)
        return base

    def _start_worker(self, slot: str) -> None:
        role = slot.rsplit("-", 1)[0]
        generation = self.generation.get(slot, 0)
        self.generation[slot] = generation + 1
        name = f"{slot}.{generation}"
        self.workers[slot] = (
            name,
            self._spawn(name, [sys.executable, "-m", "soak.worker", role, name]),
        )

    def start_workers(self) -> None:
        with self.lock:
            for role, count in ROLES.items():
                for number in range(count):
                    self._start_worker(f"{role}-{number}")

    def wait_started(self, timeout: float = 120) -> None:
        """Until every worker has recorded its first operation: the run's clock (and its
        faults) start once the load is up, not while interpreters start."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            with self.lock:
                names = [name for name, _ in self.workers.values()]
            ledgers = self.directory / "ledger"
            if all((ledgers / f"{name}.jsonl").exists() for name in names):
                return
            self.poll()
            time.sleep(0.2)
        raise RuntimeError(f"the soak's workers did not start within {timeout:.0f} s")

    def poll(self) -> None:
        """Restart every worker that is gone; a worker that exited on its own with an
        error is a crash."""
        with self.lock:
            if self.stopping:
                return
            for slot, (name, proc) in list(self.workers.items()):
                code = proc.poll()
                if code is None:
                    continue
                if code not in (0, -signal.SIGKILL):
                    log = (self.directory / "logs" / f"{name}.log").read_text(errors="replace")
                    self.record(
                        {
                            "op": "violation",
                            "kind": "worker_crash",
                            "detail": f"{name} exited {code}: {log[-600:]}",
                        }
                    )
                self._start_worker(slot)

    def killable(self) -> dict[str, int]:
        """Every process a ``kill -9`` may hit: workers, gunicorn's workers, a backfill."""
        with self.lock:
            targets = {
                name: proc.pid for name, proc in self.workers.values() if proc.poll() is None
            }
            legacy = [proc.pid for name, proc in self.workers.values() if name.startswith("legacy")]
        if self.server is not None:
            for pid in _children(self.server.pid):
                targets[f"gunicorn-worker-{pid}"] = pid
        for parent in legacy:
            for pid in _children(parent):  # the backfill command
                targets[f"backfill-{pid}"] = pid
                for forked in _children(pid):
                    targets[f"backfill-worker-{forked}"] = forked
        return targets

    def running(self, role: str) -> tuple[str, int] | None:
        with self.lock:
            for name, proc in self.workers.values():
                if name.startswith(f"{role}-") and proc.poll() is None:
                    return name, proc.pid
        return None

    def stop(self, timeout: float = 60) -> None:
        with self.lock:
            self.stopping = True
            procs = [proc for _, proc in self.workers.values()]
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.time() + timeout
        for proc in procs:
            try:
                proc.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.server is not None:
            self.server.send_signal(signal.SIGTERM)
            try:
                self.server.wait(15)
            except subprocess.TimeoutExpired:
                self.server.kill()
                self.server.wait()
