"""``ContractBase``: what every section of the contract needs from a backend's subclass."""

from __future__ import annotations

from typing import Any

import pytest


class ContractBase:
    """The backend's declarations and the ``store`` and ``index`` fixtures.

    Every section mixin derives from it; ``TranscriptContract`` combines the sections and a
    backend's test module subclasses that as ``TestXxxContract``, implementing ``make_store``.
    """

    #: What ``store.transcript.backend_name`` must say for this subclass.
    backend_name: str = "memory"
    #: True for a backend that matches substrings of the folded text (SQLite LIKE).
    substring_matching: bool = False

    def make_store(self) -> Any:
        raise NotImplementedError

    @pytest.fixture
    def store(self) -> Any:
        return self.make_store()

    @pytest.fixture
    def index(self, store: Any) -> Any:
        return store.transcript
