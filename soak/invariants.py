"""The soak's invariants, checked from the ledgers against what the database holds.

Pure: no Django, no database. ``observe.py`` reads the database into an ``Observed``;
``check`` compares it with every ledger entry and returns the violations, by kind:

- ``lost``: an acknowledged write is not what its chat holds (the chat is gone without a
  delete, behind the newest acknowledged revision, or holds a state no write made), or a
  word the chat holds is not found by search in the chat's scope;
- ``leaked``: a word found that nothing accounts for (of a deleted chat, of a write that
  was superseded, failed or killed holding its lock), or a chat, tombstone or legacy row
  the soak never made, or a deleted chat still stored;
- ``crossed``: a hit of a chat outside the scope searched;
- ``regressed``: a revision seen smaller than one acknowledged before the read began;
- ``backfill``: a ``backfill_transcripts`` run that failed while no fault was injected;
- ``unexpected_error``, and any violation a worker recorded while the run went
  (``http_500``, ``crossed``, ...).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .words import chat_tenant

__all__ = ["Observed", "ObservedChat", "Verdict", "check"]

WRITES = ("write", "append", "legacy")


@dataclass(frozen=True)
class ObservedChat:
    revision: int
    tokens: tuple[str, ...]


@dataclass
class Observed:
    """The database at the end: stored chats, tombstones, legacy rows, and the hits of
    each scope's searches for the tokens (``(scope tenant, chat id, tokens of the hit)``)."""

    chats: dict[str, ObservedChat] = field(default_factory=dict)
    tombstones: set[str] = field(default_factory=set)
    legacy_rows: set[str] = field(default_factory=set)
    hits: list[tuple[str, str, tuple[str, ...]]] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)  # (kind, detail)


@dataclass
class Verdict:
    violations: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def add(self, kind: str, detail: str) -> None:
        self.violations[kind].append(detail)

    def count(self, kind: str) -> int:
        return len(self.violations.get(kind, ()))

    @property
    def ok(self) -> bool:
        return not any(self.violations.values())


@dataclass
class _Chat:
    intents: list[dict[str, Any]] = field(default_factory=list)
    acks: list[dict[str, Any]] = field(default_factory=list)
    delete_intent: bool = False
    delete_acked: bool = False
    tokens: set[str] = field(default_factory=set)


def _chats(entries: Iterable[Mapping[str, Any]]) -> tuple[dict[str, _Chat], set[str]]:
    """Per chat: its writes' intents and acks, its deletes; and the op ids of writes
    killed while holding their lock (never acknowledged, never to be seen)."""
    chats: dict[str, _Chat] = defaultdict(_Chat)
    held: dict[str, dict[str, Any]] = {}
    acked: set[str] = set()
    kills: list[Mapping[str, Any]] = []
    for entry in entries:
        op, phase = entry.get("op"), entry.get("phase")
        if op in WRITES and phase == "intent":
            chats[entry["chat"]].intents.append(dict(entry))
            chats[entry["chat"]].tokens.update(entry["tokens_after"])
        elif op in WRITES and phase == "ack":
            chats[entry["chat"]].acks.append(dict(entry))
            acked.add(entry["op_id"])
        elif op == "delete":
            if phase == "intent":
                chats[entry["chat"]].delete_intent = True
            elif phase == "ack":
                chats[entry["chat"]].delete_acked = True
        elif op == "hold":
            held[entry["op_id"]] = dict(entry)
        elif op == "fault" and str(entry.get("kind", "")).startswith("kill9"):
            kills.append(entry)
    killed_holding = {
        op_id
        for op_id, mark in held.items()
        if op_id not in acked
        and any(k.get("target") == mark["proc"] and k["t0"] >= mark["t"] for k in kills)
    }
    return chats, killed_holding


def _regressions(chat_id: str, entries: list[Mapping[str, Any]], verdict: Verdict) -> None:
    """A read (or a write) that began after a write was acknowledged must see at least
    that revision (a write: more)."""
    acks = sorted((e["t1"], e["revision"]) for e in entries if e.get("phase") == "ack")
    if not acks:
        return
    ends = [end for end, _ in acks]
    best: list[int] = []
    for _, revision in acks:
        best.append(max(revision, best[-1] if best else revision))
    for entry in entries:
        seen = entry.get("revision")
        if seen is None:
            continue  # a delete may have come between: checked at the end
        before = bisect.bisect_left(ends, entry["t0"])
        if before == 0:
            continue
        floor = best[before - 1]
        write = entry.get("phase") == "ack"
        if seen < floor or (write and seen == floor):
            verdict.add(
                "regressed", f"{chat_id}: revision {seen} seen after {floor} was acknowledged"
            )


def check(entries: Iterable[Mapping[str, Any]], observed: Observed) -> Verdict:
    entries = list(entries)
    verdict = Verdict()
    chats, killed_holding = _chats(entries)
    found: dict[str, set[str]] = defaultdict(set)
    for scope_tenant, chat_id, tokens in observed.hits:
        if chat_tenant(chat_id) != scope_tenant:
            verdict.add("crossed", f"{chat_id} found in the scope of {scope_tenant}")
        for token in tokens:
            found[token].add(chat_id)

    owner = {token: chat_id for chat_id, chat in chats.items() for token in chat.tokens}
    for token, where in found.items():
        if token not in owner:
            verdict.add("leaked", f"{token} found in {sorted(where)}: no write made it")

    for chat_id, chat in sorted(chats.items()):
        _check_chat(chat_id, chat, observed, found, killed_holding, verdict)

    for chat_id in sorted(set(observed.chats) - set(chats)):
        verdict.add("leaked", f"{chat_id}: stored, but the soak never wrote it")
    deletes = {chat_id for chat_id, chat in chats.items() if chat.delete_intent}
    for chat_id in sorted(observed.tombstones - deletes):
        verdict.add("leaked", f"{chat_id}: a tombstone no delete made")
    legacy = {
        chat_id for chat_id, chat in chats.items() if any(i["op"] == "legacy" for i in chat.intents)
    }
    for chat_id in sorted(observed.legacy_rows - legacy):
        verdict.add("leaked", f"{chat_id}: a legacy row the soak never saved")

    by_chat: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for entry in entries:
        if (
            entry.get("op") in ("write", "append", "load")
            and entry.get("phase") in ("ack", None)
            and "t0" in entry
        ):
            by_chat[entry["chat"]].append(entry)
    for chat_id, seen in by_chat.items():
        _regressions(chat_id, seen, verdict)

    faults = [e for e in entries if e.get("op") == "fault"]
    for entry in entries:
        if entry.get("op") == "backfill" and entry["rc"] != 0:
            during = any(entry["t0"] <= f["t0"] <= entry["t1"] for f in faults)
            if not during:  # a backfill fails only when a fault hit it
                verdict.add("backfill", f"exit {entry['rc']} with no fault: {entry.get('tail')}")
    for entry in entries:
        if entry.get("phase") == "fail" and not entry.get("expected_error", False):
            verdict.add("unexpected_error", f"{entry.get('op')} {entry.get('error')}")
        elif entry.get("op") == "violation":
            verdict.add(entry["kind"], entry.get("detail", ""))
    for kind, detail in observed.problems:
        verdict.add(kind, detail)
    return verdict


def _check_chat(
    chat_id: str,
    chat: _Chat,
    observed: Observed,
    found: Mapping[str, set[str]],
    killed_holding: set[str],
    verdict: Verdict,
) -> None:
    stored = observed.chats.get(chat_id)
    shown = {token for token in chat.tokens if found.get(token)}
    if chat.delete_acked or (stored is None and chat.delete_intent):
        if stored is not None:
            verdict.add("leaked", f"{chat_id}: deleted, still stored at revision {stored.revision}")
        if chat.delete_acked and chat_id not in observed.tombstones:
            verdict.add("leaked", f"{chat_id}: deleted, no tombstone")
        if chat_id in observed.legacy_rows:
            verdict.add("leaked", f"{chat_id}: deleted, its legacy row is left")
        for token in sorted(shown):
            verdict.add("leaked", f"{chat_id}: {token} of a deleted chat found")
        return
    if stored is None:
        if chat.acks:
            verdict.add("lost", f"{chat_id}: acknowledged, no longer stored, never deleted")
        for token in sorted(shown):
            verdict.add("leaked", f"{chat_id}: {token} found, the chat is not stored")
        return
    if chat_id in observed.tombstones:
        verdict.add("leaked", f"{chat_id}: stored and tombstoned")
    newest = max((ack.get("revision") or 0 for ack in chat.acks), default=None)
    if newest is not None and stored.revision < newest:
        verdict.add(
            "lost", f"{chat_id}: at revision {stored.revision}, revision {newest} was acknowledged"
        )
    states = [
        tuple(ack["tokens_after"]) for ack in chat.acks if ack.get("revision") == stored.revision
    ]
    states += [
        tuple(intent["tokens_after"])
        for intent in chat.intents
        if intent["op_id"] not in killed_holding
        and (intent.get("expected") or 0) + (0 if intent["op"] == "legacy" else 1)
        == stored.revision
    ]
    if stored.tokens not in states:
        verdict.add("lost", f"{chat_id}: revision {stored.revision} holds a state no write made")
    for token in stored.tokens:
        if found.get(token) != {chat_id}:
            verdict.add(
                "lost", f"{chat_id}: {token} is stored, search finds {sorted(found.get(token, ()))}"
            )
    for token in sorted(shown - set(stored.tokens)):
        verdict.add("leaked", f"{chat_id}: {token} found, no longer (or never) the chat's")
