"""SQLite: FTS5 (``fts5``) or, without it, LIKE over folded terms (``like``), sharing the write lock and storage (``common``)."""
