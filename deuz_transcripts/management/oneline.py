"""Command errors as one line on stderr: no usage screen, no traceback."""

from __future__ import annotations

import unicodedata
from typing import Any, NoReturn

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError, connections

from ..errors import TranscriptError
from ..sql.errors import describe_database_error

__all__ = ["OneLineErrors", "printable"]


def printable(value: str) -> str:
    """Control, format and surrogate characters as ``\\x1b``-style escapes: printed data
    never drives the terminal (escape sequences, bidi overrides) nor fails to encode."""
    return "".join(
        char.encode("unicode_escape").decode("ascii")
        if unicodedata.category(char)[0] == "C"
        else char
        for char in value
    )


class OneLineErrors(BaseCommand):
    """A command whose errors are one line: ``<prog>: error: <why>`` (exit 2) for bad
    arguments, ``CommandError: <why>`` (exit 1) for a database that is not migrated or
    not reachable and for the app's own errors, which name the cause and the fix.

    Through ``call_command`` they stay a ``CommandError``, as Django does, with the
    original error as ``__cause__``. A ``--database`` that names no alias of
    ``DATABASES`` is refused here, for every command, before it runs.
    """

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        django_error = parser.error

        def error(message: str) -> NoReturn:
            message = printable(message)  # argparse quotes unknown arguments as they are
            if not parser.called_from_command_line:
                django_error(message)  # raises CommandError
            parser.exit(2, f"{parser.prog}: error: {message} (see --help)\n")

        parser.error = error  # type: ignore[method-assign]  # patching this one parser on purpose
        return parser

    def execute(self, *args: Any, **options: Any) -> str | None:
        try:
            database = options.get("database")
            if database is not None and database not in connections:  # every --database
                raise CommandError(f"unknown database {database!r}")
            return super().execute(*args, **options)
        except DatabaseError as exc:
            raise CommandError(printable(describe_database_error(exc))) from exc
        except TranscriptError as exc:
            raise CommandError(printable(str(exc))) from exc
        except CommandError as exc:  # messages may quote arguments: keep them one safe line
            message = str(exc)
            if printable(message) == message:
                raise
            raise CommandError(printable(message), returncode=exc.returncode) from exc
