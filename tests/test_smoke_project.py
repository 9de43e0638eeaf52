"""Smoke tests of the test project itself: settings load, system checks pass, app imports."""

from __future__ import annotations

import pytest
from django.core.management import call_command


@pytest.mark.django_db(databases=["default", "other"])  # Django 6's checks may query them
def test_system_checks_pass():
    call_command("check")


def test_package_imports():
    import deuz_transcripts

    assert deuz_transcripts.__name__ == "deuz_transcripts"
