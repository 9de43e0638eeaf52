"""A cursor's format: what binds it to its search, how it is written and read back.

The cursor is urlsafe base64 of compact JSON, signed (``cursor_signing``: only this
server can mint one); it is opaque to callers and bound to its search (scope, terms and
filters) by a fingerprint. Anything that is not a cursor of this search, or pins counts
that no longer rank (an idf of 0), is ``InvalidRecord("cursor")``, never a raw error.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
from datetime import UTC, datetime
from typing import Any

from .cursor_signing import sign, unsign
from .errors import InvalidRecord
from .paging import HitKey, PageAfter, PinnedRanking, to_micros
from .records import _check_identifier
from .search_request import SearchRequest

__all__ = ["MAX_CURSOR_LENGTH", "decode_cursor", "encode_cursor", "fingerprint"]

_CURSOR_VERSION = 2
#: No cursor this app writes is longer (a 255-character chat id escaped, 32 counts).
MAX_CURSOR_LENGTH = 8_192
#: Every integer a cursor carries is below this (SQL engines hold 64-bit integers).
_MAX_COUNT = 2**62
_MIN_MICROS = to_micros(datetime.min.replace(tzinfo=UTC))
_MAX_MICROS = to_micros(datetime.max.replace(tzinfo=UTC))


def fingerprint(request: SearchRequest) -> str:
    """What binds a cursor to its search: scope, terms and filters (not limit or around)."""
    described = [
        sorted(request.scope.items()),
        request.terms,
        None if request.chat_ids is None else sorted(request.chat_ids),
        None if request.roles is None else sorted(request.roles),
        None if request.updated_after is None else to_micros(request.updated_after),
        None if request.updated_before is None else to_micros(request.updated_before),
    ]
    data = json.dumps(described, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def encode_cursor(request: SearchRequest, after: PageAfter) -> str:
    key = after.key
    body = json.dumps(
        {
            "v": _CURSOR_VERSION,
            "q": fingerprint(request),
            "n": after.pinned.total,
            "t": list(after.pinned.matching),
            "b": after.pinned.best_mask,
            "k": [key.mask, key.updated_micros, key.chat_id, key.index],
        },
        ensure_ascii=True,
        separators=(",", ":"),
    ).encode("ascii")
    return sign(base64.urlsafe_b64encode(body).decode("ascii").rstrip("="))


def _int(value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(value)
    return value


def decode_cursor(cursor: Any, request: SearchRequest) -> PageAfter:
    """The cursor's pinned ranking and key; ``InvalidRecord("cursor")`` for anything that
    is not a cursor this search handed out (garbage, a changed byte, an unsigned or
    forged one, another search's)."""
    if not isinstance(cursor, str):
        raise InvalidRecord("cursor", f"must be a string, not {type(cursor).__name__}")
    signed = unsign(cursor) if len(cursor) <= MAX_CURSOR_LENGTH else None
    if signed is None:
        raise InvalidRecord("cursor", "is not a cursor of this index")
    try:
        body = base64.urlsafe_b64decode(signed + "=" * (-len(signed) % 4))
        data = json.loads(body.decode("ascii"))
        if not isinstance(data, dict) or data.get("v") != _CURSOR_VERSION:
            raise ValueError("version")
    except (ValueError, binascii.Error, UnicodeError, RecursionError):
        raise InvalidRecord("cursor", "is not a cursor of this index") from None
    if data.get("q") != fingerprint(request):
        raise InvalidRecord("cursor", "belongs to another search (scope, query or filters)")
    try:
        return _page_after(data, len(request.terms))
    except (ValueError, TypeError, KeyError, InvalidRecord):
        raise InvalidRecord("cursor", "is not a cursor of this index") from None


def _page_after(data: dict[str, Any], term_count: int) -> PageAfter:
    full = (1 << term_count) - 1
    total = _int(data["n"], 1, _MAX_COUNT)
    matching = data["t"]
    if not isinstance(matching, list) or len(matching) != term_count:
        raise ValueError("t")
    pinned = PinnedRanking(
        total, tuple(_int(n, 0, total) for n in matching), _int(data["b"], 1, full)
    )
    mask, micros, chat_id, index = data["k"]
    key = HitKey(
        _int(mask, 1, full),
        _int(micros, _MIN_MICROS, _MAX_MICROS),
        _check_identifier(chat_id, "cursor"),
        _int(index, 0, 2**31 - 1),
    )
    if not all(math.isfinite(weight) and weight > 0 for weight in pinned.idfs):
        raise ValueError("t")  # counts no search has: a term that weighs nothing
    if pinned.raw(key.mask) > pinned.best:
        raise ValueError("k")
    return PageAfter(pinned, key)
