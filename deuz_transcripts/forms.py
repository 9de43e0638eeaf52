"""The admin search form: every parameter is validated here, so bad input is a form error."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from django import forms
from django.utils import timezone
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from .cursors import MAX_CURSOR_LENGTH
from .errors import InvalidRecord
from .records import MAX_ID_LENGTH
from .search_input import (
    MAX_QUERY_LENGTH,
    check_roles,
    check_window,
    parse_moment,
    split_roles,
)
from .text import query_terms

if TYPE_CHECKING:
    from django.contrib.auth.base_user import AbstractBaseUser
    from django.contrib.auth.models import AnonymousUser

__all__ = [
    "MAX_AROUND",
    "MAX_PAGE",
    "MAX_QUERY_LENGTH",
    "MAX_SCOPE_LENGTH",
    "ROLE_CHOICES",
    "TranscriptSearchForm",
    "parse_roles",
    "parse_scope",
]

MAX_AROUND = 10
#: Deep pages are refused: nobody reads page 10,001, and the offset stays cheap.
MAX_PAGE = 10_000
MAX_SCOPE_LENGTH = 4_000
#: The roles offered as checkboxes (system messages are never indexed); any other role
#: is typed into "other roles" (``search_input.MAX_ROLES`` in all).
ROLE_CHOICES = [("user", _("user")), ("assistant", _("assistant")), ("tool", _("tool"))]
_PAGE_RANGE = format_lazy(
    _("The page must be a whole number from 1 to {max}."), max=f"{MAX_PAGE:,}"
)


def parse_scope(text: str) -> dict[str, str]:
    """``"userId=ada,agentId=x"`` -> ``{"userId": "ada", "agentId": "x"}``; ``ValueError`` if malformed.

    Pairs are separated by commas, key and value by the first ``=``; spaces around
    keys and values are dropped. A value cannot hold a comma. Empty input is ``{}``.
    """
    scope: dict[str, str] = {}
    if not text.strip():
        return scope
    for pair in text.split(","):
        if not pair.strip():
            raise ValueError(_("Remove the empty pair (two commas in a row, or a trailing comma)."))
        key, sep, value = pair.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            raise ValueError(_("Write each scope field as key=value, e.g. userId=ada."))
        if key in scope:
            raise ValueError(_("The scope key %(key)s is given twice.") % {"key": key})
        if len(key) > MAX_ID_LENGTH or len(value) > MAX_ID_LENGTH:
            raise ValueError(
                _("Scope keys and values are at most %(n)d characters.") % {"n": MAX_ID_LENGTH}
            )
        scope[key] = value
    return scope


def parse_roles(text: str) -> list[str]:
    """``"function, tool"`` -> ``["function", "tool"]``; ``ValueError`` when a role breaks
    ``search_input.check_roles``'s rule (too long, control or invisible characters, no
    stored role printed by an admin should hide or move text; a system role; too many)."""
    try:
        return check_roles(split_roles([text])) or []
    except InvalidRecord as exc:
        raise ValueError(_sentence(exc.problem)) from None


def _sentence(problem: str) -> str:
    """A validator's problem (``"needs a time ..."``) as a form error's sentence."""
    return problem[:1].upper() + problem[1:] + "."


class _MomentField(forms.Field):
    """A date and time by ``search_input.parse_moment``, the rule of every surface: a
    time without an offset is read in the admin's current time zone; a date alone,
    a time the clocks skip there, or a year the database cannot compare in UTC is a form
    error."""

    def to_python(self, value: Any) -> datetime | None:
        text = value.strip() if isinstance(value, str) else value
        try:
            return parse_moment(text, "date", zone=timezone.get_current_timezone())
        except InvalidRecord as exc:
            raise forms.ValidationError(_sentence(exc.problem), code="invalid") from None


class TranscriptSearchForm(forms.Form):
    """GET form of the admin search view; ``user`` decides whether an empty scope is allowed."""

    q = forms.CharField(
        label=_("Query"),
        required=False,
        max_length=MAX_QUERY_LENGTH,
        widget=forms.TextInput(attrs={"size": 40, "autofocus": True}),
        help_text=_("Words to find; case and accents are ignored."),
    )
    scope = forms.CharField(
        label=_("Scope"),
        required=False,
        max_length=MAX_SCOPE_LENGTH,
        widget=forms.TextInput(attrs={"size": 40, "placeholder": "userId=ada"}),
    )
    role = forms.MultipleChoiceField(
        label=_("Roles"),
        required=False,
        choices=ROLE_CHOICES,
        widget=forms.CheckboxSelectMultiple,
        help_text=_("Only messages of the roles checked or typed below; none: every role."),
    )
    other_roles = forms.CharField(
        label=_("Other roles"),
        required=False,
        max_length=MAX_SCOPE_LENGTH,
        widget=forms.TextInput(attrs={"size": 20, "placeholder": "function"}),
        help_text=_("Roles separated by commas, as the chats store them."),
    )
    updated_after = _MomentField(
        label=_("Updated after"),
        required=False,
        widget=forms.TextInput(attrs={"size": 20, "placeholder": _("YYYY-MM-DD hh:mm")}),
    )
    updated_before = _MomentField(
        label=_("Updated before"),
        required=False,
        widget=forms.TextInput(attrs={"size": 20, "placeholder": _("YYYY-MM-DD hh:mm")}),
    )
    around = forms.IntegerField(
        label=_("Around"),
        required=False,
        min_value=0,
        max_value=MAX_AROUND,
        initial=0,
        widget=forms.NumberInput(attrs={"style": "width: 4em"}),
        help_text=_("Messages of context shown on each side of a hit (0 to 10)."),
    )
    page = forms.IntegerField(
        label=_("Page"),
        required=False,
        min_value=1,
        max_value=MAX_PAGE,
        initial=1,
        error_messages={
            "invalid": _PAGE_RANGE,
            "min_value": _PAGE_RANGE,
            "max_value": format_lazy(
                _("Pages end at {max}: narrow the query or the scope."), max=f"{MAX_PAGE:,}"
            ),
        },
    )

    cursor = forms.CharField(
        label=_("Cursor"),
        required=False,
        max_length=MAX_CURSOR_LENGTH,
        error_messages={"max_length": _("This page link is damaged: start from the first page.")},
    )

    def __init__(self, *args: Any, user: AbstractBaseUser | AnonymousUser, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        self.fields["page"].widget = forms.HiddenInput()
        self.fields["cursor"].widget = forms.HiddenInput()
        zone = timezone.get_current_timezone_name()
        for name, side in (
            ("updated_after", _("strictly after")),
            ("updated_before", _("strictly before")),
        ):
            self.fields[name].help_text = format_lazy(
                _(
                    "Only chats last updated {side} this date and time (e.g. 2025-03-01 12:00, "
                    "or 2025-03-01T12:00+02:00); without an offset it is read in {zone}."
                ),
                side=side,
                zone=zone,
            )
        if getattr(user, "is_superuser", False):
            help_text = _(
                "key=value pairs separated by commas, e.g. userId=ada,agentId=x. "
                "Leave empty to search every chat (superusers only)."
            )
        else:
            help_text = _(
                "Required: key=value pairs separated by commas, e.g. userId=ada,agentId=x. "
                "Only superusers may search every chat with an empty scope."
            )
        self.fields["scope"].help_text = help_text

    def clean_scope(self) -> dict[str, str]:
        try:
            return parse_scope(self.cleaned_data.get("scope") or "")
        except ValueError as exc:
            raise forms.ValidationError(str(exc), code="invalid_scope") from None

    def clean_around(self) -> int:
        around = self.cleaned_data.get("around")
        return 0 if around is None else around

    def clean_other_roles(self) -> list[str]:
        try:
            return parse_roles(self.cleaned_data.get("other_roles") or "")
        except ValueError as exc:
            raise forms.ValidationError(str(exc), code="invalid_role") from None

    def clean_cursor(self) -> str | None:
        cursor = self.cleaned_data.get("cursor") or ""
        return cursor or None

    def clean_page(self) -> int:
        page = self.cleaned_data.get("page")
        return 1 if page is None else page

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        assert cleaned is not None  # Form.clean returns self.cleaned_data
        query = cleaned.get("q") or ""
        superuser = getattr(self.user, "is_superuser", False)
        if "scope" in cleaned and query.strip() and not cleaned["scope"] and not superuser:
            self.add_error(
                "scope",
                forms.ValidationError(
                    _("Enter a scope such as userId=ada: only superusers may search every chat."),
                    code="scope_required",
                ),
            )
        after, before = cleaned.get("updated_after"), cleaned.get("updated_before")
        try:
            check_window(after, before, after_field="updated_after", before_field="updated_before")
        except InvalidRecord:
            self.add_error(
                "updated_before",
                forms.ValidationError(
                    _("This must be later than the 'updated after' time."), code="empty_window"
                ),
            )
        if "role" in cleaned and "other_roles" in cleaned:
            try:
                check_roles([*cleaned["role"], *cleaned["other_roles"]])
            except InvalidRecord as exc:
                self.add_error("other_roles", forms.ValidationError(_sentence(exc.problem)))
        return cleaned

    @property
    def roles(self) -> list[str] | None:
        """The roles to search (``None``: every role); only once the form is valid."""
        roles = [*self.cleaned_data.get("role", []), *self.cleaned_data.get("other_roles", [])]
        return sorted(set(roles)) or None

    @property
    def terms(self) -> list[str]:
        """The query's terms as the index uses them (``[]``: nothing to search)."""
        return query_terms(self.cleaned_data.get("q") or "") if self.is_valid() else []
