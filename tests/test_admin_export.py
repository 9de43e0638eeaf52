"""The admin's export of a search's hits as CSV and JSON Lines: streamed, capped by
``EXPORT_MAX_HITS``, under the search's permission and scope rules, written to the admin log."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission
from django.http import StreamingHttpResponse
from django.urls import NoReverseMatch, reverse

from deuz_transcripts.admin_export import EXPORT_COLUMNS
from tests.admin_support import SEARCH, chat, izmir_chat, record, write

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]


def export(client: Any, kind: str, **params: Any) -> Any:
    return client.get(reverse("admin:deuz_transcripts_export", kwargs={"kind": kind}), params)


def body(response: Any) -> str:
    assert isinstance(response, StreamingHttpResponse)  # never built whole in memory
    return b"".join(response.streaming_content).decode()


def deploys(count: int, user: str = "ada") -> None:
    write(
        *(
            record(f"c{n:02}", [{"role": "user", "content": f"deploy number {n}"}], user, n=n)
            for n in range(count)
        )
    )


def test_csv_holds_every_hit_best_first_with_its_chat(support_client: Any) -> None:
    write(izmir_chat(), chat("later", "ada", "Izmir again"), chat("bob-izmir", "bob", "Bob: Izmir"))
    response = export(support_client, "csv", q="izmir", scope="userId=ada")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="transcripts-')
    assert {"private", "no-store"} <= set(response["Cache-Control"].replace(" ", "").split(","))
    rows = list(csv.reader(io.StringIO(body(response))))
    assert tuple(rows[0]) == EXPORT_COLUMNS
    page = support_client.get(reverse(SEARCH), {"q": "izmir", "scope": "userId=ada"})
    shown = [(row.hit.chat_id, str(row.hit.index)) for row in page.context["rows"]]
    assert [(row[0], row[2]) for row in rows[1:]] == shown
    assert sorted(shown) == [("later", "0"), ("trip", "3")]
    first = dict(zip(EXPORT_COLUMNS, rows[1 + [r[0] for r in rows[1:]].index("trip")], strict=True))
    assert first["text"] == "Book the flight to İzmir."
    assert first["role"] == "user" and first["scope"] == "userId=ada"
    assert first["updated_at"] == "2025-03-01T12:00:00+00:00"
    assert "bob" not in body(export(support_client, "csv", q="izmir", scope="userId=ada"))


def test_json_lines_follow_cursors_up_to_the_cap(support_client: Any, settings: Any) -> None:
    settings.DEUZ_TRANSCRIPTS = {**settings.DEUZ_TRANSCRIPTS, "EXPORT_MAX_HITS": 5}
    deploys(7)
    response = export(support_client, "jsonl", q="deploy", scope="userId=ada")
    assert response["Content-Type"] == "application/jsonl; charset=utf-8"
    lines = [json.loads(line) for line in body(response).splitlines()]
    assert [line["chat_id"] for line in lines] == ["c06", "c05", "c04", "c03", "c02"]
    assert lines[0]["scope"] == {"userId": "ada"} and lines[0]["text"] == "deploy number 6"
    settings.DEUZ_TRANSCRIPTS = {**settings.DEUZ_TRANSCRIPTS, "EXPORT_MAX_HITS": 1_000}
    everything = body(export(support_client, "jsonl", q="deploy", scope="userId=ada"))
    assert len(everything.splitlines()) == 7


def test_pages_are_read_by_cursor_so_a_long_export_has_every_hit_once(
    support_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("deuz_transcripts.admin_export.EXPORT_PAGE_SIZE", 2)
    deploys(5)
    lines = body(export(support_client, "jsonl", q="deploy", scope="userId=ada")).splitlines()
    assert sorted(json.loads(line)["chat_id"] for line in lines) == [f"c0{n}" for n in range(5)]


def test_the_filters_of_the_search_apply(support_client: Any) -> None:
    messages = [
        {"role": "user", "content": "deploy it"},
        {"role": "assistant", "content": "deploy done"},
    ]
    write(record("mixed", messages))
    lines = body(
        export(support_client, "jsonl", q="deploy", scope="userId=ada", role="assistant")
    ).splitlines()
    assert [json.loads(line)["text"] for line in lines] == ["deploy done"]


def test_a_cell_a_spreadsheet_would_run_is_quoted(support_client: Any) -> None:
    write(chat("sheet", "ada", "=HYPERLINK(1) deploy"))
    rows = list(
        csv.reader(io.StringIO(body(export(support_client, "csv", q="deploy", scope="userId=ada"))))
    )
    assert rows[1][-1] == "'=HYPERLINK(1) deploy"
    jsonl = body(export(support_client, "jsonl", q="deploy", scope="userId=ada"))
    assert json.loads(jsonl)["text"] == "=HYPERLINK(1) deploy"  # JSON keeps the text as it is


def test_each_export_is_written_to_the_admin_log(support_client: Any, support: Any) -> None:
    write(izmir_chat())
    body(export(support_client, "csv", q="izmir", scope="userId=ada", role="user"))
    [entry] = LogEntry.objects.all()
    assert entry.user == support and entry.content_type.model == "chat"
    assert entry.change_message == (
        "Exported 1 hits as CSV: query 'izmir'; scope userId=ada; roles user"
    )


def test_only_who_may_search_may_export(client: Any, django_user_model: Any) -> None:
    write(izmir_chat())
    assert export(client, "csv", q="izmir", scope="userId=ada").status_code == 302  # login
    clerk = django_user_model.objects.create_user("clerk", password="pw", is_staff=True)
    clerk.user_permissions.add(Permission.objects.get(codename="view_chat"))
    client.force_login(clerk)
    assert export(client, "csv", q="izmir", scope="userId=ada").status_code == 403
    assert not LogEntry.objects.exists()


def test_search_only_staff_cannot_export_every_scope(
    support_client: Any, admin_client: Any
) -> None:
    write(izmir_chat(), chat("bob-izmir", "bob", "Bob flies to Izmir"))
    refused = export(support_client, "csv", q="izmir", scope="")
    assert refused.status_code == 302 and refused["Location"].startswith(reverse(SEARCH))
    assert "Enter a scope" in support_client.get(refused["Location"]).content.decode()
    assert not LogEntry.objects.exists()
    everyone = body(export(admin_client, "jsonl", q="izmir", scope=""))
    assert {json.loads(line)["chat_id"] for line in everyone.splitlines()} == {"trip", "bob-izmir"}


def test_no_other_format_has_an_address() -> None:
    with pytest.raises(NoReverseMatch):
        reverse("admin:deuz_transcripts_export", kwargs={"kind": "xlsx"})


def test_the_search_page_links_both_exports_of_its_search(support_client: Any) -> None:
    write(izmir_chat())
    page = support_client.get(reverse(SEARCH), {"q": "izmir", "scope": "userId=ada", "page": 1})
    html = page.content.decode()
    csv_url = reverse("admin:deuz_transcripts_export", kwargs={"kind": "csv"})
    assert f'href="{csv_url}?q=izmir&amp;scope=userId%3Dada"' in html
    assert 'id="export-jsonl"' in html
    empty = support_client.get(reverse(SEARCH), {"q": "nothingmatches", "scope": "userId=ada"})
    assert 'id="export-csv"' not in empty.content.decode()
