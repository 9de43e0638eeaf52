"""The demo under ``CJK_BIGRAMS``: ``make run CJK_BIGRAMS=1`` sets it through the
environment, the demo is searched in the form it runs with, and a stale index shows
where the operator looks (runserver's checks)."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import override_settings

from deuz_transcripts.sql.stored_forms import stored_form_problem

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_run_passes_cjk_bigrams_to_every_step(tmp_path: Path) -> None:
    """``make run`` with a ``python`` that prints what it was given instead of running."""
    fake = tmp_path / "python"
    fake.write_text('#!/bin/sh\necho "bigrams=$DEUZ_CJK_BIGRAMS $2"\n')
    fake.chmod(0o755)

    def steps(*variables: str) -> list[str]:
        done = subprocess.run(
            ["make", "-s", "-o", "venv", "run", f"BIN={tmp_path}", *variables],
            cwd=ROOT,
            env={k: v for k, v in os.environ.items() if k != "DEUZ_CJK_BIGRAMS"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    on = steps("CJK_BIGRAMS=1")
    assert {"bigrams=1 migrate", "bigrams=1 load_demo_transcripts", "bigrams=1 runserver"} <= set(
        on
    )
    assert {line.split()[0] for line in on} == {"bigrams=1"}
    assert {line.split()[0] for line in steps()} == {"bigrams="}


@pytest.mark.parametrize(("value", "enabled"), [("1", "True"), ("", "False"), (None, "False")])
def test_the_test_project_reads_cjk_bigrams_from_the_environment(
    value: str | None, enabled: str
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DEUZ_CJK_BIGRAMS"}
    if value is not None:
        env["DEUZ_CJK_BIGRAMS"] = value
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", _PRINT_RULE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].split() == [enabled, enabled]  # after shell's imports


_PRINT_RULE = (
    "from deuz_transcripts.conf import conf; from deuz_transcripts.text import "
    "cjk_bigrams_enabled; print(conf.CJK_BIGRAMS, cjk_bigrams_enabled())"
)


@pytest.mark.django_db
def test_a_demo_loaded_without_bigrams_is_reindexed_when_run_with_them() -> None:
    call_command("load_demo_transcripts", "--chats", "6", stdout=io.StringIO())
    given = getattr(settings, "DEUZ_TRANSCRIPTS", {})
    with override_settings(DEUZ_TRANSCRIPTS={**given, "CJK_BIGRAMS": True}):
        assert stored_form_problem("default") is not None
        out = io.StringIO()
        call_command("load_demo_transcripts", "--if-empty", stdout=out, stderr=io.StringIO())
        assert "re-indexing" in out.getvalue()
        assert stored_form_problem("default") is None
        again = io.StringIO()
        call_command("load_demo_transcripts", "--if-empty", stdout=again, stderr=io.StringIO())
        assert "re-indexing" not in again.getvalue()
    assert stored_form_problem("default") is not None  # the demo is in the bigrams' form now
