from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class DeuzTranscriptsConfig(AppConfig):
    name = "deuz_transcripts"
    verbose_name = _("Chat transcripts")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)
