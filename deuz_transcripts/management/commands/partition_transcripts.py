"""``manage.py partition_transcripts``: hash-partition PostgreSQL's message table by tenant."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.db import DEFAULT_DB_ALIAS

from ...backends import maintenance_for
from ...backends.maintenance import MAX_PARTITIONS, Unsupported
from ...conf import conf
from ..oneline import OneLineErrors


class Command(OneLineErrors):
    help = (
        "Turn PostgreSQL's message table (messages and their search vectors) into hash "
        "partitions of the tenant column (the TENANT_KEY scope field), in one transaction "
        "that locks the table; --status only reports how the table is split."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--partitions",
            type=int,
            default=16,
            help=f"How many hash partitions (2 to {MAX_PARTITIONS}, default 16).",
        )
        parser.add_argument("--status", action="store_true", help="Report only; change nothing.")
        parser.add_argument("--database", default=DEFAULT_DB_ALIAS)

    def handle(self, *args: Any, **options: Any) -> None:
        engine = maintenance_for(options["database"])
        if options["status"]:
            info = engine.partition_info()
            if info is None:
                self.stdout.write("The message table is not partitioned.")
            else:
                self.stdout.write(
                    f"The message table is split by {info.key} into {info.partitions} partitions."
                )
            return
        if conf.TENANT_KEY is None:
            self.stderr.write(
                "Warning: DEUZ_TRANSCRIPTS['TENANT_KEY'] is not set: every row's tenant is '' "
                "and every row lands in one partition."
            )
        try:
            info = engine.partition_messages(options["partitions"])
        except Unsupported as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"The message table is now split by {info.key} into {info.partitions} partitions."
        )
