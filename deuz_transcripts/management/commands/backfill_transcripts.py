"""``manage.py backfill_transcripts``: index legacy rows, re-index stored chats, verify, fix."""

from __future__ import annotations

import time
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from django.core.management.base import CommandError, CommandParser, OutputWrapper
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.sqlite3.base import DatabaseWrapper as SQLiteWrapper

from ...backfill import SOURCES, Backfill, BackfillStats
from ...backfill_workers import MAX_WORKERS, WorkerFailed, can_fork, run_in_workers
from ...base import check_chat_id
from ...deferred_index import search_index_deferred
from ...errors import InvalidRecord
from ...models import Chat, LegacyChat, Tombstone
from ...sql.stored_forms import begin_reindex, finish_reindex
from ...verify import Problem, Verifier
from ..oneline import OneLineErrors, printable

_BAR_WIDTH = 30
#: Options that do not write a bulk of chats: a deferred index would only cost a build.
_NOT_WITH_DEFER = ("dry_run", "verify", "fix", "count_terms", "chat_ids")
#: Chats read per query at most (a bigger LIMIT overflows SQLite's, and buys nothing).
MAX_BATCH_SIZE = 100_000


def _plain(text: str) -> str:
    """Progress is not an error: no red on a terminal's stderr."""
    return text


class Progress:
    """A bar redrawn in place on a terminal; otherwise one line per ``every`` chats."""

    def __init__(self, stream: OutputWrapper, every: int, *, bar: bool = True) -> None:
        self.stream = stream
        self.tty = bar and stream.isatty()
        self.every = max(1, every)
        self._drawn = 0.0

    def __call__(self, label: str, done: int, total: int) -> None:
        if self.tty:
            now = time.monotonic()
            if done < total and done and now - self._drawn < 0.1:
                return
            self._drawn = now
            filled = _BAR_WIDTH * done // total if total else _BAR_WIDTH
            percent = 100 * done // total if total else 100
            bar = "#" * filled + "-" * (_BAR_WIDTH - filled)
            end = "\n" if done >= total else ""
            line = f"\r{label:>6} [{bar}] {done}/{total} {percent:3d}%"
            self.stream.write(line, style_func=_plain, ending=end)
            self.stream.flush()
        elif done == 0 or done == total or done % self.every == 0:
            unit = "chats" if label.split(" ")[0] in SOURCES else "messages"
            self.stream.write(f"{label}: {done}/{total} {unit}", style_func=_plain)


class Command(OneLineErrors):
    help = (
        "Index legacy deuz_chats rows (filling message ids as index_chat does) and re-index "
        "stored chats, in batches by primary key; idempotent and resumable, never indexes a "
        "tombstoned chat. --verify reports chats whose search rows are missing, stale or "
        "orphaned; --fix repairs them."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--source", choices=SOURCES, default="all", help="What to index (default: all)."
        )
        parser.add_argument(
            "--batch-size", type=int, default=500, help="Chats read per query (default 500)."
        )
        parser.add_argument(
            "--chat-id",
            action="append",
            dest="chat_ids",
            metavar="ID",
            help="Only this chat (repeatable).",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="Count what would be done; write nothing."
        )
        parser.add_argument(
            "--verify",
            action="store_true",
            help="Report chats whose search rows are missing, stale or orphaned; change "
            "nothing; exit status 1 if any.",
        )
        parser.add_argument("--fix", action="store_true", help="Repair what --verify finds.")
        parser.add_argument(
            "--count-terms",
            action="store_true",
            help="PostgreSQL: choose again the terms whose counts are stored (those in at "
            "least 2,000 indexed messages) and the tenants that count their own, and count "
            "the newly chosen ones: a repair, as writes choose them as the data grows (one "
            "pass over every vector, writes going on; then message writes wait while the "
            "new terms are counted).",
        )
        parser.add_argument(
            "--workers",
            type=int,
            default=1,
            help="Processes that backfill at once, each its own share of the chats "
            f"(default 1, at most {MAX_WORKERS}; not with --verify or --fix).",
        )
        parser.add_argument(
            "--defer-index",
            action="store_true",
            help="PostgreSQL: drop the search index for the run and build it once at the end "
            "(a first load runs ~1.4x faster; meanwhile searches scan the table and the "
            "build blocks message writes).",
        )
        parser.add_argument("--database", default=DEFAULT_DB_ALIAS)

    def handle(self, *args: Any, **options: Any) -> None:
        if not 1 <= options["batch_size"] <= MAX_BATCH_SIZE:
            raise CommandError(f"--batch-size must be between 1 and {MAX_BATCH_SIZE:,}")
        if options["fix"] and (options["dry_run"] or options["verify"]):
            raise CommandError("--fix repairs what --verify finds; use it alone")
        if options["defer_index"]:
            used = [f"--{name.replace('_', '-')}" for name in _NOT_WITH_DEFER if options[name]]
            if used:
                raise CommandError(f"--defer-index is for a bulk backfill, not with {used[0]}")
            self._check_deferrable(options["database"])
        if options["count_terms"]:
            self._count_terms(options)
            return
        if options["workers"] != 1:
            self._check_workers(options)
        for chat_id in options["chat_ids"] or ():
            try:
                check_chat_id(chat_id)
            except InvalidRecord as exc:
                raise CommandError(
                    f"--chat-id {chat_id!r} is not a valid chat id: it {exc.problem}"
                ) from None
        if options["chat_ids"]:
            self._check_chats_exist(options["database"], options["chat_ids"])
        if options["verify"] or options["fix"]:
            self._verify(options)
        else:
            self._backfill(options)

    def _count_terms(self, options: dict[str, Any]) -> None:
        from ...backends import maintenance_for
        from ...backends.maintenance import Unsupported

        others = ("dry_run", "verify", "fix", "chat_ids")
        if any(options[name] for name in others) or options["workers"] != 1:
            raise CommandError("--count-terms counts every chat's terms; use it alone")
        try:
            counted, min_rows = maintenance_for(options["database"]).refresh_term_counts()
        except Unsupported:
            raise CommandError(
                "--count-terms is PostgreSQL's (SQLite counts terms in FTS5)"
            ) from None
        self.stdout.write(
            f"Counted terms: {counted} term(s) in at least {min_rows:,} indexed "
            "messages have stored counts."
        )

    @staticmethod
    def _check_workers(options: dict[str, Any]) -> None:
        """Workers are separate processes with connections of their own: each must see
        the same committed database."""
        if not 1 <= options["workers"] <= MAX_WORKERS:
            raise CommandError(f"--workers must be between 1 and {MAX_WORKERS}")
        if options["verify"] or options["fix"]:
            raise CommandError("--workers is for a backfill, not --verify or --fix")
        if not can_fork():
            raise CommandError("--workers needs processes started by fork (Linux, macOS)")
        connection = connections[options["database"]]
        if isinstance(connection, SQLiteWrapper) and connection.is_in_memory_db():
            raise CommandError("--workers needs a database file: this SQLite database is in memory")
        if connection.in_atomic_block:
            raise CommandError(
                "--workers cannot run inside a transaction: the workers' connections would "
                "not see what it has not committed"
            )

    @staticmethod
    def _check_deferrable(database: str) -> None:
        connection = connections[database]
        if connection.vendor != "postgresql":
            raise CommandError(
                "--defer-index is PostgreSQL's (SQLite's FTS5 table is written with the rows)"
            )
        if connection.in_atomic_block:
            raise CommandError(
                "--defer-index cannot run inside a transaction: the dropped index would hold "
                "the message table's lock until it ends"
            )

    @staticmethod
    def _check_chats_exist(database: str, chat_ids: list[str]) -> None:
        """A mistyped ``--chat-id`` is an error naming it, not a run that does nothing."""
        wanted = set(chat_ids)
        known = set(
            LegacyChat.objects.using(database)
            .filter(chat_id__in=wanted)
            .values_list("chat_id", flat=True)
        )
        known.update(
            Chat.objects.using(database)
            .filter(chat_id__in=wanted)
            .values_list("chat_id", flat=True)
        )
        unknown = sorted(wanted - known)
        if not unknown:
            return
        deleted = set(
            Tombstone.objects.using(database)
            .filter(chat_id__in=unknown)
            .values_list("chat_id", flat=True)
        )
        named = ", ".join(
            repr(chat_id) + (" (deleted)" if chat_id in deleted else "") for chat_id in unknown[:10]
        )
        more = f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
        raise CommandError(
            f"no chat with --chat-id {named}{more}: neither a deuz_chats row nor an indexed "
            "chat has it; nothing was done"
        )

    def _backfill(self, options: dict[str, Any]) -> None:
        # workers write lines: one bar redrawn by several processes would be garbled
        progress = Progress(self.stderr, options["batch_size"], bar=options["workers"] == 1)

        def failed(chat_id: str, exc: BaseException) -> None:
            if progress.tty:
                self.stderr.write("")
            self.stderr.write(f"failed: chat {chat_id!r}: {type(exc).__name__}: {exc}")

        def backfill(share: tuple[int, int]) -> Backfill:
            return Backfill(
                options["database"],
                batch_size=options["batch_size"],
                chat_ids=options["chat_ids"],
                dry_run=options["dry_run"],
                progress=progress,
                on_failure=failed,
                share=share,
            )

        building: AbstractContextManager[None] = (
            nullcontext()
            if options["dry_run"]  # writes nothing, builds nothing
            else search_index_deferred(
                options["database"], defer=options["defer_index"], report=self.stderr.write
            )
        )
        # a run over every stored chat re-indexes the database in the form in force: the
        # stored forms say so once it ends without a failure (check W004 until then)
        every_chat = (
            not options["dry_run"] and not options["chat_ids"] and options["source"] != "legacy"
        )
        if every_chat:
            begin_reindex(options["database"])
        with building:
            if options["workers"] == 1:
                stats = backfill((0, 1)).run(options["source"])
            else:
                try:
                    stats = run_in_workers(
                        options["workers"], options["source"], backfill, options["database"]
                    )
                except WorkerFailed as exc:
                    raise CommandError(f"backfill stopped: {exc}") from None
        if every_chat and not stats.failed:
            finish_reindex(options["database"])
        self.stdout.write(self._summary(stats, options["dry_run"]))
        if stats.failed:
            shown = ", ".join(repr(chat_id) for chat_id in stats.failed_ids[:10])
            more = " ..." if stats.failed > 10 else ""
            raise CommandError(f"{stats.failed} chat(s) failed to index: {shown}{more}")

    @staticmethod
    def _summary(stats: BackfillStats, dry_run: bool) -> str:
        verb = "would index" if dry_run else "indexed"
        return (
            f"{'Dry run' if dry_run else 'Backfill'}: {stats.indexed} {verb}, "
            f"{stats.unchanged} unchanged, {stats.tombstoned} skipped (tombstoned), "
            f"{stats.skipped} skipped (other), {stats.failed} failed."
        )

    def _verify(self, options: dict[str, Any]) -> None:
        progress = Progress(self.stderr, options["batch_size"])
        verifier = Verifier(
            options["database"],
            batch_size=options["batch_size"],
            chat_ids=options["chat_ids"],
            progress=progress,
        )

        def report(problem: Problem) -> None:
            if progress.tty:
                self.stderr.write("")
            self.stdout.write(printable(str(problem)))

        result = verifier.run(options["source"], fix=options["fix"], report=report)
        if not result.found:
            self.stdout.write(f"Verify ({verifier.backend_name}): no problems found.")
            return
        summary = (
            f"Verify ({verifier.backend_name}): {result.found} problem(s) "
            f"in {len(result.chats)} chat(s)"
        )
        if not options["fix"]:
            self.stdout.write(summary + "; run with --fix to repair.")
            raise CommandError(f"search data of {len(result.chats)} chat(s) needs repair")
        for problem in result.remaining:
            self.stderr.write(printable(f"not fixed: {problem}"))
        self.stdout.write(f"{summary}; {len(result.remaining)} left after fixing.")
        if result.remaining:
            raise CommandError(f"{len(result.remaining)} problem(s) could not be fixed")
