"""The SQL half: the index facade, its write unit, its search planner and hit builder."""

from __future__ import annotations

from .errors import database_errors
from .index import DjangoTranscriptIndex
from .writer import ChatWriter, LockedChat

__all__ = ["ChatWriter", "DjangoTranscriptIndex", "LockedChat", "database_errors"]
