"""Signals sent when a chat enters or leaves search, after the write has committed.

Integrators connect to them to invalidate caches (a user's search results, a context
compiler's candidates) or to keep an audit trail. Each is sent with ``sender`` the class
of the index or store that wrote, and the keyword arguments ``chat_id`` (``str``),
``scope`` (``dict[str, str]``, a copy; ``None`` only for ``chat_deleted`` of a chat the
database held no row for) and ``using`` (the database alias; ``None`` in memory).

- ``chat_indexed``: a chat was (re)indexed: ``index.index()``, ``index_chat()``, a
  store's ``write_chat()`` and each chat ``backfill_transcripts`` indexes.
- ``chat_removed``: a chat searchable until now left search: ``index.remove()`` and a
  store's ``delete_chat()``/``delete_chats()`` (before ``chat_deleted``).
- ``chat_deleted``: a conditional store tombstoned a chat not tombstoned before.

SQL writes send through ``transaction.on_commit(..., using=alias)``: nothing is sent
before the outermost transaction commits, and nothing at all if it rolls back (also a
savepoint's rollback). Memory has no transactions: the signal is sent as the call returns
(a memory store holds its index's signals until its own write is complete). Receivers
run in the thread that committed; a receiver's exception is logged on the
``deuz_transcripts.signals`` logger and never fails the write, which has happened.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial

from django.db import transaction
from django.dispatch import Signal

__all__ = [
    "chat_deleted",
    "chat_indexed",
    "chat_removed",
    "held_until_complete",
    "send_after_commit",
]

logger = logging.getLogger(__name__)

#: A chat was (re)indexed: written, appended to, ``index()``-ed or backfilled.
chat_indexed = Signal()
#: A chat searchable until now left search: ``remove()``, or a store's delete.
chat_removed = Signal()
#: A conditional store tombstoned a chat not tombstoned before.
chat_deleted = Signal()


class _Held(threading.local):
    """The memory sends this thread holds back, or ``None`` when none are held."""

    sends: list[Callable[[], None]] | None = None


_held = _Held()


@contextmanager
def held_until_complete() -> Iterator[None]:
    """Memory's ``on_commit``: sends inside the block wait for its end; dropped if it raises.

    A memory store wraps a write in it, so a receiver of its index's ``chat_indexed`` sees
    the store's new revision, as a SQL receiver sees the committed transaction.
    """
    if _held.sends is not None:  # nested: the outermost block sends
        yield
        return
    _held.sends = []
    try:
        yield
        sends = _held.sends
    finally:
        _held.sends = None
    for send in sends:
        send()


def _send(
    signal: Signal,
    sender: type,
    chat_id: str,
    scope: dict[str, str] | None,
    using: str | None,
) -> None:
    """``send_robust``: one failing receiver neither stops the others nor the caller."""
    for receiver, result in signal.send_robust(sender, chat_id=chat_id, scope=scope, using=using):
        if isinstance(result, Exception):
            logger.error(
                "receiver %r of a deuz_transcripts signal failed for chat %r",
                receiver,
                chat_id,
                exc_info=result,
            )


def send_after_commit(
    signal: Signal,
    sender: type,
    *,
    chat_id: str,
    scope: Mapping[str, str] | None,
    using: str | None,
) -> None:
    """Send ``signal`` once database ``using`` commits; at once when ``using`` is None."""
    if not signal.has_listeners(sender):
        return  # nothing to tell: no callback kept in the transaction
    copied = None if scope is None else dict(scope)
    send = partial(_send, signal, sender, chat_id, copied, using)
    if using is None:
        if _held.sends is not None:
            _held.sends.append(send)
        else:
            send()
    else:
        transaction.on_commit(send, using=using)
