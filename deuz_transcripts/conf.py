"""Typed access to the ``DEUZ_TRANSCRIPTS`` settings dict, read on every access."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, cast

from django.conf import settings

__all__ = ["DEFAULTS", "SQLITE_BACKENDS", "TranscriptSettings", "conf"]

SQLITE_BACKENDS = ("auto", "fts5", "like")

DEFAULTS: dict[str, Any] = {
    "SQLITE_BACKEND": "auto",
    "ADMIN_PAGE_SIZE": 20,
    "LOCK_RETRIES": 3,
    "SQLITE_SECURE_DELETE": True,
    "SQLITE_SCAN_SCOPE_MAX": 2_000,
}


@dataclass(frozen=True)
class TranscriptSettings:
    """Reads settings lazily, so ``override_settings`` works in tests."""

    @property
    def _raw(self) -> dict[str, Any]:
        return {**DEFAULTS, **getattr(settings, "DEUZ_TRANSCRIPTS", {})}

    @property
    def SQLITE_BACKEND(self) -> Literal["auto", "fts5", "like"]:
        return cast(Literal["auto", "fts5", "like"], self._raw["SQLITE_BACKEND"])

    @property
    def ADMIN_PAGE_SIZE(self) -> int:
        return int(self._raw["ADMIN_PAGE_SIZE"])

    @property
    def LOCK_RETRIES(self) -> int:
        return int(self._raw["LOCK_RETRIES"])

    @property
    def SQLITE_SECURE_DELETE(self) -> bool:
        """SQLite ``delete_chat`` zeroes freed pages and merges FTS5 (no trace in the file)."""
        return bool(self._raw["SQLITE_SECURE_DELETE"])

    @property
    def SQLITE_SCAN_SCOPE_MAX(self) -> int:
        """FTS5 searches of a scope with at most this many indexed messages scan its rows."""
        return int(self._raw["SQLITE_SCAN_SCOPE_MAX"])

    def unknown_keys(self) -> list[str]:
        return sorted(set(getattr(settings, "DEUZ_TRANSCRIPTS", {})) - set(DEFAULTS))


conf = TranscriptSettings()
