"""URLs of the demo/test project: the admin (with the transcript search view) at /admin/,
the end-user JSON search endpoint at /transcripts/search/, the MCP endpoint at
/transcripts/mcp/, and the end users' sign-in at /accounts/login/."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.generic import RedirectView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("transcripts/", include("deuz_transcripts.urls")),
    path("transcripts/", include("deuz_transcripts.mcp_urls")),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
]
