"""The MCP endpoint, opt-in: ``path("transcripts/", include("deuz_transcripts.mcp_urls"))``
(needs the ``mcp`` extra). Whose chats a request searches comes only from
``DEUZ_TRANSCRIPTS["SEARCH_SCOPE"]``, as for the JSON endpoint.
"""

from __future__ import annotations

from django.urls import path

from .mcp_http import mcp_endpoint

app_name = "deuz_transcripts_mcp"

urlpatterns = [path("mcp/", mcp_endpoint, name="endpoint")]
