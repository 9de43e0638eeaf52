"""The contract every conditional store and its transcript index honour (SPEC sections 1-5).

``TranscriptContract`` is not collected by itself. A backend's test module subclasses it as
``TestXxxContract`` and implements ``make_store()``, returning a conditional store whose
``.transcript`` is its index. Every test goes through the public API only, so the memory
store and the SQL stores (``DjangoConditionalChatStore(using=...)``) run the same checks.

``substring_matching = True`` declares a backend that matches substrings of the folded text
(the SQLite LIKE fallback): the few tests about whole-word matching then expect the
substring behaviour. Query words elsewhere are chosen so that no query term is a substring
of a word it must not match, so the rest of the suite holds in both modes.

The contract is one mixin per section, each in its own module: ``search`` (the seed
examples, hits, ``around``, paging and scores), ``ranking`` (scores and ties), ``scope``,
``filters`` (roles and the ``updated_at`` window), ``paging`` (``search_page``: totals and
cursors),
``indexing`` (what is indexed, terms and queries, the 256 KiB cut), ``stores`` (revisions,
tombstones, rollback, message ids), ``sources`` (``resolve_source``, the index on its own),
``spans`` (why a hit matched), ``appends`` (``append_messages``), ``async_twins``, ``invalid``, ``signals`` (what each write
sends, after commit) and ``bigrams`` (SPEC §8's opt-in CJK and Thai terms); ``helpers``
holds what they share. A module subclassing the
contract calls ``pytest.register_assert_rewrite("tests.contract")`` before importing it,
which covers every module of this package.
"""

from __future__ import annotations

from tests.contract.appends import AppendContract
from tests.contract.async_twins import AsyncContract
from tests.contract.base import ContractBase
from tests.contract.bigrams import BigramContract
from tests.contract.filters import FilterContract
from tests.contract.helpers import (
    ADA,
    BOB,
    DIGEST,
    HOSTILE,
    INDEXED_SHAPES,
    LIMIT,
    T0,
    UNKNOWN_SHAPES,
    IndexFailure,
    assistant,
    chat,
    filler,
    idf,
    ids,
    image_only,
    keys,
    ref,
    system,
    user,
)
from tests.contract.indexing import IndexingContract
from tests.contract.invalid import InvalidRecordContract
from tests.contract.paging import PagingContract
from tests.contract.ranking import RankingContract
from tests.contract.scope import ScopeContract
from tests.contract.search import SearchContract
from tests.contract.signals import SignalContract
from tests.contract.sources import SourceContract
from tests.contract.spans import SpansContract
from tests.contract.stores import StoreContract

__all__ = [
    "ADA",
    "BOB",
    "DIGEST",
    "HOSTILE",
    "INDEXED_SHAPES",
    "LIMIT",
    "T0",
    "UNKNOWN_SHAPES",
    "ContractBase",
    "IndexFailure",
    "TranscriptContract",
    "assistant",
    "chat",
    "filler",
    "idf",
    "ids",
    "image_only",
    "keys",
    "ref",
    "system",
    "user",
]


# Listed last section first: pytest collects inherited tests base class first, so the
# sections run in reading order, from search to invalid records.
class TranscriptContract(
    AppendContract,
    BigramContract,
    SignalContract,
    InvalidRecordContract,
    AsyncContract,
    PagingContract,
    FilterContract,
    SourceContract,
    StoreContract,
    SpansContract,
    IndexingContract,
    ScopeContract,
    RankingContract,
    SearchContract,
):
    """Subclass as ``TestSomethingContract`` and implement ``make_store``."""
