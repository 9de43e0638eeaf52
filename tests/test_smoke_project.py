"""Smoke tests of the test project itself: settings load, system checks pass, app imports."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.core.management import call_command


@pytest.mark.django_db(databases=["default", "other"])  # Django 6's checks may query them
def test_system_checks_pass():
    call_command("check")


#: Run in a process of its own, with no Django settings: SPEC section 1's public names, no
#: model imported, and the in-memory index paging by cursor (signed with a process key).
_WITHOUT_SETTINGS = """
import sys
import deuz_transcripts as d
from django.conf import settings
assert not settings.configured
assert "deuz_transcripts.models" not in sys.modules
index = d.InMemoryTranscriptIndex()
d.index_chat(index, d.ChatRecord("c1", {"u": "a"}, [{"role": "user", "content": "izmir"}] * 3))
first = index.search_page({"u": "a"}, "izmir", limit=2)
rest = index.search_page({"u": "a"}, "izmir", limit=2, cursor=first.next_cursor)
print(len(first.hits) + len(rest.hits), sorted(set(d.__all__) & set(sys.argv[1:])))
"""
_PUBLIC = [
    "ChatRecord",
    "TranscriptMessage",
    "TranscriptHit",
    "MemorySourceRef",
    "InMemoryTranscriptIndex",
    "InMemoryConditionalChatStore",
    "InMemoryChatStore",
    "index_chat",
    "TranscriptContextSource",
    "TranscriptError",
    "RevisionConflict",
    "ChatDeleted",
    "InvalidRecord",
]


def test_package_imports_and_pages_without_django_settings():
    environment = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_SETTINGS, *_PUBLIC],
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(" ", 1) == ["3", f"{sorted(_PUBLIC)}\n"]
