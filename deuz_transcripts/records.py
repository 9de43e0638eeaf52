"""Records that cross the public API, validated once at the boundary."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from .errors import InvalidRecord

__all__ = [
    "MAX_ID_LENGTH",
    "MAX_MESSAGE_ID_LENGTH",
    "MAX_NESTING",
    "MAX_SCOPE_FIELDS",
    "MIN_UPDATED_AT_MS",
    "ChatRecord",
    "MemorySourceRef",
    "TranscriptHit",
    "TranscriptMessage",
    "decode_message",
    "encode_message",
    "encoded_message",
    "fill_ids",
    "fill_message_ids",
    "scope_matches",
    "validate_scope",
]

#: Chat ids, message ids, roles, scope keys and scope values are at most this long.
MAX_ID_LENGTH = 255
#: A message may nest dicts and lists this deep (the message itself is level 1).
MAX_NESTING = 100
#: A scope (a chat's, or a filter) has at most this many fields: SQL checks each field
#: of a filter, and PostgreSQL gives every message one lexeme per field of its chat.
MAX_SCOPE_FIELDS = 32
#: Message ids may be longer: a filled id is ``<chat_id>:<index>[:<n>]``.
MAX_MESSAGE_ID_LENGTH = 300

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MILLISECOND = timedelta(milliseconds=1)
#: A number ``updated_at`` is epoch milliseconds (the SDK's ``Date.now()``) and must be at
#: least this (2000-01-01T00:00:00Z): ``time.time()`` (seconds, ~1.7e9) read as
#: milliseconds is January 1970, so a smaller number is refused, never stored silently.
#: Earlier dates are given as a ``datetime``.
MIN_UPDATED_AT_MS = 946_684_800_000

Scope = Mapping[str, str]
Message = Mapping[str, Any]


def _check_identifier(
    value: Any, field_name: str, *, allow_empty: bool = False, max_length: int = MAX_ID_LENGTH
) -> str:
    if not isinstance(value, str):
        raise InvalidRecord(field_name, f"must be a string, not {type(value).__name__}")
    if not value and not allow_empty:
        raise InvalidRecord(field_name, "must not be empty")
    if len(value) > max_length:
        raise InvalidRecord(field_name, f"is longer than {max_length} characters")
    if "\x00" in value:
        raise InvalidRecord(field_name, "must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidRecord(field_name, "is not valid Unicode (lone surrogate)") from None
    return value


def validate_scope(
    scope: Any, field_name: str = "scope", *, max_fields: int | None = MAX_SCOPE_FIELDS
) -> dict[str, str]:
    """A scope is a mapping of non-empty str keys to str values; returns a copy.

    At most ``MAX_SCOPE_FIELDS`` fields: every scope a caller passes in (a filter, a chat
    being written) comes through here. Only a record built from stored rows is unbounded
    (``max_fields=None``), so a chat stored before the bound still loads.
    """
    if not isinstance(scope, Mapping):
        raise InvalidRecord(
            field_name, f"must be a mapping of str to str, not {type(scope).__name__}"
        )
    if max_fields is not None and len(scope) > max_fields:
        raise InvalidRecord(field_name, f"has more than {max_fields} fields")
    return {
        _check_identifier(key, f"{field_name} key"): _check_identifier(
            value, f"{field_name}[{key!r}]", allow_empty=True
        )
        for key, value in scope.items()
    }


def scope_matches(chat_scope: Scope, scope_filter: Scope) -> bool:
    """Every field set in the filter must be equal in the chat's scope."""
    return all(chat_scope.get(key) == value for key, value in scope_filter.items())


def _to_datetime(value: Any) -> datetime:
    if value is None:
        return datetime.now(UTC)
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise InvalidRecord("updated_at", "must be timezone-aware")
        return value.astimezone(UTC)
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise InvalidRecord("updated_at", "must be a finite number of milliseconds")
        if value < MIN_UPDATED_AT_MS:
            raise InvalidRecord(
                "updated_at",
                f"{value!r} is before 2000-01-01 when read as epoch milliseconds; numbers "
                "are milliseconds (JavaScript's Date.now()), not seconds: pass "
                "time.time() * 1000 or an aware datetime",
            )
        try:
            return _EPOCH + timedelta(milliseconds=value)  # exact for int ms
        except (OverflowError, OSError, ValueError):
            raise InvalidRecord("updated_at", "is out of range") from None
    raise InvalidRecord(
        "updated_at", f"must be a datetime or epoch milliseconds, not {type(value).__name__}"
    )


def _check_nesting(message: Any, field_name: str) -> None:
    """At most ``MAX_NESTING`` levels of dicts and lists, counted without recursion."""
    stack = [(message, 1)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, Mapping) else value
        for child in children:
            if isinstance(child, Mapping | list | tuple):
                if depth >= MAX_NESTING:
                    raise InvalidRecord(field_name, f"is nested deeper than {MAX_NESTING} levels")
                stack.append((child, depth + 1))


#: ``json.dumps(message, ensure_ascii=False, allow_nan=False, separators=(",", ":"))``
#: without building an encoder per message (the same text).
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def encode_message(message: Any, field_name: str = "message") -> str:
    """The message as JSON text, exactly round-trippable (NUL and lone surrogates too).

    Deeper than ``MAX_NESTING`` levels is ``InvalidRecord``: beyond that, copying a
    message or reading its text would hit Python's recursion limit.
    """
    return encoded_message(message, field_name)[0]


def encoded_message(message: Any, field_name: str = "message") -> tuple[str, bytes]:
    """``encode_message`` and its UTF-8 bytes: the encoding that checks for lone
    surrogates is the one a digest hashes (a write digests every message of a chat)."""
    try:
        text = _ENCODER.encode(message)
    except (TypeError, ValueError) as exc:
        raise InvalidRecord(field_name, f"is not JSON-serializable ({exc})") from None
    except RecursionError:
        raise InvalidRecord(field_name, f"is nested deeper than {MAX_NESTING} levels") from None
    if text.count("[") + text.count("{") >= MAX_NESTING:  # else it cannot be that deep
        _check_nesting(message, field_name)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: escape them instead of failing
        text = json.dumps(message, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
        data = text.encode("ascii")
    return text, data


def decode_message(payload: str) -> dict[str, Any]:
    message: dict[str, Any] = json.loads(payload)  # payloads are encode_message's JSON objects
    return message


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class ChatRecord:
    """One chat as the stores and indexes take it (the SDK's ``ChatRecord``)."""

    chat_id: str
    scope: dict[str, str]
    messages: list[dict[str, Any]]
    message_ids: list[str | None] | None = None
    updated_at: datetime = field(default_factory=_now)

    def __post_init__(self) -> None:
        # The annotations are what a record holds once checked; callers may still pass
        # anything (``from_json`` passes JSON values through, e.g. epoch milliseconds
        # or None for ``updated_at``), so the raw values are checked as plain objects.
        _check_identifier(self.chat_id, "chat_id")
        # unbounded here: stores build records of stored chats; writes check the bound
        self.scope = validate_scope(self.scope, max_fields=None)
        messages: object = self.messages
        if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
            raise InvalidRecord("messages", "must be a list of message mappings")
        self.messages = list(messages)
        for position, message in enumerate(self.messages):
            if type(message) is not dict and not isinstance(message, Mapping):
                raise InvalidRecord(f"messages[{position}]", "must be a mapping")
            if "role" not in message:
                raise InvalidRecord(f"messages[{position}].role", "is missing")
            _check_identifier(message["role"], f"messages[{position}].role")
        message_ids: object = self.message_ids
        if message_ids is not None:
            if isinstance(message_ids, str | bytes) or not isinstance(message_ids, Sequence):
                raise InvalidRecord("message_ids", "must be a list of strings or None")
            self.message_ids = list(message_ids)
            if len(self.message_ids) != len(self.messages):
                raise InvalidRecord(
                    "message_ids",
                    f"has {len(self.message_ids)} ids for {len(self.messages)} messages",
                )
            for position, message_id in enumerate(self.message_ids):
                if message_id is not None:
                    _check_identifier(
                        message_id,
                        f"message_ids[{position}]",
                        allow_empty=True,
                        max_length=MAX_MESSAGE_ID_LENGTH,
                    )
        self.updated_at = _to_datetime(self.updated_at)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ChatRecord:
        """Build from the SDK's camelCase JSON (``chatId``...) or snake_case keys."""
        if not isinstance(data, Mapping):
            raise InvalidRecord("record", "must be a mapping")

        def pick(snake: str, camel: str) -> Any:
            return data[snake] if snake in data else data.get(camel)

        if "chat_id" not in data and "chatId" not in data:
            raise InvalidRecord("chat_id", "is missing")
        return cls(
            chat_id=pick("chat_id", "chatId"),
            scope=data.get("scope", {}),
            messages=data.get("messages", []),
            message_ids=pick("message_ids", "messageIds"),
            updated_at=pick("updated_at", "updatedAt"),
        )

    def to_json(self) -> dict[str, Any]:
        """The SDK's camelCase JSON, ``updatedAt`` in epoch milliseconds."""
        return {
            "chatId": self.chat_id,
            "scope": dict(self.scope),
            "messages": self.messages,
            "messageIds": self.message_ids,
            "updatedAt": (self.updated_at - _EPOCH) // _ONE_MILLISECOND,
        }


def fill_message_ids(record: ChatRecord) -> list[str]:
    """Ids as ``index_chat`` fills them: missing, empty or repeated ones become ``<chat_id>:<i>``.

    The first occurrence of an id keeps it. Should a filled id be taken by another
    message already, ``:<n>`` is appended until it is unique.
    """
    return fill_ids(record.chat_id, record.message_ids or [None] * len(record.messages))


def fill_ids(
    chat_id: str,
    given: Sequence[str | None],
    *,
    first: int = 0,
    stored: Callable[[str], bool] | None = None,
) -> list[str]:
    """``fill_message_ids`` of a chat's given ids. An append passes its own messages' ids,
    ``first`` the position of the first of them, and ``stored`` which ids the chat's
    stored messages hold: the same ids as filling the stored ids and the new ones
    together (each stored id is one of them, and taken), looking up only the few that
    matter."""
    explicit = {message_id for message_id in given if message_id}
    used: set[str] = set()
    filled: list[str] = []

    def taken(message_id: str) -> bool:
        return message_id in used or (stored is not None and stored(message_id))

    for offset, message_id in enumerate(given):
        if not message_id or taken(message_id):
            position = first + offset
            candidate = f"{chat_id}:{position}"
            suffix = 0
            while candidate in explicit or taken(candidate):
                suffix += 1
                candidate = f"{chat_id}:{position}:{suffix}"
            message_id = _check_identifier(
                candidate, f"message_ids[{offset}]", max_length=MAX_MESSAGE_ID_LENGTH
            )
        used.add(message_id)
        filled.append(message_id)
    return filled


@dataclass(frozen=True)
class TranscriptMessage:
    """One message of a chat; ``index`` counts every message, system ones too."""

    chat_id: str
    message_id: str
    index: int
    message: dict[str, Any]


@dataclass(frozen=True)
class TranscriptHit:
    """A search hit, best hit of a result scoring exactly 1.0.

    ``spans``: ``(start, end)`` character offsets, in the message's indexed text
    (``text.indexed_text``), of the words that matched the query, within the indexed
    first 256 KiB, the first 1,000 of them (``spans.MAX_HIT_SPANS``); the rule every
    surface highlights with (``spans.match_spans``).
    ``updated_at``: the hit's chat's ``updated_at`` (UTC) when the search was read, set on
    ``search_page``'s hits (``None`` from ``search``); it dates the hit, it does not name
    it, so hits compare equal without it.
    """

    chat_id: str
    message_id: str
    index: int
    message: dict[str, Any]
    score: float
    around: list[TranscriptMessage] | None = None
    spans: tuple[tuple[int, int], ...] = ()
    updated_at: datetime | None = field(default=None, compare=False)


@dataclass(frozen=True)
class MemorySourceRef:
    """What a memory record cites; the digest is carried, never checked."""

    kind: str
    chat_id: str
    message_id: str
    digest: str = ""

    @classmethod
    def coerce(cls, value: Any) -> MemorySourceRef:
        """Accept a ref, or its SDK JSON form (``chatId``, ``messageId``)."""
        if isinstance(value, MemorySourceRef):
            return value
        if isinstance(value, Mapping):
            return cls(
                kind=str(value.get("kind", "")),
                chat_id=value.get("chat_id", value.get("chatId")),
                message_id=value.get("message_id", value.get("messageId")),
                digest=str(value.get("digest", "")),
            )
        raise InvalidRecord("ref", f"must be a MemorySourceRef, not {type(value).__name__}")
