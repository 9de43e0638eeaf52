"""The agent tool over the Model Context Protocol, end to end with the ``mcp`` SDK's own
clients: ``manage.py transcripts_mcp`` in a subprocess over stdio, and the Django
endpoint served by uvicorn on 127.0.0.1, both on the test run's database engine.

The scope is the server's (the command's ``--scope``, the request's ``SEARCH_SCOPE``):
no call reaches another user's chats, a refused call is a tool error (``isError``)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
import pytest
import uvicorn
from django.conf import settings
from django.core.checks import run_checks
from django.core.signals import request_finished
from django.db import connection, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.test import Client as DjangoClient
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from deuz_transcripts import ChatRecord
from deuz_transcripts.errors import TranscriptError
from deuz_transcripts.mcp_server import transcripts_mcp_server
from deuz_transcripts.stores import DjangoConditionalChatStore
from tests.sql_support import sqlite_file_database

PROJECT_DIR = Path(__file__).resolve().parent.parent
TOOL = "search_transcripts"


def _write_chats(using: str) -> None:
    store = DjangoConditionalChatStore(using)
    for chat_id, user, text in [
        ("ada-izmir", "ada", "Book the flight to Izmir on Friday."),
        ("ada-lunch", "ada", "Lunch in Izmir after the meeting."),
        ("bob-izmir", "bob", "Izmir secret of bob."),
    ]:
        record = ChatRecord(chat_id, {"userId": user}, [{"role": "user", "content": text}])
        store.write_chat(record, expected_revision=0)


def _answer(result: Any) -> dict[str, Any]:
    (block,) = result.content
    parsed: dict[str, Any] = json.loads(block.text)
    return parsed


def _chat_ids(result: Any) -> list[str]:
    assert result.is_error is False
    return sorted(hit["chat_id"] for hit in _answer(result)["hits"])


Session = Callable[[Client], Awaitable[Any]]


async def _tool_session(client: Client) -> dict[str, Any]:
    """Everything a client sees of the server in one connection."""
    tools = await client.list_tools()
    found = await client.call_tool(TOOL, {"query": "izmir"})
    widened = await client.call_tool(TOOL, {"query": "izmir", "scope": {"userId": "bob"}})
    empty = await client.call_tool(TOOL, {"query": "   "})
    bad_limit = await client.call_tool(TOOL, {"query": "izmir", "limit": 0})
    bob_words = await client.call_tool(TOOL, {"query": "secret bob"})
    with pytest.raises(MCPError, match="Unknown tool"):
        await client.call_tool("search_everything", {"query": "izmir"})
    return {
        "tools": tools.tools,
        "found": found,
        "widened": widened,
        "empty": empty,
        "bad_limit": bad_limit,
        "bob_words": bob_words,
    }


def _assert_ada_session(seen: dict[str, Any]) -> None:
    (tool,) = seen["tools"]
    assert tool.name == TOOL
    assert tool.input_schema["required"] == ["query"]
    assert tool.input_schema["additionalProperties"] is False
    assert tool.annotations.read_only_hint is True
    assert _chat_ids(seen["found"]) == ["ada-izmir", "ada-lunch"]
    assert _answer(seen["found"])["count"] == 2
    assert seen["widened"].is_error is True
    assert _answer(seen["widened"]) == {"error": "unknown arguments: scope"}
    assert seen["empty"].is_error is True
    assert _answer(seen["empty"])["error"].startswith("query")
    assert seen["bad_limit"].is_error is True
    assert "limit" in _answer(seen["bad_limit"])["error"]
    assert _chat_ids(seen["bob_words"]) == []  # bob's chat exists, outside ada's scope


# ------------------------------------------------------------------ stdio (subprocess)


@pytest.fixture
def served_database(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A database another process can open (alias here, URL there), holding the chats.

    PostgreSQL: the run's own test database, committed to (the tests are transactional).
    SQLite: the run's test database lives in this process's memory, so a migrated file.
    """
    if connection.vendor == "postgresql":
        url = urlsplit(os.environ["DATABASE_URL"])._replace(
            path="/" + connection.settings_dict["NAME"]
        )
        _write_chats("default")
        yield "default", url.geturl()
        return
    with sqlite_file_database(tmp_path) as database:
        _write_chats(database.alias)
        yield database.alias, f"sqlite:///{database.path}"


def _stdio(database_url: str, *options: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "transcripts_mcp", *options],
        env={**os.environ, "DATABASE_URL": database_url},
        cwd=PROJECT_DIR,
    )


@pytest.mark.django_db(transaction=True)
def test_stdio_server_lists_and_calls_the_tool_in_its_scope_only(served_database):
    _, url = served_database

    async def run() -> dict[str, Any]:
        async with Client(_stdio(url, "--scope", "userId=ada")) as client:
            return await _tool_session(client)

    _assert_ada_session(asyncio.run(run()))


@pytest.mark.django_db(transaction=True)
def test_stdio_server_of_another_scope_sees_only_that_scope(served_database):
    _, url = served_database

    async def run() -> Any:
        async with Client(_stdio(url, "--scope", "userId=bob")) as client:
            return await client.call_tool(TOOL, {"query": "izmir"})

    assert _chat_ids(asyncio.run(run())) == ["bob-izmir"]


@pytest.mark.parametrize(
    ("options", "error"),
    [
        (["--scope", ""], "--scope is empty"),
        (["--scope", "userId"], "--scope: Write each scope field as key=value"),
        ([], "the following arguments are required: --scope"),
    ],
)
def test_stdio_server_refuses_to_start_without_a_scope(options, error):
    """No scope never means every scope: the command stops before serving anything."""
    finished = subprocess.run(
        [sys.executable, "manage.py", "transcripts_mcp", *options],
        cwd=PROJECT_DIR,
        input="",
        capture_output=True,
        text=True,
        check=False,
    )
    assert finished.returncode != 0
    assert error in finished.stderr
    assert finished.stdout == ""


# ------------------------------------------------------------- Streamable HTTP (uvicorn)


def _close_request_thread_connections(**kwargs: Any) -> None:
    """Django ignores ``close()`` of an in-memory SQLite connection (closing the last one
    would drop the database); a request thread of the server ends with its connection, so
    it is closed for real here: the test thread's keeps the database."""
    if threading.current_thread() is threading.main_thread():
        return
    for opened in connections.all(initialized_only=True):
        if opened.vendor == "sqlite" and opened.is_in_memory_db():
            BaseDatabaseWrapper.close(opened)


@pytest.fixture
def asgi_server(transactional_db: None) -> Iterator[str]:
    """The test project's ASGI application served by uvicorn in a thread on a free port
    of 127.0.0.1, on the test database (a live server); yields its base URL."""
    request_finished.connect(_close_request_thread_connections)
    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listening.bind(("127.0.0.1", 0))
    port = listening.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config("testproject.asgi:application", lifespan="off", log_level="warning")
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listening]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, "uvicorn did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join()
        listening.close()
        request_finished.disconnect(_close_request_thread_connections)


def _signed_in_cookie(django_user_model: Any, username: str) -> dict[str, str]:
    user = django_user_model.objects.create_user(username)
    client = DjangoClient()
    client.force_login(user)
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    return {"Cookie": f"{settings.SESSION_COOKIE_NAME}={session}"}


async def _over_http(url: str, headers: dict[str, str], session: Session, **client: Any) -> Any:
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http), **client) as mcp,
    ):
        return await session(mcp)


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # the 2026 protocol, and the handshake
def test_http_endpoint_lists_and_calls_the_tool_in_the_users_scope(
    asgi_server, django_user_model, mode
):
    _write_chats("default")
    cookie = _signed_in_cookie(django_user_model, "ada")
    url = f"{asgi_server}/transcripts/mcp/"
    _assert_ada_session(asyncio.run(_over_http(url, cookie, _tool_session, mode=mode)))


def test_http_scope_follows_the_signed_in_user_not_the_request(asgi_server, django_user_model):
    _write_chats("default")
    cookie = _signed_in_cookie(django_user_model, "bob")
    url = f"{asgi_server}/transcripts/mcp/?scope=userId%3Dada"  # ignored, as any parameter

    async def session(client: Client) -> Any:
        return await client.call_tool(TOOL, {"query": "izmir"})

    assert _chat_ids(asyncio.run(_over_http(url, cookie, session))) == ["bob-izmir"]


def test_http_endpoint_refuses_anonymous_requests(asgi_server):
    _write_chats("default")
    url = f"{asgi_server}/transcripts/mcp/"
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": TOOL, "arguments": {"query": "izmir"}},
    }
    answer = httpx2.post(url, json=call, headers={"Accept": "application/json, text/event-stream"})
    assert answer.status_code == 403
    assert answer.json() == {
        "error": {"field": None, "message": "sign in to search your transcripts"}
    }

    async def session(client: Client) -> Any:
        return await client.list_tools()

    with pytest.raises(ExceptionGroup) as refused:  # the SDK client cannot even connect
        asyncio.run(_over_http(url, {}, session))
    assert refused.group_contains(MCPError, match="error response")


def test_http_endpoint_refuses_a_page_of_another_origin(asgi_server, django_user_model):
    """The MCP spec's DNS-rebinding rule: a foreign Origin is 403; the same origin is served."""
    cookie = _signed_in_cookie(django_user_model, "ada")
    url = f"{asgi_server}/transcripts/mcp/"
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {
        **cookie,
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    foreign = httpx2.post(url, json=call, headers={**headers, "Origin": "http://evil.example"})
    assert foreign.status_code == 403
    same = httpx2.post(url, json=call, headers={**headers, "Origin": asgi_server})
    assert same.status_code == 200
    assert [tool["name"] for tool in same.json()["result"]["tools"]] == [TOOL]


@pytest.mark.django_db
def test_a_date_range_over_mcp_filters_hits_and_keeps_their_scores(client, django_user_model):
    """The tool's start_date filters hits only: each scores as without it."""
    store = DjangoConditionalChatStore()
    when = datetime(2026, 1, 10, tzinfo=UTC)
    for chat_id, text, days in [
        ("ada-best", "Book the flight to Izmir.", 0),
        ("ada-later", "Izmir again.", 2),
    ]:
        message = [{"role": "user", "content": text}]
        record = ChatRecord(chat_id, {"userId": "ada"}, message, updated_at=when + timedelta(days))
        store.write_chat(record, expected_revision=0)
    client.force_login(django_user_model.objects.create_user("ada"))

    def scores(**arguments: Any) -> list[tuple[str, float]]:
        call = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": TOOL, "arguments": {"query": "izmir flight", **arguments}},
        }
        answer = client.post(
            "/transcripts/mcp/",
            call,
            content_type="application/json",
            HTTP_ACCEPT="application/json, text/event-stream",
            HTTP_MCP_PROTOCOL_VERSION="2025-11-25",
        )
        hits = json.loads(answer.json()["result"]["content"][0]["text"])["hits"]
        return [(hit["chat_id"], hit["score"]) for hit in hits]

    every = scores()
    assert every[0] == ("ada-best", 1.0) and every[1][1] < 1.0
    assert scores(start_date="2026-01-11T00:00:00Z") == every[1:]


# ------------------------------------------------------------------ the view, the extra


@pytest.mark.django_db
def test_the_view_answers_under_the_test_client_too(client, django_user_model):
    """The endpoint is a Django view: a sync (WSGI) handler runs it as well as uvicorn."""
    _write_chats("default")
    url = "/transcripts/mcp/"
    headers = {
        "HTTP_ACCEPT": "application/json, text/event-stream",
        "HTTP_MCP_PROTOCOL_VERSION": "2025-11-25",
    }
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": TOOL, "arguments": {"query": "izmir"}},
    }
    anonymous = client.post(url, call, content_type="application/json", **headers)
    assert anonymous.status_code == 403
    client.force_login(django_user_model.objects.create_user("ada"))
    answer = client.post(url, call, content_type="application/json", **headers)
    assert answer.status_code == 200
    assert answer["Cache-Control"] == "private, no-store"
    result = answer.json()["result"]
    assert result["isError"] is False
    hits = json.loads(result["content"][0]["text"])["hits"]
    assert sorted(hit["chat_id"] for hit in hits) == ["ada-izmir", "ada-lunch"]
    form = client.post(url, {"q": "izmir"}, **headers)  # a cross-site form cannot post JSON
    assert form.status_code == 400


def test_the_package_works_without_the_mcp_sdk():
    """Without the extra every other module imports, and the MCP ones say how to install it."""
    code = """
import importlib, pkgutil, sys
sys.modules["mcp"] = sys.modules["mcp_types"] = None  # as if the extra were not installed
import django
django.setup()
import deuz_transcripts
from django.core.management import CommandError, call_command
mcp_modules = {"deuz_transcripts.mcp_server", "deuz_transcripts.mcp_http", "deuz_transcripts.mcp_urls"}
for found in pkgutil.walk_packages(deuz_transcripts.__path__, "deuz_transcripts."):
    if found.name not in mcp_modules:
        importlib.import_module(found.name)
for name in sorted(mcp_modules):
    try:
        importlib.import_module(name)
    except ImportError as exc:
        print(name, exc)
try:
    call_command("transcripts_mcp", "--scope", "userId=ada")
except CommandError as exc:
    print("transcripts_mcp", exc)
"""
    finished = subprocess.run(
        [sys.executable, "-c", code],
        cwd=PROJECT_DIR,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "testproject.settings"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    lines = finished.stdout.splitlines()
    assert [line.split()[0] for line in lines] == [
        "deuz_transcripts.mcp_http",
        "deuz_transcripts.mcp_server",
        "deuz_transcripts.mcp_urls",
        "transcripts_mcp",
    ]
    assert all('pip install "deuz-transcripts[mcp]"' in line for line in lines)


def test_system_check_requires_a_scope_callable_for_the_mcp_urls_alone(settings):
    def errors() -> list[str]:
        return [m.id for m in run_checks() if m.id.startswith("deuz_") and m.is_serious()]

    settings.ROOT_URLCONF = "tests.urls_mcp_only"
    assert errors() == []
    settings.DEUZ_TRANSCRIPTS = {}
    assert errors() == ["deuz_transcripts.E011"]


def test_a_failed_search_is_a_tool_error_and_logged(caplog):
    """A database failure reaches the model as a tool error it may retry, never its text."""

    async def failing(arguments: Any) -> str:
        raise TranscriptError("the database is unreachable (connection refused at 10.0.0.5)")

    async def run() -> Any:
        async with Client(transcripts_mcp_server(failing)) as client:
            return await client.call_tool(TOOL, {"query": "izmir"})

    result = asyncio.run(run())
    assert result.is_error is True
    assert _answer(result) == {"error": "the transcript search failed; try again"}
    assert "transcript search failed" in caplog.text
    assert "10.0.0.5" in caplog.text
