"""The contract every conditional store and its transcript index honour (SPEC sections 1-5).

``TranscriptContract`` is not collected by itself. A backend's test module subclasses it as
``TestXxxContract`` and implements ``make_store()``, returning a conditional store whose
``.transcript`` is its index. Every test goes through the public API only, so the memory
store and the SQL stores (``DjangoConditionalChatStore(using=...)``) run the same checks.

``substring_matching = True`` declares a backend that matches substrings of the folded text
(the SQLite LIKE fallback): the few tests about whole-word matching then expect the
substring behaviour. Query words elsewhere are chosen so that no query term is a substring
of a word it must not match, so the rest of the suite holds in both modes.
"""

from __future__ import annotations

import asyncio
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from deuz_transcripts import (
    ChatDeleted,
    ChatRecord,
    InMemoryChatStore,
    InvalidRecord,
    MemorySourceRef,
    RevisionConflict,
    TranscriptError,
    TranscriptHit,
    TranscriptMessage,
    index_chat,
)
from tests.factories import (
    ChatRecordFactory,
    MessageFactory,
    file_part,
    image_part,
    reasoning_part,
    text_part,
    tool_call_part,
    tool_result_part,
)

ADA = {"userId": "ada"}
BOB = {"userId": "bob"}
T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
DIGEST = "sha256:" + "0" * 64
LIMIT = 262_144  # bytes of folded UTF-8 text indexed per message


class IndexFailure(Exception):
    """What a deliberately broken index raises in the rollback tests."""


def idf(total: int, matching: int) -> float:
    """SPEC section 4, written out independently of ``deuz_transcripts.ranking``."""
    return math.log(1 + (total - matching + 0.5) / (matching + 0.5))


def ids(hits: list[TranscriptHit]) -> list[str]:
    return [hit.message_id for hit in hits]


def keys(hits: list[TranscriptHit]) -> list[tuple[str, int]]:
    return [(hit.chat_id, hit.index) for hit in hits]


def user(text: str) -> dict[str, Any]:
    return MessageFactory(text=text)


def assistant(text: str) -> dict[str, Any]:
    return MessageFactory(text=text, assistant=True)


def system(text: str) -> dict[str, Any]:
    return MessageFactory(text=text, system=True)


def image_only() -> dict[str, Any]:
    return {"role": "user", "content": [image_part()]}


def chat(
    chat_id: str,
    *messages: str | dict[str, Any],
    scope: dict[str, str] | None = None,
    message_ids: list[str | None] | None = None,
    updated_at: datetime = T0,
) -> ChatRecord:
    """A record; plain strings become user/assistant messages by position."""
    built = [
        m if isinstance(m, dict) else (assistant(m) if i % 2 else user(m))
        for i, m in enumerate(messages)
    ]
    return ChatRecordFactory(
        chat_id=chat_id,
        scope=dict(ADA if scope is None else scope),
        messages=built,
        message_ids=message_ids,
        updated_at=updated_at,
    )


def filler(nbytes: int) -> str:
    """ASCII words of exactly ``nbytes`` bytes, ending with a space."""
    return ("pad " * (nbytes // 4 + 1))[: nbytes - 1] + " "


def ref(chat_id: str, message_id: str, digest: str = DIGEST) -> MemorySourceRef:
    return MemorySourceRef(kind="user", chat_id=chat_id, message_id=message_id, digest=digest)


# What SPEC section 3 indexes: (message, word, indexed?).
INDEXED_SHAPES = [
    pytest.param(user("plainword"), "plainword", True, id="string-content"),
    pytest.param(
        {"role": "user", "content": [text_part("partword")]}, "partword", True, id="text-part"
    ),
    pytest.param(
        {"role": "assistant", "content": [text_part("firstpart"), text_part("secondpart")]},
        "secondpart",
        True,
        id="second-text-part",
    ),
    pytest.param(
        {"role": "assistant", "content": [reasoning_part("reasonword")]},
        "reasonword",
        False,
        id="reasoning-part",
    ),
    pytest.param(
        {"role": "assistant", "content": [tool_call_part({"query": "inputword"})]},
        "inputword",
        False,
        id="tool-call-input",
    ),
    pytest.param(
        {"role": "assistant", "content": [tool_call_part({}, tool_name="toolnameword")]},
        "toolnameword",
        False,
        id="tool-call-name",
    ),
    pytest.param(
        {"role": "tool", "content": [tool_result_part("resultword")]},
        "resultword",
        True,
        id="tool-result-string",
    ),
    pytest.param(
        {"role": "tool", "content": [tool_result_part({"type": "text", "value": "valueword"})]},
        "valueword",
        True,
        id="tool-result-text-value",
    ),
    pytest.param(
        {
            "role": "tool",
            "content": [tool_result_part({"type": "json", "value": {"k": "jsonword"}})],
        },
        "jsonword",
        False,
        id="tool-result-json",
    ),
    pytest.param(
        {"role": "tool", "content": [tool_result_part({"type": "json", "value": "jsonstring"})]},
        "jsonstring",
        False,
        id="tool-result-json-string",
    ),
    pytest.param(
        {"role": "user", "content": [image_part("https://example.com/imageword.png")]},
        "imageword",
        False,
        id="image-part",
    ),
    pytest.param(
        {"role": "user", "content": [file_part("fileword")]}, "fileword", False, id="file-part"
    ),
    pytest.param(system("systemword"), "systemword", False, id="system-string"),
    pytest.param(
        {"role": "system", "content": [text_part("systempartword")]},
        "systempartword",
        False,
        id="system-text-part",
    ),
    # OpenAI chat-completions shapes.
    pytest.param(
        {"role": "tool", "tool_call_id": "call-1", "content": "openairesult"},
        "openairesult",
        True,
        id="openai-tool-role",
    ),
    pytest.param(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call-1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"q": "openaiargs"}'},
                }
            ],
        },
        "openaiargs",
        False,
        id="openai-tool-calls",
    ),
    pytest.param(
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "openaitext"},
                {"type": "image_url", "image_url": {"url": "https://x.test/openaiimage.png"}},
            ],
        },
        "openaitext",
        True,
        id="openai-text-part",
    ),
    pytest.param(
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": "https://x.test/openaiimage.png"}}
            ],
        },
        "openaiimage",
        False,
        id="openai-image-url",
    ),
    # Anthropic messages shapes.
    pytest.param(
        {
            "role": "assistant",
            "content": [{"type": "thinking", "thinking": "thinkword", "signature": "sig"}],
        },
        "thinkword",
        False,
        id="anthropic-thinking",
    ),
    pytest.param(
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "tu-1", "name": "lookup", "input": {"q": "usageword"}}
            ],
        },
        "usageword",
        False,
        id="anthropic-tool-use",
    ),
    pytest.param(
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "tu-1", "content": "anthroresult"}],
        },
        "anthroresult",
        True,
        id="anthropic-tool-result-string",
    ),
    pytest.param(
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "tu-1",
                    "content": [{"type": "text", "text": "anthroblock"}],
                }
            ],
        },
        "anthroblock",
        True,
        id="anthropic-tool-result-blocks",
    ),
    pytest.param(
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hidden", "signature": "sig"},
                {"type": "text", "text": "anthrotext"},
            ],
        },
        "anthrotext",
        True,
        id="anthropic-text-after-thinking",
    ),
]

UNKNOWN_SHAPES = [
    pytest.param({"role": "user", "content": {"weird": "shapeword"}}, id="mapping-content"),
    pytest.param({"role": "user", "content": 42}, id="number-content"),
    pytest.param({"role": "user", "content": None}, id="null-content"),
    pytest.param({"role": "user"}, id="no-content"),
    pytest.param({"role": "user", "content": [1, "shapeword", None, True]}, id="odd-list"),
    pytest.param(
        {"role": "user", "content": [{"type": "mystery", "text": "shapeword"}]},
        id="unknown-part-type",
    ),
    pytest.param(
        {"role": "narrator", "content": {"text": "shapeword"}, "extra": [1, {"a": None}]},
        id="unknown-role-extra-keys",
    ),
]

HOSTILE = [
    '"',
    "NEAR(",
    "*",
    ":*",
    "!",
    "'",
    "\\",
    "%",
    "_",
    "--",
    "/* */",
    "\x00",
    "OR",
    "AND NOT",
    "^",
    "-",
    "+",
    "( )",
    "{ }",
    ":",
    ";",
    "' OR 1=1 --",
    "'); DROP TABLE deuz_transcripts_message; --",
    "&|!<->",
    "$1",
    "?",
    "\\x00",
]


class TranscriptContract:
    """Subclass as ``TestSomethingContract`` and implement ``make_store``."""

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

    # ------------------------------------------------------------------ setup

    def test_store_carries_its_index_as_transcript(self, store, index):
        assert store.transcript is index
        assert index.backend_name == self.backend_name

    # ------------------------------------------------------------------ seed

    def test_seed_write_search_around_other_scope_delete(self, store, index):
        record = ChatRecord(
            chat_id="chat-1",
            scope={"userId": "ada"},
            messages=[
                {"role": "user", "content": "Book the flight to İzmir."},
                {"role": "assistant", "content": "Booked: Friday, 09:40."},
            ],
            message_ids=["m-1", "m-2"],
            updated_at=T0,
        )
        assert store.write_chat(record, expected_revision=0) == 1

        hits = index.search({"userId": "ada"}, "izmir flight", around=1)
        assert [(h.message_id, h.score, [m.message_id for m in h.around]) for h in hits] == [
            ("m-1", 1.0, ["m-2"])
        ]
        assert index.search({"userId": "bob"}, "izmir") == []

        store.delete_chat("chat-1")
        assert index.search({"userId": "ada"}, "izmir") == []

    def test_seed_legacy_chat_indexed_with_index_chat(self, index):
        legacy = InMemoryChatStore()
        legacy.save_chat(
            ChatRecord(
                chat_id="chat-2",
                scope={"userId": "ada"},
                messages=[{"role": "user", "content": "Cancel the hotel."}],
                updated_at=T0,
            )
        )
        index_chat(index, legacy.load_chat("chat-2"))
        assert index.search({"userId": "ada"}, "hotel")[0].message_id == "chat-2:0"

    def test_seed_resolve_source(self, index):
        index.index(
            ChatRecord(
                chat_id="chat-1",
                scope={"userId": "ada"},
                messages=[{"role": "user", "content": "Book the flight to İzmir."}],
                message_ids=["m-1"],
                updated_at=T0,
            )
        )
        source = MemorySourceRef(kind="user", chat_id="chat-1", message_id="m-1", digest=DIGEST)
        assert index.resolve_source({"userId": "ada"}, source).index == 0
        assert index.resolve_source({"userId": "bob"}, source) is None

    # ------------------------------------------------------------------ hits

    def test_hit_carries_chat_message_id_index_and_message(self, store, index):
        store.write_chat(
            chat(
                "c1", system("rules"), "hello there", "general kenobi", message_ids=["s", "a", "b"]
            ),
            expected_revision=0,
        )
        [hit] = index.search(ADA, "kenobi")
        assert isinstance(hit, TranscriptHit)
        assert (hit.chat_id, hit.message_id, hit.index) == ("c1", "b", 2)
        assert hit.message == {"role": "user", "content": "general kenobi"}
        assert hit.score == 1.0
        assert hit.around is None

    def test_hit_message_is_returned_as_written(self, store, index):
        message = {
            "role": "assistant",
            "content": [text_part("roundtrip ünïcödé 東京"), reasoning_part("secret")],
            "metadata": {"n": 1, "f": 1.5, "flag": False, "none": None, "list": [1, "two"]},
        }
        store.write_chat(chat("c1", message), expected_revision=0)
        [hit] = index.search(ADA, "roundtrip")
        assert hit.message == message

    def test_around_none_gives_none(self, store, index):
        store.write_chat(chat("c1", "one", "two target", "three"), expected_revision=0)
        assert index.search(ADA, "target")[0].around is None

    def test_around_zero_gives_empty_list(self, store, index):
        store.write_chat(chat("c1", "one", "two target", "three"), expected_revision=0)
        assert index.search(ADA, "target", around=0)[0].around == []

    def test_around_gives_k_messages_on_each_side_in_chat_order(self, store, index):
        store.write_chat(
            chat("c1", "m0", "m1", "m2", "m3 target", "m4", "m5", "m6"), expected_revision=0
        )
        [hit] = index.search(ADA, "target", around=2)
        assert [m.index for m in hit.around] == [1, 2, 4, 5]
        assert all(isinstance(m, TranscriptMessage) for m in hit.around)
        assert [m.message_id for m in hit.around] == ["c1:1", "c1:2", "c1:4", "c1:5"]
        assert hit.around[0].message == assistant("m1")
        assert {m.chat_id for m in hit.around} == {"c1"}

    def test_around_at_chat_start(self, store, index):
        store.write_chat(chat("c1", "target", "m1", "m2", "m3"), expected_revision=0)
        [hit] = index.search(ADA, "target", around=2)
        assert [m.index for m in hit.around] == [1, 2]

    def test_around_at_chat_end(self, store, index):
        store.write_chat(chat("c1", "m0", "m1", "m2", "target"), expected_revision=0)
        [hit] = index.search(ADA, "target", around=2)
        assert [m.index for m in hit.around] == [1, 2]

    def test_around_larger_than_chat(self, store, index):
        store.write_chat(chat("c1", "m0", "target", "m2"), expected_revision=0)
        [hit] = index.search(ADA, "target", around=50)
        assert [m.index for m in hit.around] == [0, 2]

    def test_around_skips_system_messages_without_counting_them(self, store, index):
        store.write_chat(
            chat(
                "c1",
                user("m0"),
                system("sys1"),
                assistant("m2"),
                system("sys3"),
                user("target"),
                system("sys5"),
                system("sys6"),
                assistant("m7"),
                user("m8"),
            ),
            expected_revision=0,
        )
        [hit] = index.search(ADA, "target", around=1)
        assert [m.index for m in hit.around] == [2, 7]
        [hit] = index.search(ADA, "target", around=2)
        assert [m.index for m in hit.around] == [0, 2, 7, 8]

    def test_around_includes_non_system_messages_without_indexed_text(self, store, index):
        store.write_chat(
            chat("c1", image_only(), user("target"), {"role": "assistant", "content": None}),
            expected_revision=0,
        )
        [hit] = index.search(ADA, "target", around=1)
        assert [m.index for m in hit.around] == [0, 2]
        assert hit.around[1].message == {"role": "assistant", "content": None}

    def test_around_of_each_hit_is_its_own(self, store, index):
        store.write_chat(chat("c1", "a0", "target", "a2"), expected_revision=0)
        store.write_chat(chat("c2", "b0", "b1", "target"), expected_revision=0)
        hits = index.search(ADA, "target", around=1)
        around = {h.chat_id: [(m.chat_id, m.index) for m in h.around] for h in hits}
        assert around == {"c1": [("c1", 0), ("c1", 2)], "c2": [("c2", 1)]}

    # ------------------------------------------------------------------ paging and scores

    def _ranked_chat(self, store: Any) -> None:
        # Distinct raw scores: message i holds the first (4 - i) query terms.
        store.write_chat(
            chat(
                "c1",
                "page one two three",
                "page one two",
                "page one",
                "page",
                "unrelated words",
            ),
            expected_revision=0,
        )

    def test_limit_caps_the_hits(self, store, index):
        self._ranked_chat(store)
        assert [h.index for h in index.search(ADA, "page one two three", limit=2)] == [0, 1]

    def test_default_limit_is_20(self, store, index):
        store.write_chat(chat("c1", *(["many"] * 25)), expected_revision=0)
        assert len(index.search(ADA, "many")) == 20

    def test_offset_pages_concatenate_to_the_full_result(self, store, index):
        self._ranked_chat(store)
        full = index.search(ADA, "page one two three")
        pages = [index.search(ADA, "page one two three", limit=3, offset=o) for o in (0, 3, 6)]
        assert [len(p) for p in pages] == [3, 1, 0]
        assert [(h.index, h.score) for p in pages for h in p] == [(h.index, h.score) for h in full]

    def test_scores_on_later_pages_are_relative_to_the_best_hit(self, store, index):
        self._ranked_chat(store)
        second = index.search(ADA, "page one two three", limit=1, offset=1)
        assert len(second) == 1
        assert 0 < second[0].score < 1

    def test_offset_past_the_end_is_empty(self, store, index):
        self._ranked_chat(store)
        assert index.search(ADA, "page", offset=4) == []
        assert index.search(ADA, "page", offset=1000) == []

    def test_limit_zero_is_empty(self, store, index):
        self._ranked_chat(store)
        assert index.search(ADA, "page", limit=0) == []

    @pytest.mark.parametrize(
        "kwargs",
        [{"limit": -1}, {"offset": -1}, {"around": -1}, {"limit": "5"}, {"limit": True}],
        ids=["negative-limit", "negative-offset", "negative-around", "str-limit", "bool-limit"],
    )
    def test_bad_paging_arguments_are_invalid(self, store, index, kwargs):
        self._ranked_chat(store)
        with pytest.raises(InvalidRecord):
            index.search(ADA, "page", **kwargs)

    def test_best_hit_scores_exactly_one_and_all_scores_in_0_1(self, store, index):
        self._ranked_chat(store)
        store.write_chat(chat("c2", "three", "page three", "two one"), expected_revision=0)
        hits = index.search(ADA, "page one two three")
        assert len(hits) == 7
        assert hits[0].score == 1.0
        assert all(0 < h.score <= 1 for h in hits)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)

    def test_single_hit_scores_one(self, store, index):
        store.write_chat(chat("c1", "lonely", "other"), expected_revision=0)
        assert [h.score for h in index.search(ADA, "lonely")] == [1.0]

    # ------------------------------------------------------------------ ranking

    def test_rare_term_outranks_common_term(self, store, index):
        store.write_chat(chat("c1", "apple", "apple", "apple", "kiwi"), expected_revision=0)
        hits = index.search(ADA, "apple kiwi")
        assert [h.index for h in hits] == [3, 0, 1, 2]
        expected = idf(4, 3) / idf(4, 1)
        assert [h.score for h in hits] == pytest.approx(
            [1.0, expected, expected, expected], abs=1e-9
        )

    def test_more_matched_terms_rank_higher(self, store, index):
        store.write_chat(chat("c1", "alpha", "alpha beta", "beta"), expected_revision=0)
        assert index.search(ADA, "alpha beta")[0].index == 1

    def test_scores_follow_the_idf_formula(self, store, index):
        # N counts indexed messages in scope: not the system message, not the image-only
        # message, not another scope's chat.
        store.write_chat(
            chat(
                "c1",
                system("alpha beta gamma"),
                user("alpha beta"),
                assistant("alpha"),
                user("gamma delta"),
                image_only(),
            ),
            expected_revision=0,
        )
        store.write_chat(chat("other", "alpha", "alpha", "omega", scope=BOB), expected_revision=0)
        hits = index.search(ADA, "alpha beta")
        total, n_alpha, n_beta = 3, 2, 1
        best = idf(total, n_alpha) + idf(total, n_beta)
        assert keys(hits) == [("c1", 1), ("c1", 2)]
        assert [h.score for h in hits] == pytest.approx([1.0, idf(total, n_alpha) / best], abs=1e-9)

    def test_n_counts_every_indexed_message_of_the_scope(self, store, index):
        store.write_chat(chat("c1", "alpha beta", "alpha", "gamma"), expected_revision=0)
        store.write_chat(chat("c2", "alpha", "delta", "epsilon"), expected_revision=0)
        hits = index.search(ADA, "alpha beta")
        total, n_alpha, n_beta = 6, 3, 1
        best = idf(total, n_alpha) + idf(total, n_beta)
        assert keys(hits)[0] == ("c1", 0)
        assert [h.score for h in hits] == pytest.approx(
            [1.0] + [idf(total, n_alpha) / best] * 2, abs=1e-9
        )

    def test_n_applies_the_chat_ids_filter(self, store, index):
        store.write_chat(chat("c1", "alpha beta", "alpha", "gamma"), expected_revision=0)
        store.write_chat(chat("c2", "alpha", "delta", "epsilon"), expected_revision=0)
        hits = index.search(ADA, "alpha beta", chat_ids=["c1"])
        total, n_alpha, n_beta = 3, 2, 1
        best = idf(total, n_alpha) + idf(total, n_beta)
        assert keys(hits) == [("c1", 0), ("c1", 1)]
        assert [h.score for h in hits] == pytest.approx([1.0, idf(total, n_alpha) / best], abs=1e-9)

    def test_a_term_repeated_in_a_message_counts_once(self, store, index):
        store.write_chat(chat("c1", "echo echo echo echo", "echo"), expected_revision=0)
        hits = index.search(ADA, "echo")
        assert [(h.index, h.score) for h in hits] == [(0, 1.0), (1, 1.0)]

    def test_a_term_repeated_in_the_query_counts_once(self, store, index):
        store.write_chat(chat("c1", "alpha", "beta", "alpha beta", "gamma"), expected_revision=0)
        once = index.search(ADA, "alpha beta")
        repeated = index.search(ADA, "alpha ALPHA alpha beta Alpha")
        assert [(h.index, h.score) for h in repeated] == [(h.index, h.score) for h in once]

    # ------------------------------------------------------------------ ties

    def test_tie_newer_chat_first(self, store, index):
        store.write_chat(chat("aaa-old", "tieword", updated_at=T0), expected_revision=0)
        store.write_chat(
            chat("zzz-new", "tieword", updated_at=T0 + timedelta(milliseconds=1)),
            expected_revision=0,
        )
        assert [h.chat_id for h in index.search(ADA, "tieword")] == ["zzz-new", "aaa-old"]

    def test_tie_same_updated_at_orders_by_chat_id_code_points(self, store, index):
        chat_ids = ["chat-9", "ä", "b", "chat-10", "B", "Z"]
        for chat_id in chat_ids:
            store.write_chat(chat(chat_id, "tieword"), expected_revision=0)
        hits = index.search(ADA, "tieword")
        assert [h.chat_id for h in hits] == ["B", "Z", "b", "chat-10", "chat-9", "ä"]
        assert [h.chat_id for h in hits] == sorted(chat_ids)
        assert {h.score for h in hits} == {1.0}

    def test_tie_same_chat_lower_index_first(self, store, index):
        store.write_chat(
            chat("c1", "tieword", system("tieword"), "other", "tieword", "tieword"),
            expected_revision=0,
        )
        assert [h.index for h in index.search(ADA, "tieword")] == [0, 3, 4]

    def test_ties_across_different_terms_with_equal_weight(self, store, index):
        store.write_chat(chat("old", "alpha", updated_at=T0), expected_revision=0)
        store.write_chat(
            chat("new", "beta", updated_at=T0 + timedelta(seconds=1)), expected_revision=0
        )
        hits = index.search(ADA, "alpha beta")
        assert [(h.chat_id, h.score) for h in hits] == [("new", 1.0), ("old", 1.0)]
        assert [h.chat_id for h in index.search(ADA, "alpha beta", limit=1)] == ["new"]
        assert [h.chat_id for h in index.search(ADA, "alpha beta", offset=1)] == ["old"]

    def test_score_outranks_recency(self, store, index):
        store.write_chat(chat("old", "alpha beta", updated_at=T0), expected_revision=0)
        store.write_chat(
            chat("new", "alpha", updated_at=T0 + timedelta(days=1)), expected_revision=0
        )
        assert [h.chat_id for h in index.search(ADA, "alpha beta")] == ["old", "new"]

    # ------------------------------------------------------------------ scope

    def test_other_scope_sees_nothing(self, store, index):
        store.write_chat(chat("c1", "secretword"), expected_revision=0)
        assert index.search(BOB, "secretword") == []
        assert index.search({"userId": "ada", "agentId": "x"}, "secretword") == []

    def test_multi_field_scope_matches_every_field_set(self, store, index):
        scope = {"userId": "ada", "agentId": "travel", "tenant": "t1"}
        store.write_chat(chat("c1", "scopedword", scope=scope), expected_revision=0)
        store.write_chat(
            chat("c2", "scopedword", scope={"userId": "ada", "agentId": "billing", "tenant": "t1"}),
            expected_revision=0,
        )

        def found(scope_filter: dict[str, str]) -> set[str]:
            return {h.chat_id for h in index.search(scope_filter, "scopedword")}

        assert found(scope) == {"c1"}
        assert found({"userId": "ada"}) == {"c1", "c2"}
        assert found({"agentId": "travel"}) == {"c1"}
        assert found({"userId": "ada", "tenant": "t1"}) == {"c1", "c2"}
        assert found({"userId": "ada", "agentId": "support"}) == set()
        assert found({"userId": "ada", "missing": "x"}) == set()

    def test_empty_scope_matches_every_chat(self, store, index):
        store.write_chat(chat("c1", "everyword", scope=ADA), expected_revision=0)
        store.write_chat(chat("c2", "everyword", scope=BOB), expected_revision=0)
        store.write_chat(chat("c3", "everyword", scope={}), expected_revision=0)
        assert {h.chat_id for h in index.search({}, "everyword")} == {"c1", "c2", "c3"}

    def test_chat_with_empty_scope_is_only_found_by_empty_scope(self, store, index):
        store.write_chat(chat("c1", "everyword", scope={}), expected_revision=0)
        assert index.search(ADA, "everyword") == []
        assert ids(index.search({}, "everyword")) == ["c1:0"]

    @pytest.mark.parametrize("value", ["Ada", "ADA", "ada ", " ada", "adá", "ada\t"], ids=repr)
    def test_scope_values_match_exactly(self, store, index, value):
        store.write_chat(chat("c1", "exactword"), expected_revision=0)
        assert index.search({"userId": value}, "exactword") == []

    def test_scope_keys_match_exactly(self, store, index):
        store.write_chat(chat("c1", "exactword"), expected_revision=0)
        assert index.search({"userid": "ada"}, "exactword") == []
        assert index.search({"userId ": "ada"}, "exactword") == []

    def test_scope_field_set_to_empty_string_needs_that_field(self, store, index):
        store.write_chat(chat("c1", "emptyword", scope={"userId": "ada"}), expected_revision=0)
        store.write_chat(
            chat("c2", "emptyword", scope={"userId": "ada", "agentId": ""}), expected_revision=0
        )
        assert [h.chat_id for h in index.search({"agentId": ""}, "emptyword")] == ["c2"]

    def test_invalid_scope_filter_is_invalid_record(self, index):
        with pytest.raises(InvalidRecord):
            index.search({"userId": 7}, "anything")
        with pytest.raises(InvalidRecord):
            index.search(["userId"], "anything")

    def test_chat_ids_filter_restricts_chats(self, store, index):
        for chat_id in ("c1", "c2", "c3"):
            store.write_chat(chat(chat_id, "filterword"), expected_revision=0)
        assert {h.chat_id for h in index.search(ADA, "filterword", chat_ids=["c1", "c3"])} == {
            "c1",
            "c3",
        }
        assert {h.chat_id for h in index.search(ADA, "filterword", chat_ids=("c2",))} == {"c2"}

    def test_chat_ids_filter_never_widens_the_scope(self, store, index):
        store.write_chat(chat("mine", "filterword", scope=ADA), expected_revision=0)
        store.write_chat(chat("theirs", "filterword", scope=BOB), expected_revision=0)
        hits = index.search(ADA, "filterword", chat_ids=["mine", "theirs"])
        assert [h.chat_id for h in hits] == ["mine"]

    def test_empty_or_unknown_chat_ids_find_nothing(self, store, index):
        store.write_chat(chat("c1", "filterword"), expected_revision=0)
        assert index.search(ADA, "filterword", chat_ids=[]) == []
        assert index.search(ADA, "filterword", chat_ids=["nope"]) == []

    def test_chat_ids_as_a_plain_string_is_invalid(self, store, index):
        store.write_chat(chat("c1", "filterword"), expected_revision=0)
        with pytest.raises(InvalidRecord):
            index.search(ADA, "filterword", chat_ids="c1")

    # ------------------------------------------------------------------ what is indexed

    @pytest.mark.parametrize(("message", "word", "indexed"), INDEXED_SHAPES)
    def test_what_is_indexed(self, store, index, message, word, indexed):
        store.write_chat(chat("c1", message), expected_revision=0)
        assert ids(index.search(ADA, word)) == (["c1:0"] if indexed else [])

    def test_system_message_is_never_a_hit(self, store, index):
        store.write_chat(
            chat("c1", system("shared"), user("shared"), {"role": "system", "content": "shared"}),
            expected_revision=0,
        )
        assert [h.index for h in index.search(ADA, "shared")] == [1]

    @pytest.mark.parametrize("message", UNKNOWN_SHAPES)
    def test_unknown_content_shape_is_stored_and_returned_as_is(self, store, index, message):
        store.write_chat(chat("c1", "before", message, "after"), expected_revision=0)
        assert store.load_chat("c1")[0].messages[1] == message
        assert index.search(ADA, "shapeword") == []
        [hit] = index.search(ADA, "before", around=1)
        assert hit.around[0].message == message
        assert index.resolve_source(ADA, ref("c1", "c1:1")).message == message

    # ------------------------------------------------------------------ terms and queries

    @pytest.mark.parametrize("query", ["", "   ", "!!!", "— …", "😀🎉", "\x00", "_", "%%"])
    def test_query_without_terms_returns_nothing(self, store, index, query):
        store.write_chat(chat("c1", "anything at all", "_ %% !!!"), expected_revision=0)
        assert index.search(ADA, query) == []

    def test_only_the_first_32_distinct_terms_count(self, store, index):
        store.write_chat(chat("c1", "needle", "other"), expected_revision=0)
        fillers = [f"qx{i}z" for i in range(32)]
        assert index.search(ADA, " ".join([*fillers, "needle"])) == []
        assert ids(index.search(ADA, " ".join([*fillers[:31], "needle"]))) == ["c1:0"]

    def test_repeated_terms_do_not_use_up_the_32(self, store, index):
        store.write_chat(chat("c1", "needle", "other"), expected_revision=0)
        fillers = [f"qx{i}z" for i in range(31)]
        query = " ".join([*fillers, *fillers, "QX0Z", "needle", "tail"])
        assert ids(index.search(ADA, query)) == ["c1:0"]

    @pytest.mark.parametrize("hostile", HOSTILE, ids=repr)
    def test_hostile_query_is_plain_text(self, store, index, hostile):
        store.write_chat(
            chat(
                "c1",
                "Book the flight to İzmir.",
                "Booked: Friday, 09:40.",
                message_ids=["m-1", "m-2"],
            ),
            expected_revision=0,
        )
        assert index.search(ADA, hostile) == []
        assert ids(index.search(ADA, f"{hostile} flight {hostile}")) == ["m-1"]
        assert ids(index.search(ADA, f"{hostile} flight {hostile} izmir")) == ["m-1"]

    def test_fts_operators_in_a_query_are_words(self, store, index):
        store.write_chat(
            chat("c1", "Book the flight to İzmir.", "near or not"), expected_revision=0
        )
        assert ids(index.search(ADA, "NEAR(flight izmir, 2)")) == ["c1:0", "c1:1"]
        assert ids(index.search(ADA, "flight NOT izmir")) == ["c1:0", "c1:1"]
        assert ids(index.search(ADA, '"flight to"')) == ["c1:0"]
        assert ids(index.search(ADA, "flig*")) == (["c1:0"] if self.substring_matching else [])

    @pytest.mark.parametrize("hostile", ["*", ":*", "%", "_", '"', "'", "\\", "\x00"], ids=repr)
    def test_hostile_characters_glued_to_a_word_are_separators(self, store, index, hostile):
        store.write_chat(chat("c1", "Book the flight to İzmir."), expected_revision=0)
        assert ids(index.search(ADA, f"{hostile}flight{hostile}")) == ["c1:0"]
        expected = ["c1:0"] if self.substring_matching else []
        assert ids(index.search(ADA, f"fli{hostile}")) == expected

    def test_hostile_text_in_messages_is_plain_text(self, store, index):
        store.write_chat(
            chat("c1", 'He typed "NEAR(x)" * OR 100% of _under_ -- /* c */ don\'t \\ ok'),
            expected_revision=0,
        )
        for query in ("near", "under", "100", "don", "NEAR(", '"near"'):
            assert ids(index.search(ADA, query)) == ["c1:0"], query

    def test_case_and_diacritics_are_folded(self, store, index):
        store.write_chat(
            chat("c1", "Book the flight to İzmir.", "Die Straße ist lang.", "Tiếng Việt"),
            expected_revision=0,
        )
        for query in ("izmir", "IZMIR", "Izmír", "İZMİR", "izmİr"):
            assert ids(index.search(ADA, query)) == ["c1:0"], query
        for query in ("strasse", "STRASSE", "straße", "STRAẞE"):
            assert ids(index.search(ADA, query)) == ["c1:1"], query
        assert ids(index.search(ADA, "viet")) == ["c1:2"]
        assert ids(index.search(ADA, "VIỆT")) == ["c1:2"]

    def test_digits_are_terms(self, store, index):
        store.write_chat(chat("c1", "Booked: Friday, 09:40."), expected_revision=0)
        assert ids(index.search(ADA, "09")) == ["c1:0"]
        assert ids(index.search(ADA, "40")) == ["c1:0"]
        assert ids(index.search(ADA, "0940")) == []

    def test_cjk_run_is_one_term(self, store, index):
        store.write_chat(chat("c1", "東京タワーに行く", "東京"), expected_revision=0)
        assert ids(index.search(ADA, "東京タワーに行く")) == ["c1:0"]
        expected = ["c1:1", "c1:0"] if self.substring_matching else ["c1:1"]
        assert sorted(ids(index.search(ADA, "東京"))) == sorted(expected)

    def test_no_stemming(self, store, index):
        store.write_chat(chat("c1", "we deploys daily"), expected_revision=0)
        expected = ["c1:0"] if self.substring_matching else []
        assert ids(index.search(ADA, "deploy")) == expected
        assert ids(index.search(ADA, "deployed")) == []

    def test_whole_words_match(self, store, index):
        store.write_chat(chat("c1", "the catalogue"), expected_revision=0)
        expected = ["c1:0"] if self.substring_matching else []
        assert ids(index.search(ADA, "cat")) == expected
        assert ids(index.search(ADA, "catalogue")) == ["c1:0"]

    def test_very_long_terms_match_only_themselves(self, store, index):
        word = "q" * 2999 + "b"
        other = "q" * 2999 + "c"
        store.write_chat(chat("c1", f"start {word} end", other), expected_revision=0)
        assert ids(index.search(ADA, word)) == ["c1:0"]
        assert ids(index.search(ADA, word.upper())) == ["c1:0"]
        assert ids(index.search(ADA, other)) == ["c1:1"]

    # ------------------------------------------------------------------ revisions

    def test_first_write_creates_revision_1(self, store):
        assert store.write_chat(chat("c1", "hello"), expected_revision=0) == 1
        record, revision = store.load_chat("c1")
        assert revision == 1
        assert record.chat_id == "c1"

    def test_each_write_increments_the_revision(self, store):
        assert store.write_chat(chat("c1", "v1"), expected_revision=0) == 1
        assert store.write_chat(chat("c1", "v2"), expected_revision=1) == 2
        assert store.write_chat(chat("c1", "v3"), expected_revision=2) == 3
        assert store.load_chat("c1")[1] == 3

    def test_load_chat_round_trips_the_record(self, store):
        record = chat(
            "c1",
            system("be brief"),
            "hello ünïcode",
            {"role": "assistant", "content": [text_part("x"), reasoning_part("y")]},
            scope={"userId": "ada", "agentId": "travel"},
            message_ids=["s-1", "u-1", "a-1"],
            updated_at=T0 + timedelta(microseconds=123_000),
        )
        store.write_chat(record, expected_revision=0)
        loaded, revision = store.load_chat("c1")
        assert revision == 1
        assert loaded.chat_id == "c1"
        assert loaded.scope == {"userId": "ada", "agentId": "travel"}
        assert loaded.messages == record.messages
        assert loaded.message_ids == ["s-1", "u-1", "a-1"]
        assert loaded.updated_at == T0 + timedelta(microseconds=123_000)

    def test_load_chat_of_unknown_chat_is_none(self, store):
        assert store.load_chat("nope") is None

    def test_stale_revision_raises_conflict_with_current_revision(self, store):
        store.write_chat(chat("c1", "v1"), expected_revision=0)
        store.write_chat(chat("c1", "v2"), expected_revision=1)
        for stale in (0, 1, 3, 99):
            with pytest.raises(RevisionConflict) as excinfo:
                store.write_chat(chat("c1", "v3"), expected_revision=stale)
            assert excinfo.value.current_revision == 2

    def test_new_chat_with_nonzero_revision_conflicts_at_0(self, store):
        with pytest.raises(RevisionConflict) as excinfo:
            store.write_chat(chat("c1", "v1"), expected_revision=1)
        assert excinfo.value.current_revision == 0
        assert store.load_chat("c1") is None

    def test_nothing_changes_on_conflict(self, store, index):
        store.write_chat(chat("c1", "oldword"), expected_revision=0)
        with pytest.raises(RevisionConflict):
            store.write_chat(chat("c1", "newword"), expected_revision=0)
        record, revision = store.load_chat("c1")
        assert (record.messages, revision) == ([user("oldword")], 1)
        assert ids(index.search(ADA, "oldword")) == ["c1:0"]
        assert index.search(ADA, "newword") == []

    def test_conflict_is_a_transcript_error(self, store):
        store.write_chat(chat("c1", "v1"), expected_revision=0)
        with pytest.raises(TranscriptError):
            store.write_chat(chat("c1", "v2"), expected_revision=0)

    def test_rewrite_replaces_old_messages_in_search(self, store, index):
        store.write_chat(chat("c1", "apple banana", "cherry"), expected_revision=0)
        store.write_chat(chat("c1", "apple"), expected_revision=1)
        assert index.search(ADA, "banana") == []
        assert index.search(ADA, "cherry") == []
        assert ids(index.search(ADA, "apple")) == ["c1:0"]

    def test_rewrite_drops_removed_messages_from_resolve_source(self, store, index):
        store.write_chat(chat("c1", "one", "two", message_ids=["m-1", "m-2"]), expected_revision=0)
        store.write_chat(chat("c1", "one", message_ids=["m-1"]), expected_revision=1)
        assert index.resolve_source(ADA, ref("c1", "m-2")) is None
        assert index.resolve_source(ADA, ref("c1", "m-1")).message == user("one")

    def test_rewrite_can_move_a_chat_to_another_scope(self, store, index):
        store.write_chat(chat("c1", "moveword", scope=ADA), expected_revision=0)
        store.write_chat(chat("c1", "moveword", scope=BOB), expected_revision=1)
        assert index.search(ADA, "moveword") == []
        assert ids(index.search(BOB, "moveword")) == ["c1:0"]

    def test_rewrite_updates_recency(self, store, index):
        store.write_chat(chat("a", "tieword", updated_at=T0), expected_revision=0)
        store.write_chat(
            chat("b", "tieword", updated_at=T0 + timedelta(hours=1)), expected_revision=0
        )
        store.write_chat(
            chat("a", "tieword", updated_at=T0 + timedelta(hours=2)), expected_revision=1
        )
        assert [h.chat_id for h in index.search(ADA, "tieword")] == ["a", "b"]

    def test_list_chats_filters_by_scope_newest_first(self, store):
        store.write_chat(chat("old", "x", updated_at=T0), expected_revision=0)
        store.write_chat(chat("new", "x", updated_at=T0 + timedelta(hours=1)), expected_revision=0)
        store.write_chat(chat("bobs", "x", scope=BOB), expected_revision=0)
        assert [r.chat_id for r in store.list_chats(ADA)] == ["new", "old"]
        assert [r.chat_id for r in store.list_chats(BOB)] == ["bobs"]
        assert {r.chat_id for r in store.list_chats({})} == {"old", "new", "bobs"}
        assert store.list_chats({"userId": "carol"}) == []

    # ------------------------------------------------------------------ tombstones

    def test_deleted_chat_leaves_search_at_once(self, store, index):
        store.write_chat(chat("c1", "goneword"), expected_revision=0)
        store.write_chat(chat("c2", "goneword"), expected_revision=0)
        store.delete_chat("c1")
        assert [h.chat_id for h in index.search(ADA, "goneword")] == ["c2"]

    def test_deleted_chat_loads_as_none(self, store):
        store.write_chat(chat("c1", "goneword"), expected_revision=0)
        store.delete_chat("c1")
        assert store.load_chat("c1") is None
        assert store.list_chats(ADA) == []

    @pytest.mark.parametrize("expected_revision", [0, 1, 2])
    def test_write_after_delete_raises_chat_deleted(self, store, index, expected_revision):
        store.write_chat(chat("c1", "goneword"), expected_revision=0)
        store.delete_chat("c1")
        with pytest.raises(ChatDeleted):
            store.write_chat(chat("c1", "backword"), expected_revision=expected_revision)
        assert store.load_chat("c1") is None
        assert index.search(ADA, "backword") == []

    def test_deleted_chat_does_not_resolve(self, store, index):
        store.write_chat(chat("c1", "goneword", message_ids=["m-1"]), expected_revision=0)
        store.delete_chat("c1")
        assert index.resolve_source(ADA, ref("c1", "m-1")) is None

    def test_chat_deleted_is_a_transcript_error(self, store):
        store.write_chat(chat("c1", "x"), expected_revision=0)
        store.delete_chat("c1")
        with pytest.raises(TranscriptError):
            store.write_chat(chat("c1", "x"), expected_revision=1)

    # ------------------------------------------------------------------ rollback

    def _break_index(self, monkeypatch: pytest.MonkeyPatch, store: Any) -> None:
        def failing_index(record: ChatRecord) -> None:
            raise IndexFailure(record.chat_id)

        monkeypatch.setattr(store.transcript, "index", failing_index)

    def test_failed_index_on_create_commits_nothing(self, store, index, monkeypatch):
        self._break_index(monkeypatch, store)
        with pytest.raises(IndexFailure):
            store.write_chat(chat("c1", "failword"), expected_revision=0)
        monkeypatch.undo()
        assert store.load_chat("c1") is None
        assert store.list_chats(ADA) == []
        assert index.search(ADA, "failword") == []
        assert store.write_chat(chat("c1", "failword"), expected_revision=0) == 1

    def test_failed_index_on_update_keeps_the_previous_revision(self, store, index, monkeypatch):
        store.write_chat(chat("c1", "oldword", message_ids=["m-1"]), expected_revision=0)
        self._break_index(monkeypatch, store)
        with pytest.raises(IndexFailure):
            store.write_chat(chat("c1", "newword", message_ids=["m-2"]), expected_revision=1)
        monkeypatch.undo()
        record, revision = store.load_chat("c1")
        assert (record.messages, record.message_ids, revision) == ([user("oldword")], ["m-1"], 1)
        assert ids(index.search(ADA, "oldword")) == ["m-1"]
        assert index.search(ADA, "newword") == []
        assert store.write_chat(chat("c1", "newword"), expected_revision=1) == 2

    def test_index_exception_propagates_unchanged(self, store, monkeypatch):
        error = IndexFailure("the very object")

        def failing_index(record: ChatRecord) -> None:
            raise error

        monkeypatch.setattr(store.transcript, "index", failing_index)
        with pytest.raises(IndexFailure) as excinfo:
            store.write_chat(chat("c1", "x"), expected_revision=0)
        assert excinfo.value is error

    def test_the_store_indexes_through_the_public_index_method(self, store, index, monkeypatch):
        """A subclass or wrapper overriding ``index`` sees every write (SPEC section 5)."""
        seen: list[tuple[str, list[str], list[dict[str, Any]]]] = []
        original = store.transcript.index

        def spying_index(record: ChatRecord) -> None:
            seen.append((record.chat_id, list(record.message_ids), list(record.messages)))
            original(record)

        monkeypatch.setattr(store.transcript, "index", spying_index)
        store.write_chat(chat("c1", "hello there", message_ids=["m-1"]), expected_revision=0)
        store.write_chat(chat("c1", "hello there", "again"), expected_revision=1)
        assert seen == [
            ("c1", ["m-1"], [user("hello there")]),
            ("c1", ["c1:0", "c1:1"], [user("hello there"), assistant("again")]),
        ]
        assert ids(index.search(ADA, "again")) == ["c1:1"]

    # ------------------------------------------------------------------ message ids

    def test_missing_ids_are_filled(self, store, index):
        store.write_chat(chat("c1", "idword", "idword"), expected_revision=0)
        assert store.load_chat("c1")[0].message_ids == ["c1:0", "c1:1"]
        assert ids(index.search(ADA, "idword")) == ["c1:0", "c1:1"]

    def test_empty_and_none_ids_are_filled(self, store, index):
        store.write_chat(
            chat("c1", "a", "b", "c", message_ids=["", None, "m-3"]), expected_revision=0
        )
        assert store.load_chat("c1")[0].message_ids == ["c1:0", "c1:1", "m-3"]

    def test_repeated_ids_are_filled_after_the_first(self, store, index):
        store.write_chat(
            chat("c1", "a", "b", "idword", message_ids=["dup", "x", "dup"]), expected_revision=0
        )
        assert store.load_chat("c1")[0].message_ids == ["dup", "x", "c1:2"]
        assert ids(index.search(ADA, "idword")) == ["c1:2"]

    def test_stored_ids_survive_unchanged(self, store, index):
        message_ids = ["run-7:0", "run-7:1", "ünï-çødé", "m with spaces", "M-1"]
        store.write_chat(
            chat("c1", "keep", "keep", "keep", "keep", "keep", message_ids=message_ids),
            expected_revision=0,
        )
        assert store.load_chat("c1")[0].message_ids == message_ids
        assert ids(index.search(ADA, "keep")) == message_ids
        for message_id in message_ids:
            assert index.resolve_source(ADA, ref("c1", message_id)).message_id == message_id

    def test_around_carries_filled_ids(self, store, index):
        store.write_chat(
            chat("c1", "a", "target", "c", message_ids=["m-a", None, ""]), expected_revision=0
        )
        [hit] = index.search(ADA, "target", around=1)
        assert hit.message_id == "c1:1"
        assert [m.message_id for m in hit.around] == ["m-a", "c1:2"]

    # ------------------------------------------------------------------ resolve_source

    def test_resolve_source_returns_the_message(self, store, index):
        store.write_chat(
            chat("c1", system("sys"), "first", "second", message_ids=["s", "m-1", "m-2"]),
            expected_revision=0,
        )
        found = index.resolve_source(ADA, ref("c1", "m-2"))
        assert found == TranscriptMessage(
            chat_id="c1", message_id="m-2", index=2, message=user("second")
        )

    def test_resolve_source_under_a_wider_scope_filter(self, store, index):
        store.write_chat(
            chat("c1", "first", scope={"userId": "ada", "agentId": "x"}, message_ids=["m-1"]),
            expected_revision=0,
        )
        assert index.resolve_source({"userId": "ada"}, ref("c1", "m-1")).index == 0
        assert index.resolve_source({}, ref("c1", "m-1")).index == 0
        assert index.resolve_source({"userId": "ada", "agentId": "y"}, ref("c1", "m-1")) is None

    def test_resolve_source_other_scope_is_none(self, store, index):
        store.write_chat(chat("c1", "first", message_ids=["m-1"]), expected_revision=0)
        assert index.resolve_source(BOB, ref("c1", "m-1")) is None
        assert index.resolve_source({"userId": "Ada"}, ref("c1", "m-1")) is None

    def test_resolve_source_unknown_chat_or_message_is_none(self, store, index):
        store.write_chat(chat("c1", "first", message_ids=["m-1"]), expected_revision=0)
        assert index.resolve_source(ADA, ref("nope", "m-1")) is None
        assert index.resolve_source(ADA, ref("c1", "m-9")) is None
        assert index.resolve_source(ADA, ref("c1", "c1:0")) is None

    def test_resolve_source_of_a_system_message_is_none(self, store, index):
        store.write_chat(
            chat("c1", system("sys"), "hi", message_ids=["s", "m"]), expected_revision=0
        )
        assert index.resolve_source(ADA, ref("c1", "s")) is None

    def test_resolve_source_does_not_check_the_digest(self, store, index):
        store.write_chat(chat("c1", "first", message_ids=["m-1"]), expected_revision=0)
        for digest in ("", "sha256:" + "f" * 64, "not a digest"):
            assert index.resolve_source(ADA, ref("c1", "m-1", digest)).message_id == "m-1"

    def test_resolve_source_of_a_message_without_indexed_text(self, store, index):
        store.write_chat(chat("c1", image_only(), message_ids=["img"]), expected_revision=0)
        assert index.resolve_source(ADA, ref("c1", "img")).message == image_only()

    # ------------------------------------------------------------------ the index on its own

    def test_index_remove_takes_a_chat_out_of_search(self, index):
        index.index(chat("c1", "removeword", message_ids=["m-1"]))
        index.index(chat("c2", "removeword"))
        index.remove("c1")
        assert [h.chat_id for h in index.search(ADA, "removeword")] == ["c2"]
        assert index.resolve_source(ADA, ref("c1", "m-1")) is None

    def test_index_remove_of_an_unknown_chat_is_a_no_op(self, index):
        index.remove("never-indexed")
        assert index.search(ADA, "anything") == []

    def test_indexing_twice_replaces_the_chat(self, index):
        index.index(chat("c1", "first version"))
        index.index(chat("c1", "second version"))
        assert index.search(ADA, "first") == []
        assert ids(index.search(ADA, "version")) == ["c1:0"]

    def test_index_fills_ids_like_index_chat(self, index):
        index.index(chat("c1", "a", "fillword", message_ids=["x", "x"]))
        assert ids(index.search(ADA, "fillword")) == ["c1:1"]

    def test_index_chat_returns_the_record_it_indexed(self, index):
        indexed = index_chat(index, chat("c1", "a", "b", message_ids=[None, "m"]))
        assert indexed.message_ids == ["c1:0", "m"]
        assert ids(index.search(ADA, "a")) == ["c1:0"]

    # ------------------------------------------------------------------ the 256 KiB cut

    def test_term_wholly_past_256_kib_is_not_found(self, store, index):
        store.write_chat(chat("c1", filler(LIMIT) + "pastword"), expected_revision=0)
        assert ids(index.search(ADA, "pad")) == ["c1:0"]
        assert index.search(ADA, "pastword") == []

    def test_term_ending_at_the_boundary_is_found(self, store, index):
        store.write_chat(chat("c1", filler(LIMIT - 8) + "edgeword after"), expected_revision=0)
        assert ids(index.search(ADA, "edgeword")) == ["c1:0"]
        assert index.search(ADA, "after") == []

    def test_term_straddling_the_boundary_is_found_by_its_cut_prefix_only(self, store, index):
        store.write_chat(chat("c1", filler(LIMIT - 6) + "straddleword"), expected_revision=0)
        assert ids(index.search(ADA, "stradd")) == ["c1:0"]
        assert index.search(ADA, "straddleword") == []
        assert index.search(ADA, "straddl") == []

    def test_character_cut_by_the_boundary_is_dropped(self, store, index):
        # "ж" is two bytes: its first byte is the last one indexed.
        store.write_chat(chat("c1", filler(LIMIT - 4) + "abcж"), expected_revision=0)
        assert ids(index.search(ADA, "abc")) == ["c1:0"]
        assert index.search(ADA, "abcж") == []

    def test_cut_counts_folded_bytes_not_original_bytes(self, store, index):
        # Fullwidth "Ｘ" is 3 bytes and folds to 1: the needle sits at original byte
        # ~400,000 but folded byte ~200,000.
        store.write_chat(chat("c1", "Ｘ " * 100_000 + "needleword"), expected_revision=0)
        assert ids(index.search(ADA, "needleword")) == ["c1:0"]
        # "ŉ" is 2 bytes and folds to "ʼn", 3 bytes: original ~240,000, folded ~320,000.
        store.write_chat(chat("c2", "ŉ " * 80_000 + "lostword"), expected_revision=0)
        assert index.search(ADA, "lostword") == []

    def test_long_message_is_stored_whole(self, store, index):
        text = filler(LIMIT) + "pastword"
        store.write_chat(chat("c1", text), expected_revision=0)
        assert store.load_chat("c1")[0].messages[0]["content"] == text
        assert index.search(ADA, "pad")[0].message["content"] == text

    def test_cut_applies_per_message(self, store, index):
        store.write_chat(
            chat("c1", filler(LIMIT) + "pastword", "pastword again"), expected_revision=0
        )
        assert ids(index.search(ADA, "pastword")) == ["c1:1"]

    # ------------------------------------------------------------------ async twins

    def test_async_write_load_list(self, store):
        async def scenario() -> tuple[int, Any, list[ChatRecord]]:
            revision = await store.awrite_chat(chat("c1", "asyncword"), expected_revision=0)
            loaded = await store.aload_chat("c1")
            listed = await store.alist_chats(ADA)
            return revision, loaded, listed

        revision, (record, loaded_revision), listed = asyncio.run(scenario())
        assert (revision, loaded_revision) == (1, 1)
        assert record.messages == [user("asyncword")]
        assert [r.chat_id for r in listed] == ["c1"]

    def test_async_conflict_raises(self, store):
        store.write_chat(chat("c1", "x"), expected_revision=0)
        with pytest.raises(RevisionConflict):
            asyncio.run(store.awrite_chat(chat("c1", "y"), expected_revision=0))

    def test_async_search_and_resolve(self, store, index):
        store.write_chat(
            chat("c1", "asyncword", "next", message_ids=["m-1", "m-2"]), expected_revision=0
        )

        async def scenario() -> tuple[list[TranscriptHit], Any]:
            hits = await index.asearch(ADA, "asyncword", around=1, limit=5, offset=0)
            source = await index.aresolve_source(ADA, ref("c1", "m-1"))
            return hits, source

        hits, source = asyncio.run(scenario())
        assert [(h.message_id, [m.message_id for m in h.around]) for h in hits] == [
            ("m-1", ["m-2"])
        ]
        assert source.index == 0

    def test_async_delete(self, store, index):
        store.write_chat(chat("c1", "asyncword"), expected_revision=0)

        async def scenario() -> tuple[Any, list[TranscriptHit]]:
            await store.adelete_chat("c1")
            return await store.aload_chat("c1"), await index.asearch(ADA, "asyncword")

        assert asyncio.run(scenario()) == (None, [])
        with pytest.raises(ChatDeleted):
            asyncio.run(store.awrite_chat(chat("c1", "x"), expected_revision=0))

    def test_async_index_and_remove(self, index):
        async def scenario() -> tuple[list[str], list[str]]:
            await index.aindex(chat("c1", "asyncword"))
            found = ids(await index.asearch(ADA, "asyncword"))
            await index.aremove("c1")
            return found, ids(await index.asearch(ADA, "asyncword", chat_ids=["c1"]))

        assert asyncio.run(scenario()) == (["c1:0"], [])

    # ------------------------------------------------------------------ invalid records

    @pytest.mark.parametrize(
        ("field", "change"),
        [
            pytest.param("chat_id", {"chat_id": ""}, id="empty-chat-id"),
            pytest.param("chat_id", {"chat_id": 42}, id="int-chat-id"),
            pytest.param("chat_id", {"chat_id": None}, id="none-chat-id"),
            pytest.param("scope", {"scope": ["userId", "ada"]}, id="scope-not-mapping"),
            pytest.param("scope", {"scope": {"userId": 7}}, id="scope-int-value"),
            pytest.param("scope", {"scope": {"userId": None}}, id="scope-none-value"),
            pytest.param("scope", {"scope": {7: "ada"}}, id="scope-int-key"),
            pytest.param("messages", {"messages": "hello"}, id="messages-string"),
            pytest.param(
                "messages[1]", {"messages": [user("validword"), "hello"]}, id="message-not-mapping"
            ),
            pytest.param(
                "messages[1].role",
                {"messages": [user("validword"), {"content": "no role"}]},
                id="message-without-role",
            ),
            pytest.param(
                "messages[0].role",
                {"messages": [{"role": 3, "content": "validword"}]},
                id="message-int-role",
            ),
            pytest.param("message_ids", {"message_ids": ["a", "b"]}, id="too-many-ids"),
            pytest.param("message_ids", {"message_ids": []}, id="too-few-ids"),
            pytest.param("message_ids[0]", {"message_ids": [7]}, id="int-message-id"),
            pytest.param(
                "messages[0]",
                {"messages": [{"role": "user", "content": "validword", "x": {1, 2}}]},
                id="set-content",
            ),
            pytest.param(
                "messages[0]",
                {"messages": [{"role": "user", "content": "validword", "x": object()}]},
                id="object-content",
            ),
            pytest.param(
                "messages[0]",
                {"messages": [{"role": "user", "content": "validword", "x": float("nan")}]},
                id="nan-content",
            ),
            pytest.param("updated_at", {"updated_at": datetime(2024, 1, 1)}, id="naive-updated-at"),
            pytest.param("updated_at", {"updated_at": "yesterday"}, id="str-updated-at"),
        ],
    )
    def test_invalid_record_names_the_field_and_changes_nothing(self, store, index, field, change):
        record = chat("bad", "validword")
        for name, value in change.items():
            setattr(record, name, value)
        with pytest.raises(InvalidRecord) as excinfo:
            store.write_chat(record, expected_revision=0)
        assert field in str(excinfo.value)
        assert excinfo.value.field.startswith(field.split("[")[0])
        assert store.load_chat("bad") is None
        assert store.list_chats({}) == []
        assert index.search({}, "validword") == []

    def test_invalid_update_keeps_the_previous_revision(self, store, index):
        store.write_chat(chat("c1", "oldword"), expected_revision=0)
        record = chat("c1", "newword")
        record.messages = [{"content": "no role"}]
        with pytest.raises(InvalidRecord):
            store.write_chat(record, expected_revision=1)
        loaded, revision = store.load_chat("c1")
        assert (loaded.messages, revision) == ([user("oldword")], 1)
        assert ids(index.search(ADA, "oldword")) == ["c1:0"]

    def test_invalid_chat_id_to_load_or_delete(self, store):
        for bad in ("", 42, None):
            with pytest.raises(InvalidRecord):
                store.load_chat(bad)
            with pytest.raises(InvalidRecord):
                store.delete_chat(bad)

    def test_non_string_query_is_invalid(self, store, index):
        store.write_chat(chat("c1", "x"), expected_revision=0)
        with pytest.raises(InvalidRecord):
            index.search(ADA, 42)
