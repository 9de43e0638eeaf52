"""HTTP Basic sign-in for the demo, so one ``curl -u ada:ada`` can try the JSON endpoint.

Demo only: it checks the username and password Django's ``authenticate`` checks, for this
one request (no session), and leaves any other request as it was. A project's own pages
sign users in with sessions or tokens of its choosing; the endpoint only reads
``request.user``.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable

from django.contrib.auth import authenticate
from django.http import HttpRequest, HttpResponse


class BasicAuthMiddleware:
    """``Authorization: Basic ...`` with a valid username and password signs the request in."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        scheme, _, encoded = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() == "basic" and encoded:
            try:
                pair = base64.b64decode(encoded.strip(), validate=True).decode()
            except (binascii.Error, UnicodeDecodeError):
                pair = ""
            username, _, password = pair.partition(":")
            user = authenticate(request, username=username, password=password) if username else None
            if user is not None:
                request.user = user
        return self.get_response(request)
