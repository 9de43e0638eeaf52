"""``manage.py search_transcripts``: the index's search from a shell, as a table or JSON."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.db import DEFAULT_DB_ALIAS

from ...conf import conf
from ...errors import InvalidRecord, ReplicaUnavailable, SearchTimeout
from ...forms import parse_scope
from ...paging import SearchPage
from ...records import TranscriptHit, TranscriptMessage
from ...spans import snippet, snippet_bounds
from ...sql.scopes import unknown_scope
from ...text import indexed_text
from ..oneline import OneLineErrors
from ..oneline import printable as _printable

_TEXT_WIDTH = 100


def _message_json(item: TranscriptMessage | TranscriptHit) -> dict[str, Any]:
    return {
        "chatId": item.chat_id,
        "messageId": item.message_id,
        "index": item.index,
        "message": item.message,
    }


def _hit_json(hit: TranscriptHit) -> dict[str, Any]:
    text = indexed_text(hit.message) or ""
    data = {**_message_json(hit), "score": hit.score, "snippet": snippet(text, hit.spans)}
    if hit.around is not None:
        data["around"] = [_message_json(item) for item in hit.around]
    return data


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


def _moment(value: str | None, option: str) -> datetime | None:
    """An ISO 8601 date and time with its offset (``Z`` or ``+02:00``)."""
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise CommandError(f"{option}: not an ISO 8601 date and time: {value!r}") from None
    if moment.tzinfo is None:
        raise CommandError(f"{option}: give a timezone, e.g. {value}+00:00 or {value}Z")
    return moment


def _json(document: Any) -> str:
    """JSON text; a lone surrogate in the data is written as its ``\\udXXX`` escape."""
    text = json.dumps(document, ensure_ascii=False, indent=2)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(document, ensure_ascii=True, indent=2)
    return text


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
            help="Only chats updated strictly after this ISO 8601 time with offset "
            "(2025-01-31T00:00:00Z).",
        )
        parser.add_argument(
            "--updated-before",
            default=None,
            help="Only chats updated strictly before this ISO 8601 time with offset.",
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

    def handle(self, *args: Any, **options: Any) -> None:
        scope = self._scope(options)
        if options["limit"] < 1 or options["limit"] > 1000:
            raise CommandError("--limit must be between 1 and 1000")
        if options["around"] is not None and not 0 <= options["around"] <= 100:
            raise CommandError("--around must be between 0 and 100")
        if "\x00" in options["query"]:
            raise CommandError("the query must not contain NUL characters")
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
                options["query"],
                around=options["around"],
                limit=options["limit"],
                cursor=options["cursor"],
                roles=options["roles"],
                updated_after=_moment(options["updated_after"], "--updated-after"),
                updated_before=_moment(options["updated_before"], "--updated-before"),
                total_cap=total_cap or None,
            )
        except (InvalidRecord, SearchTimeout, ReplicaUnavailable) as exc:
            raise CommandError(str(exc)) from None
        notice = None
        if not page.hits:  # a mistyped scope must not look like "no hits"
            unknown = index.read(lambda alias: unknown_scope(alias, scope))
            if unknown is not None:
                notice = unknown.sentence(",".join(f"{k}={v}" for k, v in scope.items()))
        if options["json"]:
            document = {
                "backend": index.backend_name,
                "scope": scope,
                "query": options["query"],
                "total": page.total,
                "totalExact": page.total_exact,
                "nextCursor": page.next_cursor,
                "hits": [_hit_json(hit) for hit in page.hits],
            }
            if notice is not None:
                document["notice"] = notice
            self.stdout.write(_json(document))
            return
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
        self.stdout.write(f"{'score':>6}  {'chat':<24} {'#':>4}  {'role':<9} snippet")
        for hit in hits:
            role = _printable(str(hit.message.get("role", "?")))
            self.stdout.write(
                f"{hit.score:6.3f}  {_printable(hit.chat_id):<24} {hit.index:>4}  {role:<9} "
                f"{_hit_line(hit)}"
            )
            for item in hit.around or ():
                mark = "<" if item.index < hit.index else ">"
                around_role = _printable(str(item.message.get("role", "?")))
                self.stdout.write(
                    f"{'':6}  {'':<24} {item.index:>4}{mark} "
                    f"{around_role:<9} {_one_line(item.message, 80)}"
                )
        if page.next_cursor is not None:
            self.stdout.write(f"Next page: --cursor {page.next_cursor}")
