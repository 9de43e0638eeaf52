"""The planner's thresholds: what every engine's policy holds for the shared routes.

Each number picks between exact plans of different cost; none changes a result. Each
engine has its own frozen policy type (``PostgresPolicy``, ``Fts5Policy``, ``LikePolicy``)
with its own defaults, a ``SearchPolicy``: the routes of ``deuz_transcripts.sql.search``
read the fields here, and a route only one engine takes reads its engine's policy.
Tests and the bench replace an engine's defaults through ``FORCED`` to force every plan
on small data (``backends.forced_policies``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Self, TypeVar

__all__ = ["FORCED", "Forced", "SearchPolicy", "current_policy"]


@dataclass(frozen=True)
class SearchPolicy(ABC):
    """The thresholds the shared routes read (walks, page rows, essential terms)."""

    #: A mask with at least this many rows (or the page depth, if larger) is walked
    #: newest chat first instead of being read and sorted whole.
    walk_min_rows: int = 2_048
    #: The newest-first walk of rows holding every term is tried for queries of at most
    #: this many terms (longer ones rarely have a page of such rows).
    walk_max_terms: int = 4
    #: Where the counts give N and every n_t: when they predict, as if the terms were
    #: independent, ``walk_guess_margin`` pages of rows of a mask within the newest chats
    #: of at most this many messages, those chats are walked at once, without the probe;
    #: a walk that finds less than a page falls back to the probe. 0: always probe.
    walk_guess_max_rows: int = 16_384
    walk_guess_margin: int = 4
    #: A walk the probe chose (at least ``walk_min_rows`` rows hold every term) visits at
    #: most the newest chats of this many messages; when they hold less than a page, the
    #: rows holding every term are read and sorted instead. 0: unbounded.
    walk_probed_max_rows: int = 16_384
    #: Queries of at least this many terms first try the essential-terms plan: every
    #: term's count n_t alone, then only the rows of the rarest terms, until no row
    #: without them can reach the page (``sql.search.essential``).
    essential_min_terms: int = 5
    #: ... which gives up (for the mask plans) before reading a term of more rows than
    #: this, summed over the terms it read: then ranking every match costs no more.
    essential_max_rows: int = 20_000
    #: ... and past that, with at most this many terms left unread, fills the page from
    #: their masks' rows, best raw score first (``sql.search.unread_masks``); 0: ranks every
    #: match instead.
    unread_max_terms: int = 5
    #: ... and first reads, in one statement, the rows of the rarest terms, up to this many
    #: rows in all, whatever the query's length. 0: term by term.
    essential_rare_rows: int = 2_000
    #: A statement joining at most this many rows, known in advance, to their chats looks
    #: each chat up by its key instead of reading or hashing every chat of the filter.
    chat_lookup_max_rows: int = 5_000

    @property
    @abstractmethod
    def single_statement_max(self) -> int:
        """Scopes of at most this many indexed messages rank every match in one
        statement; bigger ones count masks first and fetch only what the page needs."""

    def essential_terms_from(self, *, stored: bool) -> int:
        """The shortest query that tries the essential-terms plan (``stored``: every n_t
        is read from stored counts, not counted)."""
        return self.essential_min_terms

    def with_settings(self) -> Self:
        """This policy with the thresholds the settings set, read now
        (``override_settings``)."""
        return self


Policy = TypeVar("Policy", bound=SearchPolicy)

#: Engines' policies by their type, replacing their defaults.
Forced = dict[type[SearchPolicy], SearchPolicy]

#: An engine's policy where tests or the bench replaced its defaults.
FORCED: Forced = {}


def current_policy(kind: type[Policy]) -> Policy:
    """The engine's policy: its defaults (or ``FORCED``) with the settings' thresholds."""
    forced = FORCED.get(kind)
    return (forced if isinstance(forced, kind) else kind()).with_settings()
