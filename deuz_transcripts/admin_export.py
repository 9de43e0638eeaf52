"""The admin's export of a search's hits as CSV or JSON Lines: streamed, capped, logged.

The search page's own form, permission and scope rule decide what may be exported. Hits
are read a page at a time by cursor while the response streams (memory holds one page,
whatever ``EXPORT_MAX_HITS`` allows), and each export is written to the admin log.
"""

from __future__ import annotations

import csv
import json
import logging
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied
from django.db import router
from django.http import HttpRequest, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect
from django.urls import reverse

from .admin_views import can_search, chat_rows, scope_text, typed_search
from .conf import conf
from .errors import InvalidRecord, ReplicaUnavailable, SearchTimeout, TranscriptError
from .forms import TranscriptSearchForm
from .highlight import printable, role_label
from .models import Chat
from .paging import SearchPage
from .records import TranscriptHit
from .sql import DjangoTranscriptIndex
from .text import indexed_text

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

__all__ = ["EXPORT_COLUMNS", "EXPORT_FORMATS", "EXPORT_PAGE_SIZE", "export_view"]

logger = logging.getLogger(__name__)

#: Format name (the URL's suffix) -> the response's content type.
EXPORT_FORMATS = {"csv": "text/csv; charset=utf-8", "jsonl": "application/jsonl; charset=utf-8"}
#: Hits read per query while an export streams.
EXPORT_PAGE_SIZE = 200
EXPORT_COLUMNS = ("chat_id", "message_id", "index", "role", "score", "updated_at", "scope", "text")
#: A spreadsheet runs a cell starting with one of these as a formula.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def export_view(model_admin: ModelAdmin[Chat], request: HttpRequest, kind: str) -> HttpResponseBase:
    """GET with the search page's parameters: its hits, best first, at most
    ``EXPORT_MAX_HITS``, as ``kind`` (``csv`` or ``jsonl``)."""
    if not can_search(request):
        raise PermissionDenied
    form = TranscriptSearchForm(request.GET, user=request.user)
    back = reverse("admin:deuz_transcripts_search") + "?" + urlencode(typed_search(request.GET))
    if not form.is_valid() or not form.terms:  # the search page says what is wrong
        return redirect(back)
    database = router.db_for_read(Chat)
    index = DjangoTranscriptIndex(database)
    size = min(EXPORT_PAGE_SIZE, conf.EXPORT_MAX_HITS)
    try:
        first = _page(index, form, size, cursor=None)
    except (InvalidRecord, SearchTimeout, ReplicaUnavailable) as exc:
        messages.error(request, str(exc))
        return redirect(back)
    cap = conf.EXPORT_MAX_HITS
    _log(request, form, kind, min(first.total, cap) if first.total_exact else None)
    rows = _rows(index, database, form, first, size, cap)
    lines = _csv_lines(rows) if kind == "csv" else _json_lines(rows)
    response = StreamingHttpResponse(lines, content_type=EXPORT_FORMATS[kind])
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    response["Content-Disposition"] = f'attachment; filename="transcripts-{stamp}.{kind}"'
    response["Cache-Control"] = "private, no-store"
    return response


def _page(
    index: DjangoTranscriptIndex, form: TranscriptSearchForm, size: int, cursor: str | None
) -> SearchPage:
    data = form.cleaned_data
    return index.search_page(
        data["scope"],
        data["q"],
        limit=size,
        cursor=cursor,
        roles=form.roles,
        updated_after=data["updated_after"],
        updated_before=data["updated_before"],
        total_cap=conf.SEARCH_TOTAL_CAP,
    )


def _rows(
    index: DjangoTranscriptIndex,
    database: str,
    form: TranscriptSearchForm,
    page: SearchPage,
    size: int,
    cap: int,
) -> Iterator[dict[str, Any]]:
    """The hits from ``page`` on, following cursors, ``cap`` at most; a search failing
    midway ends the export with a row saying so (the status is sent already)."""
    served = 0
    while True:
        chats = chat_rows(database, {hit.chat_id for hit in page.hits})
        for hit in page.hits[: cap - served]:
            served += 1
            yield _row(hit, chats.get(hit.chat_id))
        if served >= cap or page.next_cursor is None:
            return
        try:
            page = _page(index, form, size, cursor=page.next_cursor)
        except TranscriptError as exc:
            logger.warning("transcript export stopped after %d hits: %s", served, exc)
            yield {"error": f"the export stopped after {served} hits: {exc}"}
            return


def _row(hit: TranscriptHit, chat: tuple[int, Any, datetime] | None) -> dict[str, Any]:
    scope = chat[1] if chat is not None and isinstance(chat[1], dict) else None
    updated = chat[2] if chat is not None else None
    return {
        "chat_id": printable(hit.chat_id),
        "message_id": printable(hit.message_id),
        "index": hit.index,
        "role": role_label(hit.message),
        "score": hit.score,
        "updated_at": updated.astimezone(UTC).isoformat() if updated is not None else None,
        "scope": {printable(k): printable(str(v)) for k, v in scope.items()} if scope else scope,
        "text": printable(indexed_text(hit.message) or ""),
    }


def _json_lines(rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    for row in rows:
        yield json.dumps(row, ensure_ascii=False) + "\n"


class _Line:
    """The file ``csv.writer`` writes to: hands back the line it was given."""

    def write(self, line: str) -> str:
        return line


def _cell(value: Any) -> Any:
    """A text cell a spreadsheet would run as a formula gets a leading apostrophe."""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value


def _csv_lines(rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    writer = csv.writer(_Line())
    yield writer.writerow(EXPORT_COLUMNS)
    for row in rows:
        if "error" in row:
            yield writer.writerow(["" for _ in EXPORT_COLUMNS[:-1]] + [_cell(row["error"])])
            continue
        scope = scope_text(row["scope"]) if row["scope"] else ""
        cells = [*(row[name] for name in EXPORT_COLUMNS[:6]), scope, row["text"]]
        yield writer.writerow([_cell("" if value is None else value) for value in cells])


def _log(request: HttpRequest, form: TranscriptSearchForm, kind: str, count: int | None) -> None:
    """One admin log entry per export: who exported which search, as what, how many
    (``None``: more than ``SEARCH_TOTAL_CAP`` match, so up to ``EXPORT_MAX_HITS``)."""
    user_id = request.user.pk
    if user_id is None:  # never: only signed-in staff may search
        return
    data = form.cleaned_data
    said = [f"query {data['q']!r}", f"scope {scope_text(data['scope']) or '(every chat)'}"]
    if form.roles:
        said.append("roles " + ", ".join(form.roles))
    for name in ("updated_after", "updated_before"):
        if data[name] is not None:
            said.append(f"{name.replace('_', ' ')} {data[name].isoformat()}")
    number = f"{count:,}" if count is not None else f"up to {conf.EXPORT_MAX_HITS:,}"
    message = f"Exported {number} hits as {kind.upper()}: " + "; ".join(said)
    LogEntry.objects.db_manager(router.db_for_write(LogEntry)).create(
        user_id=user_id,
        content_type=ContentType.objects.get_for_model(Chat),
        object_id=None,
        object_repr=printable(message)[:200],
        action_flag=CHANGE,
        change_message=printable(message),
    )
