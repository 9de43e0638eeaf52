"""Offers past messages to a context compiler as ``role: text`` lines."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from .base import BaseTranscriptIndex
from .errors import InvalidRecord
from .records import MemorySourceRef, TranscriptMessage, validate_scope
from .text import indexed_text

__all__ = ["TranscriptCandidate", "TranscriptContextSource"]

Refs = Sequence[MemorySourceRef] | Callable[[], Iterable[MemorySourceRef]] | None


@dataclass(frozen=True)
class TranscriptCandidate:
    """One offer to the compiler: the text and where it came from."""

    text: str
    match: Literal["source-ref", "search"]
    chat_id: str
    message_id: str
    score: float


def message_line(message: TranscriptMessage) -> str:
    """``role: text`` of a message's indexed text; ``""`` when it has none."""
    text = indexed_text(message.message)
    return f"{message.message['role']}: {text}" if text else ""


class TranscriptContextSource:
    """Cited messages first (``source-ref``), then search hits; each message once."""

    def __init__(
        self,
        index: BaseTranscriptIndex,
        scope: Mapping[str, str],
        chat_ids: Iterable[str] | None = None,
        around: int = 0,
        refs: Refs = None,
    ) -> None:
        if isinstance(around, bool) or not isinstance(around, int) or around < 0:
            raise InvalidRecord("around", "must be a non-negative integer")
        if isinstance(chat_ids, str | bytes):  # list("base") would be four one-letter ids
            raise InvalidRecord("chat_ids", "must be a list of chat ids, not a string")
        self.index = index
        self.scope = validate_scope(scope)
        self.chat_ids = None if chat_ids is None else list(chat_ids)
        self.around = around
        self.refs = refs

    def _refs(self) -> list[MemorySourceRef]:
        refs = self.refs() if callable(self.refs) else self.refs
        return [MemorySourceRef.coerce(ref) for ref in refs or ()]

    def candidates(self, query: str, limit: int = 20) -> list[TranscriptCandidate]:
        offered: dict[tuple[str, str], TranscriptCandidate] = {}
        for ref in self._refs():
            if len(offered) >= limit:
                break
            message = self.index.resolve_source(self.scope, ref)
            key = None if message is None else (message.chat_id, message.message_id)
            if message is None or key in offered or not message_line(message):
                continue  # unresolvable, offered already, or nothing to read
            offered[(message.chat_id, message.message_id)] = TranscriptCandidate(
                text=message_line(message),
                match="source-ref",
                chat_id=message.chat_id,
                message_id=message.message_id,
                score=1.0,
            )
        if len(offered) < limit:
            hits = self.index.search(
                self.scope,
                query,
                around=self.around or None,
                limit=limit,
                chat_ids=self.chat_ids,
            )
            for hit in hits:
                key = (hit.chat_id, hit.message_id)
                if key in offered or len(offered) >= limit:
                    continue
                hit_message = TranscriptMessage(hit.chat_id, hit.message_id, hit.index, hit.message)
                lines = [
                    message_line(m)
                    for m in sorted([*(hit.around or ()), hit_message], key=lambda m: m.index)
                ]
                offered[key] = TranscriptCandidate(
                    text="\n".join(line for line in lines if line),
                    match="search",
                    chat_id=hit.chat_id,
                    message_id=hit.message_id,
                    score=hit.score,
                )
        return list(offered.values())

    async def acandidates(self, query: str, limit: int = 20) -> list[TranscriptCandidate]:
        from asgiref.sync import sync_to_async

        return await sync_to_async(self.candidates, thread_sensitive=True)(query, limit)
