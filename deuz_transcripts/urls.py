"""The end-user JSON search endpoint, opt-in: ``path("transcripts/", include("deuz_transcripts.urls"))``.

Whose chats a request searches comes only from ``DEUZ_TRANSCRIPTS["SEARCH_SCOPE"]``
(a system check, E011, fails while it is unset).
"""

from __future__ import annotations

from django.urls import path

from .api import search_api

app_name = "deuz_transcripts"

urlpatterns = [path("search/", search_api, name="search")]
