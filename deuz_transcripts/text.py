"""The text rules every backend shares: folding, terms, what a message indexes.

Pure Python on purpose: the in-memory index and every SQL backend call these
functions, so they can never disagree about what a word is.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .fold_codes import FoldCodes
from .kana_voicing import LONE_MARKS, compose_voiced, voiced
from .message_text import SYSTEM_ROLES, indexed_text, is_system

__all__ = [
    "MAX_FOLD_GROWTH",
    "MAX_INDEXED_BYTES",
    "MAX_QUERY_TERMS",
    "MAX_STORED_TERM_BYTES",
    "SYSTEM_ROLES",
    "cjk_bigrams_enabled",
    "cut_utf8",
    "fold",
    "folded_size",
    "folded_terms",
    "holds_bigram_runs",
    "ignored_query_terms",
    "indexed_text",
    "is_system",
    "is_term_char",
    "message_terms",
    "query_terms",
    "separated_fold_aligned",
    "stored_term",
    "stored_terms_text",
    "term_ranges",
    "terms",
    "text_rules_tag",
    "use_cjk_bigrams",
    "voiced_text",
]

#: Only this many bytes of a message's folded UTF-8 text are indexed.
MAX_INDEXED_BYTES = 262_144
#: A query uses at most this many distinct terms; the rest are ignored.
MAX_QUERY_TERMS = 32
#: Longer terms are stored as a digest (PostgreSQL lexemes stop at 2,047 bytes).
MAX_STORED_TERM_BYTES = 255

_DROPPED_CATEGORIES = frozenset({"Mn", "Mc", "Me", "Cf", "Cs"})
_TERM_RE = re.compile(r"[^\W_]+")
#: ASCII bytes -> the lowered byte for letters and digits, a space for everything else: the
#: terms of ASCII text are then the words ``bytes.split()`` finds (the matches of
#: ``_TERM_RE`` on the lowered text, ~2x faster than any regex: no match objects).
_ASCII_TERMS_TABLE = bytes(
    code if chr(code).isascii() and chr(code).isalnum() else 0x20
    for code in bytes(range(256)).lower()
)
_FOLD_CHUNK_CHARS = 65_536
#: ``fold`` makes a character's UTF-8 at most this many times longer (U+FDFA, 3 bytes,
#: folds to 33): text of at most ``MAX_INDEXED_BYTES / 11`` bytes is never cut.
MAX_FOLD_GROWTH = 11
#: Text of at most this many characters (4 UTF-8 bytes each at most) is never cut.
_NEVER_CUT_CHARS = MAX_INDEXED_BYTES // (MAX_FOLD_GROWTH * 4)
# Private-use characters never occur in a term, so digests cannot collide with words.
_DIGEST_PREFIX = "\ue001"


class _DropTable(dict[int, int | None]):
    """``str.translate`` table: marks, format characters and surrogates map to None.

    Filled on first sight of each code point, so no process pays for classifying
    all 1.1M code points up front.
    """

    def __missing__(self, code_point: int) -> int | None:
        category = unicodedata.category(chr(code_point))
        value = None if category in _DROPPED_CATEGORIES else code_point
        self[code_point] = value
        return value


_DROP = _DropTable()


class _DropButVoicingTable(_DropTable):
    """``_DROP`` but for the combining kana voicing marks (kept under ``CJK_BIGRAMS``)."""

    def __missing__(self, code_point: int) -> int | None:
        if code_point in (0x3099, 0x309A):
            self[code_point] = code_point
            return code_point
        return super().__missing__(code_point)


_DROP_BUT_VOICING = _DropButVoicingTable()


def fold(text: str) -> str:
    """Fold case and diacritics: NFKD, Unicode case folding, NFKD, drop marks.

    Marks (``M*``), format characters (``Cf``: zero-width spaces and joiners, soft
    hyphens, direction marks) and lone surrogates are removed; under ``CJK_BIGRAMS`` the
    kana voicing marks stay on their kana (``kana_voicing``). The rule works on each
    character alone (of ``voiced_text(text)`` under ``CJK_BIGRAMS``), so folding a text
    equals folding its pieces.
    """
    if text.isascii():
        return text.lower()
    if _cjk_bigrams:
        return _fold_voiced(text)
    return _fold_seed(text)


def _fold_seed(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", unicodedata.normalize("NFKD", text).casefold())
    return decomposed.translate(_DROP)


def _fold_voiced(text: str) -> str:
    """The fold of each character of ``voiced(text)``: lone marks fold as they always
    did, precomposed voiced kana (and pairs made one by ``voiced``) stay voiced."""
    text = voiced(text).translate(LONE_MARKS)
    decomposed = unicodedata.normalize("NFKD", unicodedata.normalize("NFKD", text).casefold())
    return compose_voiced(decomposed.translate(_DROP_BUT_VOICING))


def voiced_text(text: str) -> str:
    """The text whose characters fold one by one under the rule in force: ``text``
    itself, or (``CJK_BIGRAMS``) with each kana + voicing mark pair made one voiced kana
    and a mark folding to nothing. Same length, so its offsets are the text's."""
    return voiced(text) if _cjk_bigrams else text


# --- CJK and Thai bigrams (SPEC §8, opt-in by the ``CJK_BIGRAMS`` setting) -------------

#: Han and Kana as one class, with the prolonged sound mark and the iteration marks (folded
#: text: NFKD has already mapped half-width Katakana and compatibility ideographs here).
_HAN_KANA = (
    "\u2e80-\u2fdf\u3005-\u3007\u3021-\u3029\u3031-\u3035\u3038-\u303c\u3041-\u309f"
    "\u30a0-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"
    "\U0001aff0-\U0001b16f\U0001d372-\U0001d376\U00020000-\U0003ffff"
)
_THAI = "\u0e00-\u0e7f"
_BIGRAM_RUN = re.compile(f"[{_HAN_KANA}]+|[{_THAI}]+")
_cjk_bigrams = False


def use_cjk_bigrams(enabled: bool) -> None:
    """Switch the process-wide term rule (the app sets it from ``CJK_BIGRAMS``)."""
    global _cjk_bigrams, _findall, _FOLD_CODES
    if enabled != _cjk_bigrams:
        _cjk_bigrams = enabled
        _findall = _findall_bigrams if enabled else _TERM_RE.findall
        _FOLD_CODES = _VOICED_CODES if enabled else _SEED_CODES


def cjk_bigrams_enabled() -> bool:
    return _cjk_bigrams


#: The bigram rule's stored form: ``+cjk-bigrams`` dropped the kana voicing marks (until
#: 2026-12-06), ``+cjk-bigrams-2`` keeps them. A new name re-indexes databases of the old.
CJK_BIGRAMS_TAG = "+cjk-bigrams-2"


def text_rules_tag() -> str:
    """Names the term rule in stored digests: ``""`` for the seed's rule (digests of
    databases indexed before the option existed stay valid)."""
    return CJK_BIGRAMS_TAG if _cjk_bigrams else ""


def _findall_bigrams(folded: str) -> list[str]:
    """Runs of letters and digits, split where the script class changes; Han/Kana and
    Thai runs give their overlapping character bigrams (one character: itself)."""
    found = _TERM_RE.findall(folded)
    if folded.isascii() or not holds_bigram_runs(folded):
        return found
    return [term[first:last] for term in found for first, last in term_ranges(term)]


#: Terms of folded text, in order, repeats kept: the rule in force (see ``use_cjk_bigrams``).
_findall: Callable[[str], list[str]] = _TERM_RE.findall


def folded_terms(folded: str) -> list[str]:
    """Terms of already folded text, in order, repeats kept."""
    return _findall(folded)


def terms(text: str) -> list[str]:
    """Distinct terms of ``text`` in order of first appearance."""
    return list(dict.fromkeys(_findall(fold(text))))


def query_terms(query: object) -> list[str]:
    """The first 32 distinct terms of a query; no term means no hits (nor has a non-string)."""
    if not isinstance(query, str):
        return []
    found: dict[str, None] = {}
    for term in folded_terms(fold(query)):
        found[term] = None
        if len(found) == MAX_QUERY_TERMS:
            break
    return list(found)


def ignored_query_terms(query: object) -> list[str]:
    """The distinct terms past the first 32 that ``query_terms`` leaves out, in order (as
    folded): what a surface tells its reader the search did not look for."""
    if not isinstance(query, str):
        return []
    distinct = list(dict.fromkeys(folded_terms(fold(query))))
    return distinct[MAX_QUERY_TERMS:]


def cut_utf8(text: str, limit: int = MAX_INDEXED_BYTES) -> str:
    """The longest prefix of ``text`` within ``limit`` UTF-8 bytes (cut characters drop)."""
    if len(text) <= limit // 4:
        return text
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", errors="ignore")


def fold_capped(text: str, limit: int = MAX_INDEXED_BYTES) -> str:
    """``cut_utf8(fold(text))`` without folding more of a huge text than needed."""
    text = voiced_text(text)  # a kana and its mark may stand on either side of a chunk's end
    if len(text) <= _FOLD_CHUNK_CHARS:
        return cut_utf8(fold(text), limit)
    pieces: list[str] = []
    size = 0
    for start in range(0, len(text), _FOLD_CHUNK_CHARS):
        piece = fold(text[start : start + _FOLD_CHUNK_CHARS])
        pieces.append(piece)
        size += len(piece.encode("utf-8"))
        if size >= limit:
            break
    return cut_utf8("".join(pieces), limit)


def message_terms(message: Any) -> list[str] | None:
    """Distinct terms of a message's first 256 KiB of folded text; ``None`` if system."""
    text = indexed_text(message)
    if text is None:
        return None
    return text_terms(text)


def text_terms(text: str) -> list[str]:
    """Distinct terms of the first 256 KiB of ``fold(text)``, in order of first appearance.

    Equal to ``dict.fromkeys(findall(fold_capped(text)))``, computed faster: ``fold``
    works on each character alone, so ``_FOLD_CODES`` folds the whole text at once (each
    character mapped to its fold, non-term characters to separators) and one ``split``
    gives the terms. ASCII text folds by ``lower()``: its terms are its runs of ASCII
    letters and digits, lowered (``_ASCII_TERMS_TABLE``).
    """
    if text.isascii():  # one byte per character: the cut is a slice
        ascii_terms = text[:MAX_INDEXED_BYTES].encode("ascii").translate(_ASCII_TERMS_TABLE).split()
        # decoded at once, then split: one str per distinct term, no decode call per term
        joined = b" ".join(dict.fromkeys(ascii_terms)).decode("ascii")
        return joined.split(" ") if joined else []
    text = voiced_text(text)
    if len(text) <= _NEVER_CUT_CHARS:
        separated = _FOLD_CODES.plain(text)
        found = dict.fromkeys(separated.split(" "))
        found.pop("", None)
    elif len(text) <= 2 * MAX_INDEXED_BYTES:
        # separators of the folded UTF-8 size, so the text is cut where the folded text is
        separated = _FOLD_CODES.sized(text)
        if len(separated) * 4 > MAX_INDEXED_BYTES:
            separated = cut_utf8(separated)
        found = dict.fromkeys(separated.split())
    else:  # almost surely cut: fold only up to the cut
        return list(dict.fromkeys(_findall(fold_capped(text))))
    if _cjk_bigrams and holds_bigram_runs(separated):
        return _bigrams(found)
    return list(found)


def separated_fold_aligned(text: str) -> tuple[str, bool]:
    """``fold(text)`` with each non-term character a space, for the whole text in C (one
    character for each folded character, so offsets follow the fold's), and True when
    those offsets are known to be the text's (each character folded to one character):
    else ``folded_spans`` maps them back (through the characters of ``voiced_text``)."""
    return _FOLD_CODES.plain_aligned(voiced_text(text))


def folded_size(text: str) -> int:
    """``len(fold(text).encode("utf-8"))`` of text already ``voiced_text``, folded in C
    (separators of the same size) character by character."""
    return len(_FOLD_CODES.sized(text).encode("utf-8"))


def holds_bigram_runs(folded: str) -> bool:
    """Whether ``folded`` holds Han, Kana or Thai, whose terms ``CJK_BIGRAMS`` changes."""
    return _BIGRAM_RUN.search(folded) is not None


def _bigrams(terms: Iterable[str]) -> list[str]:
    """The terms of the bigram rule, from the distinct terms of the seed's rule."""
    return list(dict.fromkeys(t[a:b] for t in terms for a, b in term_ranges(t)))


def _pieces(folded: str) -> list[tuple[str, bool]]:
    """Each character of a fold and whether it belongs to a term."""
    return [(piece, _TERM_RE.fullmatch(piece) is not None) for piece in folded]


def _fold_pieces(char: str) -> list[tuple[str, bool]]:
    """``_pieces`` of ``fold(char)`` under the rule in force."""
    return _pieces(fold(char))


#: Scripts of thousands of characters (Han, Kana, Hangul, Yi): a few of their texts would
#: fill the 256 codes, so their characters never get one and their texts take
#: ``str.translate``, which costs them about what the codes cost Latin text per byte.
_LARGE_SCRIPTS = re.compile(
    f"[{_HAN_KANA}\u1100-\u11ff\u3130-\u318f\ua000-\ua4cf\ua960-\ua97f\uac00-\ud7ff]"
)


def _codable(char: str) -> bool:
    return _LARGE_SCRIPTS.match(char) is None


#: The codes of each rule (a character folds differently under each), and those in force.
_SEED_CODES = FoldCodes(lambda char: _pieces(_fold_seed(char)), _codable)
_VOICED_CODES = FoldCodes(lambda char: _pieces(_fold_voiced(char)), _codable)
_FOLD_CODES = _SEED_CODES


def stored_term(term: str) -> str:
    """The form a term takes in SQL search data: itself, or a digest when very long."""
    if len(term) * 4 <= MAX_STORED_TERM_BYTES or len(term.encode("utf-8")) <= MAX_STORED_TERM_BYTES:
        return term
    return _DIGEST_PREFIX + hashlib.blake2b(term.encode("utf-8"), digest_size=16).hexdigest()


# Any term of at most this many characters fits MAX_STORED_TERM_BYTES (4 bytes each at most).
_LONG_TERM = re.compile("[^ ]{" + str(MAX_STORED_TERM_BYTES // 4 + 1) + ",}")


def stored_terms_text(search_text: str) -> str:
    """``stored_term`` of each term of a space-separated list; one regex scan when all are short."""
    if _LONG_TERM.search(search_text) is None:
        return search_text
    return " ".join(stored_term(term) for term in search_text.split(" ") if term)


def is_term_char(char: str) -> bool:
    """Whether a folded character belongs to a term (a letter or digit)."""
    return _TERM_RE.fullmatch(char) is not None


def term_ranges(word: str) -> Iterator[tuple[int, int]]:
    """``(first, last)`` character ranges of the terms of one folded run of letters and
    digits, by the rule in force: the whole run, or (``CJK_BIGRAMS``) its pieces split where
    the script class changes, Han/Kana and Thai pieces as overlapping bigrams."""
    if not _cjk_bigrams or not holds_bigram_runs(word):
        yield 0, len(word)
        return
    position = 0
    for run in _BIGRAM_RUN.finditer(word):
        if run.start() > position:
            yield position, run.start()
        if run.end() - run.start() == 1:
            yield run.start(), run.end()
        else:
            yield from ((i, i + 2) for i in range(run.start(), run.end() - 1))
        position = run.end()
    if position < len(word):
        yield position, len(word)
