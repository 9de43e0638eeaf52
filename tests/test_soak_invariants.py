"""The soak's invariant checker (soak/invariants.py) reports what it must: a planted lost
write, a word of a deleted chat found, a hit across scopes, a revision going back, a
superseded or killed write's word found, rows nobody made; and nothing for a clean run,
in-doubt writes included."""

from __future__ import annotations

from typing import Any

from soak.invariants import Observed, ObservedChat, check


def _write(
    op_id: str,
    chat: str,
    expected: int,
    tokens: list[str],
    t0: float,
    *,
    op: str = "write",
    acked: bool = True,
    proc: str = "writer-0.0",
) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = [
        {
            "proc": proc,
            "op": op,
            "phase": "intent",
            "op_id": op_id,
            "chat": chat,
            "expected": expected,
            "tokens_after": tokens,
            "t": t0,
        }
    ]
    if acked:
        entries.append(
            {
                "proc": proc,
                "op": op,
                "phase": "ack",
                "op_id": op_id,
                "chat": chat,
                "revision": expected + 1,
                "tokens_after": tokens,
                "t0": t0,
                "t1": t0 + 0.1,
            }
        )
    return entries


def _delete(op_id: str, chat: str, t0: float) -> list[dict[str, Any]]:
    return [
        {"op": "delete", "phase": "intent", "op_id": op_id, "chat": chat, "t": t0},
        {"op": "delete", "phase": "ack", "op_id": op_id, "chat": chat, "t0": t0, "t1": t0 + 0.1},
    ]


#: t000.a: created, then rewritten; t001.b: created, then deleted; t000.c: a write in
#: doubt (killed before its ack) that committed; t001.d: one in doubt that did not.
LEDGER = [
    *_write("w/1", "t000.a", 0, ["qaaaaaaaaa1"], 1.0),
    *_write("w/2", "t000.a", 1, ["qaaaaaaaaa2", "qaaaaaaaaa3"], 2.0),
    *_write("w/3", "t001.b", 0, ["qbbbbbbbbb1"], 1.0),
    *_delete("d/1", "t001.b", 3.0),
    *_write("w/4", "t000.c", 0, ["qccccccccc1"], 1.0, acked=False),
    *_write("w/5", "t001.d", 0, ["qddddddddd1"], 1.0, acked=False),
]


def _clean() -> Observed:
    return Observed(
        chats={
            "t000.a": ObservedChat(2, ("qaaaaaaaaa2", "qaaaaaaaaa3")),
            "t000.c": ObservedChat(1, ("qccccccccc1",)),
        },
        tombstones={"t001.b"},
        hits=[
            ("t000", "t000.a", ("qaaaaaaaaa2",)),
            ("t000", "t000.a", ("qaaaaaaaaa3",)),
            ("t000", "t000.c", ("qccccccccc1",)),
        ],
    )


def test_a_clean_run_has_no_violation() -> None:
    verdict = check(LEDGER, _clean())
    assert verdict.ok, dict(verdict.violations)


def test_an_acknowledged_write_not_found_by_its_words_is_lost() -> None:
    observed = _clean()
    observed.hits = [hit for hit in observed.hits if "qaaaaaaaaa3" not in hit[2]]
    verdict = check(LEDGER, observed)
    assert verdict.count("lost") == 1 and "qaaaaaaaaa3" in verdict.violations["lost"][0]


def test_a_chat_behind_its_acknowledged_revision_is_lost() -> None:
    observed = _clean()
    observed.chats["t000.a"] = ObservedChat(1, ("qaaaaaaaaa1",))
    observed.hits = [("t000", "t000.a", ("qaaaaaaaaa1",)), ("t000", "t000.c", ("qccccccccc1",))]
    lost = check(LEDGER, observed).violations["lost"]
    assert any("revision 2 was acknowledged" in detail for detail in lost)


def test_an_acknowledged_chat_gone_without_a_delete_is_lost() -> None:
    observed = _clean()
    del observed.chats["t000.a"]
    observed.hits = [("t000", "t000.c", ("qccccccccc1",))]
    assert check(LEDGER, observed).violations["lost"] == [
        "t000.a: acknowledged, no longer stored, never deleted"
    ]


def test_a_word_of_a_deleted_chat_found_is_leaked() -> None:
    observed = _clean()
    observed.hits.append(("t001", "t001.b", ("qbbbbbbbbb1",)))
    verdict = check(LEDGER, observed)
    assert verdict.count("leaked") == 1 and "deleted chat" in verdict.violations["leaked"][0]


def test_a_superseded_word_found_is_leaked() -> None:
    observed = _clean()
    observed.hits.append(("t000", "t000.a", ("qaaaaaaaaa1",)))
    assert check(LEDGER, observed).count("leaked") == 1


def test_a_write_in_doubt_may_not_show_unless_stored() -> None:
    observed = _clean()
    observed.hits.append(("t001", "t001.d", ("qddddddddd1",)))
    assert check(LEDGER, observed).violations["leaked"] == [
        "t001.d: qddddddddd1 found, the chat is not stored"
    ]


def test_a_hit_outside_its_scope_is_crossed() -> None:
    observed = _clean()
    observed.hits.append(("t001", "t000.a", ("qaaaaaaaaa2",)))
    verdict = check(LEDGER, observed)
    assert verdict.violations["crossed"] == ["t000.a found in the scope of t001"]


def test_a_revision_read_smaller_than_one_acknowledged_before_is_regressed() -> None:
    load = {"op": "load", "chat": "t000.a", "revision": 1, "t0": 5.0, "t1": 5.1}
    verdict = check([*LEDGER, load], _clean())
    assert verdict.violations["regressed"] == ["t000.a: revision 1 seen after 2 was acknowledged"]


def test_a_write_killed_holding_its_lock_never_shows() -> None:
    holder = [
        *_write("h/1", "t002.h", 0, ["qhhhhhhhhh1"], 1.0, acked=False, proc="lockholder-0.0"),
        {"proc": "lockholder-0.0", "op": "hold", "op_id": "h/1", "t": 1.2},
        {
            "proc": "harness",
            "op": "fault",
            "kind": "kill9_holding_lock",
            "target": "lockholder-0.0",
            "t0": 1.5,
        },
    ]
    observed = _clean()
    observed.chats["t002.h"] = ObservedChat(1, ("qhhhhhhhhh1",))
    observed.hits.append(("t002", "t002.h", ("qhhhhhhhhh1",)))
    verdict = check([*LEDGER, *holder], observed)
    assert not verdict.ok
    assert any("t002.h" in detail for details in verdict.violations.values() for detail in details)


def test_rows_nobody_made_are_leaked() -> None:
    observed = _clean()
    observed.chats["t003.x"] = ObservedChat(1, ())
    observed.tombstones.add("t003.y")
    observed.legacy_rows.add("t003.z")
    assert check(LEDGER, observed).violations["leaked"] == [
        "t003.x: stored, but the soak never wrote it",
        "t003.y: a tombstone no delete made",
        "t003.z: a legacy row the soak never saved",
    ]


def test_worker_violations_and_unexpected_errors_are_reported() -> None:
    recorded = [
        {"op": "violation", "kind": "http_500", "detail": "'invoice': Server Error (500)"},
        {"op": "write", "phase": "fail", "error": "raw:OperationalError", "expected_error": False},
        {"op": "write", "phase": "fail", "error": "conflict", "expected_error": True},
    ]
    verdict = check([*LEDGER, *recorded], _clean())
    assert verdict.violations["http_500"] == ["'invoice': Server Error (500)"]
    assert verdict.violations["unexpected_error"] == ["write raw:OperationalError"]


def test_a_backfill_fails_only_when_a_fault_hit_it() -> None:
    runs = [
        {"op": "backfill", "t0": 10.0, "t1": 20.0, "rc": 1, "tail": "cannot reach the database"},
        {"op": "fault", "kind": "pg_restart_fast", "t0": 12.0},
        {"op": "backfill", "t0": 30.0, "t1": 40.0, "rc": 1, "tail": "failed: 1"},
        {"op": "backfill", "t0": 50.0, "t1": 60.0, "rc": 0, "tail": ""},
    ]
    assert check([*LEDGER, *runs], _clean()).violations["backfill"] == [
        "exit 1 with no fault: failed: 1"
    ]
