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
from typing import ClassVar, Self, TypeVar

__all__ = ["FORCED", "Forced", "SearchPolicy", "current_policy"]


@dataclass(frozen=True)
class SearchPolicy(ABC):
    """The thresholds the shared routes read (walks, page rows, essential terms).

    Four sizes, each read by several routes that ask the same question of it, so that
    one measured value answers it once rather than a near copy per route. The
    properties name what each route reads of them; tests and ablations may force one of
    those apart (``backends.forced_policies``) to reach a route on small data."""

    #: Queries of at most this many terms have few terms: their term subsets are
    #: enumerated (masks counted by inclusion-exclusion over 2^n - 1 subset counts) and
    #: their rows holding every term are walked newest chat first (a page of such rows is
    #: likely). Longer queries try the essential-terms plan instead (``sql.search.essential``),
    #: whose unread terms' masks are read best-first one by one for up to one term more
    #: (``unread_terms_max``), and in tiers for up to twice as many (``tiered_terms_max``).
    few_terms: int = 4
    #: Rows one statement reads and sorts whole at little cost: a mask with at least this
    #: many rows (or the page depth, if larger) is walked newest chat first instead, and
    #: the essential-terms plan reads the rarest terms' rows in one statement up to this
    #: many in all (``essential_rare_rows``).
    small_read_rows: int = 2_048
    #: The most rows a plan reads before another costs less: a walk bounded by a guess
    #: or chosen by a probe visits the newest chats of at most this many messages (then
    #: the rows are read and sorted), and the essential-terms plan stops reading terms
    #: past this many rows (``essential_max_rows``: then the unread terms' masks fill the
    #: page). 0: walks are never guessed nor bounded, and the plan reads no term.
    big_read_rows: int = 16_384
    #: Where the counts give N and every n_t: when they predict, as if the terms were
    #: independent, this many pages of rows of a mask within the newest chats of at most
    #: ``big_read_rows`` messages, those chats are walked at once, without the probe; a
    #: walk that finds less than a page falls back to the probe.
    walk_guess_margin: int = 4

    #: Whether a walk the probe chose is bounded by ``big_read_rows`` (an engine that
    #: cannot guess from counts walks mostly dense words, which a bound only delays).
    bounds_probed_walks: ClassVar[bool] = True
    #: Whether a roles search's probe counts every role's rows holding every term, a
    #: superset that reaches the walk's size sooner, rather than the roles' own (an
    #: engine that counts the roles' rows as cheaply keeps them: its walk then visits
    #: only what the roles hold).
    probes_every_role: ClassVar[bool] = False

    @property
    def probed_walk_max_rows(self) -> int:
        """The bound of a walk the probe chose (0: unbounded)."""
        return self.big_read_rows if self.bounds_probed_walks else 0

    @property
    def essential_rare_rows(self) -> int:
        """The essential-terms plan reads the rarest terms' rows in one statement up to
        this many in all (0: term by term)."""
        return self.small_read_rows

    @property
    def essential_max_rows(self) -> int:
        """The essential-terms plan stops reading terms past this many rows."""
        return self.big_read_rows

    @property
    def essential_min_terms(self) -> int:
        """The shortest query that tries the essential-terms plan where its n_t are
        counted (``essential_terms_from``)."""
        return self.few_terms + 1

    @property
    def unread_terms_max(self) -> int:
        """The most unread terms whose masks fill a page best-first: one more than
        ``few_terms``, so the shortest query the essential-terms plan takes is covered
        even when it reads none of its terms."""
        return self.few_terms + 1

    @property
    def tiered_terms_max(self) -> int:
        """The most unread terms whose masks fill a page in tiers (every mask reaching a
        raw score in one statement, past ``unread_terms_max``): twice ``few_terms``, so
        a query of eight common words is ranked without every match's histogram; more
        terms make too many masks to enumerate."""
        return 2 * self.few_terms

    @property
    @abstractmethod
    def single_statement_max(self) -> int:
        """Scopes of at most this many indexed messages rank every match in one
        statement; bigger ones count masks first and fetch only what the page needs."""

    @property
    def chat_lookup_max_rows(self) -> int:
        """A statement joining at most this many rows, known in advance, to their chats
        looks each chat up by its key instead of reading or hashing every chat of the
        filter: the one-statement size, up to which rows are handled one by one for less
        than any plan sets up."""
        return self.single_statement_max

    def essential_terms_from(self, *, stored: bool) -> int:
        """The shortest query that tries the essential-terms plan: every query of more
        than ``few_terms`` terms, and every query of two or more where each n_t is read
        from stored counts (``stored``), since trying the plan then costs no count."""
        return 2 if stored else self.essential_min_terms

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
