"""Searchable chat transcripts for Django: the Python counterpart of TranscriptIndex 2.4.

Everything here imports without Django being set up; the SQL stores live in
``deuz_transcripts.stores``.
"""

from __future__ import annotations

from .context import TranscriptCandidate, TranscriptContextSource
from .errors import ChatDeleted, InvalidRecord, RevisionConflict, SearchTimeout, TranscriptError
from .indexing import aindex_chat, index_chat
from .memory import InMemoryTranscriptIndex
from .memory_stores import InMemoryChatStore, InMemoryConditionalChatStore
from .records import ChatRecord, MemorySourceRef, TranscriptHit, TranscriptMessage

__all__ = [
    "ChatDeleted",
    "ChatRecord",
    "InMemoryChatStore",
    "InMemoryConditionalChatStore",
    "InMemoryTranscriptIndex",
    "InvalidRecord",
    "MemorySourceRef",
    "RevisionConflict",
    "SearchTimeout",
    "TranscriptCandidate",
    "TranscriptContextSource",
    "TranscriptError",
    "TranscriptHit",
    "TranscriptMessage",
    "aindex_chat",
    "index_chat",
]

__version__ = "0.2.0"
