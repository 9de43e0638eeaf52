"""A deterministic synthetic chat corpus that looks like real agent transcripts.

Same seed and sizes give the same corpus, byte for byte (Faker is seeded too), so
two runs (or two databases) search the same data. Term frequencies follow a Zipf
law over a vocabulary mixing English, Turkish, German, French, Vietnamese and
Greek words with diacritics; user sizes are skewed (one user holds ~5% of all
messages); tool results range from a few hundred bytes to 300 KiB log dumps.
``cjk_share`` (default 0: the corpus is unchanged) turns that share of user and
assistant prose into Japanese, Chinese or Thai text (``bench/cjk.py``).
"""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from faker import Faker

from .cjk import CjkText

__all__ = ["BIG_USER", "SMALL_USER", "Corpus", "CorpusChat"]

BIG_USER = "u0000"
SMALL_USER = "u0001"
SMALL_USER_MESSAGES = 400
DUMP_RATE = 0.002  # share of messages that are a log dump tool result
DUMP_MIN, DUMP_MAX = 30 * 1024, 300 * 1024
ZIPF_S = 1.07
LOCALES = ["en_US", "tr_TR", "de_DE", "fr_FR", "vi_VN", "el_GR"]
LOG_WORDS = [
    "error",
    "warn",
    "timeout",
    "kubelet",
    "upstream",
    "retry",
    "connection",
    "refused",
    "latency",
    "handshake",
    "deadline",
    "exceeded",
    "panic",
    "stacktrace",
    "segfault",
]
_SYLLABLES = {
    "tr": "ba be bı bo bö bu bü ça çe çı ğa ğe şa şe şı ka ke kı lar ler lık lük mı mü "
    "öz üz ış iş ya ye gü gö du dü sı sü ta te",
    "de": "ba be bä ge gü ha hö ka kö la lü ma mä na nö ra rü sa sä sch st ei au äu "
    "ung ßen ter ber",
    "fr": "ba bé bè ça ce ço da dé fê fi gé je là lé mè né pâ pé ré rè sé té vé ée ion eau",
    "vi": "bà bả cá cầ đa đế gạ hư kỳ lạ mỹ nghĩ ngườ nhậ phố quố sự thà tiế trư việ xuấ ơn ưu",
    "el": "κα κε λο μα να πα ρο σα τα φι χω ψυ ωμ αι ευ ου γι δε ζω θη",
    "en": "ba co de fi ga ho in jo ka lo mi no pe qu ra st th un ve wo",
}
_SYSTEM_PROMPTS = 24
_EPOCH_MS = int(datetime(2025, 1, 1, tzinfo=UTC).timestamp() * 1000)


@dataclass
class CorpusChat:
    """One chat to write: ``indexed`` is each message's indexed text (None: system)."""

    chat_id: str
    user: str
    messages: list[dict[str, Any]]
    updated_at_ms: int
    indexed: list[str | None]

    @property
    def scope(self) -> dict[str, str]:
        return {"userId": self.user}


@dataclass
class Corpus:
    messages: int
    users: int
    seed: int = 1
    #: share of user and assistant prose messages written in Japanese, Chinese or Thai.
    cjk_share: float = 0.0
    vocabulary: list[str] = field(init=False)
    cum_weights: list[float] = field(init=False)
    user_sizes: dict[str, int] = field(init=False)
    #: word -> occurrences, for the users whose queries are measured (filled while generating).
    word_counts: dict[str, Counter[str]] = field(init=False)
    dump_words: Counter[str] = field(init=False)
    #: CJK word -> occurrences, for the measured users (empty without ``cjk_share``).
    cjk_word_counts: dict[str, Counter[str]] = field(init=False)

    def __post_init__(self) -> None:
        rng = random.Random(self.seed)
        self.faker = Faker(LOCALES)
        self.faker.seed_instance(self.seed)
        self.vocabulary = self._vocabulary(rng)
        self.cum_weights = list(
            itertools.accumulate(1.0 / (rank + 1) ** ZIPF_S for rank in range(len(self.vocabulary)))
        )
        self.sentences = {
            loc: [self.faker[loc].sentence(nb_words=10) for _ in range(300)] for loc in LOCALES
        }
        self.system_prompts = [
            "You are a helpful assistant. " + " ".join(self.faker["en_US"].paragraphs(nb=3))
            for _ in range(_SYSTEM_PROMPTS)
        ]
        self.user_sizes = self._user_sizes(rng)
        self.word_counts = {BIG_USER: Counter(), SMALL_USER: Counter()}
        self.dump_words = Counter()
        self.cjk_word_counts = {BIG_USER: Counter(), SMALL_USER: Counter()}
        self.cjk = CjkText(self.seed) if self.cjk_share > 0 else None

    # vocabulary and sizes

    def _vocabulary(self, rng: random.Random, size: int = 60_000) -> list[str]:
        """Real words first (Faker's lorem lists per locale), then synthetic ones."""
        words: dict[str, None] = {}
        for loc in LOCALES:
            try:
                for word in self.faker[loc].words(nb=400, unique=True):
                    words.setdefault(word, None)
            except Exception:  # locale without lorem words: synthetic ones below
                continue
        real = list(words)
        rng.shuffle(real)
        syllables = {lang: text.split() for lang, text in _SYLLABLES.items()}
        langs = sorted(syllables)
        synthetic: dict[str, None] = {}
        while len(real) + len(synthetic) < size:
            lang = rng.choice(langs)
            word = "".join(rng.choice(syllables[lang]) for _ in range(rng.randint(2, 4)))
            if word not in words:
                synthetic.setdefault(word, None)
        vocab = real + list(synthetic)
        # Interleave so the top ranks mix real words of every language with synthetic ones.
        head = vocab[:2000]
        rng.shuffle(head)
        return head + vocab[2000:]

    def _user_sizes(self, rng: random.Random) -> dict[str, int]:
        """One big user (~5%), one small user (measured), the rest log-normally skewed."""
        users = max(self.users, 3)
        big = max(20, round(self.messages * 0.05))
        small = min(SMALL_USER_MESSAGES, max(20, self.messages // (4 * users)))
        rest = max(self.messages - big - small, users - 2)
        weights = [rng.lognormvariate(0.0, 1.0) for _ in range(users - 2)]
        total = sum(weights)
        sizes = {BIG_USER: big, SMALL_USER: small}
        others = [max(1, math.floor(rest * w / total)) for w in weights]
        others[0] += rest - sum(others)  # exact total
        for i, size in enumerate(others):
            sizes[f"u{i + 2:04d}"] = max(1, size)
        return sizes

    # text

    def words(self, rng: random.Random, k: int) -> list[str]:
        return rng.choices(self.vocabulary, cum_weights=self.cum_weights, k=k)

    def _prose(self, rng: random.Random, user: str, sentences: int, words: int) -> str:
        parts = [rng.choice(self.sentences[rng.choice(LOCALES)]) for _ in range(sentences)]
        picked = self.words(rng, words)
        counter = self.word_counts.get(user)
        if counter is not None:
            counter.update(picked)
        parts.append(" ".join(picked) + ".")
        rng.shuffle(parts)
        return " ".join(parts)

    def _message_prose(
        self,
        rng: random.Random,
        cjk_rng: random.Random | None,
        user: str,
        sentences: int,
        words: int,
    ) -> str:
        """User or assistant prose; with ``cjk_share``, sometimes CJK text instead.

        The Latin prose is drawn even when CJK replaces it (uncounted), so ``rng`` advances
        exactly as without CJK: every other message of the corpus stays the same.
        """
        if self.cjk is not None and cjk_rng is not None and cjk_rng.random() < self.cjk_share:
            self._prose(rng, "", sentences, words)
            return self.cjk.prose(cjk_rng, self.cjk_word_counts.get(user))
        return self._prose(rng, user, sentences, words)

    def _tool_output(self, rng: random.Random, user: str) -> str:
        if rng.random() < DUMP_RATE * 3:  # tool messages are ~1/3 of all: 0.2% overall
            return self._dump(rng, user)
        size = int(min(8000, rng.lognormvariate(6.0, 0.9)))  # median ~400 bytes
        text = self._prose(rng, user, 1, max(3, size // 8))
        return f'{{"status": "ok", "rows": {rng.randint(0, 500)}}} {text}'[: max(size, 200)]

    def _dump(self, rng: random.Random, user: str) -> str:
        """A log dump of 30-300 KiB: repeated lines of log words, ids and Zipf words."""
        target = rng.randint(DUMP_MIN, DUMP_MAX)
        lines = []
        length = 0
        picked = self.words(rng, 40)
        counter = self.word_counts.get(user)
        if counter is not None:
            counter.update(picked)
            counter.update(LOG_WORDS)
        self.dump_words.update(LOG_WORDS)
        n = 0
        while length < target:
            n += 1
            line = (
                f"2025-03-{n % 28 + 1:02d}T12:{n % 60:02d}:{n * 7 % 60:02d}Z "
                f"{LOG_WORDS[n % len(LOG_WORDS)]} pod-{n % 97} req={n * 7919 % 1000003:x} "
                f"{picked[n % len(picked)]} {LOG_WORDS[n * 3 % len(LOG_WORDS)]}"
            )
            lines.append(line)
            length += len(line) + 1
        return "\n".join(lines)

    # chats

    def _chat(self, rng: random.Random, user: str, number: int, size: int) -> CorpusChat:
        messages: list[dict[str, Any]] = []
        indexed: list[str | None] = []
        if rng.random() < 0.7:
            messages.append({"role": "system", "content": rng.choice(self.system_prompts)})
            indexed.append(None)
        call = 0
        cjk_rng = random.Random(f"{self.seed}:{user}:{number}:cjk") if self.cjk else None
        while len(messages) < size:
            text = self._message_prose(rng, cjk_rng, user, rng.randint(1, 3), rng.randint(3, 25))
            messages.append({"role": "user", "content": text})
            indexed.append(text)
            if len(messages) >= size:
                break
            answer = self._message_prose(rng, cjk_rng, user, rng.randint(2, 6), rng.randint(10, 60))
            parts: list[dict[str, Any]] = []
            if rng.random() < 0.3:
                parts.append({"type": "reasoning", "text": self._prose(rng, "", 2, 20)})
            parts.append({"type": "text", "text": answer})
            use_tool = rng.random() < 0.4 and len(messages) + 2 < size
            if use_tool:
                call += 1
                parts.append(
                    {
                        "type": "tool-call",
                        "toolCallId": f"call{call}",
                        "toolName": rng.choice(["search_docs", "run_sql", "fetch_logs"]),
                        "input": {"q": " ".join(self.words(rng, 3))},
                    }
                )
            messages.append({"role": "assistant", "content": parts})
            indexed.append(answer)
            if use_tool:
                output = self._tool_output(rng, user)
                messages.append(
                    {
                        "role": "tool",
                        "content": [
                            {
                                "type": "tool-result",
                                "toolCallId": f"call{call}",
                                "toolName": "fetch_logs",
                                "output": output,
                            }
                        ],
                    }
                )
                indexed.append(output)
        messages, indexed = messages[:size], indexed[:size]
        return CorpusChat(
            chat_id=f"{user}-c{number:05d}",
            user=user,
            messages=messages,
            updated_at_ms=_EPOCH_MS + number * 60_000 + int(user[1:]) * 1000,
            indexed=indexed,
        )

    def _chat_sizes(self, rng: random.Random, total: int) -> list[int]:
        sizes = []
        while total > 0:
            size = min(total, max(2, min(400, int(rng.lognormvariate(2.5, 0.8)))))
            sizes.append(size)
            total -= size
        return sizes

    def chats(self) -> Iterator[CorpusChat]:
        """Every chat once: the small user first, then all others interleaved by seed.

        The small user comes first so its data is complete at every growth checkpoint.
        """
        rng = random.Random(self.seed * 7919 + 1)
        plan: list[tuple[str, int, int]] = []
        for user, size in self.user_sizes.items():
            for number, chat_size in enumerate(self._chat_sizes(rng, size)):
                plan.append((user, number, chat_size))
        first = [p for p in plan if p[0] == SMALL_USER]
        rest = [p for p in plan if p[0] != SMALL_USER]
        rng.shuffle(rest)
        for user, number, chat_size in first + rest:
            chat_rng = random.Random(f"{self.seed}:{user}:{number}")
            yield self._chat(chat_rng, user, number, chat_size)
