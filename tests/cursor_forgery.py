"""Cursors a client writes itself, as an attacker would: the counts a cursor pins
rewritten (N and every n_t at 2**62, so every idf is 0.0) and sealed again every way a
client can: the checksum the unsigned format carried, the signature of the cursor it
was given, or none."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

#: Counts no index holds: every idf ``ln(1 + 0.5 / (2**62 + 0.5))`` is 0.0 in floats.
HUGE = 2**62


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def cursor_body(cursor: str) -> dict[str, Any]:
    """The JSON a cursor carries (signed ``body.signature``, or checksum + body)."""
    if "." in cursor:
        return dict(json.loads(_unb64(cursor.split(".", 1)[0])))
    return dict(json.loads(_unb64(cursor)[8:]))


def forged_cursors(cursor: str, **changes: Any) -> list[str]:
    """``cursor`` with ``changes`` (default: N and every n_t at ``HUGE``), resealed."""
    data = cursor_body(cursor)
    data.update(changes or {"n": HUGE, "t": [HUGE] * len(data["t"])})
    body = json.dumps(data, separators=(",", ":")).encode("ascii")
    checksum = hashlib.blake2b(body, digest_size=8).digest()
    signature = cursor.rpartition(".")[2] if "." in cursor else _b64(checksum)
    return [_b64(checksum + body), f"{_b64(body)}.{signature}", _b64(body)]


def resigned(cursor: str, **changes: Any) -> str:
    """``cursor`` with ``changes``, signed with this server's own key: what a leaked key
    (or a bug minting a cursor) could make; what it pins must still rank."""
    from deuz_transcripts.cursor_signing import sign

    data = cursor_body(cursor)
    data.update(changes or {"n": HUGE, "t": [HUGE] * len(data["t"])})
    return sign(_b64(json.dumps(data, separators=(",", ":")).encode("ascii")))
