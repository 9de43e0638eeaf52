"""Searchable chat transcripts for Django: the Python counterpart of TranscriptIndex 2.4.

Everything here imports without Django being set up; the SQL stores live in
``deuz_transcripts.stores``.
"""

from __future__ import annotations

from .context import TranscriptCandidate, TranscriptContextSource
from .errors import (
    ChatDeleted,
    InvalidRecord,
    ReplicaUnavailable,
    RevisionConflict,
    SearchTimeout,
    TranscriptError,
)
from .indexing import aindex_chat, index_chat
from .memory import InMemoryTranscriptIndex
from .memory_stores import InMemoryChatStore, InMemoryConditionalChatStore
from .paging import SearchPage
from .records import ChatRecord, MemorySourceRef, TranscriptHit, TranscriptMessage
from .spans import snippet
from .text import indexed_text

__all__ = [
    "ChatDeleted",
    "ChatRecord",
    "InMemoryChatStore",
    "InMemoryConditionalChatStore",
    "InMemoryTranscriptIndex",
    "InvalidRecord",
    "MemorySourceRef",
    "ReplicaUnavailable",
    "RevisionConflict",
    "SearchPage",
    "SearchTimeout",
    "TranscriptCandidate",
    "TranscriptContextSource",
    "TranscriptError",
    "TranscriptHit",
    "TranscriptMessage",
    "aindex_chat",
    "index_chat",
    "indexed_text",
    "snippet",
]

__version__ = "0.2.0"
