"""The end-user JSON search endpoint: a signed-in user searches their own chats.

The scope comes only from ``DEUZ_TRANSCRIPTS["SEARCH_SCOPE"]`` (a callable
``request -> scope``), never from the request's parameters, so no parameter can widen
it. Every answer is JSON: bad parameters are 400 naming the parameter, a search the
database stopped is 503; no parameter can cause a 500 or show a traceback.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import DatabaseError, router
from django.http import HttpRequest, JsonResponse, QueryDict
from django.views.decorators.csrf import csrf_exempt

from .conf import conf
from .errors import InvalidRecord, ReplicaUnavailable, SearchTimeout, TranscriptError
from .highlight import printable
from .models import Chat
from .records import TranscriptHit, TranscriptMessage, validate_scope
from .search_request import aware_datetime_from_text
from .spans import Span, match_spans, snippet_with_spans
from .sql import DjangoTranscriptIndex
from .text import indexed_text, query_terms

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_AROUND",
    "MAX_QUERY_LENGTH",
    "MAX_ROLES",
    "SNIPPET_WIDTH",
    "SearchParameters",
    "parse_parameters",
    "search_api",
]

logger = logging.getLogger(__name__)

DEFAULT_LIMIT = 20
#: At most this many messages before and after each hit.
MAX_AROUND = 10
MAX_QUERY_LENGTH = 1_000
MAX_ROLES = 20
SNIPPET_WIDTH = 160
#: Spans an around message's snippet needs at most.
_AROUND_SPANS = 12
_NUMBER_RE = re.compile(r"[0-9]{1,9}")
_MAX_DATE_LENGTH = 64
#: Parameter names as the endpoint takes them, for errors the index raises.
_FIELD_NAMES = {"query": "q"}


@dataclass(frozen=True)
class SearchParameters:
    """The endpoint's GET parameters, checked; the scope is never among them."""

    q: str
    around: int
    limit: int
    cursor: str | None
    roles: list[str] | None
    updated_after: datetime | None
    updated_before: datetime | None


def _number(params: QueryDict, name: str, default: int, low: int, high: int) -> int:
    raw = params.get(name)
    if raw is None or raw == "":
        return default
    if not _NUMBER_RE.fullmatch(raw) or not low <= int(raw) <= high:
        raise InvalidRecord(name, f"must be an integer from {low} to {high}")
    return int(raw)


def _date(params: QueryDict, name: str) -> datetime | None:
    raw = params.get(name)
    if raw is None or raw == "":
        return None
    value = aware_datetime_from_text(raw, _MAX_DATE_LENGTH)
    if value is None:
        raise InvalidRecord(
            name, "must be an ISO 8601 date-time with an offset, e.g. 2026-01-31T09:00:00+00:00"
        )
    return value


def _roles(params: QueryDict) -> list[str] | None:
    """``roles=user&roles=tool`` or ``roles=user,tool``; absent or blank: every role."""
    roles = [
        role.strip()
        for value in params.getlist("roles")
        for role in value.split(",")
        if role.strip()
    ]
    if len(roles) > MAX_ROLES:
        raise InvalidRecord("roles", f"names more than {MAX_ROLES} roles")
    return roles or None


def parse_parameters(params: QueryDict) -> SearchParameters:
    """The checked parameters, or ``InvalidRecord`` naming the first bad one."""
    q = params.get("q")
    if q is None or not q.strip():
        raise InvalidRecord("q", "is required")
    if len(q) > MAX_QUERY_LENGTH:
        raise InvalidRecord("q", f"is longer than {MAX_QUERY_LENGTH} characters")
    return SearchParameters(
        q=q,
        around=_number(params, "around", 0, 0, MAX_AROUND),
        limit=_number(params, "limit", DEFAULT_LIMIT, 1, conf.API_MAX_LIMIT),
        cursor=params.get("cursor") or None,
        roles=_roles(params),
        updated_after=_date(params, "updated_after"),
        updated_before=_date(params, "updated_before"),
    )


def _error(status: int, field: str | None, message: str) -> JsonResponse:
    return _private(JsonResponse({"error": {"field": field, "message": message}}, status=status))


def _private(response: JsonResponse) -> JsonResponse:
    """Answers depend on who asks: never stored by a browser or shared cache."""
    response["Cache-Control"] = "private, no-store"
    return response


def _role(message: Mapping[str, Any]) -> str:
    role = message.get("role")
    return printable(role) if isinstance(role, str) else ""


def _spans_json(spans: tuple[Span, ...]) -> list[list[int]]:
    return [[start, end] for start, end in spans]


def _around_json(item: TranscriptMessage, terms: list[str], substring: bool) -> dict[str, Any]:
    text = indexed_text(item.message) or ""
    spans = match_spans(text, terms, substring=substring, enough=_AROUND_SPANS)
    shown, inside = snippet_with_spans(text, spans, width=SNIPPET_WIDTH)
    return {
        "message_id": item.message_id,
        "index": item.index,
        "role": _role(item.message),
        "snippet": shown,
        "spans": _spans_json(inside),
    }


def hit_json(hit: TranscriptHit, terms: list[str], substring: bool) -> dict[str, Any]:
    """A hit as the endpoint answers it; ``spans`` are offsets into ``snippet``."""
    shown, inside = snippet_with_spans(
        indexed_text(hit.message) or "", hit.spans, width=SNIPPET_WIDTH
    )
    return {
        "chat_id": hit.chat_id,
        "message_id": hit.message_id,
        "index": hit.index,
        "role": _role(hit.message),
        "score": hit.score,
        "snippet": shown,
        "spans": _spans_json(inside),
        "around": [_around_json(item, terms, substring) for item in hit.around or ()],
    }


def _request_scope(request: HttpRequest) -> dict[str, str] | JsonResponse:
    """The scope the configured callable gives, or the response refusing the request.

    Who asks is read from the database (the session, the user, whatever the scope callable
    reads): while the database is down or restarting that is a 503, as a stopped search
    is, never a 500."""
    try:
        return _signed_in_scope(request)
    except DatabaseError:
        logger.warning("transcript search: the database could not say who asks", exc_info=True)
        return _error(503, None, "transcript search is unavailable; try again")


def _signed_in_scope(request: HttpRequest) -> dict[str, str] | JsonResponse:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return _error(403, None, "sign in to search your transcripts")
    scope_of = conf.SEARCH_SCOPE
    if scope_of is None:
        logger.error("DEUZ_TRANSCRIPTS['SEARCH_SCOPE'] is not set or cannot be imported")
        return _error(503, None, "transcript search is not configured")
    scope = scope_of(request)
    if scope is None:
        return _error(403, None, "you may not search transcripts")
    try:
        checked = validate_scope(scope)
    except InvalidRecord as exc:
        logger.error("DEUZ_TRANSCRIPTS['SEARCH_SCOPE'] returned an invalid scope: %s", exc)
        return _error(503, None, "transcript search is not configured")
    if not checked:  # an empty scope would search every chat: refuse, never widen
        return _error(403, None, "you may not search transcripts")
    return checked


@csrf_exempt  # it only reads: a POST gets the JSON 405, not Django's HTML CSRF page
def search_api(request: HttpRequest) -> JsonResponse:
    """GET ``q``, ``around``, ``limit``, ``cursor``, ``roles``, ``updated_after``,
    ``updated_before``: the signed-in user's hits, best first, with the count (exact up
    to ``SEARCH_TOTAL_CAP``; past it the cap, and ``count_exact`` false)."""
    if request.method != "GET":
        response = _error(405, None, "only GET is allowed")
        response["Allow"] = "GET"
        return response
    scope = _request_scope(request)
    if isinstance(scope, JsonResponse):
        return scope
    index = DjangoTranscriptIndex(router.db_for_read(Chat))
    try:
        params = parse_parameters(request.GET)
        page = index.search_page(
            scope,
            params.q,
            around=params.around or None,
            limit=params.limit,
            cursor=params.cursor,
            roles=params.roles,
            updated_after=params.updated_after,
            updated_before=params.updated_before,
            total_cap=conf.SEARCH_TOTAL_CAP,
        )
    except InvalidRecord as exc:
        return _error(400, _FIELD_NAMES.get(exc.field, exc.field), exc.problem)
    except (SearchTimeout, ReplicaUnavailable) as exc:
        return _error(503, None, str(exc))
    except TranscriptError:
        logger.exception("transcript search failed")
        return _error(503, None, "transcript search failed; try again")
    terms = query_terms(params.q)
    substring = index.backend.substring_matching
    return _private(
        JsonResponse(
            {
                "count": page.total,
                "count_exact": page.total_exact,
                "next_cursor": page.next_cursor,
                "hits": [hit_json(hit, terms, substring) for hit in page.hits],
            }
        )
    )
