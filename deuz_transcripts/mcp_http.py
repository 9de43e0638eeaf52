"""The MCP endpoint as a Django view: Streamable HTTP, the scope from ``SEARCH_SCOPE``.

A plain async view, so it sits in the project's URLconf behind its own middleware
(sessions, authentication, whatever sets ``request.user``), under ASGI and WSGI alike.
Each request is refused exactly as the JSON endpoint refuses it (403 when not signed
in or the callable gives no scope, 503 when it is missing or broken) before anything
MCP runs; otherwise it is answered by a server bound to that request's scope, in the
SDK's stateless JSON mode: nothing is kept between requests, so any worker of any
process can answer any request, and there is no ASGI lifespan to run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from asgiref.sync import sync_to_async
from django.db import router
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from .agent_tool import arun_search_tool
from .api import _request_scope
from .mcp_server import transcripts_mcp_server
from .models import Chat
from .sql import DjangoTranscriptIndex

try:
    import anyio
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings
except ImportError as exc:  # pragma: no cover - the message is the point
    raise ImportError(
        'The MCP endpoint needs the "mcp" extra: pip install "deuz-transcripts[mcp]"'
    ) from exc

__all__ = ["mcp_endpoint"]


def _asgi_scope(request: HttpRequest, host: str) -> dict[str, Any]:
    """The request as the SDK's ASGI transport reads it (method, path, headers), with the
    host Django validated (a WSGI request may carry it in ``SERVER_NAME`` only)."""
    headers = [
        (name.lower().encode("latin-1", "replace"), value.encode("latin-1", "replace"))
        for name, value in request.headers.items()
        if name.lower() != "host"
    ]
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.path.encode("utf-8"),
        "root_path": "",
        "query_string": request.META.get("QUERY_STRING", "").encode("latin-1", "replace"),
        "headers": [(b"host", host.encode("latin-1", "replace")), *headers],
    }


class _BufferedExchange:
    """ASGI ``receive``/``send`` over a body read already and a response kept whole
    (the JSON mode answers each POST with one body)."""

    def __init__(self, body: bytes) -> None:
        self._body: bytes | None = body
        self._done = anyio.Event()
        self.status = 500
        self.headers: list[tuple[str, str]] = []
        self.chunks: list[bytes] = []

    async def receive(self) -> dict[str, Any]:
        if self._body is not None:
            body, self._body = self._body, None
            return {"type": "http.request", "body": body, "more_body": False}
        await self._done.wait()  # the client hangs up once it has the whole answer
        return {"type": "http.disconnect"}

    async def send(self, message: Mapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = [
                (name.decode("latin-1"), value.decode("latin-1"))
                for name, value in message.get("headers", [])
            ]
        elif message["type"] == "http.response.body":
            self.chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                self._done.set()

    def response(self) -> HttpResponse:
        response = HttpResponse(b"".join(self.chunks), status=self.status)
        for name, value in self.headers:
            if name.lower() != "content-length":
                response[name] = value
        return response


@csrf_exempt  # MCP clients send no CSRF token; the transport takes JSON bodies only
async def mcp_endpoint(request: HttpRequest) -> HttpResponse:
    """The Streamable HTTP MCP endpoint: ``tools/list`` and ``tools/call`` of
    ``search_transcripts`` in the signed-in user's ``SEARCH_SCOPE``."""
    scope = await sync_to_async(_request_scope)(request)
    if isinstance(scope, JsonResponse):
        return scope
    index = DjangoTranscriptIndex(router.db_for_read(Chat))

    async def search(arguments: Mapping[str, Any]) -> str:
        return await arun_search_tool(index, scope, arguments)

    host = request.get_host()  # checked against ALLOWED_HOSTS
    manager = StreamableHTTPSessionManager(
        transcripts_mcp_server(search),
        json_response=True,
        stateless=True,
        # a browser page of another origin is refused (403), as the MCP spec asks
        security_settings=TransportSecuritySettings(
            allowed_hosts=[host], allowed_origins=[f"{request.scheme}://{host}"]
        ),
    )
    exchange = _BufferedExchange(await sync_to_async(lambda: request.body)())
    async with manager.run():
        await manager.handle_request(_asgi_scope(request, host), exchange.receive, exchange.send)
    response = exchange.response()
    response["Cache-Control"] = "private, no-store"
    return response
