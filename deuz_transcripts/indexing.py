"""``index_chat``: how a chat saved elsewhere (a legacy store) enters an index."""

from __future__ import annotations

from .base import BaseTranscriptIndex, check_record
from .records import ChatRecord, with_filled_ids

__all__ = ["aindex_chat", "index_chat"]


def index_chat(index: BaseTranscriptIndex, record: ChatRecord) -> ChatRecord:
    """Fill missing, empty or repeated ids as ``<chat_id>:<i>``, then index; returns the record indexed."""
    filled = with_filled_ids(check_record(record))
    index.index(filled)
    return filled


async def aindex_chat(index: BaseTranscriptIndex, record: ChatRecord) -> ChatRecord:
    filled = with_filled_ids(check_record(record))
    await index.aindex(filled)
    return filled
