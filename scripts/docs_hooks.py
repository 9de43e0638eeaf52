"""MkDocs hook: the pages that live outside ``docs/`` join the site at their own paths.

``CHANGELOG.md`` and the benchmark's results (``bench/RESULTS.md`` and the dated sections in
``bench/history/``) stay where the project keeps them; the site takes them as they are, so
``mkdocs build --strict`` checks their links too and a new history file needs no page of its
own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent

#: repository file -> its path in the site
OUTSIDE_DOCS = {"CHANGELOG.md": "changelog.md", "bench/RESULTS.md": "bench/RESULTS.md"}
OUTSIDE_FOLDERS = {"bench/history": "bench/history"}


def on_files(files: Files, config: Any) -> Files:
    pages = dict(OUTSIDE_DOCS)
    for folder, site_folder in OUTSIDE_FOLDERS.items():
        for path in sorted((ROOT / folder).glob("*.md")):
            pages[f"{folder}/{path.name}"] = f"{site_folder}/{path.name}"
    for source, site_path in pages.items():
        files.append(File.generated(config, site_path, abs_src_path=str(ROOT / source)))
    return files
