"""Folding a whole text in two stdlib codec calls, for the characters a process has seen.

Why: the per-word work of term extraction (split, one cache lookup per word, merging)
kept it near 20 MB/s. ``fold`` works on each character alone (the tests prove it on every
code point), so folding a text is mapping each character to its fold. The charmap codec
does such a mapping in C: ``charmap_encode`` gives each known character a one-byte code
(256 codes, the first 128 ASCII), ``charmap_decode`` maps each code to one character: the
character's fold with every non-term character turned into a separator. Then one
``split`` gives the terms. A character whose fold is ASCII but not one character (``ß``,
``ﬁ``, marks that drop) is replaced in the codes before decoding (ASCII codes are ASCII);
one whose fold is longer and not ASCII (``½``, ``ᾳ``) decodes to a placeholder (a control
character, which no fold produces otherwise) that one ``replace`` expands.

Codes are handed out on first sight of a character. Characters outside the BMP (and
U+FFFE, which the codec reserves) get no code: an error handler turns those that fold to
no term character (emoji, symbols, marks) into spaces of their folded size. A text with a
character that cannot get a code (no code left, or a term character outside the BMP) gets
``None`` and the caller's slower general path; after ``RESET_AFTER_MISSES`` such texts the
table starts again from ASCII, so it follows what a process reads instead of what it read
first.
"""

from __future__ import annotations

import codecs
import threading
import weakref
from collections.abc import Callable, Container
from typing import Any, NamedTuple, cast

__all__ = ["RESET_AFTER_MISSES", "FoldCodes"]

#: Texts the table had no room for before it starts again from ASCII.
RESET_AFTER_MISSES = 1024

#: One separator per UTF-8 size of the character it stands for: the separated text then
#: has exactly the UTF-8 size of the folded text, so it can be cut at the same byte.
_SIZED_SEPARATORS = {1: " ", 2: "\u00a0", 3: "\u3000"}
#: Codes left for placeholders: the ASCII control characters but NUL (no term holds one).
_PLACEHOLDERS = [chr(code) for code in range(1, 32)]
_encode = codecs.charmap_encode
_decode = codecs.charmap_decode
_UNMAPPED = "\ufffe"  # what the charmap codec reads as "no character here"
_ASCII = [chr(code) for code in range(128)]
#: A placeholder's code (one byte), the placeholder and the fold it stands for.
_Expansion = tuple[bytes, str, str]


def _placeheld(sized_fold: str) -> bool:
    """Whether a fold decodes to a placeholder: neither one character nor ASCII."""
    return len(sized_fold) != 1 and not sized_fold.isascii()


class _Table(NamedTuple):
    """One consistent state of the codes: readers take it whole while a learner swaps it."""

    encoding: Any  # the codec's encoding map (``codecs.charmap_build``)
    #: codes whose fold is ASCII but not one character (``ß``, marks): -> the fold's codes
    ascii_expansions: list[tuple[bytes, bytes]]
    plain: str
    plain_expansions: list[_Expansion]
    sized: str
    sized_expansions: list[_Expansion]


class FoldCodes:
    """Maps text to its fold with separators through a table of codes for seen characters.

    ``pieces(char)`` gives a character's fold as ``(piece, is_term)`` pairs, one per
    character of the fold, or ``None`` when ``char`` must never get a code.
    """

    def __init__(self, pieces: Callable[[str], list[tuple[str, bool]] | None]) -> None:
        self._pieces = pieces
        #: characters without a code -> the spaces they fold to, None if a term character
        self._spaces: dict[str, str | None] = {}
        self._errors = f"deuz_transcripts.fold_codes.{id(self)}"
        replace = weakref.WeakMethod(self._replace)  # the codec registry keeps its handlers

        def handler(error: UnicodeError) -> tuple[str, int]:
            method = replace()
            if method is None:  # pragma: no cover - a table is only freed unused
                raise error
            return method(error)

        codecs.register_error(self._errors, handler)
        self._lock = threading.Lock()  # learning only: readers take one snapshot of the table
        self._start()

    def _start(self) -> None:
        self._chars: list[str] = []
        #: per code: the fold with " " separators, and with separators of the same UTF-8 size
        self._plain: list[str] = []
        self._sized: list[str] = []
        self._known: set[str] = set()
        self._expanding = 0  # codes whose fold decodes to a placeholder
        self._misses = 0
        if not self._learn_all("".join(_ASCII)) or self._expanding:
            raise ValueError("every ASCII character must fold to one character")

    def plain(self, text: str) -> str | None:
        """``text`` folded, each non-term character a space; ``None`` if a character of
        it has no code and cannot get one."""
        return self._separate(text, sized=False)

    def sized(self, text: str) -> str | None:
        """Like ``plain``, but each separator has the UTF-8 size of the character it
        replaces (a space, U+00A0 or U+3000): the result has the folded text's size."""
        return self._separate(text, sized=True)

    def _separate(self, text: str, sized: bool) -> str | None:
        table = self._table  # one snapshot: another thread may learn meanwhile
        try:
            codes = _encode(text, self._errors, table.encoding)[0]
        except UnicodeEncodeError:
            learnt = self._learn(text)
            if learnt is None:
                return None
            table = learnt
            codes = _encode(text, self._errors, table.encoding)[0]
        for code, replacement in table.ascii_expansions:
            if code in codes:  # one memchr
                codes = codes.replace(code, replacement)
        if sized:
            separated: str = _decode(codes, "strict", table.sized)[0]
            expansions = table.sized_expansions
        else:
            separated = _decode(codes, "strict", table.plain)[0]
            expansions = table.plain_expansions
        for code, placeholder, expansion in expansions:
            if code in codes:  # one memchr
                separated = separated.replace(placeholder, expansion)
        return separated

    def __len__(self) -> int:
        """Characters that have a code."""
        return len(self._chars)

    def _replace(self, error: UnicodeError) -> tuple[str, int]:
        """Error handler: characters that get no code but fold to no term become spaces."""
        if not isinstance(error, UnicodeEncodeError):
            raise error
        out = []
        for char in error.object[error.start : error.end]:
            spaces = self._codeless(char)
            if spaces is None:
                raise error
            out.append(spaces)
        return "".join(out), error.end

    def _codeless(self, char: str) -> str | None:
        """For a character that never gets a code: the spaces its fold becomes (one per
        UTF-8 byte), or None if its fold holds a term character or it could get a code."""
        if char in self._spaces:
            return self._spaces[char]
        spaces = None
        if ord(char) > 0xFFFF or char == _UNMAPPED:
            pieces = self._pieces(char)
            if pieces is not None and not any(term for _, term in pieces):
                spaces = " " * sum(len(p.encode("utf-8", "surrogatepass")) for p, _ in pieces)
        self._spaces[char] = spaces
        return spaces

    def _learn(self, text: str) -> _Table | None:
        """Give codes to the characters of ``text`` that have none: the table that has
        them all, or ``None`` (and no code given) when they do not all fit."""
        with self._lock:
            if not self._learn_all(text):
                self._misses += 1
                if self._misses < RESET_AFTER_MISSES:
                    return None
                self._start()
                if not self._learn_all(text):
                    return None
            return self._table

    def _learn_all(self, text: str) -> bool:
        new = []
        for char in set(text).difference(self._known):
            if ord(char) <= 0xFFFF and char != _UNMAPPED:
                new.append(char)
            elif self._codeless(char) is None:  # a term character that can have no code
                return False
        new.sort()
        if len(self._chars) + len(new) > 256:
            return False
        entries = [self._entry(char) for char in new]
        expanding = self._expanding + sum(1 for e in entries if e is not None and _placeheld(e[1]))
        if None in entries or expanding > len(_PLACEHOLDERS):
            return False
        for char, entry in zip(new, entries, strict=True):
            self._commit(char, cast("tuple[str, str]", entry))
        self._build()
        return True

    def _entry(self, char: str) -> tuple[str, str] | None:
        """The plain and the sized separated fold of ``char``; ``None`` if it gets no code."""
        if ord(char) > 0xFFFF or char == _UNMAPPED:
            return None
        pieces = self._pieces(char)
        if pieces is None:
            return None
        sized = [
            piece if term else _SIZED_SEPARATORS.get(len(piece.encode("utf-8", "surrogatepass")))
            for piece, term in pieces
        ]
        if None in sized:  # a fold piece that is no term and of no size a separator has
            return None
        plain = "".join(piece if term else " " for piece, term in pieces)
        return plain, "".join(cast("list[str]", sized))

    def _commit(self, char: str, entry: tuple[str, str]) -> None:
        self._chars.append(char)
        self._known.add(char)
        self._plain.append(entry[0])
        self._sized.append(entry[1])
        self._expanding += _placeheld(entry[1])

    def _build(self) -> None:
        padding = _UNMAPPED * (256 - len(self._chars))
        encoding = codecs.charmap_build("".join(self._chars) + padding)
        # a sized fold in ASCII has ASCII separators: the plain fold is the same
        ascii_expansions = {
            code: fold.encode("ascii")
            for code, fold in enumerate(self._sized)
            if len(fold) != 1 and fold.isascii()
        }
        self._table = _Table(
            encoding,
            [(bytes((code,)), replacement) for code, replacement in ascii_expansions.items()],
            *self._decoding(self._plain, ascii_expansions),
            *self._decoding(self._sized, ascii_expansions),
        )

    @staticmethod
    def _decoding(folds: list[str], in_codes: Container[int]) -> tuple[str, list[_Expansion]]:
        """The decoding table of ``folds`` (one per code) and, for each fold that is not
        one character nor expanded ``in_codes`` before decoding, its code, the placeholder
        that stands for it and the fold."""
        table: list[str] = []
        expansions: list[_Expansion] = []
        for code, fold in enumerate(folds):
            if len(fold) == 1:
                table.append(fold)
            elif code in in_codes:
                table.append(_UNMAPPED)  # never decoded: replaced in the codes first
            else:
                placeholder = _PLACEHOLDERS[len(expansions)]
                table.append(placeholder)
                expansions.append((bytes((code,)), placeholder, fold))
        return "".join(table) + _UNMAPPED * (256 - len(table)), expansions
