"""Why a hit matched: every hit's ``spans``, identical on every backend (SPEC section 8)."""

from __future__ import annotations

from deuz_transcripts import (
    InMemoryConditionalChatStore,
    InMemoryTranscriptIndex,
    indexed_text,
    snippet,
)
from deuz_transcripts.spans import match_spans
from deuz_transcripts.text import query_terms
from tests.contract.base import ContractBase
from tests.contract.helpers import ADA, LIMIT, chat, user
from tests.factories import reasoning_part, text_part, tool_result_part


def _words(text: str, spans: tuple[tuple[int, int], ...]) -> list[str]:
    return [text[start:end] for start, end in spans]


class SpansContract(ContractBase):
    """Spans index the message's indexed text, follow the one highlight rule, and stop at
    the indexed 256 KiB; the same data gives the same spans as the in-memory index."""

    def test_hit_spans_mark_the_matched_words_in_the_original_text(self, store, index):
        store.write_chat(
            chat("c1", "Book the flight to İzmir, then IZMIR again."), expected_revision=0
        )
        [hit] = index.search(ADA, "izmir flight")
        text = indexed_text(hit.message)
        assert _words(text, hit.spans) == ["flight", "İzmir", "IZMIR"]
        assert isinstance(hit.spans, tuple) and all(isinstance(s, tuple) for s in hit.spans)

    def test_spans_index_the_joined_indexed_parts_only(self, store, index):
        message = {
            "role": "assistant",
            "content": [
                reasoning_part("deploy in my head"),
                text_part("first part"),
                tool_result_part("deploy log: ok"),
            ],
        }
        store.write_chat(chat("c1", user("hello"), message), expected_revision=0)
        [hit] = index.search(ADA, "deploy")
        text = indexed_text(hit.message)
        assert text == "first part\ndeploy log: ok"
        assert hit.spans == ((11, 17),)  # not the reasoning's "deploy"

    def test_substring_backends_mark_the_words_they_matched(self, store, index):
        store.write_chat(chat("c1", "deploy redeploys deploy."), expected_revision=0)
        [hit] = index.search(ADA, "deploy")
        words = _words(indexed_text(hit.message), hit.spans)
        if self.substring_matching:
            assert words == ["deploy", "redeploys", "deploy"]
        else:
            assert words == ["deploy", "deploy"]

    def test_spans_stop_at_the_indexed_256_kib(self, store, index):
        head = "a " * (LIMIT // 2 - 4)  # 262,136 bytes: "deploy" fits once, not twice
        store.write_chat(chat("c1", head + "deploy deploy " * 1000), expected_revision=0)
        [hit] = index.search(ADA, "deploy")
        assert hit.spans == ((len(head), len(head) + 6),)

    def test_around_and_paging_keep_each_hits_own_spans(self, store, index):
        store.write_chat(
            chat("c1", "izmir one", "nothing here", "flight izmir two", "izmir"),
            expected_revision=0,
        )
        hits = index.search(ADA, "izmir flight", around=1, limit=2, offset=1)
        assert [hit.index for hit in hits] == [0, 3]
        for hit in hits:
            text = indexed_text(hit.message)
            assert hit.spans == match_spans(text, query_terms("izmir flight"))
            assert "izmir" in snippet(text, hit.spans)

    def test_spans_equal_the_memory_index_on_the_same_data(self, store, index):
        memory = InMemoryConditionalChatStore(InMemoryTranscriptIndex())
        records = [
            chat("c1", "Straße STRASSE strasse", "ﬁle file", "naïve NAIVE 09:40"),
            chat(
                "c2",
                "東京 and 東京都 σοφός ΣΟΦΟΣ",
                "pay\u202elap a\u200bb e\u0301 \ud800deploy\ud800",
                "x" * 300 + " " + "x" * 300,
            ),
        ]
        for record in records:
            store.write_chat(record, expected_revision=0)
            memory.write_chat(record, expected_revision=0)
        for query in ("strasse file naive", "東京 σοφος", "paylap ab e deploy", "x" * 300, "0940"):
            expected = [
                (hit.chat_id, hit.index, hit.spans)
                for hit in memory.transcript.search(ADA, query, limit=50)
            ]
            found = [
                (hit.chat_id, hit.index, hit.spans) for hit in index.search(ADA, query, limit=50)
            ]
            if self.substring_matching:  # more hits and wider spans; each hit still agrees
                for chat_id, position, spans in found:
                    text = next(
                        indexed_text(r.messages[position]) for r in records if r.chat_id == chat_id
                    )
                    assert spans == match_spans(text, query_terms(query), substring=True)
                assert {key[:2] for key in expected} <= {key[:2] for key in found}
            else:
                assert found == expected, query
