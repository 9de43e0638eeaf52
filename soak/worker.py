"""One soak process: ``python -m soak.worker ROLE NAME`` (the harness starts them).

Roles: ``writer``, ``appender``, ``deleter``, ``searcher``, ``http``, ``lockholder``,
``legacy`` (saves legacy rows and runs ``backfill_transcripts --workers 2`` over them),
``setup`` (migrate, users, sessions, the base corpus, stored counts) and ``observe`` (the
database at the end, for ``invariants.check``). Every role but the last two loops until
SIGTERM, pacing itself, and records every operation in its own ledger.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "soak.settings")
django.setup()

from django.db import DatabaseError, close_old_connections, transaction  # noqa: E402

from deuz_transcripts import ChatRecord  # noqa: E402
from deuz_transcripts.stores import DjangoChatStore, DjangoConditionalChatStore  # noqa: E402

from .errors import classify  # noqa: E402
from .ledger import Ledger  # noqa: E402
from .roles_search import http_loop, search_loop  # noqa: E402
from .words import (  # noqa: E402
    SHARED_CHATS,
    chat_tenant,
    messages_with_tokens,
    pick_tenant,
    scope_of,
    tokens_in,
)

__all__ = ["Worker", "main"]


class Worker:
    """A role's loop with its ledger, its seeded randomness and a clean stop on SIGTERM."""

    def __init__(self, role: str, name: str) -> None:
        self.role = role
        self.name = name
        self.directory = Path(os.environ["SOAK_DIR"])
        self.tenants = int(os.environ.get("SOAK_TENANTS", "40"))
        self.pace = float(os.environ.get("SOAK_PACE", "0.05"))
        self.rng = random.Random(f"{os.environ.get('SOAK_SEED', '0')}:{name}")
        self.ledger = Ledger(self.directory / "ledger", name)
        self.store = DjangoConditionalChatStore()
        self.stopping = False
        self.serial = 0
        signal.signal(signal.SIGTERM, self._stop)

    def _stop(self, *_: Any) -> None:
        self.stopping = True

    def op_id(self) -> str:
        self.serial += 1
        return f"{self.name}/{self.serial}"

    def sleep(self, factor: float = 1.0) -> None:
        time.sleep(self.pace * factor * (0.5 + self.rng.random()))

    def failed(
        self, op: str, op_id: str | None, t0: float, exc: BaseException, *, own: bool = False
    ) -> None:
        """Records a failed operation; ``own``: the error came from the soak's own
        transaction around the app's call (the lock holder's), not from the app."""
        kind, expected = ("database_unavailable", True) if own else classify(exc)
        if not expected:
            traceback.print_exception(exc, file=sys.stderr)
        self.ledger.write(
            {
                "op": op,
                "phase": "fail",
                "op_id": op_id,
                "t0": t0,
                "t1": time.time(),
                "error": kind,
                "expected_error": expected,
            },
            durable=not expected,
        )
        close_old_connections()
        if kind in ("database_unavailable", "locked", "statement_timeout"):
            time.sleep(0.2)  # the database is down or busy: do not spin

    def violation(self, kind: str, detail: str) -> None:
        self.ledger.write({"op": "violation", "kind": kind, "detail": detail, "t": time.time()})

    # --- store operations, each recorded as intent, then ack or fail ----------------------

    def load(self, chat_id: str) -> tuple[ChatRecord, int] | None:
        t0 = time.time()
        loaded = self.store.load_chat(chat_id)
        self.ledger.write(
            {
                "op": "load",
                "chat": chat_id,
                "t0": t0,
                "t1": time.time(),
                "revision": None if loaded is None else loaded[1],
            },
            durable=False,
        )
        return loaded

    def write(
        self,
        chat_id: str,
        expected: int,
        new_messages: int,
        *,
        append: bool = False,
        before: list[str] | None = None,
        hold: float = 0.0,
    ) -> int | None:
        """``write_chat`` (or ``append_messages``) of new messages; the new revision, or
        ``None`` when it failed (recorded)."""
        op = "append" if append else "write"
        messages, tokens = messages_with_tokens(self.rng, new_messages)
        record = ChatRecord(chat_id, scope_of(chat_tenant(chat_id)), messages)

        def call(op_id: str) -> int:
            if append:
                return self.store.append_messages(chat_id, messages, expected_revision=expected)
            if not hold:
                return self.store.write_chat(record, expected_revision=expected)
            with transaction.atomic():  # the lock holder: the write lock stays held
                revision = self.store.write_chat(record, expected_revision=expected)
                self.ledger.write({"op": "hold", "op_id": op_id, "t": time.time()})
                time.sleep(hold)
            return revision

        after = [*(before or []), *tokens] if append else tokens
        done, revision = self.recorded(
            op, chat_id, call, own_transaction=hold > 0, expected=expected, tokens_after=after
        )
        if not done or revision is None:
            return None
        self.read_own_write(chat_id, tokens[0], revision)
        return revision

    def recorded(
        self,
        op: str,
        chat_id: str,
        call: Callable[[str], int | None],
        *,
        own_transaction: bool = False,
        **fields: Any,
    ) -> tuple[bool, int | None]:
        """``call(op_id)`` between its intent and its ack (with the revision it returned)
        in the ledger; ``(False, None)`` when it failed (recorded). ``own_transaction``:
        a database error may come from the soak's own transaction around the call."""
        op_id = self.op_id()
        self.ledger.write(
            {
                "op": op,
                "phase": "intent",
                "op_id": op_id,
                "chat": chat_id,
                **fields,
                "t": time.time(),
            }
        )
        t0 = time.time()
        try:
            revision = call(op_id)
        except Exception as exc:
            own = own_transaction and isinstance(exc, DatabaseError)
            self.failed(op, op_id, t0, exc, own=own)
            return False, None
        ack = {"op": op, "phase": "ack", "op_id": op_id, "chat": chat_id, **fields}
        self.ledger.write({**ack, "revision": revision, "t0": t0, "t1": time.time()})
        return True, revision

    def read_own_write(self, chat_id: str, token: str, revision: int) -> None:
        """An acknowledged write is searchable at once (read-your-writes on a standby)."""
        t0 = time.time()
        try:
            hits = self.store.transcript.search(scope_of(chat_tenant(chat_id)), token, limit=5)
            if any(hit.chat_id == chat_id for hit in hits):
                return
            loaded = self.load(chat_id)  # superseded or deleted meanwhile: fine
        except Exception as exc:
            self.failed("search", None, t0, exc)
            return
        if loaded is not None and loaded[1] == revision:
            self.violation("lost", f"{chat_id}: {token} of revision {revision} not found")

    def delete(self, chat_id: str) -> None:
        loaded = self.load(chat_id)
        words = tokens_in(loaded[0].messages) if loaded else []
        done, _ = self.recorded("delete", chat_id, lambda op_id: self.store.delete_chat(chat_id))
        if not done:
            return
        if words:
            try:
                hits = self.store.transcript.search(
                    scope_of(chat_tenant(chat_id)), " ".join(words[:32]), limit=5
                )
            except Exception as exc:
                self.failed("search", None, time.time(), exc)
                return
            for hit in hits:
                if hit.chat_id == chat_id:
                    self.violation("leaked", f"{chat_id}: found after its delete was acknowledged")

    # --- the roles ------------------------------------------------------------------------

    def writer(self) -> None:
        own: list[str] = []
        while not self.stopping:
            roll = self.rng.random()
            try:
                if roll < 0.45 or not own:
                    tenant = pick_tenant(self.rng, self.tenants)
                    chat_id = f"{tenant}.{self.name}.{self.serial + 1}"
                    if self.write(chat_id, 0, self.rng.randint(1, 4)) is not None:
                        own.append(chat_id)
                else:
                    chat_id = self.rng.choice(own) if roll < 0.8 else self.rng.choice(SHARED_CHATS)
                    loaded = self.load(chat_id)
                    if loaded is None and chat_id in own:
                        own.remove(chat_id)  # deleted by a deleter
                    else:
                        self.write(chat_id, loaded[1] if loaded else 0, self.rng.randint(1, 3))
            except Exception as exc:  # a load that failed
                self.failed("load", None, time.time(), exc)
            self.sleep()

    def appender(self) -> None:
        while not self.stopping:
            try:
                chat_id = self.pick_chat(shared=0.5)
                loaded = self.load(chat_id) if chat_id else None
                if chat_id and loaded is not None and loaded[1] > 0:
                    self.write(
                        chat_id,
                        loaded[1],
                        self.rng.randint(1, 2),
                        append=True,
                        before=tokens_in(loaded[0].messages),
                    )
            except Exception as exc:
                self.failed("load", None, time.time(), exc)
            self.sleep()

    def deleter(self) -> None:
        while not self.stopping:
            try:
                chat_id = self.pick_chat(shared=0.0)
                if chat_id:
                    self.delete(chat_id)
            except Exception as exc:
                self.failed("load", None, time.time(), exc)
            self.sleep(8)

    def pick_chat(self, *, shared: float) -> str | None:
        """A shared chat (with probability ``shared``), else a chat of a random tenant."""
        if self.rng.random() < shared:
            return self.rng.choice(SHARED_CHATS)
        chats = self.store.list_chats(scope_of(pick_tenant(self.rng, self.tenants)))
        chats = [chat for chat in chats if chat.chat_id not in SHARED_CHATS]
        return self.rng.choice(chats).chat_id if chats else None

    def lockholder(self) -> None:
        """Writes a new chat inside a transaction it keeps open for a few seconds: the
        harness kills it there (with the write lock held) now and then."""
        while not self.stopping:
            self.sleep(20)
            tenant = pick_tenant(self.rng, self.tenants)
            self.write(
                f"{tenant}.{self.name}.{self.serial + 1}", 0, 2, hold=1.0 + 2 * self.rng.random()
            )

    def save_legacy(self, legacy_store: DjangoChatStore) -> None:
        """A new legacy row (``deuz_chats``), for the backfill to index."""
        tenant = pick_tenant(self.rng, self.tenants)
        chat_id = f"{tenant}.legacy.{self.name}.{self.serial + 1}"
        messages, tokens = messages_with_tokens(self.rng, self.rng.randint(1, 4))
        record = ChatRecord(chat_id, scope_of(tenant), messages)
        self.recorded(
            "legacy", chat_id, lambda op_id: legacy_store.save_chat(record), tokens_after=tokens
        )

    def legacy(self) -> None:
        """Legacy rows saved, then ``backfill_transcripts --workers 2`` over them, again
        and again: the backfill runs while everything else does."""
        import subprocess

        legacy_store = DjangoChatStore()
        manage = Path(__file__).resolve().parent.parent / "manage.py"
        while not self.stopping:
            for _ in range(self.rng.randint(5, 15)):
                self.save_legacy(legacy_store)
            t0 = time.time()
            done = subprocess.run(
                [
                    sys.executable,
                    str(manage),
                    "backfill_transcripts",
                    "--source",
                    "legacy",
                    "--workers",
                    "2",
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            self.ledger.write(
                {
                    "op": "backfill",
                    "t0": t0,
                    "t1": time.time(),
                    "rc": done.returncode,
                    "tail": done.stderr[-300:],
                },
                durable=False,
            )
            self.sleep(20)


def main(argv: list[str]) -> None:
    role, name = argv[0], argv[1]
    if role == "setup":
        from .setup_db import setup

        setup(Worker(role, name))
        return
    if role == "observe":
        from .observe import observe

        observe(Path(os.environ["SOAK_DIR"]))
        return
    worker = Worker(role, name)
    loops = {"searcher": lambda: search_loop(worker), "http": lambda: http_loop(worker)}
    (loops.get(role) or getattr(worker, role))()
    worker.ledger.close()


if __name__ == "__main__":
    main(sys.argv[1:])
