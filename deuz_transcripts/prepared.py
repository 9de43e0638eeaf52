"""A chat validated once and ready to store: what every index and store writes from.

``PreparedChat.of(record)`` validates a record, fills its message ids as ``index_chat``
fills them and encodes each message to its JSON payload, once. The memory index, the
SQL write unit, the stores, the backfill and the verifier all take the result, so none
of them validates or encodes a message again. Terms are extracted lazily per message:
a rewrite of a long chat folds only the messages whose digest changed.

Pure Python: no Django import.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

from .errors import InvalidRecord
from .records import (
    ChatRecord,
    decode_message,
    encoded_message,
    fill_message_ids,
    validate_scope,
)
from .text import is_system, message_terms, text_rules_tag

__all__ = [
    "STORED_FORM_VERSION",
    "PreparedChat",
    "PreparedMessage",
    "message_digest",
    "payload_digest",
]

#: Bump when the text rules change what a message indexes: re-indexing then rewrites rows.
STORED_FORM_VERSION = 1


@dataclass(frozen=True)
class PreparedMessage:
    """One message ready for storage: its JSON payload, position and (lazily) terms."""

    index: int
    message_id: str
    role: str
    payload: str
    #: Position among the chat's non-system messages; ``None`` for a system message.
    visible_position: int | None
    #: Changes whenever anything the stored row or its terms come from changes
    #: (``message_digest``): a write compares it with each stored row's.
    digest: str = field(repr=False)
    message: Mapping[str, Any] = field(repr=False, compare=False)

    @cached_property
    def terms(self) -> list[str] | None:
        """Distinct terms of the indexed text; ``None`` for a system message."""
        return message_terms(self.message)

    @property
    def search_text(self) -> str:
        """The terms separated by spaces (``""`` when none): the stored search form."""
        return " ".join(self.terms or ())

    @property
    def has_terms(self) -> bool:
        return bool(self.terms)


@dataclass(frozen=True)
class PreparedChat:
    """A validated chat with complete, unique message ids; read-only.

    It carries the ``ChatRecord`` fields (``chat_id``, ``scope``, ``messages``,
    ``message_ids``, ``updated_at``), so an ``index()`` override written for records
    reads it the same way.
    """

    chat_id: str
    scope: Mapping[str, str]
    updated_at: datetime
    prepared: tuple[PreparedMessage, ...]

    @classmethod
    def of(cls, record: Any) -> PreparedChat:
        """Validate ``record`` (a ``ChatRecord`` or its JSON form) once; a
        ``PreparedChat`` is returned as it is (it cannot have changed)."""
        if isinstance(record, PreparedChat):
            return record
        checked = check_record(record)
        return cls.from_checked(checked, fill_message_ids(checked))

    @classmethod
    def from_checked(
        cls,
        record: ChatRecord,
        message_ids: Sequence[str],
        *,
        first_index: int = 0,
        first_visible: int = 0,
    ) -> PreparedChat:
        """From a record validated just now and its filled ids (no second validation);
        ``first_index``/``first_visible``: the positions of its first message, for
        messages appended after a stored chat's (errors still name the record's fields)."""
        prepared = []
        visible = first_visible
        for position, (message, message_id) in enumerate(
            zip(record.messages, message_ids, strict=True), start=first_index
        ):
            system = is_system(message)  # exactly when ``message_terms`` is None
            visible_position = None if system else visible
            payload, encoded = encoded_message(message, f"messages[{position - first_index}]")
            prepared.append(
                PreparedMessage(
                    index=position,
                    message_id=message_id,
                    role=message["role"],
                    payload=payload,
                    visible_position=visible_position,
                    digest=payload_digest(message_id, visible_position, encoded),
                    message=message,
                )
            )
            if not system:
                visible += 1
        return cls(record.chat_id, dict(record.scope), record.updated_at, tuple(prepared))

    @property
    def messages(self) -> list[dict[str, Any]]:
        """Fresh copies of the messages, decoded from their payloads."""
        return [decode_message(message.payload) for message in self.prepared]

    @property
    def message_ids(self) -> list[str]:
        return [message.message_id for message in self.prepared]

    def compute_ahead(self) -> PreparedChat:
        """Compute every message's terms now, as a write of a new chat needs them:
        before its transaction (``backfill``), so the lock is not held through them. On
        SQLite that lock is the database's one write lock."""
        for message in self.prepared:
            _ = message.terms
        return self

    @property
    def indexed_count(self) -> int:
        """Messages with at least one term (extracts every message's terms)."""
        return sum(1 for message in self.prepared if message.terms)

    def to_record(self) -> ChatRecord:
        """A new, independent ``ChatRecord`` of this chat (ids filled)."""
        return ChatRecord(
            chat_id=self.chat_id,
            scope=dict(self.scope),
            messages=self.messages,
            message_ids=list(self.message_ids),
            updated_at=self.updated_at,
        )

    def to_json(self) -> dict[str, Any]:
        return self.to_record().to_json()


def message_digest(
    message_id: str, visible_position: int | None, payload: str, rules_tag: str | None = None
) -> str:
    """A stored row's digest under the term rule in force (or the one ``rules_tag`` names):
    a row written under another rule (``CJK_BIGRAMS``) no longer matches, so a backfill
    rewrites it."""
    return payload_digest(message_id, visible_position, payload.encode("utf-8"), rules_tag)


def payload_digest(
    message_id: str, visible_position: int | None, payload: bytes, rules_tag: str | None = None
) -> str:
    """``message_digest`` of a payload already encoded to UTF-8."""
    tag = text_rules_tag() if rules_tag is None else rules_tag
    key = f"{STORED_FORM_VERSION}{tag}\x00{message_id}\x00{visible_position}\x00"
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=16)
    digest.update(payload)  # the hash of key + payload, without copying both
    return digest.hexdigest()


def check_record(record: Any, *, revalidate: bool = True) -> ChatRecord:
    """Accept a ``ChatRecord`` or its JSON form to write; anything else, or a scope of
    more than ``MAX_SCOPE_FIELDS`` fields, is ``InvalidRecord``. ``revalidate=False``:
    ``record`` was built just now by the caller (no one else can have changed it)."""
    if isinstance(record, ChatRecord) and not revalidate:
        checked = record
    elif isinstance(record, ChatRecord):
        # Re-validate: dataclasses are mutable, the caller may have changed fields.
        checked = ChatRecord(
            chat_id=record.chat_id,
            scope=record.scope,
            messages=record.messages,
            message_ids=record.message_ids,
            updated_at=record.updated_at,
        )
    elif isinstance(record, Mapping):
        checked = ChatRecord.from_json(record)
    else:
        raise InvalidRecord("record", f"must be a ChatRecord, not {type(record).__name__}")
    validate_scope(checked.scope)  # the bound, for writes (records of stored rows skip it)
    return checked
