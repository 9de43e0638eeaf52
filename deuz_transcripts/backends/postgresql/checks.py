"""``verify`` on PostgreSQL: each row's ``tsvector`` against the terms it must hold, and
the stored term counts against the vectors."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from django.db import connections

from ...models import Chat, Message
from ...problems import Problem
from ...text import MAX_STORED_TERM_BYTES, stored_term
from ..base import SearchDataChecks, StoredMessage
from ..chat_filter import table
from .counts.stored import count_drift, rebuild_term_counts
from .storage import VECTOR_COLUMN, role_lexeme, scope_lexemes

__all__ = ["PostgresChecks"]


class PostgresChecks(SearchDataChecks):
    """Each row's tsvector holds exactly its message's stored terms."""

    def check_chat(
        self,
        chat: Chat,
        rows: Sequence[StoredMessage],
        expected_terms: Sequence[list[str] | None] | None,
    ) -> list[Problem]:
        return self.check_chats([(chat, rows, expected_terms)])

    def check_chats(
        self,
        chats: Sequence[tuple[Chat, Sequence[StoredMessage], Sequence[list[str] | None] | None]],
        *,
        full_run: bool = False,
    ) -> list[Problem]:
        """The vectors of a whole batch of chats in one statement."""
        checked = [(chat, rows, terms) for chat, rows, terms in chats if terms is not None and rows]
        if not checked:
            return []
        with connections[self.alias].cursor() as cursor:
            cursor.execute(
                f"SELECT id, tsvector_to_array({VECTOR_COLUMN}) FROM {table(Message)} "
                "WHERE chat_id = ANY(%s)",
                [[chat.pk for chat, _, _ in checked]],
            )
            vectors = dict(cursor.fetchall())
        problems = []
        roles: dict[str, str] = {}
        for chat, rows, expected_terms in checked:
            missing = stale = 0
            tokens = scope_lexemes(chat.scope, chat.chat_id)
            for row, terms in zip(rows, expected_terms, strict=True):
                want = _stored_terms(terms or ())
                if want:
                    role = roles.get(row.role)
                    if role is None:
                        role = roles[row.role] = role_lexeme(row.role)
                    want.update(tokens)
                    want.add(role)
                have = vectors.get(row.pk)
                if want and have is None:
                    missing += 1
                elif set(have or ()) != want:
                    stale += 1
            if missing:
                detail = f"{missing} row(s) without a vector"
                problems.append(Problem(chat.chat_id, "missing", detail))
            if stale:
                problems.append(
                    Problem(chat.chat_id, "stale", f"{stale} row(s) with a wrong vector")
                )
        return problems

    def sweep(
        self, batch_size: int, progress: Callable[[str, int, int], None] | None = None
    ) -> Iterator[Problem]:
        """Term counts that differ from the vectors (a message ``TRUNCATE``, a trigger
        dropped by hand): one pass over every vector."""
        with connections[self.alias].cursor() as cursor:
            drift = count_drift(cursor)
        if drift:
            tenant, role, lexeme, stored, actual = drift[0]
            more = "" if len(drift) == 1 else f" and {len(drift) - 1}+ more"
            detail = (
                f"stored term counts differ from the vectors: tenant {tenant!r} role "
                f"{role!r} term {lexeme or '(any)'!r} counts {stored}, its vectors "
                f"{actual}{more}"
            )
            yield Problem("", "counts", detail, source="sweep")

    def repair(self, problem: Problem) -> None:
        """Counts again from every vector (in ``fix``'s transaction)."""
        if problem.kind == "counts":
            with connections[self.alias].cursor() as cursor:
                rebuild_term_counts(cursor)


def _stored_terms(terms: Sequence[str]) -> set[str]:
    """``{stored_term(term) for term in terms}``; a term of at most 63 characters (255
    UTF-8 bytes at most) is stored as it is, so most messages need no call per term."""
    if max(map(len, terms), default=0) * 4 <= MAX_STORED_TERM_BYTES:
        return set(terms)
    return {stored_term(term) for term in terms}
