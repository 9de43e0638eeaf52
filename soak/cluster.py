"""The soak's own PostgreSQL: a cluster ``soak`` (127.0.0.1:5440) and its hot standby
``soak_standby`` (5441), created and started by the harness (idempotent; root, Debian's
``pg_createcluster``). The soak restarts, terminates and locks only these: never the
clusters other work runs on. The standby is made by ``.ci/pg_replica.sh``, parameterised.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg

__all__ = ["Cluster"]

ROOT = Path(__file__).resolve().parent.parent
#: The soak connects, and its standby streams, from 127.0.0.1 without a password.
_TRUST = ("host all all 127.0.0.1/32 trust", "host replication all 127.0.0.1/32 trust")


def _newest_version() -> str:
    versions = sorted(os.listdir("/etc/postgresql"), key=lambda v: [int(p) for p in v.split(".")])
    return os.environ.get("PG_VERSION") or versions[-1]


def _run(*command: str) -> None:
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


@dataclass
class Cluster:
    """``name`` on ``port`` and, with ``standby_port``, its standby ``<name>_standby``."""

    name: str = "soak"
    port: int = 5440
    standby_port: int | None = 5441
    database: str = "soak"

    def __post_init__(self) -> None:
        self.version = _newest_version()
        self.standby = f"{self.name}_standby"

    def url(self, *, standby: bool = False) -> str:
        port = self.standby_port if standby else self.port
        return f"postgres://postgres@127.0.0.1:{port}/{self.database}"

    def _ctl(self, cluster: str, *action: str) -> None:
        _run("pg_ctlcluster", "--skip-systemctl-redirect", self.version, cluster, *action)

    def ready(self, *, standby: bool = False) -> bool:
        port = str(self.standby_port if standby else self.port)
        return subprocess.run(["pg_isready", "-q", "-h", "127.0.0.1", "-p", port]).returncode == 0

    def wait_ready(self, *, standby: bool = False, timeout: float = 60) -> float:
        """Seconds until the server accepts connections (``timeout``: give up, raise)."""
        start = time.monotonic()
        while not self.ready(standby=standby):
            if time.monotonic() - start > timeout:
                raise RuntimeError(f"cluster {self.name} did not come back in {timeout:.0f} s")
            time.sleep(0.1)
        return time.monotonic() - start

    def exists(self, cluster: str) -> bool:
        listed = subprocess.run(["pg_lsclusters", "-h"], capture_output=True, text=True, check=True)
        return any(
            line.split()[:2] == [self.version, cluster] for line in listed.stdout.splitlines()
        )

    def ensure(self) -> None:
        """Create the clusters if absent, start them if stopped, wait until they serve."""
        if not self.exists(self.name):
            _run("pg_createcluster", self.version, self.name, "-p", str(self.port))
        hba = Path(f"/etc/postgresql/{self.version}/{self.name}/pg_hba.conf")
        rules = hba.read_text()
        if not rules.startswith("\n".join(_TRUST)):  # before the stock password rules
            hba.write_text("\n".join(_TRUST) + "\n" + rules)
            if self.ready():
                self._ctl(self.name, "reload")
        if not self.ready():
            self._ctl(self.name, "start")
        self.wait_ready()
        if self.standby_port is not None:
            env = {
                **os.environ,
                "PG_VERSION": self.version,
                "PG_PRIMARY_CLUSTER": self.name,
                "PG_PRIMARY_PORT": str(self.port),
                "PG_REPLICA_CLUSTER": self.standby,
                "PG_REPLICA_PORT": str(self.standby_port),
            }
            script = str(ROOT / ".ci" / "pg_replica.sh")
            if subprocess.run([script], env=env, stdin=subprocess.DEVNULL).returncode != 0:
                # e.g. a copy cut short, or too far behind to stream: made again
                subprocess.run(
                    [script, "--recreate"], check=True, env=env, stdin=subprocess.DEVNULL
                )

    def recreate_database(self) -> None:
        with psycopg.connect(self.url().rsplit("/", 1)[0] + "/postgres", autocommit=True) as db:
            db.execute(f"DROP DATABASE IF EXISTS {self.database} WITH (FORCE)")
            db.execute(f"CREATE DATABASE {self.database}")
        if self.standby_port is not None:  # the standby replays the CREATE DATABASE
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    psycopg.connect(self.url(standby=True), connect_timeout=2).close()
                    return
                except psycopg.OperationalError:
                    time.sleep(0.2)
            raise RuntimeError("the standby did not replay the new soak database")

    def restart(self, mode: str, *, standby: bool = False) -> float:
        """``pg_ctlcluster restart -m mode``; seconds from the command until the server
        accepts connections again (after ``-m immediate``, crash recovery included)."""
        start = time.monotonic()
        self._ctl(self.standby if standby else self.name, "restart", "-m", mode)
        self.wait_ready(standby=standby)
        return time.monotonic() - start

    def terminate_app_backends(self) -> int:
        """``pg_terminate_backend`` of the soak processes' connections (application_name
        ``soak-...``), on the primary and the standby; how many."""
        ended = 0
        for standby in (False, True) if self.standby_port else (False,):
            try:
                with psycopg.connect(self.url(standby=standby), autocommit=True) as db:
                    row = db.execute(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                        "WHERE application_name LIKE 'soak-%' AND pid <> pg_backend_pid()"
                    ).fetchone()
                    ended += row[0] if row else 0
            except psycopg.OperationalError:
                pass  # that server is restarting: nothing to terminate there
        return ended

    def hold_lock(self, table: str, seconds: float) -> None:
        """Hold an exclusive lock on ``table`` for ``seconds``: the writes and searches that
        wait for it meet their statement timeouts."""
        with psycopg.connect(self.url(), autocommit=True) as db, db.transaction():
            db.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
            time.sleep(seconds)
