"""``manage.py load_demo_transcripts``: demo chats, legacy rows and two demo users."""

from __future__ import annotations

import os
from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.db import DEFAULT_DB_ALIAS, transaction

from ...errors import ChatDeleted, RevisionConflict
from ...models import Chat
from ..oneline import OneLineErrors

#: Chats also written to the legacy ``deuz_chats`` table (not indexed until a backfill).
LEGACY_CHATS = 12
#: The demo's end user: not staff, the chats of scope ``userId=ada`` are theirs.
END_USER = "ada"


class Command(OneLineErrors):
    help = (
        "Load a few hundred realistic demo chats (several users and languages, tool logs, "
        "reasoning, system prompts) through the conditional store, a few legacy deuz_chats "
        "rows, a demo superuser, a 'support' user who may only search and an end user "
        "'ada' whose chats the JSON endpoint searches."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--chats", type=int, default=300, help="How many chats (default 300).")
        parser.add_argument("--seed", type=int, default=2024, help="Random seed (default 2024).")
        parser.add_argument(
            "--if-empty",
            action="store_true",
            help="Load no chats when any chat exists already (missing demo users are still made).",
        )
        parser.add_argument("--database", default=DEFAULT_DB_ALIAS)
        parser.add_argument(
            "--url",
            default="http://127.0.0.1:8000",
            help="Where the demo is served, for the addresses printed "
            "(default http://127.0.0.1:8000; `make run PORT=...` passes its own).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["chats"] < 1:
            raise CommandError("--chats must be at least 1")
        database = options["database"]
        if options["if_empty"] and Chat.objects.using(database).exists():
            self.stdout.write("Chats exist already; demo data not loaded (--if-empty).")
            self._reindex_if_stale(database)
        else:
            self._chats(database, options["chats"], options["seed"])
        self._users(database)
        self._addresses(options["url"].rstrip("/"))

    def _chats(self, database: str, count: int, seed: int) -> None:
        try:
            from ...demo import demo_chats
        except ImportError as exc:  # factory-boy / Faker are dev dependencies
            raise CommandError(
                f"the demo needs factory-boy and Faker ({exc}); pip install 'deuz-transcripts[dev]'"
            ) from None
        from ...stores import DjangoChatStore, DjangoConditionalChatStore

        store = DjangoConditionalChatStore(database)
        legacy = DjangoChatStore(database)
        written = skipped = 0
        chats = enumerate(demo_chats(count, seed))
        done = False
        while not done:
            with transaction.atomic(using=database):  # one commit per 50 chats: fast on SQLite
                for number, record in chats:
                    try:
                        store.write_chat(record, expected_revision=0)
                        written += 1
                    except (RevisionConflict, ChatDeleted):
                        skipped += 1
                    if 0 < number <= LEGACY_CHATS:
                        record.chat_id = record.chat_id.replace("demo-", "legacy-", 1)
                        legacy.save_chat(record)
                    if number % 50 == 49:
                        break
                else:
                    done = True
        self.stdout.write(
            f"Demo chats: {written} written, {skipped} already there; "
            f"{min(LEGACY_CHATS, count - 1)} legacy rows in deuz_chats "
            "(run `manage.py backfill_transcripts` to index them)."
        )

    def _reindex_if_stale(self, database: str) -> None:
        """The demo is searched under the settings it runs with (``make run CJK_BIGRAMS=1``
        after a run without): chats of another stored form are re-indexed."""
        from django.core.management import call_command

        from ...sql.stored_forms import stored_form_problem

        problem = stored_form_problem(database)
        if problem is None:
            return
        self.stdout.write(f"The demo's {problem}: re-indexing them (backfill_transcripts).")
        call_command(
            "backfill_transcripts",
            "--source=stored",
            f"--database={database}",
            stdout=self.stdout,
            stderr=self.stderr,
        )

    def _users(self, database: str) -> None:
        from django.contrib.auth import get_user_model
        from django.contrib.auth.models import Permission

        user_model = get_user_model()
        name = os.environ.get("DEUZ_DEMO_ADMIN_USER", "admin")
        password = os.environ.get("DEUZ_DEMO_ADMIN_PASSWORD", "admin")
        users = user_model._default_manager.db_manager(database)
        if not users.filter(username=name).exists():
            users.create_superuser(username=name, email="", password=password)
            self.stdout.write(f"Superuser: {name} / {password}")
        else:
            self.stdout.write(f"Superuser {name} exists already (password unchanged).")
        if not users.filter(username="support").exists():
            support = users.create_user(username="support", password="support", is_staff=True)
            support.user_permissions.add(
                Permission.objects.db_manager(database).get(
                    content_type__app_label="deuz_transcripts", codename="search_transcripts"
                )
            )
            self.stdout.write("Staff user with only the search permission: support / support")
        if not users.filter(username=END_USER).exists():
            users.create_user(username=END_USER, password=END_USER)
            self.stdout.write(
                f"End user whose chats are the scope userId={END_USER}: {END_USER} / {END_USER}"
            )

    def _addresses(self, base: str) -> None:
        """Where to go next, at the address the demo is really served."""
        self.stdout.write(
            f"Admin search: {base}/admin/deuz_transcripts/chat/search/"
            "?q=izmir&scope=userId%3Dada&around=1"
        )
        self.stdout.write(f"End user sign-in: {base}/accounts/login/ ({END_USER} / {END_USER})")
        self.stdout.write(
            f"JSON endpoint: curl -u {END_USER}:{END_USER} '{base}/transcripts/search/?q=izmir&around=1'"
        )
