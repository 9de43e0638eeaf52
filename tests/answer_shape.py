"""The one JSON shape of a search answer (README, "The JSON search endpoint"): the fields the
endpoint, the agent tool and ``search_transcripts --json`` all give."""

from __future__ import annotations

ANSWER_KEYS = {"count", "count_exact", "next_cursor", "ignored_terms", "hits"}
HIT_KEYS = {
    "chat_id",
    "message_id",
    "index",
    "role",
    "score",
    "updated_at",
    "snippet",
    "spans",
    "around",
}
AROUND_KEYS = {"message_id", "index", "role", "snippet", "spans"}
