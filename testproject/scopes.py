"""The demo project's search scope: a signed-in user searches the chats of their username."""

from __future__ import annotations

from django.http import HttpRequest


def user_scope(request: HttpRequest) -> dict[str, str] | None:
    """``{"userId": <username>}`` (the demo chats' scope), ``None`` for anyone else."""
    user = request.user
    if not user.is_authenticated or not user.is_active:
        return None
    return {"userId": user.get_username()}
