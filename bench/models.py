"""``PeerDoc``: the indexed text of each message, as the peers (watson, modelsearch) index it.

The peers index a model of their own; this one holds exactly the text deuz_transcripts
indexes (first 256 KiB) and the user, so every engine searches the same messages.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

if "modelsearch" in settings.INSTALLED_APPS:
    from modelsearch import index as _index

    _bases: tuple[type, ...] = (_index.Indexed, models.Model)
else:
    _bases = (models.Model,)


class PeerDoc(*_bases):  # type: ignore[misc]
    """One message: ``message_pk`` is the deuz Message row, ``user`` its scope."""

    message_pk = models.BigIntegerField(db_index=True)
    user = models.CharField(max_length=64, db_index=True)
    text = models.TextField()

    if "modelsearch" in settings.INSTALLED_APPS:
        search_fields = [_index.SearchField("text"), _index.FilterField("user")]
        search_auto_update = False

    class Meta:
        app_label = "bench"

    def __str__(self) -> str:
        return f"{self.user}:{self.message_pk}"
