"""HF `Pattern::find_matches` for the patterns tokenizer.json stages use: a literal `String`, a `Regex`
(Oniguruma syntax, run by fstok's own DFA compiler in the "oniguruma" dialect) or a character predicate.

`find_matches(text)` returns [((start, end), is_match), ...] covering `text` in order, in character
offsets, as HF does (gaps between matches are (gap, False)).  A regex that can match the empty string is
refused: Oniguruma's empty matches split a text in ways fstok does not reproduce.
"""
from __future__ import annotations

from typing import Any, Callable

from . import UnsupportedComponent


class Matcher:
    def __init__(self, pattern: Any, where: str = "pattern", dialect: str = "oniguruma"):
        if not isinstance(pattern, dict) or len(pattern) != 1 or next(iter(pattern)) not in ("String", "Regex"):
            raise UnsupportedComponent(f"{where}: pattern {pattern!r} is neither {{'String': ...}} nor {{'Regex': ...}}")
        kind, value = next(iter(pattern.items()))
        if not isinstance(value, str):
            raise UnsupportedComponent(f"{where}: pattern {pattern!r} is not a string")
        self.kind, self.value = kind, value
        self._cp = None
        if kind == "String":
            if value == "":
                raise UnsupportedComponent(f"{where}: an empty String pattern is not supported")
        else:
            from ..pretokenize import CompiledPattern

            try:
                cp = CompiledPattern.compile(value, dialect)
            except (ValueError, NotImplementedError) as e:
                raise UnsupportedComponent(f"{where}: regex {value!r} is not supported ({e})") from None
            if cp.levels[0].match(b"", 0) >= 0:
                raise UnsupportedComponent(f"{where}: regex {value!r} can match the empty string, which is not supported")
            self._cp = cp

    def spans(self, text: str) -> list[tuple[int, int]]:
        """The matches, leftmost-first and non-overlapping, as character spans."""
        if self.kind == "String":
            out = []
            v, n = self.value, len(self.value)
            i = text.find(v)
            while i >= 0:
                out.append((i, i + n))
                i = text.find(v, i + n)
            return out
        return self._cp.spans(text)

    def find_matches(self, text: str) -> list[tuple[tuple[int, int], bool]]:
        if not text:
            return [((0, 0), False)]
        out = []
        prev = 0
        for s, e in self.spans(text):
            if prev != s:
                out.append(((prev, s), False))
            out.append(((s, e), True))
            prev = e
        if prev != len(text):
            out.append(((prev, len(text)), False))
        return out


def char_matches(pred: Callable[[str], bool], text: str) -> list[tuple[tuple[int, int], bool]]:
    """HF's find_matches for a `Fn(char) -> bool` pattern: each matching char is a match of its own."""
    if not text:
        return [((0, 0), False)]
    out = []
    last = 0
    for i, c in enumerate(text):
        if pred(c):
            if last < i:
                out.append(((last, i), False))
            out.append(((i, i + 1), True))
            last = i + 1
    if len(text) > last:
        out.append(((last, len(text)), False))
    return out
