"""A URLconf without the JSON search endpoint: the system checks then ask for no scope."""

from __future__ import annotations

from django.contrib import admin
from django.urls import path

urlpatterns = [path("admin/", admin.site.urls)]
