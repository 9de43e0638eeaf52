"""Hostile and random input through the public API, on every backend of the run.

Backends: memory always; the test database's own (PostgreSQL or SQLite FTS5); on SQLite
also the LIKE fallback. Each input either works as documented or raises ``InvalidRecord``
naming the field; after an error the store is unchanged; no other exception escapes
(no raw database error, no ``RecursionError``, no ``UnicodeEncodeError``). Random chats of
any shape (``tests/strategies.py``) must also load back exactly and search exactly as the
brute-force oracle says. Hostile arguments to the management commands are tested in
``test_commands.py``.

CI runs a bounded number of random examples. For a long local run::

    DEUZ_FUZZ_EXAMPLES=2000 .venv/bin/pytest tests/test_hostile_input.py tests/test_properties.py tests/test_scope_isolation.py
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from deuz_transcripts import (
    ChatRecord,
    InMemoryChatStore,
    InMemoryConditionalChatStore,
    InMemoryTranscriptIndex,
    InvalidRecord,
    MemorySourceRef,
    TranscriptContextSource,
)
from deuz_transcripts.models import Message
from deuz_transcripts.records import fill_message_ids
from deuz_transcripts.stores import DjangoChatStore, DjangoConditionalChatStore
from deuz_transcripts.text import message_terms
from tests import oracle
from tests.sql_support import backend_settings
from tests.strategies import chat_drafts, wordy_text

pytestmark = pytest.mark.django_db
ADA = {"userId": "ada"}


@pytest.fixture(params=["memory", "database", "like"])
def store(request) -> Iterator[Any]:
    """A conditional store with its index, holding one ordinary chat of Ada's."""
    with backend_settings(request.param):
        if request.param == "memory":
            made = InMemoryConditionalChatStore(InMemoryTranscriptIndex())
        else:
            made = DjangoConditionalChatStore()
        made.write_chat(
            ChatRecord("base", ADA, [{"role": "user", "content": "ordinary words here"}]),
            expected_revision=0,
        )
        made.kind = request.param
        yield made


@pytest.fixture(params=["memory", "database"])
def legacy(request) -> Any:
    return InMemoryChatStore() if request.param == "memory" else DjangoChatStore()


def observe(store: Any) -> Any:
    """Everything a caller can see of the store (plus row counts on SQL)."""
    chats = [(r.to_json(), store.load_chat(r.chat_id)[1]) for r in store.list_chats({})]
    hits = [(h.chat_id, h.message_id) for h in store.transcript.search({}, "ordinary words x")]
    rows = None if store.kind == "memory" else Message.objects.count()
    return json.dumps([chats, hits, rows], default=str, sort_keys=True)


def rejected(store: Any, field: str, call: Callable[[], Any]) -> InvalidRecord:
    """``call`` raises InvalidRecord naming ``field`` and changes nothing."""
    before = observe(store)
    with pytest.raises(InvalidRecord) as caught:
        call()
    assert caught.value.field == field, caught.value
    assert observe(store) == before
    return caught.value


def round_trip(store: Any, record: ChatRecord) -> ChatRecord:
    revision = store.load_chat(record.chat_id)
    store.write_chat(record, expected_revision=revision[1] if revision else 0)
    loaded, _ = store.load_chat(record.chat_id)
    assert loaded.messages == record.messages
    assert loaded.scope == record.scope
    return loaded


def chat_of(chat_id: str, *contents: Any, scope: dict | None = None, ids=None) -> ChatRecord:
    return ChatRecord(
        chat_id,
        ADA if scope is None else scope,
        [{"role": "user", "content": c} for c in contents],
        message_ids=ids,
    )


def hit_ids(store: Any, query: str, scope: dict | None = None) -> list[str]:
    return [h.chat_id for h in store.transcript.search(ADA if scope is None else scope, query)]


# ---------------------------------------------------------------- query syntax is data

SYNTAX = [
    # FTS5
    '"',
    '""',
    "*",
    "ordinary*",
    "NEAR(ordinary words)",
    "ordinary OR nothing",
    "ordinary AND NOT words",
    "^ordinary",
    "body:ordinary",
    "{body}:ordinary",
    "-ordinary",
    "+ordinary",
    "(ordinary",
    # tsquery
    "ordinary & words",
    "ordinary | x",
    "!ordinary",
    "ordinary <-> words",
    "ord:*",
    "ordinary:AB",
    "'ordinary'",
    "\\",
    # LIKE and SQL
    "%",
    "_",
    "%rdinar%",
    "ord_nary",
    "' OR '1'='1",
    '"; DROP TABLE deuz_transcripts_chat; --',
    "/* ordinary */",
    "-- ordinary",
    "ordinary\x00words",
    "\x00",
]


@pytest.mark.parametrize("query", SYNTAX)
def test_query_syntax_is_only_words(store, query):
    """Hits are exactly the oracle's for the query's terms, whatever its punctuation."""
    store.write_chat(chat_of("odd", "100% _under_ ord_nary x*y"), expected_revision=0)
    records = [r for r in store.list_chats({})]
    expected = oracle.search(records, {}, query, substring=store.kind == "like")
    found = store.transcript.search({}, query)
    assert [(h.chat_id, h.index) for h in found] == [(h.chat_id, h.index) for h in expected]


HOSTILE_VALUES = ["%", "_", "a%", "a_a", "'", '"', "\\", "-- x", "/*", "*", "NEAR", "ada "]


def test_hostile_ids_and_scope_values_are_exact_strings(store):
    """Wildcards and quotes in ids and scope values match only themselves."""
    for n, value in enumerate(HOSTILE_VALUES):
        record = chat_of(f"id{value}", f"hostile{n} shared", scope={"userId": value}, ids=[value])
        round_trip(store, record)
    for value in HOSTILE_VALUES:
        hits = store.transcript.search({"userId": value}, "shared hostile")
        assert [(h.chat_id, h.message_id) for h in hits] == [(f"id{value}", value)]
        assert [r.chat_id for r in store.list_chats({"userId": value})] == [f"id{value}"]
        ref = MemorySourceRef("m", f"id{value}", value)
        assert store.transcript.resolve_source({"userId": value}, ref).message_id == value
        assert store.transcript.resolve_source(ADA, ref) is None
    assert store.transcript.search({"userId": "a"}, "shared") == []


HOSTILE_KEYS = ["0", "-1", "1.5", "a.b", 'a"b', "a'b", "$", "$.a", "[0]", "*", "a b", "%", "_"]


def test_hostile_scope_keys_work_in_every_store(store):
    for n, key in enumerate(HOSTILE_KEYS):
        round_trip(store, chat_of(f"k{n}", f"keyword{n} shared", scope={key: "v"}))
    for n, key in enumerate(HOSTILE_KEYS):
        assert [r.chat_id for r in store.list_chats({key: "v"})] == [f"k{n}"]
        assert hit_ids(store, "shared", {key: "v"}) == [f"k{n}"]


def test_hostile_scope_keys_in_the_legacy_store(legacy):
    """The legacy store filters JSON: a key must never be read as a JSON path."""
    for n, key in enumerate(HOSTILE_KEYS):
        legacy.save_chat(chat_of(f"k{n}", "x", scope={key: "v", "other": str(n)}))
    for n, key in enumerate(HOSTILE_KEYS):
        assert [r.chat_id for r in legacy.list_chats({key: "v"})] == [f"k{n}"], key
        assert [r.chat_id for r in legacy.list_chats({key: "v", "other": str(n)})] == [f"k{n}"]
        assert legacy.list_chats({key: "w"}) == []


# ---------------------------------------------------------------- control characters, Unicode

CONTROLS = "".join(chr(c) for c in [*range(0, 32), 127, *range(0x80, 0xA0)])


def test_control_characters_round_trip_in_content(store):
    loaded = round_trip(store, chat_of("ctl", f"before{CONTROLS}after", {"nested": CONTROLS}))
    assert loaded.messages[0]["content"] == f"before{CONTROLS}after"
    assert hit_ids(store, "before") == ["ctl"]
    assert hit_ids(store, "after") == ["ctl"]


def test_control_characters_in_ids_round_trip_except_nul(store):
    ident = "id" + CONTROLS.replace("\x00", "")
    loaded = round_trip(store, chat_of(ident, "ctlword", scope={"userId": ident}, ids=[ident]))
    assert loaded.chat_id == ident and loaded.message_ids == [ident]
    assert [h.message_id for h in store.transcript.search({"userId": ident}, "ctlword")] == [ident]
    for field, record in [
        ("chat_id", lambda: chat_of("a\x00b", "x")),
        ("message_ids[0]", lambda: chat_of("c", "x", ids=["a\x00b"])),
        ("scope['userId']", lambda: chat_of("c", "x", scope={"userId": "a\x00"})),
        ("scope key", lambda: chat_of("c", "x", scope={"user\x00Id": "a"})),
        ("messages[0].role", lambda: ChatRecord("c", ADA, [{"role": "us\x00er"}])),
    ]:
        rejected(
            store, field, lambda record=record: store.write_chat(record(), expected_revision=0)
        )
    rejected(store, "chat_id", lambda: store.load_chat("a\x00"))
    rejected(store, "chat_id", lambda: store.delete_chat("a\x00"))
    rejected(store, "scope['userId']", lambda: store.transcript.search({"userId": "\x00"}, "x"))
    assert store.transcript.search(ADA, "\x00ordinary\x00") != []


LONE = "\ud800"


def test_lone_surrogates(store):
    """Content keeps them exactly; identifiers refuse them; lookups treat them as unknown."""
    loaded = round_trip(store, chat_of("sur", f"high{LONE}low \udfff end", {"k": LONE}))
    assert loaded.messages[0]["content"] == f"high{LONE}low \udfff end"
    assert hit_ids(store, "highlow") == ["sur"]  # folding drops the surrogate
    assert hit_ids(store, f"end{LONE}") == ["sur"]
    rejected(store, "chat_id", lambda: store.write_chat(chat_of(LONE, "x"), expected_revision=0))
    rejected(store, "chat_id", lambda: store.load_chat("a" + LONE))
    rejected(store, "scope['userId']", lambda: store.list_chats({"userId": LONE}))
    rejected(store, "chat_ids", lambda: store.transcript.search(ADA, "x", chat_ids=[LONE]))
    for ref in (MemorySourceRef("m", LONE, "sur:0"), MemorySourceRef("m", "sur", LONE)):
        assert store.transcript.resolve_source(ADA, ref) is None


def test_invalid_utf8_from_json(store):
    r"""JSON escapes of lone surrogates (what invalid UTF-8 becomes), bytes, wrong types."""
    data = json.loads(
        '{"chatId": "j1", "scope": {"userId": "ada"}, "messages": '
        '[{"role": "user", "content": "bad \\udcff byte"}]}'
    )
    loaded = round_trip(store, ChatRecord.from_json(data))
    assert loaded.messages[0]["content"] == "bad \udcff byte"
    decoded = b"caf\xe9 ok".decode("utf-8", errors="surrogateescape")
    round_trip(store, chat_of("j2", decoded))
    assert hit_ids(store, "ok") == ["j2"]
    for field, data in [
        ("chat_id", {"chatId": "j\udcff", "messages": []}),
        ("chat_id", {"chatId": b"bytes", "messages": []}),
        ("scope['userId']", {"chatId": "j3", "scope": {"userId": b"ada"}}),
        ("messages[0]", {"chatId": "j3", "messages": [{"role": "user", "content": b"\xff"}]}),
        ("message_ids[0]", {"chatId": "j3", "messages": [{"role": "u"}], "messageIds": [b"x"]}),
    ]:
        rejected(store, field, lambda data=data: store.write_chat(data, expected_revision=0))


def test_bidi_and_zero_width_characters(store):
    """Format characters vanish from terms; identifiers and scopes keep them exactly."""
    rtl = "\u202e"
    round_trip(
        store,
        chat_of(
            "bidi",
            f"pay{rtl}lap ev\u200bil \u2066iso\u2069late \u200fmark\u200e",
            scope={"userId": "ada\u200b"},
            ids=[f"m{rtl}1"],
        ),
    )
    hits = store.transcript.search({"userId": "ada\u200b"}, "paylap evil isolate mark")
    assert [(h.chat_id, h.message_id) for h in hits] == [("bidi", f"m{rtl}1")]
    assert store.transcript.search(ADA, "evil") == []  # "ada\u200b" is not "ada"
    assert hit_ids(store, "e\u200dvil\u200c", {"userId": "ada\u200b"}) == ["bidi"]


# ---------------------------------------------------------------- sizes


def test_a_100000_term_query_uses_its_first_32_terms(store, monkeypatch):
    terms = [f"w{n:06d}" for n in range(100_000)]  # same width: none holds another
    round_trip(store, chat_of("many", "w000005 w000031", "w000032 w099999"))
    searched: list[list[str]] = []
    index_class = type(store.transcript)
    real_search = index_class._search

    def counted(self: Any, request: Any) -> Any:
        searched.append(request.terms)
        return real_search(self, request)

    monkeypatch.setattr(index_class, "_search", counted)
    with CaptureQueriesContext(connection) as queries:
        hits = store.transcript.search(ADA, " ".join(terms))
    assert [(h.chat_id, h.index) for h in hits] == [("many", 0)]
    # the work of 32 terms: the backend gets those alone, in a bounded number of statements
    assert searched == [terms[:32]]
    assert len(queries) <= 40, len(queries)
    assert store.transcript.search(ADA, " ".join(["ordinary"] * 100_000)) != []


def test_ten_megabyte_message(store):
    dump = "early " + "lorem ipsum " * 900_000 + " lateword"
    loaded = round_trip(store, chat_of("big", dump, "small neighbour"))
    assert loaded.messages[0]["content"] == dump
    assert hit_ids(store, "early") == ["big"]
    assert store.transcript.search(ADA, "lateword") == []  # beyond the 256 KiB indexed
    assert [m.index for m in store.transcript.search(ADA, "early", around=1)[0].around] == [1]


def test_ids_and_terms_of_10000_characters(store):
    long = "x" * 10_000
    rejected(store, "chat_id", lambda: store.write_chat(chat_of(long, "x"), expected_revision=0))
    rejected(
        store,
        "message_ids[0]",
        lambda: store.write_chat(chat_of("c", "x", ids=[long]), expected_revision=0),
    )
    rejected(
        store,
        "scope['userId']",
        lambda: store.write_chat(chat_of("c", "x", scope={"userId": long}), expected_revision=0),
    )
    rejected(
        store,
        "scope key",
        lambda: store.write_chat(chat_of("c", "x", scope={long: "a"}), expected_revision=0),
    )
    rejected(
        store,
        "messages[0].role",
        lambda: store.write_chat(ChatRecord("c", ADA, [{"role": long}]), expected_revision=0),
    )
    assert store.transcript.resolve_source(ADA, MemorySourceRef("m", long, long)) is None
    assert store.load_chat("x" * 255) is None
    word = "q" * 10_000
    round_trip(store, chat_of("longterm", f"a {word} b"))
    assert hit_ids(store, word) == ["longterm"]
    if store.kind != "like":
        assert store.transcript.search(ADA, word[:-1]) == []


def test_duplicate_message_ids_are_filled_as_documented(store):
    loaded = round_trip(
        store, chat_of("dup", "one", "two", "three", "four", ids=["a", "a", "", "dup:1"])
    )
    assert loaded.message_ids == ["a", "dup:1:1", "dup:2", "dup:1"]
    ref = MemorySourceRef("m", "dup", "a")
    assert store.transcript.resolve_source(ADA, ref).message["content"] == "one"


NON_STRINGS = [1, 1.5, None, True, ["ada"], {"a": "b"}, b"ada"]


@pytest.mark.parametrize("value", NON_STRINGS, ids=repr)
def test_non_string_scope_values_and_keys(store, value):
    rejected(
        store,
        "scope['userId']",
        lambda: store.write_chat(chat_of("c", "x", scope={"userId": value}), expected_revision=0),
    )
    rejected(store, "scope['userId']", lambda: store.transcript.search({"userId": value}, "x"))
    rejected(store, "scope['userId']", lambda: store.list_chats({"userId": value}))
    if isinstance(value, int | float | bytes) or value is None:
        rejected(
            store,
            "scope key",
            lambda: store.write_chat(chat_of("c", "x", scope={value: "a"}), expected_revision=0),
        )
    rejected(store, "scope", lambda: store.transcript.search([("userId", "ada")], "x"))


# ---------------------------------------------------------------- nesting

DEPTHS = [10, 99, 100, 101, 300, 500, 1_000, 10_000]


def nested(shape: str, depth: int) -> dict[str, Any]:
    if shape == "lists":
        value: Any = "deepword"
        for _ in range(depth):
            value = [value]
        return {"role": "user", "content": [{"type": "text", "text": "top"}, {"x": value}]}
    if shape == "dicts":
        value = "deepword"
        for _ in range(depth):
            value = {"k": value}
        return {
            "role": "tool",
            "content": [{"type": "tool-result", "output": {"type": "json", "value": value}}],
        }
    block: Any = {"type": "tool_result", "content": "deepword"}  # Anthropic blocks
    for _ in range(depth):
        block = {"type": "tool_result", "content": [block]}
    return {"role": "user", "content": [block]}


def depth_of(value: Any) -> int:
    """Containers (dicts and lists) on the longest path, the message itself included."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        value, level = stack.pop()
        children = value.values() if isinstance(value, dict) else value
        if isinstance(value, dict | list):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in children)
    return deepest


def test_nesting_limit_is_exactly_100_levels(store):
    at_limit = nested("lists", 97)
    assert depth_of(at_limit) == 100
    round_trip(store, ChatRecord("limit", ADA, [at_limit]))
    over = nested("lists", 98)
    rejected(
        store,
        "messages[0]",
        lambda: store.write_chat(ChatRecord("over", ADA, [over]), expected_revision=0),
    )


@pytest.mark.parametrize("shape", ["lists", "dicts", "anthropic"])
def test_deeply_nested_content_works_or_is_rejected_at_every_depth(store, shape):
    """Up to 100 levels are stored; deeper is InvalidRecord naming the message, never a crash."""
    for depth in DEPTHS:
        record = ChatRecord(f"deep{depth}", ADA, [nested(shape, depth)])
        if depth_of(record.messages[0]) <= 100:
            round_trip(store, record)
            continue
        rejected(
            store,
            "messages[0]",
            lambda record=record: store.write_chat(record, expected_revision=0),
        )
        rejected(store, "messages[0]", lambda record=record: store.transcript.index(record))
    found = hit_ids(store, "deepword")
    assert found == (["deep10"] if shape == "anthropic" else [])


def test_deeply_nested_content_in_the_legacy_stores(legacy):
    record = ChatRecord("deep", ADA, [nested("lists", 10_000)])
    with pytest.raises(InvalidRecord) as caught:
        legacy.save_chat(record)
    assert caught.value.field == "messages[0]"
    assert legacy.load_chat("deep") is None


# ---------------------------------------------------------------- context source


def test_context_source_with_hostile_refs(store):
    ok = MemorySourceRef("m", "base", "base:0")
    refs = [
        MemorySourceRef("m", LONE, "x"),
        MemorySourceRef("m", "x" * 10_000, "y"),
        MemorySourceRef("m", "a\x00", "b"),
        {"kind": "m", "chatId": 5, "messageId": None},
        ok,
    ]
    source = TranscriptContextSource(store.transcript, ADA, refs=refs)
    candidates = source.candidates("ordinary %' OR 1=1 --")
    assert [(c.chat_id, c.match) for c in candidates] == [("base", "source-ref")]


# ---------------------------------------------------------------- random chats, any shape

EXAMPLES = int(os.environ.get("DEUZ_FUZZ_EXAMPLES", "40"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def finite_json(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(finite_json(v) for v in value)
    if isinstance(value, dict):
        return all(finite_json(v) for v in value.values())
    return True


class Rollback(Exception):
    """Undoes one example's writes on the test database."""


def write_all(store: Any, drafts: list[dict[str, Any]]) -> list[ChatRecord]:
    """Write each draft; it succeeds or raises InvalidRecord naming a real field."""
    written = []
    for draft in drafts:
        try:
            record = ChatRecord.from_json(draft)
            store.write_chat(record, expected_revision=0)
        except InvalidRecord as exc:
            assert exc.field.split("[")[0].split(".")[0] in (
                "chat_id",
                "scope",
                "messages",
                "message_ids",
                "updated_at",
            ), exc
            bad_json = not all(finite_json(m) for m in draft["messages"])
            assert bad_json or exc.field != "messages" or "nested" in str(exc), exc
            assert store.load_chat(draft["chatId"]) is None  # nothing half-written
            continue
        written.append(record)
    return written


def check(store: Any, written: list[ChatRecord], queries: list[str], substring: bool) -> None:
    for record in written:
        loaded, revision = store.load_chat(record.chat_id)
        assert revision == 1
        assert loaded.messages == record.messages  # exact round trip, NaN excluded
        assert loaded.message_ids == fill_message_ids(record)
    own = [
        term
        for record in written
        for message in record.messages
        for term in (message_terms(message) or [])[:2]
    ]
    for query in [*queries, *own[:6], " ".join(own)]:
        for scope in ({}, {"userId": "ada"}):
            expected = oracle.search(written, scope, query, around=1, limit=30, substring=substring)
            found = store.transcript.search(scope, query, around=1, limit=30)
            assert [(h.chat_id, h.message_id, h.index) for h in found] == [
                (h.chat_id, h.message_id, h.index) for h in expected
            ]
            for hit, want in zip(found, expected, strict=True):
                assert hit.score == pytest.approx(want.score, abs=1e-9)
                assert tuple(m.message_id for m in hit.around) == want.around


@contextmanager
def store_for(backend: str) -> Iterator[Any]:
    """A conditional store on the memory index, the database's backend or SQLite's LIKE."""
    with backend_settings(backend):
        if backend == "memory":
            yield InMemoryConditionalChatStore(InMemoryTranscriptIndex())
        else:
            yield DjangoConditionalChatStore()


@pytest.mark.parametrize("backend", ["memory", "database", "like"])
@FUZZ
@given(
    drafts=st.integers(1, 4).flatmap(lambda n: st.tuples(*[chat_drafts(i) for i in range(n)])),
    queries=st.lists(wordy_text, min_size=1, max_size=3),
)
def test_random_chats_store_exactly_and_search_like_the_oracle(backend, drafts, queries):
    assume(len({d["chatId"] for d in drafts}) == len(drafts))
    with store_for(backend) as store:
        try:
            with transaction.atomic():
                written = write_all(store, list(drafts))
                check(store, written, queries, substring=backend == "like")
                raise Rollback
        except Rollback:
            pass


@pytest.mark.parametrize("backend", ["memory", "database", "like"])
def test_around_is_in_chat_order_after_rewrites(backend):
    """Found by the random chats above, on PostgreSQL: rewritten rows came back in heap order."""
    with store_for(backend) as store:
        if backend == "database" and connection.vendor == "postgresql":
            with connection.cursor() as cursor:  # the plans a bigger table gets: heap order
                cursor.execute("SET LOCAL enable_indexscan = off")
                cursor.execute("SET LOCAL enable_seqscan = off")
        texts = [f"filler{n}" for n in range(7)]
        texts[3] = "needle"
        store.write_chat(
            ChatRecord("c", {"u": "a"}, [{"role": "user", "content": t} for t in texts]),
            expected_revision=0,
        )
        for revision, changed in enumerate([0, 1, 2], start=1):  # rows before the hit move
            texts[changed] += "x"
            record = ChatRecord("c", {"u": "a"}, [{"role": "user", "content": t} for t in texts])
            store.write_chat(record, expected_revision=revision)
            [hit] = store.transcript.search({"u": "a"}, "needle", around=3)
            assert [m.index for m in hit.around] == [0, 1, 2, 4, 5, 6]
