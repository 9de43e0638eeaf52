"""Typed access to the ``DEUZ_TRANSCRIPTS`` settings dict, read on every access.

This module alone decides whether a setting is valid (``conf.problems()``): the
system checks report its findings, and code that needs a valid value asks
``conf.require_valid(key)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS
from django.utils.module_loading import import_string

if TYPE_CHECKING:
    from django.http import HttpRequest

__all__ = [
    "DEFAULTS",
    "REPLICA_FALLBACKS",
    "SQLITE_BACKENDS",
    "SettingProblem",
    "TranscriptSettings",
    "conf",
]

SQLITE_BACKENDS = ("auto", "fts5", "like")
REPLICA_FALLBACKS = ("primary", "error")

DEFAULTS: dict[str, Any] = {
    "SQLITE_BACKEND": "auto",
    "ADMIN_PAGE_SIZE": 20,
    "LOCK_RETRIES": 3,
    "SQLITE_SECURE_DELETE": True,
    "SQLITE_SCAN_SCOPE_MAX": 2_000,
    "SEARCH_TIMEOUT_MS": 5_000,
    "CJK_BIGRAMS": False,
    "SEARCH_SCOPE": None,
    "API_MAX_LIMIT": 100,
    "SEARCH_DATABASE": None,
    "REPLICA_WAIT_MS": 1_000,
    "REPLICA_FALLBACK": "primary",
    "TENANT_KEY": None,
    "SEARCH_TOTAL_CAP": 10_000,
    "EXPORT_MAX_HITS": 10_000,
}

#: ``API_MAX_LIMIT`` is at most this: a page of the JSON endpoint stays small.
API_LIMIT_CEILING = 1_000


def _import_callable(value: Any) -> Callable[..., Any] | None:
    """``value`` itself when callable, the callable a dotted path names, else ``None``."""
    if callable(value):
        return cast(Callable[..., Any], value)
    if not isinstance(value, str) or "." not in value:
        return None
    try:
        found = import_string(value)
    except Exception:  # ImportError, or the module failing as it is imported
        return None
    return cast(Callable[..., Any], found) if callable(found) else None


def _is_int(value: Any, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _is_tenant_key(value: Any) -> bool:
    """``None`` or a scope key: a non-empty string without control characters."""
    from .records import MAX_ID_LENGTH

    return value is None or (
        isinstance(value, str)
        and 0 < len(value) <= MAX_ID_LENGTH
        and value.isprintable()
        and value.strip() == value
    )


def _is_alias(value: Any) -> bool:
    return isinstance(value, str) and value in settings.DATABASES


def _is_search_database(value: Any) -> bool:
    """``None``, an alias of ``DATABASES`` (the search database of ``default``), or a dict
    of aliases: ``{primary alias: its search database}``."""
    if value is None or _is_alias(value):
        return True
    return (
        isinstance(value, dict)
        and bool(value)
        and all(_is_alias(key) and _is_alias(alias) for key, alias in value.items())
    )


@dataclass(frozen=True)
class _Rule:
    valid: Callable[[Any], bool]
    message: str
    hint: str | None
    check_id: str


_RULES: dict[str, _Rule] = {
    "SQLITE_BACKEND": _Rule(
        lambda value: value in SQLITE_BACKENDS,
        "must be one of {choices}",
        "Use one of {choices}.",
        "deuz_transcripts.E002",
    ),
    "ADMIN_PAGE_SIZE": _Rule(
        lambda value: _is_int(value, 1), "must be a positive integer", None, "deuz_transcripts.E003"
    ),
    "LOCK_RETRIES": _Rule(
        lambda value: _is_int(value, 1), "must be a positive integer", None, "deuz_transcripts.E003"
    ),
    "SQLITE_SECURE_DELETE": _Rule(
        lambda value: isinstance(value, bool),
        "must be True or False",
        None,
        "deuz_transcripts.E007",
    ),
    "SQLITE_SCAN_SCOPE_MAX": _Rule(
        lambda value: _is_int(value, 0),
        "must be an integer >= 0",
        "0 sends every SQLite search to FTS5.",
        "deuz_transcripts.E006",
    ),
    "SEARCH_TIMEOUT_MS": _Rule(
        lambda value: _is_int(value, 0) and value <= 2**31 - 1,
        "must be an integer of milliseconds >= 0",
        "0 lets searches run as long as they take.",
        "deuz_transcripts.E008",
    ),
    "CJK_BIGRAMS": _Rule(
        lambda value: isinstance(value, bool),
        "must be True or False",
        None,
        "deuz_transcripts.E009",
    ),
    "SEARCH_SCOPE": _Rule(
        lambda value: value is None or _import_callable(value) is not None,
        "must be None or the dotted path of a callable taking the request and returning "
        "its scope (a dict of str to str) or None; it cannot be imported as one",
        "For example 'myproject.scopes.user_scope'.",
        "deuz_transcripts.E010",
    ),
    "API_MAX_LIMIT": _Rule(
        lambda value: _is_int(value, 1) and value <= API_LIMIT_CEILING,
        f"must be an integer from 1 to {API_LIMIT_CEILING}",
        None,
        "deuz_transcripts.E012",
    ),
    "SEARCH_DATABASE": _Rule(
        _is_search_database,
        "must be None, an alias of DATABASES (where the searches of 'default' read), or a "
        "dict mapping aliases of DATABASES to the alias their searches read",
        "For example 'replica' or {{'default': 'replica'}}; every name must be a key of DATABASES.",
        "deuz_transcripts.E013",
    ),
    "REPLICA_WAIT_MS": _Rule(
        lambda value: _is_int(value, 0) and value <= 60_000,
        "must be an integer of milliseconds from 0 to 60000",
        "0 never waits: a search right after this caller's write reads the primary "
        "(or fails, with REPLICA_FALLBACK 'error').",
        "deuz_transcripts.E014",
    ),
    "REPLICA_FALLBACK": _Rule(
        lambda value: value in REPLICA_FALLBACKS,
        "must be 'primary' or 'error'",
        "'primary' reads the primary when the search database cannot answer; 'error' raises "
        "ReplicaUnavailable.",
        "deuz_transcripts.E015",
    ),
    "TENANT_KEY": _Rule(
        _is_tenant_key,
        "must be None or a scope key (a non-empty printable string)",
        "For example 'userId': message rows then carry that scope field's value in their "
        "tenant column, the key a partitioned or distributed schema splits the data by.",
        "deuz_transcripts.E017",
    ),
    "SEARCH_TOTAL_CAP": _Rule(
        lambda value: value is None or (_is_int(value, 1) and value <= 2**31 - 1),
        "must be None or an integer from 1 to 2147483647",
        "The admin, the JSON endpoint, the agent tool and search_transcripts count matches "
        "exactly up to this many and say 'more than' past it; None counts every match.",
        "deuz_transcripts.E018",
    ),
    "EXPORT_MAX_HITS": _Rule(
        lambda value: _is_int(value, 1) and value <= 2**31 - 1,
        "must be an integer from 1 to 2147483647",
        "An admin export writes at most this many hits, best first.",
        "deuz_transcripts.E020",
    ),
}


@dataclass(frozen=True)
class SettingProblem:
    """One invalid or unknown key of ``DEUZ_TRANSCRIPTS``; ``check_id`` names the check."""

    key: str | None
    message: str
    hint: str | None
    check_id: str
    is_error: bool = True


@dataclass(frozen=True)
class TranscriptSettings:
    """Reads settings lazily, so ``override_settings`` works in tests."""

    @property
    def _given(self) -> Any:
        return getattr(settings, "DEUZ_TRANSCRIPTS", {})

    @property
    def _raw(self) -> dict[str, Any]:
        given = self._given
        return {**DEFAULTS, **(given if isinstance(given, dict) else {})}

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
        """FTS5 searches in a scope of at most this many indexed messages: of 8 terms or
        more, scan its rows; shorter, find each match's mask on its own terms (one FTS5
        pass); and its N with roles is summed from its rows."""
        return int(self._raw["SQLITE_SCAN_SCOPE_MAX"])

    @property
    def SEARCH_TOTAL_CAP(self) -> int | None:
        """The surfaces' ``search_page(total_cap=...)``: exact totals up to this many."""
        value = self._raw["SEARCH_TOTAL_CAP"]
        return None if value is None else int(value)

    @property
    def EXPORT_MAX_HITS(self) -> int:
        """The most hits one admin export writes (invalid: the default)."""
        valid = self.problem("EXPORT_MAX_HITS") is None
        return int(self._raw["EXPORT_MAX_HITS"] if valid else DEFAULTS["EXPORT_MAX_HITS"])

    @property
    def SEARCH_TIMEOUT_MS(self) -> int:
        """The database stops a search after this many milliseconds (0: no limit)."""
        return int(self._raw["SEARCH_TIMEOUT_MS"])

    @property
    def CJK_BIGRAMS(self) -> bool:
        """Han/Kana and Thai runs index as overlapping bigrams (SPEC §8); invalid: False."""
        return self.problem("CJK_BIGRAMS") is None and bool(self._raw["CJK_BIGRAMS"])

    @property
    def SEARCH_SCOPE(self) -> Callable[[HttpRequest], Mapping[str, str] | None] | None:
        """The callable giving a request's search scope (the JSON endpoint's only source of
        scope); ``None`` when unset or invalid (the endpoint then answers no one)."""
        value = self._raw["SEARCH_SCOPE"]
        return None if value is None else _import_callable(value)

    @property
    def API_MAX_LIMIT(self) -> int:
        """The largest ``limit`` the JSON endpoint accepts."""
        return int(self._raw["API_MAX_LIMIT"]) if self.problem("API_MAX_LIMIT") is None else 100

    def search_database(self, using: str) -> str:
        """The alias the searches of an index on ``using`` read (``using`` itself unless
        ``SEARCH_DATABASE`` names another; an invalid setting is ``using``)."""
        value = self._raw["SEARCH_DATABASE"]
        if value is None or not _is_search_database(value):
            return using
        if isinstance(value, str):
            return value if using == DEFAULT_DB_ALIAS else using
        return str(value.get(using, using))

    @property
    def REPLICA_WAIT_MS(self) -> int:
        """How long a search waits for the search database to replay its caller's write."""
        return int(self._raw["REPLICA_WAIT_MS"]) if self.problem("REPLICA_WAIT_MS") is None else 0

    @property
    def REPLICA_FALLBACK(self) -> Literal["primary", "error"]:
        """What a search does when the search database cannot answer (invalid: error)."""
        if self.problem("REPLICA_FALLBACK") is not None:
            return "error"
        return cast(Literal["primary", "error"], self._raw["REPLICA_FALLBACK"])

    @property
    def TENANT_KEY(self) -> str | None:
        """The scope key whose value fills the tenant columns (``None``: every row's tenant
        is ``""``); an invalid setting is ``None`` (its check fails)."""
        value = self._raw["TENANT_KEY"]
        return value if self.problem("TENANT_KEY") is None else None

    def scope_tenant(self, scope: Mapping[str, str]) -> str | None:
        """The tenant every chat of ``scope`` has, or ``None`` when the scope does not set
        the ``TENANT_KEY`` field (a search of it may find chats of any tenant)."""
        key = self.TENANT_KEY
        return None if key is None else scope.get(key)

    def tenant_of(self, scope: Mapping[str, str]) -> str:
        """The tenant column's value for a chat of ``scope`` (``""`` without the field)."""
        return self.scope_tenant(scope) or ""

    def _unknown_keys(self) -> list[str]:
        given = self._given
        return sorted(set(given) - set(DEFAULTS)) if isinstance(given, dict) else []

    def problem(self, key: str) -> SettingProblem | None:
        """Why ``key``'s value is invalid, or ``None`` when it is valid."""
        rule = _RULES[key]
        value = self._raw[key]
        if rule.valid(value):
            return None
        choices = ", ".join(SQLITE_BACKENDS)
        return SettingProblem(
            key,
            f"DEUZ_TRANSCRIPTS[{key!r}] is {value!r}: it {rule.message.format(choices=choices)}.",
            None if rule.hint is None else rule.hint.format(choices=choices),
            rule.check_id,
        )

    def problems(self) -> list[SettingProblem]:
        """Everything wrong with the settings, in key order, unknown keys last."""
        if not isinstance(self._given, dict):
            return [
                SettingProblem(
                    None, "DEUZ_TRANSCRIPTS must be a dict.", None, "deuz_transcripts.E001"
                )
            ]
        found = [problem for key in _RULES if (problem := self.problem(key)) is not None]
        found.extend(
            SettingProblem(
                key,
                f"DEUZ_TRANSCRIPTS has an unknown key {key!r}.",
                None,
                "deuz_transcripts.W002",
                is_error=False,
            )
            for key in self._unknown_keys()
        )
        return found

    def require_valid(self, key: str) -> None:
        """Raise ``ImproperlyConfigured`` with the check's message when ``key`` is invalid."""
        problem = self.problem(key)
        if problem is not None:
            raise ImproperlyConfigured(problem.message)


conf = TranscriptSettings()
