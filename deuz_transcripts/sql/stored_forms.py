"""Which stored forms a database's message rows may be in: recorded by the writes and the
backfill, read by check W004 and the admin search page.

The record can be trusted without reading the rows: every write of message rows adds its
form (after taking the chat's lock), and only a full backfill removes forms, at its
start, marking its own form ``reindexing`` until it has rewritten every chat. A chat
written under another form after that start is written after the backfill read it (or
the backfill waits for its lock and rewrites it), and that write adds its form again. A
backfill that stops early leaves ``reindexing`` set: a partly re-indexed database warns.
"""

from __future__ import annotations

from django.db import DatabaseError, transaction
from django.db.backends.utils import CursorWrapper

from ..backends.batched import Statement
from ..backends.chat_filter import table
from ..models import StoredForm
from ..stored_form import current_form, describe_form

__all__ = [
    "begin_reindex",
    "finish_reindex",
    "record_form",
    "record_form_sql",
    "stored_form_problem",
]

# ``ON CONFLICT ... DO NOTHING``: PostgreSQL and SQLite (3.24+) alike; no lock on a
# recorded form, so concurrent writers never wait for each other here.
_RECORD = (
    f"INSERT INTO {table(StoredForm)} (form, reindexing) VALUES (%s, %s) "
    "ON CONFLICT (form) DO NOTHING"
)


def record_form(cursor: CursorWrapper) -> None:
    """Adds the form in force to the forms of the cursor's database: for each write of
    message rows, in its transaction, after the chat's lock."""
    cursor.execute(*record_form_sql())


def record_form_sql() -> Statement:
    """``record_form``'s statement, for a write to send with its others."""
    return _RECORD, [current_form(), False]


def begin_reindex(using: str) -> None:
    """A backfill of every chat starts: forget the other forms, mark the form in force
    ``reindexing`` (until ``finish_reindex``)."""
    form = current_form()
    with transaction.atomic(using=using):
        StoredForm.objects.using(using).exclude(form=form).delete()
        StoredForm.objects.using(using).update_or_create(form=form, defaults={"reindexing": True})


def finish_reindex(using: str) -> None:
    """The backfill rewrote every chat in the form in force."""
    StoredForm.objects.using(using).filter(form=current_form()).update(reindexing=False)


def stored_form_problem(using: str) -> str | None:
    """Why searches of database ``using`` may miss messages stored under other rules than
    the settings', or None (also when the app's tables are not there yet)."""
    try:
        forms = dict(StoredForm.objects.using(using).values_list("form", "reindexing"))
    except DatabaseError:  # not migrated yet: nothing indexed to compare
        return None
    form = current_form()
    others = sorted(describe_form(other) for other in forms if other != form)
    if others:
        return (
            f"messages were indexed under {' and '.join(others)}, but the settings index "
            f"under {describe_form(form)}: searches miss their Chinese, Japanese and Thai "
            "words until they are re-indexed"
        )
    if forms.get(form):
        return (
            f"a re-index under {describe_form(form)} started and has not finished: "
            "searches miss the words of the messages it has not rewritten yet"
        )
    return None
