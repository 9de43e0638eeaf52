"""``python -m bench --policy NAME=INTEGER``: the ablation of one PlanPolicy threshold."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from bench.__main__ import apply_policy, parse_args
from deuz_transcripts.backends import policy


@pytest.fixture
def restored_policy() -> Iterator[None]:
    saved = policy.DEFAULT_POLICY
    yield
    policy.DEFAULT_POLICY = saved


def test_policy_changes_are_parsed_and_reach_the_planner(restored_policy: None) -> None:
    args = parse_args(["--policy", "walk_min_rows=0", "--policy", "essential_max_rows=5"])
    assert args.policy == [("walk_min_rows", 0), ("essential_max_rows", 5)]
    apply_policy(args.policy)
    current = policy.current_policy()
    assert (current.walk_min_rows, current.essential_max_rows) == (0, 5)
    assert current.walk_max_terms == policy.PlanPolicy().walk_max_terms


def test_an_unknown_threshold_stops_the_run(restored_policy: None) -> None:
    with pytest.raises(SystemExit, match="no threshold walk_rows"):
        apply_policy([("walk_rows", 1)])
    assert policy.PlanPolicy() == policy.DEFAULT_POLICY


def test_a_change_that_is_no_integer_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--policy", "walk_min_rows=many"])
    assert "NAME=INTEGER" in capsys.readouterr().err


def test_the_scan_scope_threshold_is_also_the_setting_it_is_read_from(
    restored_policy: None, settings: Any
) -> None:
    settings.DEUZ_TRANSCRIPTS = {**settings.DEUZ_TRANSCRIPTS}
    apply_policy([("scan_scope_max", 0)])
    assert policy.current_policy().scan_scope_max == 0
