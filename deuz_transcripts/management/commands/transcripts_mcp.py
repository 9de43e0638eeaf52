"""``manage.py transcripts_mcp --scope userId=ada``: the agent tool as an MCP server on stdio.

Whoever starts the process fixes the scope (an MCP client such as Claude Desktop or an
agent framework launches it with the user's scope); no tool call can name another one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from asgiref.sync import sync_to_async
from django.core.management.base import CommandError, CommandParser
from django.db import DEFAULT_DB_ALIAS, close_old_connections

from ...agent_tool import run_search_tool
from ...forms import parse_scope
from ...records import validate_scope
from ...sql import DjangoTranscriptIndex
from ..oneline import OneLineErrors


class Command(OneLineErrors):
    help = (
        "Serve the search_transcripts agent tool over the Model Context Protocol on stdin/"
        "stdout, inside one scope (needs the mcp extra)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--scope",
            required=True,
            help="Whose chats every call searches: key=value pairs separated by commas, "
            "e.g. userId=ada,agentId=x (not empty: there is no all-scopes server).",
        )
        parser.add_argument("--database", default=DEFAULT_DB_ALIAS)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            scope = validate_scope(parse_scope(options["scope"]))
        except ValueError as exc:  # InvalidRecord too
            raise CommandError(f"--scope: {exc}") from None
        if not scope:
            raise CommandError("--scope is empty; name whose chats the server searches")
        try:
            from ...mcp_server import serve_stdio, transcripts_mcp_server
        except ImportError as exc:  # no mcp extra: its message says how to install it
            raise CommandError(str(exc)) from None
        index = DjangoTranscriptIndex(options["database"])

        def call(arguments: Mapping[str, Any]) -> str:
            # each call as a request: a connection closed or past its age is replaced
            close_old_connections()
            return run_search_tool(index, scope, arguments)

        asyncio.run(serve_stdio(transcripts_mcp_server(sync_to_async(call))))
