"""Admin for chats (read-only, deleted through the store) and tombstones, plus the search view.

Chat content is never added or edited here: the stores own it. Deleting a chat
calls ``DjangoConditionalChatStore.delete_chat`` so a tombstone is left and no
search row survives, which a plain row delete would not guarantee.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast

from django.contrib import admin, messages
from django.core.exceptions import FieldDoesNotExist, PermissionDenied
from django.db import router
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, re_path
from django.utils.text import format_lazy
from django.utils.timezone import localtime
from django.utils.translation import gettext_lazy as _

from .admin_chat_page import MESSAGES_PER_PAGE, message_page, search_context
from .admin_export import EXPORT_FORMATS, export_view
from .admin_views import can_search, search_view
from .errors import ReplicaUnavailable, SearchTimeout
from .forms import parse_scope
from .models import Chat, Tombstone, TranscriptSearch
from .records import scope_matches
from .sql import DjangoTranscriptIndex
from .stores import DjangoConditionalChatStore

__all__ = [
    "CHANGELIST_SEARCH_CAP",
    "ChatAdmin",
    "TombstoneAdmin",
    "TranscriptSearchAdmin",
    "scope_named_in",
]


def scope_named_in(request: HttpRequest, chat: Chat) -> bool:
    """Whether the request's ``?scope=`` is non-empty, well formed and the chat's."""
    try:
        scope = parse_scope(request.GET.get("scope", ""))
    except ValueError:
        return False
    return bool(scope) and scope_matches(chat.scope, scope)


if TYPE_CHECKING:
    _ChatModelAdmin = admin.ModelAdmin[Chat]
    _TombstoneModelAdmin = admin.ModelAdmin[Tombstone]
    _SearchModelAdmin = admin.ModelAdmin[TranscriptSearch]
else:  # ModelAdmin is generic in django-stubs only: it cannot be subscripted at runtime
    _ChatModelAdmin = _TombstoneModelAdmin = _SearchModelAdmin = admin.ModelAdmin

#: The changelist's search box shows the chats of at most this many best hits.
CHANGELIST_SEARCH_CAP = 500


class SourceFilter(admin.SimpleListFilter):
    """Chats a store wrote (revision > 0) versus chats only indexed (e.g. by a backfill)."""

    title = _("source")
    parameter_name = "source"

    def lookups(
        self, request: HttpRequest, model_admin: admin.ModelAdmin[Chat]
    ) -> list[tuple[str, Any]]:
        return [("stored", _("written by a store")), ("indexed", _("indexed only"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Chat]) -> QuerySet[Chat]:
        if self.value() == "stored":
            return queryset.filter(revision__gt=0)
        if self.value() == "indexed":
            return queryset.filter(revision=0)
        return queryset


@admin.register(Chat)
class ChatAdmin(_ChatModelAdmin):
    # Narrow columns (counts in one, a short date), so the list fits a 1280 px window
    # beside the admin's sidebar and the filters.
    list_display = [
        "chat_id",
        "scope_display",
        "messages_display",
        "revision",
        "updated_display",
        "is_indexed",
    ]
    list_filter = [SourceFilter, "is_indexed"]
    search_fields = ["chat_id"]  # shows the box; get_search_results does the work
    search_help_text = format_lazy(
        _(
            "An exact chat id, or (superusers) words of the messages: the chats of the best {cap} hits."
        ),
        cap=CHANGELIST_SEARCH_CAP,
    )
    ordering = ["-updated_at", "chat_id"]
    fields = [
        "chat_id",
        "scope_display",
        "revision",
        "updated_at",
        "is_indexed",
        "message_count",
        "indexed_count",
    ]
    # ``fields`` is typed as fieldset groups; the list above holds plain names only.
    readonly_fields = cast("list[str]", fields)

    @admin.display(description=_("scope"))
    def scope_display(self, chat: Chat) -> str:
        return ", ".join(f"{key}={value}" for key, value in sorted(chat.scope.items())) or "—"

    @admin.display(description=_("messages (indexed)"), ordering="message_count")
    def messages_display(self, chat: Chat) -> str:
        return f"{chat.message_count} ({chat.indexed_count})"

    @admin.display(description=_("updated at"), ordering="updated_at")
    def updated_display(self, chat: Chat) -> str:
        """``2024-06-01 12:00`` in the current time zone: a third of Django's long form."""
        return localtime(chat.updated_at).strftime("%Y-%m-%d %H:%M")

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest) -> bool:
        """Only the list filters' own parameters: Django lets the query string filter on
        any field (``?scope=``, ``?chat_id__regex=``), which sent NUL in JSON or a broken
        regular expression to the database (a 500); anything else is a 400."""
        return lookup in {SourceFilter.parameter_name, "is_indexed__exact", "is_indexed__isnull"}

    # permissions: read-only, the search permission can read

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Chat | None = None) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: Chat | None = None) -> bool:
        """Staff who may search may open a chat a hit links to, within the scope searched.

        The hit's link carries ``?scope=``; without a non-empty scope that the chat
        matches, search-only staff get 403 (else any chat could be read by its pk,
        around the superuser-only rule for scope-less search).
        """
        if super().has_view_permission(request, obj):
            return True
        if not can_search(request):
            return False
        return obj is None or scope_named_in(request, obj)

    def may_browse(self, request: HttpRequest) -> bool:
        """Listing chats needs Django's own view permission (or superuser).

        Without it a chat's scope is shown only to someone who already named it (a
        search's scope, a hit's link): search-only staff would otherwise read all
        users' chats from the changelist, or one chat's scope by typing its id.
        """
        return super().has_view_permission(request) or super().has_change_permission(request)

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """Search-only staff are sent to the transcript search, the page they can use (an
        action's POST too: the list would show the number of every user's chats)."""
        if not self.may_browse(request) and can_search(request):
            return redirect("admin:deuz_transcripts_search")
        return super().changelist_view(request, extra_context)

    # the search view

    def get_urls(self) -> list[URLPattern]:
        search = path(
            "search/",
            self.admin_site.admin_view(self.transcript_search_view),
            name="deuz_transcripts_search",
        )
        export = re_path(
            rf"^search/export\.(?P<kind>{'|'.join(EXPORT_FORMATS)})$",
            self.admin_site.admin_view(self.transcript_export_view),
            name="deuz_transcripts_export",
        )
        return [search, export, *super().get_urls()]

    def transcript_search_view(self, request: HttpRequest) -> HttpResponse:
        return search_view(self, request)

    def transcript_export_view(self, request: HttpRequest, kind: str) -> HttpResponseBase:
        return export_view(self, request, kind)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Chat], search_term: str
    ) -> tuple[QuerySet[Chat], bool]:
        """An exact chat id, or (superusers) the chats of the index's best hits; no LIKE scans.

        Nothing at all for staff who may not browse, not even an exact id's row.
        """
        term = search_term.replace("\x00", "").strip()
        if not self.may_browse(request):
            return queryset.none(), False
        if not term:
            return queryset, False
        match = Q(chat_id=term[:255])
        if request.user.is_superuser:
            index = DjangoTranscriptIndex(router.db_for_read(Chat))
            try:
                hits = index.search({}, term, limit=CHANGELIST_SEARCH_CAP)
            except (SearchTimeout, ReplicaUnavailable) as exc:
                messages.warning(request, f"{exc}; only an exact chat id is matched.")
                hits = []
            match |= Q(chat_id__in={hit.chat_id for hit in hits})
        return queryset.filter(match), False

    # the read-only detail page

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        """Search-only staff refused a chat they asked to read get a 403 page saying why
        and what to do (a refused POST stays Django's bare 403)."""
        try:
            return super().change_view(request, object_id, form_url, extra_context)
        except PermissionDenied:
            if request.method not in ("GET", "HEAD") or not can_search(request):
                raise
            return self._scope_refusal(request)

    def _scope_refusal(self, request: HttpRequest) -> HttpResponse:
        """Names the scope the link gave (never the chat's own) and leads to the search."""
        named = request.GET.get("scope", "")[:200]
        try:
            well_formed = bool(parse_scope(named))
        except ValueError:
            well_formed = False
        context = {
            **self.admin_site.each_context(request),
            "title": _("This chat is not shown to you"),
            "opts": self.opts,
            "named_scope": named if well_formed else "",
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(
            request, "admin/deuz_transcripts/chat/scope_refused.html", context, status=403
        )

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> Chat | None:
        """An empty ``?_to_field=`` means the primary key, as a missing one does (Django
        looked up a field named ``''`` and answered 500)."""
        return super().get_object(request, object_id, from_field or None)

    def to_field_allowed(self, request: HttpRequest, to_field: str) -> bool:
        """A reverse relation (``?_to_field=messages``) is refused, so Django answers 400:
        its own check reads ``primary_key`` of the relation and failed with a 500."""
        try:
            field = self.opts.get_field(to_field)
        except FieldDoesNotExist:
            return False
        return bool(getattr(field, "concrete", False)) and super().to_field_allowed(
            request, to_field
        )

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Chat | None = None,
    ) -> HttpResponse:
        if obj is not None:
            search = search_context(request)
            database = obj._state.db or router.db_for_read(Chat)
            page, rows = message_page(request, obj, database, search["search_terms"])
            context.update(
                search,
                message_rows=rows,
                message_page=page,
                messages_per_page=MESSAGES_PER_PAGE,
                scope_query=",".join(f"{k}={v}" for k, v in sorted(obj.scope.items())),
            )
        return super().render_change_form(request, context, add, change, form_url, obj)

    # deletion goes through the store

    def _store(self, chat: Chat | None = None) -> DjangoConditionalChatStore:
        return DjangoConditionalChatStore(router.db_for_write(Chat, instance=chat))

    def delete_model(self, request: HttpRequest, obj: Chat) -> None:
        self._store(obj).delete_chat(obj.chat_id)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Chat]) -> None:
        self._store().delete_chats(list(queryset.values_list("chat_id", flat=True)))

    def get_deleted_objects(
        self, objs: Iterable[Chat], request: HttpRequest
    ) -> tuple[list[str], dict[str, int], set[str], list[str]]:
        """Summarise instead of listing every message row of every chat."""
        chats = list(objs)
        messages = sum(chat.message_count for chat in chats)
        listed = [
            _("%(chat)s (%(n)d messages; a tombstone is kept)")
            % {"chat": chat.chat_id, "n": chat.message_count}
            for chat in chats
        ]
        counts = {str(Chat._meta.verbose_name_plural): len(chats), str(_("messages")): messages}
        return listed, counts, set(), []


@admin.register(Tombstone)
class TombstoneAdmin(_TombstoneModelAdmin):
    """Deleted chat ids: read-only, since removing one would let the chat be written again."""

    list_display = ["chat_id", "deleted_at"]
    search_fields = ["=chat_id"]
    ordering = ["-deleted_at"]
    readonly_fields = ["chat_id", "deleted_at"]

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest) -> bool:
        """No filter from the query string (see ``ChatAdmin.lookup_allowed``)."""
        return False

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> Tombstone | None:
        """An empty ``?_to_field=`` means the primary key (see ``ChatAdmin.get_object``)."""
        return super().get_object(request, object_id, from_field or None)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Tombstone | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Tombstone | None = None) -> bool:
        return False


@admin.register(TranscriptSearch)
class TranscriptSearchAdmin(_SearchModelAdmin):
    """The *Search transcripts* entry of the admin home and sidebar: its only page sends
    to the search view, for whoever may search."""

    def get_urls(self) -> list[URLPattern]:
        info = self.opts.app_label, self.opts.model_name
        entry = self.admin_site.admin_view(self.entry_view)
        return [path("", entry, name="{}_{}_changelist".format(*info))]

    def entry_view(self, request: HttpRequest) -> HttpResponse:
        if not can_search(request):
            raise PermissionDenied
        return redirect("admin:deuz_transcripts_search")

    def has_view_permission(
        self, request: HttpRequest, obj: TranscriptSearch | None = None
    ) -> bool:
        return obj is None and can_search(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(
        self, request: HttpRequest, obj: TranscriptSearch | None = None
    ) -> bool:
        return False

    def has_delete_permission(
        self, request: HttpRequest, obj: TranscriptSearch | None = None
    ) -> bool:
        return False
