"""What a benchmark reads of this machine's processes, from ``/proc`` (Linux only).

Why here and not psutil: the harness's own tests run the tools in the test environment,
which installs no benchmark extras; three small reads of ``/proc`` need no package.
"""

from __future__ import annotations

import os
from pathlib import Path


def cpu_seconds(pid: int) -> float | None:
    """utime + stime of a process, or None once it has gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid: int) -> int:
    """The resident set of a process (0 once it has gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children, grandchildren, ...)."""
    found: list[int] = []
    pending = [pid]
    while pending:
        parent = pending.pop()
        try:
            tasks = list(Path(f"/proc/{parent}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            found.extend(children)
            pending.extend(children)
    return found


def largest_rss(pid: int) -> int:
    """The largest resident set of ``pid`` and any process below it, right now."""
    return max(rss_bytes(p) for p in [pid, *descendants(pid)])


def memory_gb() -> float:
    """The machine's physical memory."""
    return round(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30, 1)
