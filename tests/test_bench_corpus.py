"""The benchmark corpus: unchanged without CJK, and a CJK share that touches only prose.

The digest below was computed by the corpus code before ``cjk_share`` existed (commit
2fbffff, Faker 40.63.0), so benchmark results from before and after stay comparable.
A Faker release that changes its word lists would change it too: recompute it then at
the older commit with ``corpus_digest``.
"""

from __future__ import annotations

import hashlib
import json
import re

from bench.cjk import query_words
from bench.corpus import BIG_USER, SMALL_USER, Corpus

DIGEST_3000_6_SEED3 = "b5def524aebe436e3c1c5751a1cc1d290ef47cd4301df687194ded8dac16cf92"
CJK = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff\u0e00-\u0e7f]")


def corpus_digest(corpus: Corpus) -> str:
    digest = hashlib.sha256()
    for chat in corpus.chats():
        row = [chat.chat_id, chat.user, chat.messages, chat.updated_at_ms, chat.indexed]
        digest.update(json.dumps(row, ensure_ascii=False, sort_keys=True).encode())
    counts = {user: sorted(counter.items()) for user, counter in corpus.word_counts.items()}
    digest.update(json.dumps(counts, ensure_ascii=False).encode())
    digest.update(json.dumps(sorted(corpus.dump_words.items())).encode())
    return digest.hexdigest()


def test_corpus_without_cjk_is_byte_for_byte_the_earlier_one() -> None:
    assert corpus_digest(Corpus(3000, 6, seed=3)) == DIGEST_3000_6_SEED3
    assert corpus_digest(Corpus(3000, 6, seed=3, cjk_share=0.0)) == DIGEST_3000_6_SEED3


def _prose_text(message: dict[str, object]) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    assert isinstance(content, list)
    return next(p["text"] for p in content if p["type"] == "text")


def test_cjk_share_replaces_only_prose_and_records_words() -> None:
    plain = list(Corpus(3000, 6, seed=3).chats())
    mixed_corpus = Corpus(3000, 6, seed=3, cjk_share=0.2)
    mixed = list(mixed_corpus.chats())
    assert [c.chat_id for c in mixed] == [c.chat_id for c in plain]
    replaced = prose = 0
    for a, b in zip(plain, mixed, strict=True):
        assert [m["role"] for m in a.messages] == [m["role"] for m in b.messages]
        assert a.updated_at_ms == b.updated_at_ms
        for ma, mb, ia, ib in zip(a.messages, b.messages, a.indexed, b.indexed, strict=True):
            if ma["role"] in ("user", "assistant"):
                prose += 1
                if ma != mb:
                    replaced += 1
                    assert CJK.search(_prose_text(mb)) and not CJK.search(_prose_text(ma))
                    assert ib == _prose_text(mb)
                    continue
            assert ma == mb and ia == ib  # system prompts, tool calls and results untouched
    assert 0.15 < replaced / prose < 0.25
    for user in (BIG_USER, SMALL_USER):
        words = query_words(mixed_corpus.cjk_word_counts[user])
        assert words and all(2 <= len(w) <= 4 for w in words)
        text = "".join(i or "" for c in mixed if c.user == user for i in c.indexed)
        assert all(w in text for w in words)
    # the CJK share is deterministic too
    assert corpus_digest(Corpus(3000, 6, seed=3, cjk_share=0.2)) == corpus_digest(
        Corpus(3000, 6, seed=3, cjk_share=0.2)
    )
