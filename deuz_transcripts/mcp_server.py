"""The ``search_transcripts`` agent tool as a Model Context Protocol server (``mcp`` SDK 2.x).

The server is built around one ``search`` callable that already holds the scope (bound
by whoever starts the server: the ``transcripts_mcp`` command or the HTTP endpoint), so
nothing a client sends can name or widen it: a client picks only the tool's arguments.
A refused call comes back as a tool error (``isError``) whose text the model can read.

Needs the ``mcp`` extra (``pip install "deuz-transcripts[mcp]"``); nothing else in the
package imports this module.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from . import __version__
from .agent_tool import SEARCH_TOOL, TOOL_NAME, is_error_answer
from .errors import TranscriptError

try:
    import mcp_types as types
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server
    from mcp.shared.exceptions import MCPError
except ImportError as exc:  # pragma: no cover - the message is the point
    raise ImportError(
        'The MCP server needs the "mcp" extra: pip install "deuz-transcripts[mcp]"'
    ) from exc

__all__ = ["SERVER_NAME", "SearchCall", "search_tool", "serve_stdio", "transcripts_mcp_server"]

logger = logging.getLogger(__name__)

SERVER_NAME = "deuz-transcripts"
#: What the model reads when the database failed (the cause is logged, not shown).
FAILED_ANSWER = json.dumps({"error": "the transcript search failed; try again"})

#: Runs one tool call inside the scope it was bound to; returns ``run_search_tool``'s JSON.
SearchCall = Callable[[Mapping[str, Any]], Awaitable[str]]


def search_tool() -> types.Tool:
    """The tool as ``tools/list`` shows it: ``SEARCH_TOOL``'s name, description and schema."""
    return types.Tool(
        name=TOOL_NAME,
        description=SEARCH_TOOL["description"],
        input_schema=SEARCH_TOOL["parameters"],
        annotations=types.ToolAnnotations(
            read_only_hint=True, idempotent_hint=True, open_world_hint=False
        ),
    )


def transcripts_mcp_server(search: SearchCall) -> Server[Any]:
    """A low-level MCP server with the one ``search_transcripts`` tool, answered by ``search``."""

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[search_tool()])

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name != TOOL_NAME:  # finding the tool failed: a protocol error, per the spec
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name[:100]}")
        try:
            answer = await search(params.arguments or {})
        except TranscriptError:  # unreachable database, lock timeouts...: the model may retry
            logger.exception("transcript search failed")
            answer = FAILED_ANSWER
        return types.CallToolResult(
            content=[types.TextContent(text=answer)], is_error=is_error_answer(answer)
        )

    return Server(
        SERVER_NAME,
        version=__version__,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_stdio(server: Server[Any]) -> None:
    """Serve ``server`` on this process's stdin and stdout until the client closes them."""
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
