"""``manage.py search_transcripts``: the index's search from a shell, as a table or JSON."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.db import DEFAULT_DB_ALIAS
from django.utils import timezone

from ...conf import conf
from ...errors import InvalidRecord, ReplicaUnavailable, SearchTimeout
from ...forms import parse_scope
from ...paging import SearchPage
from ...records import TranscriptHit
from ...search_input import check_query, check_roles, check_window, parse_moment, split_roles
from ...search_json import answer_json, hit_json
from ...spans import snippet_bounds
from ...sql.scopes import unknown_scope
from ...text import MAX_QUERY_TERMS, ignored_query_terms, indexed_text, query_terms
from ..oneline import OneLineErrors
from ..oneline import printable as _printable

_TEXT_WIDTH = 100
#: ``updated_at`` in the table: ISO 8601 in UTC, to the minute.
_MOMENT_FORMAT = "%Y-%m-%dT%H:%MZ"
#: A shell's status for a command that a closed pipe stopped (128 + SIGPIPE).
_SIGPIPE_STATUS = 141


def _one_line(message: Any, width: int = _TEXT_WIDTH) -> str:
    text = " ".join((indexed_text(message) or "").split()) or "(no searchable text)"
    text = text if len(text) <= width else text[: width - 1] + "…"
    return _printable(text)


def _hit_line(hit: TranscriptHit, width: int = _TEXT_WIDTH) -> str:
    """The hit's excerpt around its matches (``spans.snippet``'s cut), on one line, with
    control characters escaped as every other printed value."""
    text = indexed_text(hit.message) or ""
    start, end = snippet_bounds(text, hit.spans, width=width)
    shown = " ".join(text[start:end].split())
    if not shown:
        return "(no searchable text)"
    return ("…" if start > 0 else "") + _printable(shown) + ("…" if end < len(text) else "")


def _updated(hit: TranscriptHit) -> str:
    return hit.updated_at.strftime(_MOMENT_FORMAT) if hit.updated_at is not None else "?"


def _json(document: Any) -> str:
    """JSON text; a lone surrogate in the data is written as its ``\\udXXX`` escape."""
    text = json.dumps(document, ensure_ascii=False, indent=2)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(document, ensure_ascii=True, indent=2)
    return text


def _checked(options: dict[str, Any]) -> dict[str, Any]:
    """The query, roles and window by ``search_input``'s rules (every surface's)."""
    zone = timezone.get_current_timezone()
    try:
        query = check_query(options["query"], "query")
        roles = check_roles(split_roles(options["roles"] or []) or None, "--role")
        after = parse_moment(options["updated_after"], "--updated-after", zone=zone)
        before = parse_moment(options["updated_before"], "--updated-before", zone=zone)
        check_window(after, before, after_field="--updated-after", before_field="--updated-before")
    except InvalidRecord as exc:
        raise CommandError(str(exc)) from None
    return {"query": query, "roles": roles, "updated_after": after, "updated_before": before}


class Command(OneLineErrors):
    help = "Search chat transcripts: best hits first, with score, chat, message and text."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("query", help="Words to find (case and accents are ignored).")
        parser.add_argument(
            "--scope",
            default=None,
            help="Fields the chats must have: key=value pairs separated by commas, "
            "e.g. userId=ada,agentId=x. Required unless --all-scopes.",
        )
        parser.add_argument(
            "--all-scopes", action="store_true", help="Search every chat (no scope filter)."
        )
        parser.add_argument("--around", type=int, default=None, help="Context messages per side.")
        parser.add_argument("--limit", type=int, default=20, help="Hits to show (default 20).")
        parser.add_argument(
            "--role",
            action="append",
            dest="roles",
            default=None,
            help="Only messages of this role (repeat for several: --role user --role tool).",
        )
        parser.add_argument(
            "--updated-after",
            default=None,
            help="Only chats updated strictly after this ISO 8601 date and time "
            "(2025-01-31T00:00:00Z; without an offset it is read in TIME_ZONE).",
        )
        parser.add_argument(
            "--updated-before",
            default=None,
            help="Only chats updated strictly before this ISO 8601 date and time.",
        )
        parser.add_argument(
            "--cursor", default=None, help="Continue after a page: the cursor it printed."
        )
        parser.add_argument(
            "--total-cap",
            type=int,
            default=None,
            help="Count matches exactly up to this many, 'more than' past it (default: the "
            "SEARCH_TOTAL_CAP setting, 10,000; 0 counts every match).",
        )
        parser.add_argument("--json", action="store_true", help="Print one JSON document.")
        parser.add_argument("--database", default=DEFAULT_DB_ALIAS)

    def run_from_argv(self, argv: list[str]) -> None:
        """From a shell: a reader that stops early (``| head``) ends the output quietly,
        as it ends any Unix tool's, instead of a ``BrokenPipeError`` traceback."""
        try:
            super().run_from_argv(argv)
            sys.stdout.flush()  # inside the try: the last lines may meet the closed pipe
        except BrokenPipeError:
            # Python flushes stdout again at exit: point it at nothing so that is quiet too
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(_SIGPIPE_STATUS)

    def handle(self, *args: Any, **options: Any) -> None:
        scope = self._scope(options)
        if options["limit"] < 1 or options["limit"] > 1000:
            raise CommandError("--limit must be between 1 and 1000")
        if options["around"] is not None and not 0 <= options["around"] <= 100:
            raise CommandError("--around must be between 0 and 100")
        checked = _checked(options)
        total_cap = options["total_cap"]
        if total_cap is None:
            total_cap = conf.SEARCH_TOTAL_CAP
        elif total_cap < 0:
            raise CommandError("--total-cap must be 0 (count every match) or more")
        from ...stores import DjangoTranscriptIndex

        index = DjangoTranscriptIndex(options["database"])
        try:
            page = index.search_page(
                scope,
                checked["query"],
                around=options["around"],
                limit=options["limit"],
                cursor=options["cursor"],
                roles=checked["roles"],
                updated_after=checked["updated_after"],
                updated_before=checked["updated_before"],
                total_cap=total_cap or None,
            )
        except (InvalidRecord, SearchTimeout, ReplicaUnavailable) as exc:
            raise CommandError(str(exc)) from None
        notice = None
        if not page.hits:  # a mistyped scope must not look like "no hits"
            unknown = index.read(lambda alias: unknown_scope(alias, scope))
            if unknown is not None:
                notice = unknown.sentence(",".join(f"{k}={v}" for k, v in scope.items()))
        ignored = ignored_query_terms(checked["query"])
        if options["json"]:
            terms = query_terms(checked["query"])
            substring = index.backend.substring_matching
            hits = [hit_json(hit, terms, substring) for hit in page.hits]
            document = {"backend": index.backend_name, **answer_json(page, hits, ignored)}
            if notice is not None:
                document["notice"] = notice
            self.stdout.write(_json(document))
            return
        if ignored:
            self.stdout.write(
                f"Only the first {MAX_QUERY_TERMS} words of the query are searched; these "
                f"were ignored: {_printable(', '.join(ignored))}."
            )
        self._table(page, index.backend_name)
        if notice is not None:
            self.stdout.write(_printable(notice))

    @staticmethod
    def _scope(options: dict[str, Any]) -> dict[str, str]:
        if options["all_scopes"]:
            if options["scope"] is not None:
                raise CommandError("give either --scope or --all-scopes, not both")
            return {}
        if options["scope"] is None:
            raise CommandError("--scope is required (e.g. --scope userId=ada), or --all-scopes")
        try:
            scope = parse_scope(options["scope"])
        except ValueError as exc:
            raise CommandError(f"--scope: {exc}") from None
        if not scope:
            raise CommandError("--scope is empty; use --all-scopes to search every chat")
        return scope

    def _table(self, page: SearchPage, backend: str) -> None:
        hits = page.hits
        total = f"{page.total}" if page.total_exact else f"more than {page.total}"
        if not hits:
            self.stdout.write(f"No hits ({backend}); {total} matching message(s).")
            return
        self.stdout.write(
            f"{len(hits)} hit(s) ({backend}) of {total} matching message(s), best first:"
        )
        self.stdout.write(
            f"{'score':>6}  {'chat':<24} {'#':>4}  {'role':<9} {'updated (UTC)':<17} snippet"
        )
        for hit in hits:
            role = _printable(str(hit.message.get("role", "?")))
            self.stdout.write(
                f"{hit.score:6.3f}  {_printable(hit.chat_id):<24} {hit.index:>4}  {role:<9} "
                f"{_updated(hit):<17} {_hit_line(hit)}"
            )
            for item in hit.around or ():
                mark = "<" if item.index < hit.index else ">"
                around_role = _printable(str(item.message.get("role", "?")))
                self.stdout.write(
                    f"{'':6}  {'':<24} {item.index:>4}{mark} "
                    f"{around_role:<9} {'':<17} {_one_line(item.message, 80)}"
                )
        if page.next_cursor is not None:
            self.stdout.write(f"Next page: --cursor {page.next_cursor}")
