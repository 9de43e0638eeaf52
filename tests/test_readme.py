"""The quick starts of the README and of the docs run, and print what their comments say."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
GETTING_STARTED = ROOT / "docs" / "getting-started.md"


def _quick_start(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    # the first python block of the section (a paragraph may come before it)
    found = re.search(r"## Quick start\n(?:(?!\n## ).)*?```python\n(.*?)\n```", text, re.DOTALL)
    assert found is not None, f"{path.name} has no quick start block"
    return found.group(1)


def _expected(code: str) -> list[str]:
    """Each ``print`` line's comment (on its line, else the next line), up to ``": "``."""
    lines = code.splitlines()
    expected = []
    for number, line in enumerate(lines):
        if not line.startswith("print("):
            continue
        comment = line.partition("#")[2] if "#" in line else lines[number + 1].lstrip("# ")
        expected.append(comment.strip().split(": ")[0])
    return expected


@pytest.mark.parametrize(
    ("path", "min_prints", "max_lines"),
    [(README, 3, 20), (GETTING_STARTED, 6, None)],
    ids=["README", "getting-started"],
)
def test_the_quick_start_prints_what_its_comments_say(path, min_prints, max_lines):
    code = _quick_start(path)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, f"{path.name} quick start", "exec"), {})
    assert printed.getvalue().splitlines() == _expected(code)
    assert len(_expected(code)) >= min_prints
    if max_lines is not None:
        assert len(code.splitlines()) <= max_lines


def test_the_readme_is_a_front_page():
    """The README stays a front page (issue #42): the reference lives in the docs site."""
    assert len(README.read_bytes()) <= 12 * 1024
