"""An append as the whole chat it equals, read from the database only if asked.

``DjangoConditionalChatStore.append_messages`` gives ``index()`` an ``AppendedChat``:
the stock ``DjangoTranscriptIndex.index`` writes its ``tail`` alone (the cost follows the
new messages), while an ``index()`` of the caller's own sees the whole chat, as for any
write (its ``messages`` and ``prepared`` load the stored messages under the write's lock).
"""

from __future__ import annotations

from functools import cached_property

from ..appends import appended_to
from ..models import Chat
from ..prepared import PreparedChat, PreparedMessage
from .stored import record_from_rows
from .writer import chat_messages

__all__ = ["AppendedChat"]


class AppendedChat(PreparedChat):
    """The stored chat ``row`` (as locked, in database ``using``) with ``tail``, the new
    messages ``ChatWriter.appended`` prepared, after its own."""

    using: str
    row: Chat
    tail: PreparedChat
    #: The tail's first position: the stored messages are those before it.
    first: int

    def __init__(self, using: str, row: Chat, tail: PreparedChat) -> None:
        # the frozen dataclass's fields but ``prepared``, which is read when first asked
        for name, value in (
            ("chat_id", tail.chat_id),
            ("scope", tail.scope),
            ("updated_at", tail.updated_at),
            ("using", using),
            ("row", row),
            ("tail", tail),
            ("first", tail.prepared[0].index if tail.prepared else row.message_count),
        ):
            object.__setattr__(self, name, value)

    @cached_property
    def prepared(self) -> tuple[PreparedMessage, ...]:
        """Every message: the stored ones before the tail's first position (the tail may
        be written already), then the tail's, with ids and positions as ``write_chat`` of
        the whole chat gives them."""
        stored = chat_messages(self.using, self.row).filter(position__lt=self.first)
        whole = appended_to(
            record_from_rows(self.row, list(stored.order_by("position"))), self.tail.to_record()
        )
        return PreparedChat.of(whole).prepared

    def __repr__(self) -> str:
        return f"AppendedChat(chat_id={self.chat_id!r}, new={len(self.tail.prepared)})"
