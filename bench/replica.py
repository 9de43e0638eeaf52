"""What read-your-writes on a standby costs: ``write_chat`` then ``search`` for it at once.

    .ci/pg_replica.sh     # a hot standby of 127.0.0.1:5432 on 127.0.0.1:5433
    PYTHONPATH=. .venv/bin/python -m bench.replica --rounds 300

Creates (and afterwards drops) the PostgreSQL database ``deuz_replica_bench`` on the primary,
which reaches the standby by replication, migrates it, then runs ``--rounds`` rounds of a
write of a new one-message chat (its own scope) and a search for its word, once with
``SEARCH_DATABASE`` unset and once with ``"replica"`` (``REPLICA_FALLBACK = "error"``: every
hit came from the standby, after waiting for the write's WAL position), alternating which
goes first. Prints best, median and p95 of the write and of the search, in milliseconds.
Run it with ``PYTHONPATH`` at another checkout (its ``deuz_transcripts``) and ``--modes none``
for a baseline of code without the setting.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time

PRIMARY = "postgres://postgres@127.0.0.1:5432"
STANDBY = "postgres://postgres@127.0.0.1:5433"


def _timed(modes: list[str], rounds: int) -> dict[str, list[float]]:
    from django.test import override_settings

    from deuz_transcripts import ChatRecord
    from deuz_transcripts.stores import DjangoConditionalChatStore

    store = DjangoConditionalChatStore()
    times: dict[str, list[float]] = {}
    for number in range(rounds):
        for mode in modes if number % 2 else list(reversed(modes)):
            search_database = None if mode == "none" else "replica"
            chosen = {"SEARCH_DATABASE": search_database, "REPLICA_FALLBACK": "error"}
            with override_settings(DEUZ_TRANSCRIPTS=chosen):
                chat_id = f"{mode}-{number}-{time.time_ns()}"
                scope, word = {"userId": chat_id}, f"w{time.time_ns()}"
                record = ChatRecord(chat_id, scope, [{"role": "user", "content": word}])
                started = time.perf_counter()
                store.write_chat(record, expected_revision=0)
                written = time.perf_counter()
                hits = store.transcript.search(scope, word)
                searched = time.perf_counter()
            assert [hit.chat_id for hit in hits] == [chat_id], (mode, hits)
            times.setdefault(f"{mode} write", []).append((written - started) * 1000)
            times.setdefault(f"{mode} search", []).append((searched - written) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--modes", default="none,replica", help="none and/or replica")
    parser.add_argument("--pg-name", default="deuz_replica_bench")
    arguments = parser.parse_args()
    name = arguments.pg_name
    psql = ["psql", "-X", "-q", "-h", "127.0.0.1", "-U", "postgres", "-d", "postgres", "-c"]
    subprocess.run([*psql, f'DROP DATABASE IF EXISTS "{name}"'], check=True)
    subprocess.run([*psql, f'CREATE DATABASE "{name}"'], check=True)
    os.environ.update(
        DJANGO_SETTINGS_MODULE="testproject.settings",
        DATABASE_URL=f"{PRIMARY}/{name}",
        REPLICA_DATABASE_URL=f"{STANDBY}/{name}",
    )
    import django
    from django.core.management import call_command
    from django.db import connections

    django.setup()
    try:
        call_command("migrate", verbosity=0)
        times = _timed(arguments.modes.split(","), arguments.rounds)
    finally:
        connections.close_all()
        subprocess.run([*psql, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'], check=True)
    print(f"load average: {os.getloadavg()[0]:.2f}  rounds: {arguments.rounds}")
    for label, values in sorted(times.items()):
        ordered = sorted(values)
        print(
            f"{label:16} best {ordered[0]:6.2f} ms  median {statistics.median(ordered):6.2f} ms"
            f"  p95 {ordered[int(len(ordered) * 0.95)]:6.2f} ms"
        )


if __name__ == "__main__":
    main()
