"""The demo (`make run`): served at the port asked for, with an end user whose scope has
chats, who can sign in and try the JSON endpoint (the browser and curl: test_demo_browser)."""

from __future__ import annotations

import base64
import io
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]

ROOT = Path(__file__).resolve().parent.parent
CURL = re.compile(r"curl -u (\w+):(\w+) '(http://[^']+)'")


def load(*args: str) -> str:
    out = io.StringIO()
    call_command("load_demo_transcripts", "--chats", "12", *args, stdout=out)
    return out.getvalue()


def basic(username: str, password: str) -> dict[str, str]:
    pair = base64.b64encode(f"{username}:{password}".encode()).decode()
    return {"HTTP_AUTHORIZATION": f"Basic {pair}"}


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_run_serves_and_prints_the_port_it_is_given() -> None:
    """`make run` hard-coded 8000, and the demo printed :8000 whatever it was served at."""
    commands = subprocess.run(
        ["make", "-n", "-o", "venv", "run", "PORT=8765"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "runserver 127.0.0.1:8765" in commands
    assert "load_demo_transcripts --if-empty --url http://127.0.0.1:8765" in commands
    assert "8000" not in commands


def test_the_demo_prints_where_it_is_served_and_makes_an_end_user(
    django_user_model: Any,
) -> None:
    out = load("--url", "http://127.0.0.1:8765/")
    assert "http://127.0.0.1:8765/admin/deuz_transcripts/chat/search/?q=izmir" in out
    assert "End user sign-in: http://127.0.0.1:8765/accounts/login/ (ada / ada)" in out
    assert "curl -u ada:ada 'http://127.0.0.1:8765/transcripts/search/?q=izmir&around=1'" in out
    assert ":8000" not in out
    ada = django_user_model.objects.get(username="ada")
    assert not ada.is_staff and not ada.is_superuser and ada.check_password("ada")
    again = load("--if-empty")
    assert "not loaded" in again and "http://127.0.0.1:8000/accounts/login/" in again


def test_the_end_users_curl_finds_their_own_chats_only() -> None:
    out = load()
    username, password, url = CURL.search(out).groups()  # type: ignore[union-attr]
    answer = Client().get(url.split("8000", 1)[1], **basic(username, password)).json()
    assert answer["count"] >= 1 and "notice" not in answer
    assert {hit["chat_id"] for hit in answer["hits"]} >= {"demo-ada-izmir"}
    assert all(hit["chat_id"].startswith("demo-ada-") for hit in answer["hits"])
    wrong = Client().get(url.split("8000", 1)[1], **basic(username, "not-the-password"))
    assert wrong.status_code == 403


def documented_curls() -> list[re.Match[str]]:
    """The curls of the demo's endpoint the README and the docs site show."""
    documents = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [match for doc in documents for match in CURL.finditer(doc.read_text("utf-8"))]


def test_the_documented_curl_is_the_one_the_demo_prints() -> None:
    """The docs' curl (README or the docs site) is the demo's own, so it works as shown."""
    shown = {match.group(0) for match in documented_curls()}
    printed = {match.group(0) for match in CURL.finditer(load())}
    assert shown and shown <= printed


def test_the_end_user_signs_in_and_lands_on_their_search(client: Client) -> None:
    load()
    page = client.get("/accounts/login/")
    assert page.status_code == 200 and b"ada / ada" in page.content
    signed_in = client.post("/accounts/login/", {"username": "ada", "password": "ada"}, follow=True)
    assert signed_in.redirect_chain == [("/transcripts/search/?q=izmir&around=1", 302)]
    assert signed_in.json()["count"] >= 1
