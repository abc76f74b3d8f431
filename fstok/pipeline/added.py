"""HF added tokens (`added_tokens` of tokenizer.json), matched before the normalizer and the model.

HF `AddedVocabulary::extract_and_normalize`: tokens with normalized=false are found in the raw text;
the remaining text is normalized, and tokens with normalized=true are found in it (by their normalized
content).  Matching is leftmost-longest; single_word skips a match touching a word character (`\\w`)
on either side; lstrip / rstrip widen a match over the whitespace before / after it.  special=true
marks what `decode(skip_special_tokens=True)` drops.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from . import unicode as _u
from ..literals import LiteralSet
from .normalized import Piece


@dataclass(frozen=True)
class AddedToken:
    content: str
    id: int
    special: bool = False
    normalized: bool = True
    lstrip: bool = False
    rstrip: bool = False
    single_word: bool = False


def hf_added_ids(contents, vocab, size: Optional[int] = None) -> dict[str, int]:
    """The ids HF gives added tokens when it reads a tokenizer.json: it ignores the ids written in the file
    and adds the contents in file order, each getting its id in the model `vocab` (content -> id), else the
    next id from the model's vocabulary size on (`size`, default len(vocab); TokenizerImpl::add_tokens).
    A repeated content keeps its first id."""
    ids: dict[str, int] = {}
    nxt = len(vocab) if size is None else size
    for c in contents:
        if not c or c in ids:
            continue
        i = vocab.get(c)
        if i is None:
            i, nxt = nxt, nxt + 1
        ids[c] = i
    return ids


def _word_char():
    from ..pretokenize import CompiledPattern

    cp = CompiledPattern.compile(r"\w", "rust-regex")  # HF checks with Rust regex's Unicode \w
    cache: dict[str, bool] = {}

    def is_word(c: str) -> bool:
        r = cache.get(c)
        if r is None:
            r = cache[c] = bool(cp.spans(c))
        return r

    return is_word


_IS_WORD = []


def is_word_char(c: str) -> bool:
    """Whether `c` is a word character for single_word: Rust regex's Unicode \\w (letters, marks, decimal
    digits, connector punctuation, joiners), which is not Python's str.isalnum (marks, U+00BD...)."""
    if not _IS_WORD:
        _IS_WORD.append(_word_char())
    return _IS_WORD[0](c)


class _Trie:
    """Leftmost-longest matching of a set of literal strings (values: their AddedToken)."""

    def __init__(self, pairs: list[tuple[str, AddedToken]]):
        self.by = {}
        for s, tok in pairs:
            if s and s not in self.by:
                self.by[s] = tok
        self.literals = LiteralSet(self.by) if self.by else None


class AddedVocabulary:
    def __init__(self, tokens: list[AddedToken], normalizer=None, special_contents: Optional[frozenset] = None):
        self.tokens = tokens
        self.by_id: dict[int, AddedToken] = {t.id: t for t in tokens}
        self.special_contents = (special_contents if special_contents is not None
                                 else frozenset(t.content for t in tokens if t.special))
        self.normalizer = normalizer
        self.decode_form: dict[int, str] = {}  # normalized form of normalized tokens (HF decodes to it)
        raw, norm = [], []
        for t in tokens:
            if t.normalized:
                f = normalizer.normalize_str(t.content) if normalizer is not None else t.content
                if f != t.content:
                    self.decode_form[t.id] = f
                norm.append((f, t))
            else:
                raw.append((t.content, t))
        self.raw = _Trie(raw)
        self.norm = _Trie(norm)
        self._is_word = _word_char() if any(t.single_word for t in tokens) else None

    def id_to_token(self, i: int) -> Optional[str]:
        t = self.by_id.get(i)
        if t is None:
            return None
        return self.decode_form.get(i, t.content)

    def _find(self, s: str, trie: _Trie) -> list[tuple[Optional[AddedToken], int, int]]:
        if not s:
            return [(None, 0, 0)]
        if trie.literals is None:
            return [(None, 0, len(s))]
        out = []
        start_offset = 0
        for start, stop in trie.literals.finditer(s):
            tok = trie.by[s[start:stop]]
            if tok.single_word:
                iw = self._is_word
                if not (start == 0 or not iw(s[start - 1])) or not (stop == len(s) or not iw(s[stop])):
                    continue
            if tok.lstrip:
                k = start
                while k > 0 and s[k - 1] in _u.WHITESPACE:
                    k -= 1
                start = max(k, start_offset)
            if tok.rstrip:
                while stop < len(s) and s[stop] in _u.WHITESPACE:
                    stop += 1
            if start_offset < start:
                out.append((None, start_offset, start))
            out.append((tok, start, stop))
            start_offset = stop
        if start_offset != len(s):
            out.append((None, start_offset, len(s)))
        return out

    def extract_and_normalize(self, text: str) -> list[tuple[Piece, Optional[AddedToken]]]:
        """The text as pieces: (added-token slice, token) or (normalized text piece, None); empty ones dropped."""
        first: list[tuple[Piece, Optional[AddedToken]]] = []
        whole = Piece.original(text)
        for tok, a, b in self._find(text, self.raw):
            if b > a:
                first.append((whole.slice(a, b), tok))
        out: list[tuple[Piece, Optional[AddedToken]]] = []
        for p, tok in first:
            if tok is not None:
                out.append((p, tok))
                continue
            if self.normalizer is not None:
                p = self.normalizer.normalize(p)
            for t2, a, b in self._find(p.text, self.norm):
                if b > a:
                    out.append((p.slice(a, b), t2))
        return out
