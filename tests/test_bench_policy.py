"""``python -m bench --policy NAME=INTEGER``: the ablation of one threshold, in every
engine's policy that has it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from bench.__main__ import apply_policy, parse_args
from deuz_transcripts.backends import policy
from deuz_transcripts.backends.postgresql.policy import PostgresPolicy
from deuz_transcripts.backends.sqlite.fts5_policy import Fts5Policy


@pytest.fixture
def restored_policy() -> Iterator[None]:
    saved = policy.FORCED
    yield
    policy.FORCED = saved


def test_policy_changes_are_parsed_and_reach_the_planner(restored_policy: None) -> None:
    args = parse_args(["--policy", "small_read_rows=0", "--policy", "essential_max_rows=5"])
    assert args.policy == [("small_read_rows", 0), ("essential_max_rows", 5)]
    apply_policy(args.policy)
    for kind in (PostgresPolicy, Fts5Policy):
        current = policy.current_policy(kind)
        assert (current.small_read_rows, current.essential_max_rows) == (0, 5)
        assert current.few_terms == kind().few_terms


def test_a_threshold_of_one_engine_changes_that_engine_only(restored_policy: None) -> None:
    apply_policy([("lexeme_scope_min", 7)])
    assert policy.current_policy(PostgresPolicy).lexeme_scope_min == 7
    assert policy.current_policy(Fts5Policy) == Fts5Policy().with_settings()


def test_an_unknown_threshold_stops_the_run(restored_policy: None) -> None:
    with pytest.raises(SystemExit, match="no engine's policy has walk_rows"):
        apply_policy([("walk_rows", 1)])
    assert policy.FORCED == {}


def test_a_change_that_is_no_integer_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--policy", "small_read_rows=many"])
    assert "NAME=INTEGER" in capsys.readouterr().err


def test_the_scan_scope_threshold_is_also_the_setting_it_is_read_from(
    restored_policy: None, settings: Any
) -> None:
    settings.DEUZ_TRANSCRIPTS = {**settings.DEUZ_TRANSCRIPTS}
    apply_policy([("scan_scope_max", 0)])
    assert policy.current_policy(Fts5Policy).scan_scope_max == 0
