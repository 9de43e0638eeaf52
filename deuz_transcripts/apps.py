from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class DeuzTranscriptsConfig(AppConfig):
    name = "deuz_transcripts"
    verbose_name = _("Chat transcripts")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.core.signals import setting_changed
        from django.db.backends.signals import connection_created
        from django.db.models.signals import post_migrate

        from . import checks  # noqa: F401  (registers the system checks)
        from .backends.sqlite import empty_fts_after_flush, secure_delete_on_connect

        post_migrate.connect(empty_fts_after_flush, sender=self)
        connection_created.connect(secure_delete_on_connect, dispatch_uid="deuz_secure_delete")
        setting_changed.connect(_apply_text_rules)
        _apply_text_rules(setting="DEUZ_TRANSCRIPTS")


def _apply_text_rules(*, setting: str, **kwargs: Any) -> None:
    """The term rule is process-wide (``text.use_cjk_bigrams``): follow the setting."""
    if setting == "DEUZ_TRANSCRIPTS":
        from .conf import conf
        from .text import use_cjk_bigrams

        use_cjk_bigrams(conf.CJK_BIGRAMS)
