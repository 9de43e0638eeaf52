"""URLs of the demo/test project: the admin (with the transcript search view) at /admin/,
the end-user JSON search endpoint at /transcripts/search/ and the MCP endpoint at
/transcripts/mcp/."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("transcripts/", include("deuz_transcripts.urls")),
    path("transcripts/", include("deuz_transcripts.mcp_urls")),
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
]
