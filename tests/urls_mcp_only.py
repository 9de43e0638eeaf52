"""A URLconf with the MCP endpoint and not the JSON one: it needs a scope all the same."""

from __future__ import annotations

from django.urls import include, path

urlpatterns = [path("transcripts/", include("deuz_transcripts.mcp_urls"))]
