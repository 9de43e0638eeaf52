"""Kana voicing marks under ``CJK_BIGRAMS`` (SPEC §8): kept on their kana, not dropped.

Why: folding drops diacritics, and for Kana the voicing marks are diacritics only in
Unicode's eyes: ``デプロイ`` (deploy) folded to ``テフロイ`` and shared the bigram ``テフ``
with ``デフォルト`` (default); ``バス``, ``パス`` and ``ハス`` were one word. Under the
bigram rule a mark stays on its kana, recomposed as NFC does (``デ`` stays U+30C7).

Folding works on each character alone, but a mark written as a character of its own
(U+3099/U+309A, the spacing U+309B/U+309C, the half-width U+FF9E/U+FF9F) right after
its kana makes one character of two. ``voiced(text)`` rewrites each such pair in place
and keeps the text's length: the kana becomes its voiced form, the mark a combining
U+3099 (which then folds to nothing, as a lone mark does). Every per-character step
(the fold codes, the highlight rule, the spans' offset map) runs on ``voiced(text)``,
whose offsets are the text's. A mark after anything else is a diacritic as before.

Pure Python: no Django import.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["LONE_MARKS", "VOICED", "VOICING_BASES", "compose_voiced", "voiced"]

#: The combining voicing marks folding keeps (dakuten, handakuten).
COMBINING_MARKS = "\u3099\u309a"
#: Each voicing mark written as a character of its own -> the combining mark it stands for.
_MARKS = {
    "\u3099": "\u3099",
    "\u309a": "\u309a",
    "\u309b": "\u3099",
    "\u309c": "\u309a",
    "\uff9e": "\u3099",
    "\uff9f": "\u309a",
}
#: A mark left alone (after something it does not voice) folds as every rule of §2 says:
#: the combining and half-width ones to nothing, the spacing ones to a space.
LONE_MARKS = str.maketrans({"\u3099": None, "\u309a": None, "\uff9e": None, "\uff9f": None,
                            "\u309b": " ", "\u309c": " "})  # fmt: skip


def _compositions() -> dict[str, str]:
    found: dict[str, str] = {}
    for code in range(0x3040, 0x3100):
        for mark in COMBINING_MARKS:
            composed = unicodedata.normalize("NFC", chr(code) + mark)
            if len(composed) == 1:
                found[chr(code) + mark] = composed
    return found


#: Kana + combining mark -> the voiced kana NFC composes them to (``カ\u3099`` -> ``ガ``).
VOICED = _compositions()


def _bases() -> dict[str, str]:
    """Characters whose compatibility decomposition is one kana that takes a mark: the
    kana themselves, half-width, circled and squared Katakana (the tests check every
    code point)."""
    kana = {pair[0] for pair in VOICED}
    blocks = (range(0x3040, 0x3400), range(0xFF61, 0xFFA0), range(0x1F200, 0x1F300))
    found: dict[str, str] = {}
    for block in blocks:
        for code in block:
            decomposed = unicodedata.normalize("NFKD", chr(code))
            if decomposed in kana:
                found[chr(code)] = decomposed
    return found


#: Character -> the kana it folds to, for each character a voicing mark can follow.
VOICING_BASES = _bases()
_ANY_MARK = re.compile(f"[{''.join(_MARKS)}]")
_PAIR = re.compile(f"[{''.join(VOICING_BASES)}][{''.join(_MARKS)}]")
_COMBINING = re.compile(f"(.?)[{COMBINING_MARKS}]", re.DOTALL)


def _voice_pair(found: re.Match[str]) -> str:
    pair = found.group()
    composed = VOICED.get(VOICING_BASES[pair[0]] + _MARKS[pair[1]])
    return pair if composed is None else composed + "\u3099"


def voiced(text: str) -> str:
    """``text`` with each kana + voicing mark pair as its voiced kana + U+3099 (same
    length); ``text`` itself when it holds no voicing mark."""
    if text.isascii() or _ANY_MARK.search(text) is None:
        return text
    return _PAIR.sub(_voice_pair, text)


def _compose(found: re.Match[str]) -> str:
    return VOICED.get(found.group(), found.group(1))


def compose_voiced(decomposed: str) -> str:
    """Decomposed folded text with its combining voicing marks kept: each composed with
    the kana before it, the others dropped."""
    if "\u3099" not in decomposed and "\u309a" not in decomposed:
        return decomposed
    return _COMBINING.sub(_compose, decomposed)
