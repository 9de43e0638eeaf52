"""An opt-in share of Japanese, Chinese and Thai prose in the corpus (``--cjk-share``).

These scripts write sentences without spaces, so a word is found only when the index
splits runs into bigrams (``CJK_BIGRAMS``). The text comes from a Faker of its own,
seeded apart from the corpus's, so the other locales' random streams stay untouched
and a corpus without CJK is byte for byte what it was before this option existed.
"""

from __future__ import annotations

import random
from collections import Counter, OrderedDict

from faker import Faker

__all__ = ["CJK_LOCALES", "CjkText", "query_words"]

CJK_LOCALES = ["ja_JP", "zh_CN", "th_TH"]
_ZIPF_S = 1.07
#: Query words are words of 2-4 characters (a one-character word is a single unigram).
QUERY_WORD_CHARS = (2, 4)


class CjkText:
    """Prose of the three locales: Zipf-weighted words of each locale's word list, no spaces."""

    def __init__(self, seed: int) -> None:
        self.faker = Faker(CJK_LOCALES)
        self.faker.seed_instance(seed * 1_000_003 + 7)
        self.weights: dict[str, OrderedDict[str, float]] = {}
        for loc in CJK_LOCALES:
            words = list(dict.fromkeys(self.faker[loc].get_words_list()))
            self.weights[loc] = OrderedDict(
                (word, 1.0 / (rank + 1) ** _ZIPF_S) for rank, word in enumerate(words)
            )

    def prose(self, rng: random.Random, counter: Counter[str] | None) -> str:
        """One message of 1-4 sentences in one locale; ``counter`` gets every word used."""
        loc = rng.choice(CJK_LOCALES)
        sentences = []
        for _ in range(rng.randint(1, 4)):
            words = self.faker[loc].random_choices(self.weights[loc], length=rng.randint(4, 12))
            if counter is not None:
                counter.update(words)
            end = " " if loc == "th_TH" else "。"
            sentences.append("".join(words) + end)
        return "".join(sentences).strip()


def query_words(counts: Counter[str]) -> list[str]:
    """The words of 2-4 characters a user's CJK text holds, most frequent first."""
    low, high = QUERY_WORD_CHARS
    return [w for w, _ in counts.most_common() if low <= len(w) <= high]
