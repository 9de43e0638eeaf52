"""SQLite: the FTS5 table kept current by every write, whichever SQLite backend searches
(the row source, the counts and the backend are in ``sqlite.fts5``)."""

from __future__ import annotations

from collections.abc import Sequence

from django.db.backends.utils import CursorWrapper

from ...conf import conf
from ...models import Chat
from ..search_rows import StoredRow
from .common import FTS_TABLE, SQLiteRows, fts5_secure_delete_supported, fts_table_exists
from .fts5_expressions import fts_bodies

__all__ = ["Fts5Rows"]


class Fts5Rows(SQLiteRows):
    """Keeps the FTS5 table current whenever it exists, whichever SQLite backend searches.

    So ``SQLITE_BACKEND`` can move between ``"like"`` and FTS5 at any time: the
    table never misses a write, and a delete never names tokens it does not hold.
    """

    def _fts_rows(self, chat: Chat, rows: Sequence[StoredRow]) -> list[tuple[int, str]]:
        if not fts_table_exists(self.alias):
            return []
        kept = [(row, text) for row in rows if (text := row.search_text)]
        bodies = fts_bodies(chat.scope, chat.chat_id, [(text, row.role) for row, text in kept])
        return [(row.pk, body) for (row, _), body in zip(kept, bodies, strict=True)]

    def add_search_data(
        self, cursor: CursorWrapper, written: Sequence[tuple[Chat, Sequence[StoredRow]]]
    ) -> None:
        cursor.executemany(
            f"INSERT INTO {FTS_TABLE} (rowid, body) VALUES (%s, %s)",
            [fts_row for chat, rows in written for fts_row in self._fts_rows(chat, rows)],
        )

    def delete(self, cursor: CursorWrapper, chat: Chat, rows: Sequence[StoredRow]) -> None:
        """Every delete, a rewrite's too, erases in place where it can (``SQLITE_SECURE_DELETE``):
        a delete marker would keep the old text in older segments, which on 3.42+ nothing
        ever merges, even once the chat itself is deleted."""
        if conf.SQLITE_SECURE_DELETE:
            self.erase_in_place(cursor)
        cursor.executemany(
            f"INSERT INTO {FTS_TABLE} ({FTS_TABLE}, rowid, body) VALUES ('delete', %s, %s)",
            self._fts_rows(chat, rows),
        )

    def erase_in_place(self, cursor: CursorWrapper) -> bool:
        """On SQLite 3.42+, FTS5's ``secure-delete`` table option, switched on if it is not.

        With it a delete removes the row's entries from every segment that holds them
        instead of appending a delete marker, so nothing needs merging afterwards. The
        option is stored in the table: once a delete ran with it, SQLite older than 3.42
        cannot read the FTS5 table any more.
        """
        if not (fts_table_exists(self.alias) and fts5_secure_delete_supported()):
            return False
        cursor.execute(f"SELECT v FROM {FTS_TABLE}_config WHERE k = 'secure-delete'")
        found = cursor.fetchone()
        if found is None or found[0] != 1:
            cursor.execute(
                f"INSERT INTO {FTS_TABLE} ({FTS_TABLE}, rank) VALUES ('secure-delete', 1)"
            )
        return True

    def erase_deleted(self, cursor: CursorWrapper) -> None:
        """Merge every segment into one (FTS5 ``optimize``), on SQLite before 3.42.

        An FTS5 delete only writes a delete marker into a new segment: the deleted
        terms stay in older segments (``deuz_transcripts_fts_data``) until a merge
        reaches the oldest one. ``optimize`` is that merge; it costs in proportion to
        the whole index (~0.3 s for 50,000 messages) and nothing when already merged.
        """
        if fts_table_exists(self.alias):
            cursor.execute(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('optimize')")
