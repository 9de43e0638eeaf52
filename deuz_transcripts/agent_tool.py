"""A ``search_transcripts`` tool for LLM agents (what Letta's ``conversation_search`` gives).

The model chooses only the query and filters; the scope is bound by the caller when it
runs the call, so a model can never search another user's chats. The answer is compact
JSON (the endpoint's shape, ``search_json``) within a character budget, and a bad call
is answered with a JSON error the model can read and correct, never an exception.

Pure Python over any ``BaseTranscriptIndex`` (memory or SQL).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from django.utils import timezone

from .base import BaseTranscriptIndex
from .conf import conf
from .errors import InvalidRecord, ReplicaUnavailable, SearchTimeout
from .highlight import printable
from .paging import SearchPage
from .records import validate_scope
from .search_input import MAX_ROLES, check_query, check_roles, check_window, parse_moment
from .search_json import answer_json, hit_json
from .text import ignored_query_terms

__all__ = [
    "DEFAULT_BUDGET_CHARS",
    "MIN_BUDGET_CHARS",
    "SEARCH_TOOL",
    "TOOL_NAME",
    "anthropic_tool",
    "anthropic_tool_result",
    "arun_search_tool",
    "is_error_answer",
    "openai_responses_tool",
    "openai_tool",
    "run_search_tool",
]

TOOL_NAME = "search_transcripts"
DEFAULT_BUDGET_CHARS = 4_000
#: Below this not even an error with its message fits.
MIN_BUDGET_CHARS = 200
MAX_TOOL_LIMIT = 20
DEFAULT_TOOL_LIMIT = 5
SNIPPET_CHARS = 200
#: Snippets are shortened down to this before hits are dropped a second time.
_MIN_SNIPPET_CHARS = 20

_DESCRIPTION = (
    "Search the user's past conversations by words (full-text, not semantic). Returns the "
    "best matching messages first, each with its chat id, message id, role, the time its "
    "chat was last updated (updated_at), a short snippet and a score from 0 to 1 (1 is the "
    "best hit; a date range filters hits without changing scores, so its best may score "
    'less), plus the total count (with "count_exact": false, more match than it says), '
    "a cursor for the next page, and the query's words past the 32nd, which were not "
    "searched (ignored_terms)."
)
_DATE_HELP = (
    "an ISO 8601 date and time, e.g. 2026-01-31T09:00:00Z (a date alone is refused; "
    "without an offset the server's time zone applies)"
)

#: The tool's input, a JSON schema both the OpenAI and Anthropic tool APIs accept.
SEARCH_TOOL: dict[str, Any] = {
    "name": TOOL_NAME,
    "description": _DESCRIPTION,
    "parameters": {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "Words to look for; a message matching more of them ranks higher.",
            },
            "roles": {
                "type": "array",
                "items": {"type": "string", "enum": ["user", "assistant", "tool"]},
                "maxItems": MAX_ROLES,
                "description": "Only messages of these roles. Leave it out for every role; "
                "an empty list matches no message.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_TOOL_LIMIT,
                "description": f"How many hits to return (default {DEFAULT_TOOL_LIMIT}).",
            },
            "start_date": {
                "type": "string",
                "description": f"Only chats updated after this moment: {_DATE_HELP}.",
            },
            "end_date": {
                "type": "string",
                "description": f"Only chats updated before this moment (later than start_date): "
                f"{_DATE_HELP}.",
            },
            "cursor": {
                "type": "string",
                "description": "The next_cursor of a previous answer, to get its next page.",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    },
}


def _strict_parameters() -> dict[str, Any]:
    """``SEARCH_TOOL``'s schema as OpenAI's strict mode wants it: every property required,
    the optional ones nullable (``null`` is read as "not given")."""
    parameters: dict[str, Any] = copy.deepcopy(SEARCH_TOOL["parameters"])
    optional = set(parameters["properties"]) - set(parameters["required"])
    for name in optional:
        schema = parameters["properties"][name]
        schema["type"] = [schema["type"], "null"]
        if "enum" in schema:
            schema["enum"] = [*schema["enum"], None]
    parameters["required"] = list(parameters["properties"])
    return parameters


def _openai_function(strict: bool) -> dict[str, Any]:
    if not strict:
        return {"parameters": copy.deepcopy(SEARCH_TOOL["parameters"])}
    return {"strict": True, "parameters": _strict_parameters()}


def openai_tool(*, strict: bool = False) -> dict[str, Any]:
    """The tool as OpenAI's Chat Completions API takes it (``tools=[openai_tool()]``);
    ``strict=True``: the ``strict`` schema variant (structured outputs)."""
    return {
        "type": "function",
        "function": {"name": TOOL_NAME, "description": _DESCRIPTION, **_openai_function(strict)},
    }


def openai_responses_tool(*, strict: bool = False) -> dict[str, Any]:
    """The tool as OpenAI's Responses API takes it (a flat function tool); ``strict=True``
    as ``openai_tool``."""
    return {
        "type": "function",
        "name": TOOL_NAME,
        "description": _DESCRIPTION,
        **_openai_function(strict),
    }


def anthropic_tool() -> dict[str, Any]:
    """The tool as Anthropic's Messages API takes it (``tools=[anthropic_tool()]``)."""
    return {
        "name": TOOL_NAME,
        "description": _DESCRIPTION,
        "input_schema": copy.deepcopy(SEARCH_TOOL["parameters"]),
    }


def is_error_answer(answer: str) -> bool:
    """Whether ``run_search_tool``'s answer is a ``{"error": ...}`` (for the API's error flag)."""
    try:
        parsed = json.loads(answer)
    except ValueError:
        return True
    return isinstance(parsed, dict) and "error" in parsed


def anthropic_tool_result(tool_use_id: str, answer: str) -> dict[str, Any]:
    """``run_search_tool``'s answer as the ``tool_result`` block of Anthropic's Messages API,
    with ``is_error`` set when the call was refused."""
    return {
        "type": "tool_result",
        "tool_use_id": tool_use_id,
        "content": answer,
        "is_error": is_error_answer(answer),
    }


class _BadCall(Exception):
    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


def _arguments(raw: str | Mapping[str, Any]) -> dict[str, Any]:
    """The model's arguments checked against ``SEARCH_TOOL`` and ``search_input``'s rules,
    as ``search_page`` keywords."""
    if isinstance(raw, str | bytes):
        try:
            raw = json.loads(raw)
        except (ValueError, RecursionError):
            raise _BadCall("arguments must be a JSON object") from None
    if not isinstance(raw, Mapping):
        raise _BadCall("arguments must be a JSON object")
    known = set(SEARCH_TOOL["parameters"]["properties"])
    unknown = sorted(str(key) for key in raw if key not in known)
    if unknown:
        raise _BadCall(f"unknown arguments: {', '.join(unknown)[:100]}")
    query = check_query(raw.get("query"), "query")
    limit = DEFAULT_TOOL_LIMIT if raw.get("limit") is None else raw["limit"]  # null: strict
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_TOOL_LIMIT:
        raise _BadCall(f"limit must be an integer from 1 to {MAX_TOOL_LIMIT}")
    roles = raw.get("roles")
    if roles is not None and not isinstance(roles, list):
        raise _BadCall('roles must be a list of role names, e.g. ["user", "assistant"]')
    cursor = raw.get("cursor")
    if cursor is not None and not isinstance(cursor, str):
        raise _BadCall("cursor must be the next_cursor string of a previous answer")
    zone = timezone.get_current_timezone()
    after = parse_moment(raw.get("start_date"), "start_date", zone=zone)
    before = parse_moment(raw.get("end_date"), "end_date", zone=zone)
    check_window(after, before, after_field="start_date", before_field="end_date")
    return {
        "query": query,
        "limit": limit,
        "roles": check_roles(roles),  # [] matches no message, as search(roles=[]) does
        "cursor": cursor or None,
        "updated_after": after,
        "updated_before": before,
    }


def _error(message: str, budget: int) -> str:
    text = json.dumps({"error": printable(message)[:150]}, ensure_ascii=False)
    return text if len(text) <= budget else '{"error":"invalid arguments"}'


def _render(
    page: SearchPage, ignored: list[str], count: int, width: int | None, *, cut: bool = False
) -> str:
    """The answer with the page's first ``count`` hits, snippets ``width`` characters long
    (``None``: no hit); ``cut``: ``ignored`` is only the head of the ignored terms."""
    hits = page.hits[:count] if width is not None else []
    shown = [hit_json(hit, [], False, width=width, score_digits=3) for hit in hits if width]
    answer = answer_json(page, shown, ignored)
    if count < len(page.hits) or width is None or cut:
        answer["next_cursor"] = None  # it would skip the hits left out
        answer["truncated"] = True
    return json.dumps(answer, ensure_ascii=False, separators=(",", ":"))


def _widths() -> list[int]:
    """Snippet widths to try, longest first."""
    widths = [SNIPPET_CHARS]
    while widths[-1] > _MIN_SNIPPET_CHARS:
        widths.append(max(_MIN_SNIPPET_CHARS, widths[-1] // 2))
    return widths


def _fit_whole(page: SearchPage, ignored: list[str], budget: int) -> str | None:
    """Every hit of the page (so its cursor stays exact), snippets shortened as needed;
    ``None`` when even the shortest do not fit."""
    for width in _widths():
        text = _render(page, ignored, len(page.hits), width)
        if len(text) <= budget:
            return text
    return None


def _head(terms: list[str], chars: int) -> list[str]:
    """The first of ``terms`` whose JSON takes at most ``chars`` characters."""
    kept: list[str] = []
    for term in terms:
        chars -= len(json.dumps(term, ensure_ascii=False)) + 1
        if chars < 0:
            break
        kept.append(term)
    return kept


def _fit(page: SearchPage, ignored: list[str], budget: int) -> tuple[str, int]:
    """The longest answer within ``budget``: every hit with full snippets if it fits,
    else fewer hits, else shorter snippets; and how many hits it holds."""
    for count in range(len(page.hits), 0, -1):
        text = _render(page, ignored, count, SNIPPET_CHARS)
        if len(text) <= budget:
            return text, count
    for width in _widths()[1:]:
        text = _render(page, ignored, 1, width)
        if len(text) <= budget:
            return text, 1
    # ids (or ignored terms) longer than the budget: the count, and what terms fit
    head = _head(ignored, budget // 2)
    return _render(page, head, 0, None, cut=len(head) < len(ignored)), 0


def _search(
    index: BaseTranscriptIndex, scope: dict[str, str], call: dict[str, Any], limit: int
) -> SearchPage:
    return index.search_page(
        scope,
        call["query"],
        limit=limit,
        cursor=call["cursor"],
        roles=call["roles"],
        updated_after=call["updated_after"],
        updated_before=call["updated_before"],
        total_cap=conf.SEARCH_TOTAL_CAP,
    )


def _bound_scope(scope: Mapping[str, str]) -> dict[str, str]:
    checked = validate_scope(scope)
    if not checked:
        raise InvalidRecord("scope", "must name whose chats the tool searches (not empty)")
    return checked


def run_search_tool(
    index: BaseTranscriptIndex,
    scope: Mapping[str, str],
    arguments: str | Mapping[str, Any],
    *,
    budget_chars: int = DEFAULT_BUDGET_CHARS,
) -> str:
    """Run one ``search_transcripts`` call inside ``scope`` (yours, never the model's).

    ``arguments``: the call's JSON arguments, as the model sent them (text or parsed).
    Returns JSON of at most ``budget_chars`` characters in the endpoint's shape
    (``search_json``: ``count``, ``count_exact``, ``next_cursor``, ``ignored_terms``,
    ``hits`` with ``updated_at``), or ``{"error": ...}`` for a bad call (the same rules as
    every surface: ``search_input``). When the hits do not fit, the last ones are left out
    and snippets shortened: ``next_cursor`` then continues right after the last hit shown,
    or, when not even it fits, the answer says ``"truncated": true`` and the cursor is null.
    An empty or invalid ``scope`` or a budget below ``MIN_BUDGET_CHARS`` is the caller's
    mistake and raises.
    """
    bound = _bound_scope(scope)
    if budget_chars < MIN_BUDGET_CHARS:
        raise ValueError(f"budget_chars must be at least {MIN_BUDGET_CHARS}")
    try:
        call = _arguments(arguments)
        ignored = ignored_query_terms(call["query"])
        page = _search(index, bound, call, call["limit"])
        text, count = _fit(page, ignored, budget_chars)
        if 0 < count < len(page.hits):
            # fewer hits than asked: read that many, so next_cursor continues after them
            # (else the answer without a cursor, "truncated", stands)
            text = _fit_whole(_search(index, bound, call, count), ignored, budget_chars) or text
    except _BadCall as exc:
        return _error(exc.message, budget_chars)
    except InvalidRecord as exc:
        return _error(f"{exc.field}: {exc.problem}", budget_chars)
    except SearchTimeout:
        return _error(
            "the search took too long; use more specific words or a date range", budget_chars
        )
    except ReplicaUnavailable:
        return _error("the transcript search is unavailable for a moment; try again", budget_chars)
    return text


async def arun_search_tool(
    index: BaseTranscriptIndex,
    scope: Mapping[str, str],
    arguments: str | Mapping[str, Any],
    *,
    budget_chars: int = DEFAULT_BUDGET_CHARS,
) -> str:
    """``run_search_tool`` for async agents (SQL indexes search in a worker thread)."""
    return await index._run(run_search_tool, index, scope, arguments, budget_chars=budget_chars)
