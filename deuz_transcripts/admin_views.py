"""The admin transcript search view (the chat page's message list: ``admin_chat_page``).

It only reads: search goes through ``DjangoTranscriptIndex`` (so it works the
same on every backend) and text is escaped piece by piece before highlighting.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django.core.exceptions import PermissionDenied
from django.db import router
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.formats import number_format
from django.utils.safestring import SafeString
from django.utils.timezone import localtime
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from .conf import conf
from .cursors import MAX_CURSOR_LENGTH
from .errors import InvalidRecord, ReplicaUnavailable, SearchTimeout
from .forms import MAX_SCOPE_LENGTH, TranscriptSearchForm
from .highlight import highlighted_excerpt, highlighted_snippet, printable, role_label
from .models import Chat
from .paging import SearchPage
from .records import TranscriptHit, TranscriptMessage
from .spans import Span, match_spans, snippet_bounds
from .sql import DjangoTranscriptIndex
from .sql.scopes import unknown_scope
from .sql.stored_forms import stored_form_problem
from .text import MAX_QUERY_TERMS, ignored_query_terms, indexed_text

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

__all__ = [
    "MESSAGES_PER_PAGE",
    "SEARCH_PERMISSION",
    "can_search",
    "chat_rows",
    "scope_text",
    "search_view",
    "typed_search",
]

SEARCH_PERMISSION = "deuz_transcripts.search_transcripts"
#: Messages shown per page on a chat's admin page (a hit links to the page holding it).
MESSAGES_PER_PAGE = 200


def can_search(request: HttpRequest) -> bool:
    user = request.user
    return bool(user.is_active and user.is_staff and user.has_perm(SEARCH_PERMISSION))


@dataclass(frozen=True)
class ContextLine:
    """One around message as shown under a hit."""

    index: int
    message_id: str
    role: str
    html: SafeString


@dataclass(frozen=True)
class HitRow:
    """A hit as listed: ``snippet`` is its one-line excerpt with the matches marked;
    ``html`` the longer excerpt (``None`` when the snippet already shows it all); ``scope``
    and ``updated_at`` are its chat's (``None`` if the chat was deleted meanwhile)."""

    hit: TranscriptHit
    role: str
    snippet: SafeString
    html: SafeString | None
    before: list[ContextLine]
    after: list[ContextLine]
    chat_url: str | None
    scope: str | None
    updated_at: datetime | None


#: Spans an excerpt of an ``around`` line needs at most (its one window's worth).
_AROUND_SPANS = 12


def _context_line(item: TranscriptMessage, terms: list[str], substring: bool) -> ContextLine:
    text = indexed_text(item.message) or ""
    spans = match_spans(text, terms, substring=substring, enough=_AROUND_SPANS)
    html = highlighted_excerpt(text, spans, limit=400, windows=1)
    return ContextLine(item.index, item.message_id, role_label(item.message), html)


def chat_rows(database: str, chat_ids: set[str]) -> dict[str, tuple[int, Any, datetime]]:
    """The hits' chats: primary key (for the link), scope and ``updated_at``, one query."""
    rows = Chat.objects.using(database).filter(chat_id__in=chat_ids)
    return {
        chat_id: (pk, scope, updated_at)
        for chat_id, pk, scope, updated_at in rows.values_list(
            "chat_id", "pk", "scope", "updated_at"
        )
    }


def _whole_text(text: str, spans: Sequence[Span]) -> SafeString | None:
    """The bounded excerpt of a hit's text, or ``None`` when its snippet shows it all."""
    start, end = snippet_bounds(text, spans)
    if start == 0 and end == len(text) and "\n" not in text:
        return None
    return highlighted_excerpt(text, spans)


def scope_text(scope: dict[str, str]) -> str:
    """The inverse of ``parse_scope``: ``{"userId": "ada"}`` -> ``"userId=ada"``."""
    return ",".join(f"{key}={value}" for key, value in scope.items())


def _hit_rows(
    database: str,
    hits: list[TranscriptHit],
    terms: list[str],
    substring: bool,
    search: list[tuple[str, str]],
) -> list[HitRow]:
    """``search``: the search's parameters, carried by each chat link so the chat page
    highlights the query and leads back to these results."""
    chats = chat_rows(database, {hit.chat_id for hit in hits})
    # The link names the scope searched: search-only staff may open a chat only
    # within a scope they name (see ChatAdmin.has_view_permission).
    rows = []
    for hit in hits:
        pk, scope, updated_at = chats.get(hit.chat_id, (None, None, None))
        url = None
        if pk is not None:
            page = hit.index // MESSAGES_PER_PAGE + 1
            params = [*search, *([("messages", str(page))] if page > 1 else [])]
            url = reverse("admin:deuz_transcripts_chat_change", args=[pk])
            url += (f"?{urlencode(params)}" if params else "") + f"#message-{hit.index}"
        around = hit.around or []
        text = indexed_text(hit.message) or ""
        rows.append(
            HitRow(
                hit=hit,
                role=role_label(hit.message),
                snippet=highlighted_snippet(text, hit.spans),
                html=_whole_text(text, hit.spans),
                before=[_context_line(m, terms, substring) for m in around if m.index < hit.index],
                after=[_context_line(m, terms, substring) for m in around if m.index > hit.index],
                chat_url=url,
                scope=printable(scope_text(scope)) if isinstance(scope, dict) else None,
                updated_at=updated_at,
            )
        )
    return rows


#: The search's parameters as a URL carries them (``messages`` is the chat page's own),
#: with the longest value each may validly have.
SEARCH_PARAMETERS = {
    "q": MAX_SCOPE_LENGTH,
    "scope": MAX_SCOPE_LENGTH,
    "role": MAX_SCOPE_LENGTH,
    "other_roles": MAX_SCOPE_LENGTH,
    "updated_after": MAX_SCOPE_LENGTH,
    "updated_before": MAX_SCOPE_LENGTH,
    "around": MAX_SCOPE_LENGTH,
    "page": MAX_SCOPE_LENGTH,
    "cursor": MAX_CURSOR_LENGTH,
}
#: More ``role`` values than there are checkboxes is never a valid search.
_MAX_ROLE_VALUES = 10


def typed_search(
    data: Any, *, page: int | None = None, cursor: str | None = None
) -> list[tuple[str, str]]:
    """The search's non-empty parameters as typed (a bad ``around`` stays bad, each value
    cut to its longest valid length), with ``page`` (kept only above 1) and ``cursor``
    replaced when ``page`` is given."""
    pairs: list[tuple[str, str]] = []
    for key, longest in SEARCH_PARAMETERS.items():
        if key in ("page", "cursor") and page is not None:
            continue
        values = data.getlist(key)[:_MAX_ROLE_VALUES] if hasattr(data, "getlist") else []
        pairs.extend((key, value[:longest]) for value in values if value)
    if page is not None:
        if page > 1:
            pairs.append(("page", str(page)))
        if cursor:
            pairs.append(("cursor", cursor))
    return pairs


def _page_url(
    request: HttpRequest, form: TranscriptSearchForm, page: int, cursor: str | None = None
) -> str:
    """This search's page ``page``: the hits after ``cursor`` when given, else by offset."""
    return f"{request.path}?{urlencode(typed_search(form.data, page=page, cursor=cursor))}"


def search_view(model_admin: ModelAdmin[Chat], request: HttpRequest) -> HttpResponse:
    """GET ``q``, ``scope``, ``role``, ``other_roles``, ``updated_after``,
    ``updated_before``, ``around``, ``page``, ``cursor``; staff with the search permission
    only."""
    if not can_search(request):
        raise PermissionDenied
    database = router.db_for_read(Chat)
    index = DjangoTranscriptIndex(database)
    backend = index.backend
    # Without ``q`` the form is only being opened (maybe with a scope filled in by a link).
    submitted = "q" in request.GET
    initial = {"scope": request.GET.get("scope", "")[:200], "around": 0}
    form = TranscriptSearchForm(
        request.GET if submitted else None, initial=initial, user=request.user
    )
    context: dict[str, Any] = {
        **model_admin.admin_site.each_context(request),
        "title": _("Search transcripts"),
        "opts": model_admin.model._meta,
        "form": form,
        "backend_name": backend.name,
        "substring_matching": backend.substring_matching,
        "submitted": submitted,
        "main_fields": [form[name] for name in MAIN_FIELDS],
        "filter_fields": [form[name] for name in FILTER_FIELDS],
        "active_filters": len(_filters_text(form)) if submitted and form.is_valid() else 0,
        "rows": [],
        "notice": "",
        "stale_form": _stale_form_notice(database),
    }
    if submitted and form.is_valid():
        context.update(_search(request, form, index, database, backend.substring_matching))
    elif submitted and ("page" in form.errors or "cursor" in form.errors):
        # ``page`` and ``cursor`` are hidden: say what is wrong and lead to the first page
        context["page_errors"] = [*form.errors.get("page", []), *form.errors.get("cursor", [])]
        context["first_url"] = _page_url(request, form, 1)
    request.current_app = model_admin.admin_site.name
    return TemplateResponse(request, "admin/deuz_transcripts/search.html", context)


def _stale_form_notice(database: str) -> str:
    """Check W004 where the operator looks: the index is in another stored form than the
    settings write, so searches miss words until a backfill."""
    problem = stored_form_problem(database)
    if problem is None:
        return ""
    return _(
        "The search index is out of date: %(problem)s. Run manage.py backfill_transcripts "
        "to re-index it (system check deuz_transcripts.W004)."
    ) % {"problem": problem}


def _search(
    request: HttpRequest,
    form: TranscriptSearchForm,
    index: DjangoTranscriptIndex,
    database: str,
    substring: bool,
) -> dict[str, Any]:
    data = form.cleaned_data
    if not (data["q"] or "").strip():
        return {"notice": _("Enter a query to search the transcripts.")}
    terms = form.terms
    if not terms:
        return {"notice": _("The query has no words to search for (letters or digits).")}
    size = conf.ADMIN_PAGE_SIZE
    page, cursor = data["page"], data["cursor"]
    banner = _("Every scope is searched: these hits come from every user's chats.")
    try:
        found = index.search_page(
            data["scope"],
            data["q"],
            around=data["around"] or None,
            limit=size,
            offset=0 if cursor else (page - 1) * size,
            cursor=cursor,
            roles=form.roles,
            updated_after=data["updated_after"],
            updated_before=data["updated_before"],
            total_cap=conf.SEARCH_TOTAL_CAP,
        )
    except InvalidRecord as exc:
        if exc.field == "cursor":  # a cursor of another search, or damaged
            return {
                "page_errors": [_("This page link is not one of this search's: start again.")],
                "first_url": _page_url(request, form, 1),
            }
        form.add_error(None, str(exc))
        return {}
    except (SearchTimeout, ReplicaUnavailable) as exc:
        form.add_error(None, str(exc))
        return {}
    hits = found.hits
    pages = -(-found.total // size)  # at least this many pages hold hits
    result: dict[str, Any] = {
        "rows": _hit_rows(
            database, hits, terms, substring, typed_search(form.data, page=page, cursor=cursor)
        ),
        "page": page,
        "total": found.total,
        "total_text": _total_text(found),
        "all_scopes_banner": banner if not data["scope"] else "",
        "first_number": (page - 1) * size + 1,
        "last_number": (page - 1) * size + len(hits),
        "page_count": pages,
        "page_count_exact": found.total_exact,
        # back by offset (a cursor only leads forward); forward by the page's cursor, so
        # no hit is shown twice or skipped while chats are written (docs/guarantees.md)
        "previous_url": _page_url(request, form, page - 1) if hits and page > 1 else None,
        "next_url": _page_url(request, form, page + 1, found.next_cursor)
        if found.has_next
        else None,
        "export_query": urlencode(typed_search(form.data, page=1)) if hits else "",
        "export_cap": conf.EXPORT_MAX_HITS,
        "terms": terms,
        "ignored_notice": ignored_notice(data["q"]),
    }
    if not hits and page > 1:  # past the last page: no pager, the first and last pages
        result["first_url"] = _page_url(request, form, 1)
        result["last_url"] = _page_url(request, form, pages) if pages > 1 else None
        result["notice"] = _("No more hits: this page is past the last one.")
    elif not hits:
        result["notice"] = _scope_notice(index, data["scope"]) or _no_match_notice(form)
    return result


def ignored_notice(query: str) -> str:
    """Which of the query's words were not searched (past the 32nd); "" when none."""
    ignored = ignored_query_terms(query)
    if not ignored:
        return ""
    return _(
        "Only the first %(limit)d words of the query are searched; these were ignored: %(words)s."
    ) % {"limit": MAX_QUERY_TERMS, "words": ", ".join(ignored)}


#: The form's fields always shown; the others fold away on a phone once hits are shown.
MAIN_FIELDS = ("q", "scope")
FILTER_FIELDS = ("role", "other_roles", "updated_after", "updated_before", "around")


def _moment_text(moment: datetime) -> str:
    return localtime(moment).strftime("%Y-%m-%d %H:%M %Z")


def _filters_text(form: TranscriptSearchForm) -> list[str]:
    """The valid form's active filters as a person reads them."""
    data = form.cleaned_data
    active = []
    if form.roles:
        active.append(_("roles %(roles)s") % {"roles": ", ".join(form.roles)})
    if data.get("updated_after"):
        active.append(_("updated after %(t)s") % {"t": _moment_text(data["updated_after"])})
    if data.get("updated_before"):
        active.append(_("updated before %(t)s") % {"t": _moment_text(data["updated_before"])})
    return active


def _no_match_notice(form: TranscriptSearchForm) -> str:
    """A search without hits names the filters that narrowed it, if any."""
    active = _filters_text(form)
    if not active:
        return _("No message matches this query in this scope.")
    return _(
        "No message matches this query in this scope with these filters: %(filters)s. "
        "Clear a filter to widen the search."
    ) % {"filters": "; ".join(active)}


def _total_text(found: SearchPage) -> str:
    count = number_format(found.total, force_grouping=True)
    if not found.total_exact:  # more than SEARCH_TOTAL_CAP: not counted past it
        return _("More than %(count)s messages match this search.") % {"count": count}
    return ngettext(
        "%(count)s message matches this search.",
        "%(count)s messages match this search.",
        found.total,
    ) % {"count": count}


def _scope_notice(index: DjangoTranscriptIndex, scope: dict[str, str]) -> str:
    """When no chat has the scope searched (a mistyped key or value): say so, with the
    scope keys that exist; "" when some chat has it. Read where the search read."""
    unknown = index.read(lambda alias: unknown_scope(alias, scope))
    if unknown is None:
        return ""
    notice = _("No chat has the scope %(scope)s. Scope keys that exist: %(keys)s.") % {
        "scope": scope_text(scope),
        "keys": ", ".join(unknown.keys) + (", …" if unknown.more_keys else "")
        if unknown.keys
        else _("none (no chat has a scope field)"),
    }
    if unknown.unknown_keys:
        notice += " " + _("No chat has the key %(keys)s.") % {
            "keys": ", ".join(unknown.unknown_keys)
        }
    if unknown.joined_fields:
        notice += " " + _("Separate scope fields with commas, e.g. userId=ada,agentId=x.")
    return notice
