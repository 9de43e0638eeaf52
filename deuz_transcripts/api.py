"""The end-user JSON search endpoint: a signed-in user searches their own chats.

The scope comes only from ``DEUZ_TRANSCRIPTS["SEARCH_SCOPE"]`` (a callable
``request -> scope``), never from the request's parameters, so no parameter can widen
it. Every answer is JSON: bad parameters are 400 naming the parameter, a search the
database stopped is 503; no parameter can cause a 500 or show a traceback.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import datetime

from django.db import DatabaseError, router
from django.http import HttpRequest, JsonResponse, QueryDict
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from .conf import conf
from .errors import InvalidRecord, ReplicaUnavailable, SearchTimeout, TranscriptError
from .highlight import printable
from .models import Chat
from .records import validate_scope
from .search_input import (
    MAX_QUERY_LENGTH,
    MAX_ROLES,
    check_query,
    check_roles,
    check_window,
    parse_moment,
    split_roles,
)
from .search_json import SNIPPET_WIDTH, answer_json, hit_json
from .sql import DjangoTranscriptIndex
from .sql.scopes import unknown_scope
from .text import ignored_query_terms, query_terms

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
_NUMBER_RE = re.compile(r"[0-9]{1,9}")
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


def parse_parameters(params: QueryDict) -> SearchParameters:
    """The checked parameters (``search_input``'s rules), or ``InvalidRecord`` naming the
    first bad one. ``roles=user&roles=tool`` or ``roles=user,tool``; absent or blank:
    every role."""
    q = check_query(params.get("q", ""), "q")
    around = _number(params, "around", 0, 0, MAX_AROUND)
    limit = _number(params, "limit", DEFAULT_LIMIT, 1, conf.API_MAX_LIMIT)
    roles = check_roles(split_roles(params.getlist("roles")) or None)
    zone = timezone.get_current_timezone()
    after = parse_moment(params.get("updated_after"), "updated_after", zone=zone)
    before = parse_moment(params.get("updated_before"), "updated_before", zone=zone)
    check_window(after, before, after_field="updated_after", before_field="updated_before")
    return SearchParameters(
        q=q,
        around=around,
        limit=limit,
        cursor=params.get("cursor") or None,
        roles=roles,
        updated_after=after,
        updated_before=before,
    )


def _error(status: int, field: str | None, message: str) -> JsonResponse:
    return _private(JsonResponse({"error": {"field": field, "message": message}}, status=status))


def _private(response: JsonResponse) -> JsonResponse:
    """Answers depend on who asks: never stored by a browser or shared cache."""
    response["Cache-Control"] = "private, no-store"
    return response


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
    try:
        scope = scope_of(request)
    except Exception:  # the project's code: its failure is logged, the answer stays JSON
        logger.exception("DEUZ_TRANSCRIPTS['SEARCH_SCOPE'] raised")
        return _error(503, None, "transcript search is not available; try again")
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
    hits = [hit_json(hit, terms, substring) for hit in page.hits]
    answer = answer_json(page, hits, ignored_query_terms(params.q))
    if not page.hits and (notice := _empty_scope_notice(index, scope)):
        answer["notice"] = notice
    return _private(JsonResponse(answer))


def _empty_scope_notice(index: DjangoTranscriptIndex, scope: dict[str, str]) -> str | None:
    """When no chat has the caller's scope, say so: a count of 0 alone reads as "no
    message matches" (the admin and ``search_transcripts`` say it too). Never the scope
    keys other chats have, which the admin lists for staff."""
    try:
        unknown = index.read(lambda alias: unknown_scope(alias, scope))
    except TranscriptError:  # the answer stands without the notice
        logger.warning("the empty-scope check of a transcript search failed", exc_info=True)
        return None
    if unknown is None:
        return None
    shown = ",".join(f"{key}={value}" for key, value in scope.items())
    return f"no chat has your scope ({printable(shown)}) yet: no search can find anything"
