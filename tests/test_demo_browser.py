"""`make run PORT=...` for real: the demo serves at that port, prints it, and its end user
signs in with Chromium (Playwright) and with the documented curl."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser_support import chromium
from tests.test_demo import ROOT, documented_curls

pytestmark = [pytest.mark.browser]

#: How long the demo may take to migrate, load its chats and answer (a wait, not a test).
START_SECONDS = 180


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _until_served(url: str, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline and process.poll() is None:
        try:
            urllib.request.urlopen(url, timeout=5).close()
            return
        except urllib.error.HTTPError:
            return  # it answers
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"the demo did not answer at {url} (exit code {process.poll()})")


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[tuple[int, str]]:
    """`make run PORT=<free port>` on a database of its own, in this interpreter's virtualenv
    (``-o venv``: nothing is installed); its port and what it printed before serving."""
    if shutil.which("make") is None:
        pytest.fail("make is not installed")
    port = _free_port()
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'demo.sqlite3'}",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("REPLICA_DATABASE_URL", None)
    process = subprocess.Popen(
        ["make", "-o", "venv", "run", f"PORT={port}", f"VENV={sys.prefix}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        _until_served(f"http://127.0.0.1:{port}/admin/login/", process)
        printed = ""
        assert process.stdout is not None
        while "JSON endpoint:" not in printed:
            line = process.stdout.readline()
            assert line, f"the demo ended before printing its addresses:\n{printed}"
            printed += line
        yield port, printed
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
        if process.stdout is not None:
            process.stdout.close()


def test_make_run_serves_at_port_and_its_end_user_signs_in(demo: tuple[int, str]) -> None:
    port, printed = demo
    base = f"http://127.0.0.1:{port}"
    sign_in = re.search(r"End user sign-in: (\S+)", printed)
    assert sign_in is not None and sign_in.group(1) == f"{base}/accounts/login/"
    assert f"Admin search: {base}/admin/" in printed and ":8000" not in printed
    with chromium() as page:
        page.goto(sign_in.group(1))
        page.fill("input[name=username]", "ada")
        page.fill("input[name=password]", "ada")
        page.click("button[type=submit]")
        page.wait_for_url(f"{base}/transcripts/search/**")
        answer = json.loads(page.locator("body").inner_text())
    assert answer["count"] >= 1 and "notice" not in answer
    assert {hit["chat_id"] for hit in answer["hits"]} >= {"demo-ada-izmir"}
    assert all(hit["chat_id"].startswith("demo-ada-") for hit in answer["hits"])


def test_the_documented_curl_answers_from_the_demo(demo: tuple[int, str]) -> None:
    if shutil.which("curl") is None:
        pytest.fail("curl is not installed (apt-get install curl)")
    port, _ = demo
    documented = documented_curls()
    assert documented, "the docs show no curl of the demo's endpoint"
    user, password, url = documented[0].groups()
    url = url.replace("127.0.0.1:8000", f"127.0.0.1:{port}")
    out = subprocess.run(
        ["curl", "-sS", "-u", f"{user}:{password}", url], capture_output=True, text=True, check=True
    ).stdout
    answer = json.loads(out)
    assert answer["count"] >= 1
    assert {hit["chat_id"] for hit in answer["hits"]} >= {"demo-ada-izmir"}
