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

        from . import checks  # noqa: F401  (registers the system checks)
        from .backends import connect_engine_signals

        connect_engine_signals(sender=self)
        setting_changed.connect(_apply_text_rules)
        _apply_text_rules(setting="DEUZ_TRANSCRIPTS")


def _apply_text_rules(*, setting: str, **kwargs: Any) -> None:
    """The term rule is process-wide (``text.use_cjk_bigrams``): follow the setting."""
    if setting == "DEUZ_TRANSCRIPTS":
        from .conf import conf
        from .text import use_cjk_bigrams

        use_cjk_bigrams(conf.CJK_BIGRAMS)
