from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class DeuzTranscriptsConfig(AppConfig):
    name = "deuz_transcripts"
    verbose_name = _("Chat transcripts")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from . import checks  # noqa: F401  (registers the system checks)
        from .backends.sqlite import empty_fts_after_flush

        post_migrate.connect(empty_fts_after_flush, sender=self)
