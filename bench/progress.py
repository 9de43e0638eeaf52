"""The bench's progress lines on stderr (every phase module prints through it)."""

from __future__ import annotations

import sys
import time

__all__ = ["log"]


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)
