"""The one rule for search input typed by a person or sent by a model: the admin form, the
JSON endpoint, the agent tool and ``search_transcripts`` all check it here, so the same
input is accepted or refused, with the same words, on every surface. Pure Python.

Each function raises ``InvalidRecord(field, problem)`` naming the field as the calling
surface spells it (``q``, ``start_date``, ``--updated-after``, ...).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from datetime import UTC, datetime, tzinfo

from .errors import InvalidRecord
from .message_text import SYSTEM_ROLES
from .records import MAX_ID_LENGTH
from .text import query_terms

__all__ = [
    "MAX_DATE_LENGTH",
    "MAX_QUERY_LENGTH",
    "MAX_ROLES",
    "check_query",
    "check_roles",
    "check_window",
    "parse_moment",
    "split_roles",
]

#: Longer queries are refused (a query uses at most its first 32 distinct terms anyway).
MAX_QUERY_LENGTH = 1_000
#: A search names at most this many distinct roles.
MAX_ROLES = 20
#: No date and time is longer.
MAX_DATE_LENGTH = 64
#: ``2026-01-31T09:00`` or ``2026-01-31 09:00``, seconds and an offset optional: a time
#: is required, since a date alone does not say which moment of the day it means.
_HAS_TIME = re.compile(r"[0-9]{4}-?[0-9]{2}-?[0-9]{2}[T ][0-9]{2}:?[0-9]{2}")
_MOMENT_EXAMPLE = "2026-01-31T09:00:00+00:00"


def check_query(query: object, field: str = "query") -> str:
    """``query`` when it is text of at most ``MAX_QUERY_LENGTH`` characters holding at
    least one word (a run of letters or digits); a query without one is refused rather
    than answered "no hits"."""
    if not isinstance(query, str):
        raise InvalidRecord(field, f"must be a string, not {type(query).__name__}")
    if not query.strip():
        raise InvalidRecord(field, "is required")
    if len(query) > MAX_QUERY_LENGTH:
        raise InvalidRecord(field, f"is longer than {MAX_QUERY_LENGTH:,} characters")
    if "\x00" in query:
        raise InvalidRecord(field, "must not contain NUL characters")
    if not query_terms(query):
        raise InvalidRecord(field, "has no words to search for (letters or digits)")
    return query


def split_roles(values: Iterable[str]) -> list[str]:
    """Role names typed as text (``"user, tool"``, possibly repeated): split at commas,
    blanks dropped. Nothing typed is ``[]``, which the caller reads as "every role"."""
    return [role.strip() for value in values for role in value.split(",") if role.strip()]


def check_roles(roles: object, field: str = "roles") -> list[str] | None:
    """The distinct roles a search keeps, in the order given; ``None``: every role.

    Any role name the chats may store is accepted (``user``, ``assistant``, ``tool``,
    ``function``, an application's own), since messages keep the role their SDK wrote.
    Refused: a name that is empty, longer than ``MAX_ID_LENGTH``, or holds control or
    invisible characters; ``system`` and ``developer``, whose messages are never indexed;
    more than ``MAX_ROLES`` names. An empty list is kept: it finds nothing (SPEC §8).
    """
    if roles is None:
        return None
    if isinstance(roles, str | bytes) or not isinstance(roles, list | tuple | set | frozenset):
        raise InvalidRecord(field, 'must be a list of role names, e.g. ["user", "assistant"]')
    distinct: dict[str, None] = {}
    for role in roles:
        if not isinstance(role, str) or not role.strip():
            raise InvalidRecord(field, "each role must be a non-empty string")
        if len(role) > MAX_ID_LENGTH:
            raise InvalidRecord(field, f"a role is at most {MAX_ID_LENGTH} characters")
        if any(unicodedata.category(char)[0] == "C" for char in role):
            raise InvalidRecord(field, "a role cannot hold control or invisible characters")
        if role in SYSTEM_ROLES:
            raise InvalidRecord(
                field, f"{role} messages are never indexed: no search can find them"
            )
        distinct[role] = None
    if len(distinct) > MAX_ROLES:
        raise InvalidRecord(field, f"names more than {MAX_ROLES} roles")
    return list(distinct)


def parse_moment(text: object, field: str, *, zone: tzinfo) -> datetime | None:
    """An ISO 8601 date and time (``2026-01-31T09:00``, seconds, fractions and an offset
    such as ``Z`` or ``+02:00`` optional), in UTC; ``None`` for nothing typed. A time
    without an offset is read in ``zone`` (the surface passes Django's current time zone).
    A date alone is refused."""
    if text is None or text == "":
        return None
    if not isinstance(text, str) or len(text) > MAX_DATE_LENGTH:
        raise InvalidRecord(field, f"must be an ISO 8601 date and time, e.g. {_MOMENT_EXAMPLE}")
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidRecord(
            field, f"must be an ISO 8601 date and time, e.g. {_MOMENT_EXAMPLE}"
        ) from None
    if not _HAS_TIME.match(text.strip()):
        raise InvalidRecord(
            field, f"needs a time as well as a date, e.g. {text.strip()}T00:00:00+00:00"
        )
    try:
        if moment.utcoffset() is None:
            moment = _in_zone(moment, zone, field)
        return moment.astimezone(UTC)
    except OverflowError:
        raise InvalidRecord(field, "is out of range") from None


def _in_zone(naive: datetime, zone: tzinfo, field: str) -> datetime:
    """``naive`` read in ``zone``; a time the clocks skip or repeat there is refused, as
    Django's forms refuse it, rather than guessed."""
    early, late = naive.replace(tzinfo=zone, fold=0), naive.replace(tzinfo=zone, fold=1)
    skipped = early.astimezone(UTC).astimezone(zone).replace(tzinfo=None) != naive
    if skipped or early.utcoffset() != late.utcoffset():
        raise InvalidRecord(
            field, f"does not exist or is ambiguous in the time zone {zone}: give an offset"
        )
    return early


def check_window(
    after: datetime | None, before: datetime | None, *, after_field: str, before_field: str
) -> None:
    """A window whose end is not after its start holds no chat: refused, not answered 0."""
    if after is not None and before is not None and after >= before:
        raise InvalidRecord(before_field, f"must be later than {after_field}")
