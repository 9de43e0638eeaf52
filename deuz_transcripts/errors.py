"""The app's own exceptions: callers never see a raw database error."""

from __future__ import annotations

__all__ = ["ChatDeleted", "InvalidRecord", "RevisionConflict", "SearchTimeout", "TranscriptError"]


class TranscriptError(Exception):
    """Base class of every error this app raises on purpose."""


class InvalidRecord(TranscriptError, ValueError):
    """A record, query argument or scope is malformed; ``field`` names the culprit."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")


class RevisionConflict(TranscriptError):
    """A conditional write passed a revision that is not the chat's current one."""

    def __init__(self, chat_id: str, expected_revision: int, current_revision: int) -> None:
        self.chat_id = chat_id
        self.expected_revision = expected_revision
        self.current_revision = current_revision
        super().__init__(
            f"chat {chat_id!r} is at revision {current_revision}, "
            f"the write expected {expected_revision}"
        )


class ChatDeleted(TranscriptError):
    """The chat was tombstoned; its id can never be written again."""

    def __init__(self, chat_id: str) -> None:
        self.chat_id = chat_id
        super().__init__(f"chat {chat_id!r} was deleted")


class SearchTimeout(TranscriptError):
    """A search ran past ``DEUZ_TRANSCRIPTS["SEARCH_TIMEOUT_MS"]`` and the database stopped it."""

    def __init__(self, timeout_ms: int) -> None:
        self.timeout_ms = timeout_ms
        super().__init__(
            f"the search took longer than {timeout_ms} ms and was stopped "
            "(SEARCH_TIMEOUT_MS); narrow it with a scope or fewer words"
        )
