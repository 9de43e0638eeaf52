"""Cursors only this server can mint: an HMAC signature (``django.core.signing``).

A cursor pins N and every n_t; a client that could write its own would pin counts no
search ever had. So a cursor's body is signed with Django's ``SECRET_KEY`` (salted for
cursors alone) and a cursor signed with a key of ``SECRET_KEY_FALLBACKS`` is still read,
as Django reads its own signed values while a key is rotated.

The package imports, and the in-memory index runs, without Django settings: a process
whose settings are not configured (or whose ``SECRET_KEY`` is empty) signs with a random
key of its own, made at import, so its cursors are good in that process only.
"""

from __future__ import annotations

import secrets

from django.core import signing
from django.core.exceptions import ImproperlyConfigured

__all__ = ["sign", "signing_keys", "unsign"]

_SALT = "deuz_transcripts.cursor"
#: Not in urlsafe base64: a cursor stays one URL-safe token, ``body.signature``.
_SEPARATOR = "."
_PROCESS_KEY = secrets.token_urlsafe(48)


def signing_keys() -> tuple[str | bytes, list[str | bytes]]:
    """The key cursors are signed with and the older keys still accepted."""
    from django.conf import settings

    try:
        return settings.SECRET_KEY, list(settings.SECRET_KEY_FALLBACKS)
    except ImproperlyConfigured:  # no settings, or an empty SECRET_KEY
        return _PROCESS_KEY, []


def _signer() -> signing.Signer:
    key, fallbacks = signing_keys()
    return signing.Signer(key=key, sep=_SEPARATOR, salt=_SALT, fallback_keys=fallbacks)


def sign(body: str) -> str:
    """``body`` (urlsafe base64) with its signature."""
    return _signer().sign(body)


def unsign(cursor: str) -> str | None:
    """The body of a cursor this server signed (with any of its keys); ``None`` else."""
    if not cursor.isascii():
        return None
    try:
        return _signer().unsign(cursor)
    except signing.BadSignature:
        return None
