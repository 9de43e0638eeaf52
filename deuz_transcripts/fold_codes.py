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
character that cannot get a code (no code left, or a term character outside the BMP) is
mapped by ``str.translate`` through a table of every character seen instead: one dict
lookup per character (about twice the codecs' time on Latin text), but any character and
no learning, so scripts of thousands of characters (Han, Kana, Hangul) cost about what
Latin text costs. After ``RESET_AFTER_MISSES`` such texts the codes start again from
ASCII, so they follow what a process reads instead of what it read first.
"""

from __future__ import annotations

import codecs
import threading
import weakref
from collections.abc import Callable, Container
from typing import Any, NamedTuple, cast

__all__ = ["RESET_AFTER_MISSES", "TRANSLATED_CHARACTERS", "FoldCodes"]

#: Texts the table had no room for before it starts again from ASCII.
RESET_AFTER_MISSES = 1024
#: Characters a ``str.translate`` table remembers before it starts again empty (it takes
#: any code point: a text of every code point must not leave 1.1M entries behind).
TRANSLATED_CHARACTERS = 65_536

#: One separator per UTF-8 size of the character it stands for: the separated text then
#: has exactly the UTF-8 size of the folded text, so it can be cut at the same byte.
_SIZED_SEPARATORS = {1: " ", 2: "\u00a0", 3: "\u3000"}
#: Codes left for placeholders: the ASCII control characters but NUL (no term holds one).
_PLACEHOLDERS = [chr(code) for code in range(1, 32)]
_encode = codecs.charmap_encode
_decode = codecs.charmap_decode
_UNMAPPED = "\ufffe"  # what the charmap codec reads as "no character here"
_ASCII = [chr(code) for code in range(128)]
#: A placeholder's code, the placeholder and the fold it stands for. Codes are tested as
#: ints: ``int in bytes`` is one memchr, while ``bytes in bytes`` first tries the operand as
#: an int and formats (then clears) a TypeError, ~0.7 us per test.
_Expansion = tuple[int, str, str]


def _placeheld(sized_fold: str) -> bool:
    """Whether a fold decodes to a placeholder: neither one character nor ASCII."""
    return len(sized_fold) != 1 and not sized_fold.isascii()


class _Table(NamedTuple):
    """One consistent state of the codes: readers take it whole while a learner swaps it."""

    encoding: Any  # the codec's encoding map (``codecs.charmap_build``)
    #: codes whose fold is ASCII but not one character (``ß``, marks): the code, as an int
    #: and as bytes, and the fold's codes
    ascii_expansions: list[tuple[int, bytes, bytes]]
    plain: str
    plain_expansions: list[_Expansion]
    sized: str
    sized_expansions: list[_Expansion]


class FoldCodes:
    """Maps text to its fold with separators through a table of codes for seen characters.

    ``pieces(char)`` gives a character's fold as ``(piece, is_term)`` pairs, one per
    character of the fold; ``codable(char)`` is False for characters that never get a
    code (scripts of thousands of characters, which would fill the table in a few texts).
    """

    def __init__(
        self,
        pieces: Callable[[str], list[tuple[str, bool]]],
        codable: Callable[[str], bool] = lambda char: True,
    ) -> None:
        self._pieces = pieces
        self._codable = codable
        self._translations = (_Translation(self._plain_fold), _Translation(self._sized_fold))
        #: characters without a code -> the spaces they fold to (one per character of the
        #: fold, and one per UTF-8 byte), None if a term character
        self._spaces: dict[str, tuple[str, str] | None] = {}
        #: set (never cleared) once such a character folds to other than one character
        self._odd_codeless = False
        #: the codec's error handlers, for ``plain`` and for ``sized``
        self._errors = (
            self._register(f"deuz_transcripts.fold_codes.{id(self)}.plain", sized=False),
            self._register(f"deuz_transcripts.fold_codes.{id(self)}", sized=True),
        )
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
        #: characters that found no room since the table started: texts that meet one
        #: first take ``translated`` without trying to learn again
        self._refused: set[str] = set()
        if not self._learn_all("".join(_ASCII)) or self._expanding:
            raise ValueError("every ASCII character must fold to one character")

    def plain(self, text: str) -> str:
        """``text`` folded, each non-term character a space."""
        return self._separate(text, sized=False)[0]

    def plain_aligned(self, text: str) -> tuple[str, bool]:
        """``plain(text)``, and True when each character of ``text`` is known to fold to
        exactly one character (the result's offsets are the text's): no code of another
        fold length occurs, and no character without a code was ever seen folding to
        other than one character. False: unknown (the text went through ``translated``)."""
        return self._separate(text, sized=False)

    def sized(self, text: str) -> str:
        """Like ``plain``, but each separator has the UTF-8 size of the character it
        replaces (spaces, U+00A0 or U+3000): the result has the folded text's size."""
        return self._separate(text, sized=True)[0]

    def translated(self, text: str, *, sized: bool) -> str:
        """What ``plain``/``sized`` give, through ``str.translate``: for text the codes
        have no room for."""
        return text.translate(self._translations[sized])

    def _register(self, name: str, *, sized: bool) -> str:
        replace = weakref.WeakMethod(self._replace)  # the codec registry keeps its handlers

        def handler(error: UnicodeError) -> tuple[str, int]:
            method = replace()
            if method is None:  # pragma: no cover - a table is only freed unused
                raise error
            return method(error, sized)

        codecs.register_error(name, handler)
        return name

    def _separate(self, text: str, sized: bool) -> tuple[str, bool]:
        """The separated fold, and whether each character folded to one character."""
        table = self._table  # one snapshot: another thread may learn meanwhile
        errors = self._errors[sized]
        try:
            codes = _encode(text, errors, table.encoding)[0]
        except UnicodeEncodeError as error:  # its start: the first character needing a code
            learnt = self._learn(text, error.object[error.start])
            if learnt is None:
                return self.translated(text, sized=sized), False
            table = learnt
            codes = _encode(text, errors, table.encoding)[0]
        # read after the encode: a codeless character of this text is seen by then
        aligned = not self._odd_codeless
        for code, code_bytes, replacement in table.ascii_expansions:
            if code in codes:  # one memchr
                codes = codes.replace(code_bytes, replacement)
                aligned = False
        if sized:
            separated: str = _decode(codes, "strict", table.sized)[0]
            expansions = table.sized_expansions
        else:
            separated = _decode(codes, "strict", table.plain)[0]
            expansions = table.plain_expansions
        for code, placeholder, expansion in expansions:
            if code in codes:  # one memchr
                separated = separated.replace(placeholder, expansion)
                aligned = False
        return separated, aligned

    def __len__(self) -> int:
        """Characters that have a code."""
        return len(self._chars)

    def _replace(self, error: UnicodeError, sized: bool) -> tuple[str, int]:
        """Error handler: characters that get no code but fold to no term become spaces."""
        if not isinstance(error, UnicodeEncodeError):
            raise error
        out = []
        for position in range(error.start, error.end):
            spaces = self._codeless(error.object[position])
            if spaces is None:
                error.start = position
                raise error
            out.append(spaces[sized])
        return "".join(out), error.end

    def _can_code(self, char: str) -> bool:
        return ord(char) <= 0xFFFF and char != _UNMAPPED and self._codable(char)

    def _codeless(self, char: str) -> tuple[str, str] | None:
        """For a character that never gets a code: the spaces its fold becomes in ``plain``
        (one per character) and in ``sized`` (one per UTF-8 byte), or None if its fold
        holds a term character or it could get a code."""
        if char in self._spaces:
            return self._spaces[char]
        spaces = None
        if not self._can_code(char):
            pieces = self._pieces(char)
            if not any(term for _, term in pieces):
                size = sum(len(p.encode("utf-8", "surrogatepass")) for p, _ in pieces)
                spaces = (" " * len(pieces), " " * size)
                if len(pieces) != 1:
                    self._odd_codeless = True
        self._spaces[char] = spaces
        return spaces

    def _learn(self, text: str, first: str) -> _Table | None:
        """Give codes to the characters of ``text`` that have none (``first`` is the first
        of them): the table that has them all, or ``None`` when one of them can never have
        a code or they do not all fit (then no code is given)."""
        if not self._can_code(first):  # no table can help: not a miss
            return None
        with self._lock:
            learnt = False if first in self._refused else self._learn_all(text)
            if learnt is None:  # the others have codes now; this text keeps one without
                return None
            if not learnt:  # no room
                self._refused.add(first)
                self._misses += 1
                if self._misses < RESET_AFTER_MISSES:
                    return None
                self._start()
                if not self._learn_all(text):
                    return None
            return self._table

    def _learn_all(self, text: str) -> bool | None:
        """Codes for the characters of ``text`` that can have one: ``True`` when the whole
        text can then be encoded, ``None`` when it holds a term character that can have
        no code, ``False`` (and no code given) when there is no room for them."""
        new = []
        blocked = False
        for char in set(text).difference(self._known):
            if self._can_code(char):
                new.append(char)
            elif self._codeless(char) is None:  # a term character that can have no code
                blocked = True
        new.sort()
        if len(self._chars) + len(new) > 256:
            return False
        entries = [self._entry(char) for char in new]
        expanding = self._expanding + sum(1 for e in entries if e is not None and _placeheld(e[1]))
        if None in entries or expanding > len(_PLACEHOLDERS):
            return False
        for char, entry in zip(new, entries, strict=True):
            self._commit(char, cast("tuple[str, str]", entry))
        if new:
            self._build()
        return None if blocked else True

    def _entry(self, char: str) -> tuple[str, str] | None:
        """The plain and the sized separated fold of ``char``; ``None`` if it gets no code."""
        if not self._can_code(char):
            return None
        pieces = self._pieces(char)
        sized = [
            piece if term else _SIZED_SEPARATORS.get(len(piece.encode("utf-8", "surrogatepass")))
            for piece, term in pieces
        ]
        if None in sized:  # a fold piece that is no term and of no size a separator has
            return None
        plain = "".join(piece if term else " " for piece, term in pieces)
        return plain, "".join(cast("list[str]", sized))

    def _plain_fold(self, char: str) -> str:
        return "".join(piece if term else " " for piece, term in self._pieces(char))

    def _sized_fold(self, char: str) -> str:
        return "".join(
            piece if term else " " * len(piece.encode("utf-8", "surrogatepass"))
            for piece, term in self._pieces(char)
        )

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
            [(code, bytes((code,)), replacement) for code, replacement in ascii_expansions.items()],
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
                expansions.append((code, placeholder, fold))
        return "".join(table) + _UNMAPPED * (256 - len(table)), expansions


class _Translation(dict[int, str]):
    """``str.translate`` table: each character seen -> its fold with separators, filled on
    first sight and emptied past ``TRANSLATED_CHARACTERS`` entries."""

    def __init__(self, fold: Callable[[str], str]) -> None:
        super().__init__()
        self._fold = fold

    def __missing__(self, code_point: int) -> str:
        if len(self) >= TRANSLATED_CHARACTERS:
            self.clear()
        folded = self[code_point] = self._fold(chr(code_point))
        return folded
