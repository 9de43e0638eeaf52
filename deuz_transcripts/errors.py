"""The app's own exceptions: callers never see a raw database error."""

from __future__ import annotations

from typing import Literal

__all__ = [
    "ChatDeleted",
    "InvalidRecord",
    "ReplicaUnavailable",
    "RevisionConflict",
    "SearchTimeout",
    "TranscriptError",
]


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


#: Why a search database (a replica) could not answer.
ReplicaProblem = Literal["unreachable", "behind", "conflict"]

_REPLICA_PROBLEMS: dict[str, str] = {
    "unreachable": "cannot be reached",
    "behind": "has not replayed this caller's last write within REPLICA_WAIT_MS",
    "conflict": "cancelled the search to replay the primary's changes (recovery conflict)",
}


class ReplicaUnavailable(TranscriptError):
    """The search database (``DEUZ_TRANSCRIPTS["SEARCH_DATABASE"]``) could not answer a
    read and ``REPLICA_FALLBACK`` is ``"error"``; ``reason`` says why.

    ``"unreachable"``: down or refusing connections; ``"behind"``: it had not replayed the
    caller's own last write within ``REPLICA_WAIT_MS``; ``"conflict"``: a hot standby
    cancelled the search to apply the primary's changes (SQLSTATE 40001, "conflict with
    recovery"). Trying again later, or on the primary, is the cure for each.
    """

    def __init__(self, alias: str, reason: ReplicaProblem, detail: str = "") -> None:
        self.alias = alias
        self.reason = reason
        self.detail = detail
        message = f"the search database {alias!r} {_REPLICA_PROBLEMS[reason]}"
        super().__init__(f"{message} ({detail}); try again" if detail else f"{message}; try again")
