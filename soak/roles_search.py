"""The readers: searches through the Python API (every filter, cursors, counts) and
through the JSON endpoint served by gunicorn, checking every answer's scope as it comes."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings

from deuz_transcripts import InvalidRecord

from .ledger import DeletedChats
from .words import COMMON_WORDS, ROLES, chat_tenant, pick_tenant, scope_of

if TYPE_CHECKING:
    from .worker import Worker

__all__ = ["http_loop", "search_loop"]


def _query(worker: Worker) -> str:
    return " ".join(worker.rng.sample(COMMON_WORDS, worker.rng.randint(1, 3)))


def _filters(worker: Worker) -> dict[str, Any]:
    rng = worker.rng
    filters: dict[str, Any] = {}
    if rng.random() < 0.3:
        filters["roles"] = rng.sample(ROLES, rng.randint(1, 2))
    if rng.random() < 0.2:
        filters["updated_after"] = datetime.now(UTC) - timedelta(seconds=rng.randint(1, 120))
    if rng.random() < 0.1:
        filters["updated_before"] = datetime.now(UTC) - timedelta(seconds=rng.randint(0, 30))
    return filters


#: How long after a delete another process's search may still find the chat: none on the
#: primary; on a standby, its replay lag (read-your-writes covers only the caller's own).
STALE_GRACE_S = 30.0 if "replica" in settings.DATABASES else 0.0


def _check_hit(worker: Worker, chat_id: str, tenant: str, t0: float, deleted: DeletedChats) -> None:
    """A hit must be of the scope searched, and not of a chat deleted before the search."""
    if chat_tenant(chat_id) != tenant:
        worker.violation("crossed", f"{chat_id} in a search of {tenant}")
    gone = deleted.when.get(chat_id)
    if gone is not None and gone + STALE_GRACE_S < t0:
        worker.violation("leaked", f"{chat_id}: a hit {t0 - gone:.1f} s after its delete")


#: A write's ``updated_at`` is taken before it commits: at most this much before.
_COMMIT_SLACK_S = 10.0


def _written_since(worker: Worker, chat_id: str, t0: float) -> bool:
    """Whether the chat was written (or deleted) since ``t0``: a cursor continues after its
    last hit's key, so a message whose chat moved (newer ``updated_at``) may come again on
    a later page, as with any keyset cursor over changing data; a chat nobody wrote may not."""
    loaded = worker.store.load_chat(chat_id)
    return loaded is None or loaded[0].updated_at.timestamp() >= t0 - _COMMIT_SLACK_S


def _one_search(worker: Worker, deleted: DeletedChats) -> None:
    """A search walked over up to three pages: every hit in the scope, no hit twice, every
    score in (0, 1]; then the last cursor tried under another scope, which must refuse it
    or answer from that scope alone."""
    tenant = pick_tenant(worker.rng, worker.tenants)
    query, filters = _query(worker), _filters(worker)
    if worker.rng.random() < 0.15:
        chats = worker.store.list_chats(scope_of(tenant))[:5]
        filters["chat_ids"] = [chat.chat_id for chat in chats]
    index = worker.store.transcript
    deleted.refresh()
    t0 = time.time()
    cursor: str | None = None
    seen: set[tuple[str, str]] = set()
    for _ in range(3):
        page = index.search_page(
            scope_of(tenant), query, limit=10, cursor=cursor, total_cap=1_000, **filters
        )
        for hit in page.hits:
            _check_hit(worker, hit.chat_id, tenant, t0, deleted)
            if (hit.chat_id, hit.message_id) in seen and not _written_since(
                worker, hit.chat_id, t0
            ):
                worker.violation("cursor", f"{hit.chat_id}/{hit.message_id} on two pages")
            if not 0 < hit.score <= 1:
                worker.violation("score", f"{hit.chat_id}: score {hit.score}")
            seen.add((hit.chat_id, hit.message_id))
        if page.total < len(page.hits):
            worker.violation("count", f"{tenant} {query!r}: total {page.total} < page")
        cursor = page.next_cursor
        if cursor is None:
            break
    if cursor is not None:
        other = pick_tenant(worker.rng, worker.tenants)
        if other != tenant:
            try:
                page = index.search_page(scope_of(other), query, cursor=cursor, **filters)
            except InvalidRecord:
                return  # refused: the cursor is bound to its search's scope
            for hit in page.hits:
                if chat_tenant(hit.chat_id) != other:
                    worker.violation("crossed", f"{hit.chat_id}: a cursor of {tenant} in {other}")


def search_loop(worker: Worker) -> None:
    deleted = DeletedChats(worker.directory / "ledger")
    while not worker.stopping:
        t0 = time.time()
        try:
            _one_search(worker, deleted)
        except Exception as exc:
            worker.failed("search", None, t0, exc)
        else:
            worker.ledger.write(
                {"op": "search", "phase": "ok", "t0": t0, "t1": time.time()}, durable=False
            )
        worker.sleep()


def _http_search(
    worker: Worker, base: str, sessions: dict[str, str], deleted: DeletedChats
) -> None:
    tenant = worker.rng.choice(sorted(sessions))
    params: list[tuple[str, str]] = [("q", _query(worker)), ("limit", "10")]
    if worker.rng.random() < 0.3:
        params.append(("roles", ",".join(worker.rng.sample(ROLES, 2))))
    if worker.rng.random() < 0.2:
        params.append(("around", "1"))
    request = urllib.request.Request(
        f"{base}/transcripts/search/?{urllib.parse.urlencode(params)}",
        headers={"Cookie": f"sessionid={sessions[tenant]}"},
    )
    deleted.refresh()
    t0 = time.time()
    try:
        with urllib.request.urlopen(request, timeout=15) as response:
            status, body = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, body = exc.code, exc.read()
    except (OSError, urllib.error.URLError) as exc:
        # the server is restarting a worker this soak killed: no answer is not a wrong one
        worker.ledger.write(
            {
                "op": "http",
                "phase": "fail",
                "t0": t0,
                "t1": time.time(),
                "error": f"connection:{type(exc).__name__}",
                "expected_error": True,
            },
            durable=False,
        )
        time.sleep(0.2)
        return
    entry = {"op": "http", "t0": t0, "t1": time.time(), "status": status}
    if status == 200:
        for hit in json.loads(body)["hits"]:
            _check_hit(worker, hit["chat_id"], tenant, t0, deleted)
        worker.ledger.write({**entry, "phase": "ok"}, durable=False)
    elif status == 503:  # the database is down or stopped the search: say which
        message = json.loads(body)["error"]["message"].split(";")[0].split("(")[0].strip()
        worker.ledger.write(
            {**entry, "phase": "fail", "error": f"http_503:{message[:60]}", "expected_error": True},
            durable=False,
        )
        time.sleep(0.2)
    elif status == 500:
        text = " ".join(body.decode("utf-8", "replace").split())
        worker.violation("http_500", f"{dict(params).get('q')!r}: {text[:200]}")
    else:
        worker.ledger.write(
            {**entry, "phase": "fail", "error": f"http_{status}", "expected_error": False}
        )


def http_loop(worker: Worker) -> None:
    base = worker.directory.joinpath("server").read_text().strip()
    sessions: dict[str, str] = json.loads(worker.directory.joinpath("sessions.json").read_text())
    deleted = DeletedChats(worker.directory / "ledger")
    while not worker.stopping:
        _http_search(worker, base, sessions, deleted)
        worker.sleep()
