"""Bad command-line arguments as one line on stderr, not a usage screen."""

from __future__ import annotations

from typing import Any, NoReturn

from django.core.management.base import BaseCommand, CommandParser

__all__ = ["OneLineErrors"]


class OneLineErrors(BaseCommand):
    """A command whose argument errors print ``<prog>: error: <why>`` and exit 2.

    Through ``call_command`` they stay a ``CommandError``, as Django does.
    """

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        django_error = parser.error

        def error(message: str) -> NoReturn:
            if not parser.called_from_command_line:
                django_error(message)  # raises CommandError
            parser.exit(2, f"{parser.prog}: error: {message} (see --help)\n")

        parser.error = error  # type: ignore[method-assign]  # patching this one parser on purpose
        return parser
