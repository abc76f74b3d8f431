"""`Piece`: a normalized text and, for each of its characters, the span of original text it came from.

This is HF `tokenizers`' `NormalizedString` in character units: HF keeps one (start, end) alignment per
byte of the normalized string, but every byte of a normalized character shares its character's alignment
and every alignment covers whole original characters, so one (start, end) per character, in original
character offsets, carries the same information.  Offsets here are absolute (into the whole input).

`transform(dest, initial_offset)` is HF's `NormalizedString::transform`: `dest` yields (char, change),
change 0 = the char replaces the next original char, 1 = an inserted char (it takes the alignment of the
char before it, or the empty span at the piece start), -n = replaces the next char and removes n more.
"""
from __future__ import annotations

from typing import Iterable, Sequence


class Piece:
    __slots__ = ("text", "starts", "ends", "base")

    def __init__(self, text: str, starts: Sequence[int], ends: Sequence[int], base: int):
        self.text = text
        self.starts = starts  # original start offset of each character (range for an unchanged slice)
        self.ends = ends
        self.base = base  # original offset where this piece starts (for chars inserted at its very start)

    @classmethod
    def original(cls, text: str, start: int = 0, end: int | None = None) -> "Piece":
        """The unchanged slice text[start:end] (absolute offsets)."""
        end = len(text) if end is None else end
        return cls(text[start:end], range(start, end), range(start + 1, end + 1), start)

    def __len__(self) -> int:
        return len(self.text)

    def __repr__(self) -> str:
        return f"Piece({self.text!r}, {self.span()})"

    def span(self) -> tuple[int, int]:
        """Original offsets of the whole piece."""
        if not self.text:
            return (self.base, self.base)
        return (self.starts[0], self.ends[-1])

    def slice(self, i: int, j: int) -> "Piece":
        """Characters [i, j) (HF `slice(Range::Normalized)`)."""
        st = self.starts[i:j]
        return Piece(self.text[i:j], st, self.ends[i:j], st[0] if j > i else self.base)

    def offsets(self, i: int, j: int) -> tuple[int, int]:
        """Original offsets of characters [i, j) (HF `convert_offsets` + the piece's shift)."""
        if j <= i:  # an empty range (models never produce one): HF returns it in the piece's own referential
            return (self.base + i, self.base + j)
        return (self.starts[i], self.ends[j - 1])

    def transform(self, dest: Iterable[tuple[str, int]], initial_offset: int = 0) -> "Piece":
        starts, ends = self.starts, self.ends
        out: list[str] = []
        ns: list[int] = []
        ne: list[int] = []
        i = initial_offset
        for c, ch in dest:
            if ch > 0:
                if i >= 1:
                    a, b = starts[i - 1], ends[i - 1]
                else:
                    a = b = self.base
            else:
                a, b = starts[i], ends[i]
                i += 1 - ch
            out.append(c)
            ns.append(a)
            ne.append(b)
        return Piece("".join(out), ns, ne, self.base)

    def map_chars(self, table: dict[int, str]) -> "Piece":
        """Each char c becomes table.get(c, c) (one char, or several: the first replaces c, the rest are
        inserted after it, as HF's lowercase does)."""
        text = self.text
        mapped = text.translate(table)
        if len(mapped) == len(text) and all(len(table.get(ord(c), "x")) == 1 for c in set(text) if ord(c) in table):
            return Piece(mapped, self.starts, self.ends, self.base)
        dest = []
        for c in text:
            r = table.get(ord(c), c)
            for k, o in enumerate(r):
                dest.append((o, 1 if k else 0))
            if not r:
                raise AssertionError("map_chars cannot delete")
        return self.transform(dest)
