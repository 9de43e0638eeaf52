"""``index_chat``: how a chat saved elsewhere (a legacy store) enters an index."""

from __future__ import annotations

from .base import BaseTranscriptIndex
from .prepared import PreparedChat
from .records import ChatRecord

__all__ = ["aindex_chat", "index_chat"]


def index_chat(index: BaseTranscriptIndex, record: ChatRecord) -> ChatRecord:
    """Fill missing, empty or repeated ids as ``<chat_id>:<i>``, then index; returns the record indexed."""
    prepared = PreparedChat.of(record)
    index.index(prepared)
    return prepared.to_record()


async def aindex_chat(index: BaseTranscriptIndex, record: ChatRecord) -> ChatRecord:
    prepared = PreparedChat.of(record)
    await index.aindex(prepared)
    return prepared.to_record()
