"""The README's quick start runs, and prints what its comments say it prints."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def _quick_start() -> str:
    text = README.read_text(encoding="utf-8")
    found = re.search(r"## Quick start\s+```python\n(.*?)\n```", text, re.DOTALL)
    assert found is not None, "the README has no quick start block"
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


def test_the_quick_start_prints_what_its_comments_say():
    code = _quick_start()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README quick start", "exec"), {})
    assert printed.getvalue().splitlines() == _expected(code)
    assert len(_expected(code)) >= 6
