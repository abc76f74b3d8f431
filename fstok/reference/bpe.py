"""Pure-Python reference BPE: the test oracle for the compiled tables and the C runtime.

It implements the *source* semantics directly (no compiled tables, no canonical splits):

* tiktoken semantics (`merges is None`): start from single bytes and repeatedly merge the leftmost
  adjacent pair whose concatenation has the lowest rank (tiktoken's `_byte_pair_merge`,
  `tiktoken/_educational.py`); a whole piece that is a token is emitted directly.
* HF semantics (`merges` given): repeatedly apply the lowest-ranked listed pair, leftmost first
  (HF `Word::merge_all`); with `ignore_merges` a whole piece in the vocabulary is emitted directly.

Pre-tokenization uses the `regex` module with the source's stages; special / added tokens follow
tiktoken's `encode` (tiktoken semantics) or HF's added-vocabulary split (HF semantics).
It is slow and meant for tests and differential runs only.
"""
from __future__ import annotations

import unicodedata

import regex

from .._text import fix_surrogates
from ..loaders.bpe_source import BPESource


def merge_ranks(piece: bytes, ranks: dict[bytes, int]) -> list[int]:
    """tiktoken semantics on one piece, without the whole-piece shortcut."""
    parts = [piece[i : i + 1] for i in range(len(piece))]
    while len(parts) > 1:
        best, best_i = None, -1
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and (best is None or r < best):
                best, best_i = r, i
        if best is None:
            break
        parts[best_i : best_i + 2] = [parts[best_i] + parts[best_i + 1]]
    return [ranks[p] for p in parts]


def merge_rules(piece: bytes, tokens: dict[bytes, int], rules: dict[tuple[int, int], tuple[int, int]]) -> list[int]:
    """HF semantics on one piece: rules (left id, right id) -> (rank, merged id)."""
    ids = [tokens[piece[i : i + 1]] for i in range(len(piece))]
    while len(ids) > 1:
        best, best_i = None, -1
        for i in range(len(ids) - 1):
            r = rules.get((ids[i], ids[i + 1]))
            if r is not None and (best is None or r[0] < best[0]):
                best, best_i = r, i
        if best is None:
            break
        ids[best_i : best_i + 2] = [best[1]]
    return ids


def split_stages(text: str, stages) -> list[str]:
    """Apply the pre-tokenizer stages (tiktoken find_iter / HF Split Isolated) to `text`."""
    pieces = [text] if text else []
    for st in stages:
        pat = regex.compile(st.pattern)
        out: list[str] = []
        for p in pieces:
            last = 0
            for m in pat.finditer(p):
                if st.keep_gaps and m.start() > last:
                    out.append(p[last : m.start()])
                if m.end() > m.start():
                    out.append(m.group())
                last = m.end()
            if st.keep_gaps and last < len(p):
                out.append(p[last:])
        pieces = out
    return pieces


class ReferenceBPE:
    def __init__(self, src: BPESource):
        self.src = src
        self.tokens = src.tokens
        self.rules = None
        if src.merges is not None:
            self.rules = {}
            for k, (a, b) in enumerate(src.merges):
                self.rules[(src.tokens[a], src.tokens[b])] = (k, src.tokens[a + b])
        self.whole = src.merges is None or src.ignore_merges
        self.special_tokens = dict(src.special_tokens)

    def encode_piece(self, piece: bytes) -> list[int]:
        if self.whole and piece in self.tokens:
            return [self.tokens[piece]]
        if self.rules is None:
            return merge_ranks(piece, self.tokens)
        return merge_rules(piece, self.tokens, self.rules)

    def _normalize(self, text: str) -> str:
        if self.src.normalizer:
            return unicodedata.normalize(self.src.normalizer, text)
        return text

    def _encode_plain(self, text: str) -> list[int]:
        """Normalize, pre-tokenize and BPE text that holds no special/added tokens."""
        if not text:
            return []
        out: list[int] = []
        for piece in split_stages(text, self.src.stages):
            out.extend(self.encode_piece(piece.encode("utf-8")))
        return out

    def _segment_plain(self, text: str) -> list[int]:
        text = self._normalize(text)
        if self.src.add_prefix_space and text and not text.startswith(" "):
            text = " " + text
        return self._encode_plain(text)

    def encode(self, text: str, allowed_special=frozenset()) -> list[int]:
        text = fix_surrogates(text)
        if allowed_special == "all":
            allowed_special = set(self.special_tokens)
        allowed = {s: self.special_tokens[s] for s in allowed_special}
        if self.src.semantics == "tiktoken":
            return self._encode_tiktoken(text, allowed)
        return self._encode_hf(text, allowed)

    def encode_ordinary(self, text: str) -> list[int]:
        return self.encode(text, frozenset())

    def _encode_tiktoken(self, text: str, allowed: dict[str, int]) -> list[int]:
        out: list[int] = []
        if not allowed:
            return self._segment_plain(text)
        pat = regex.compile("|".join(regex.escape(s) for s in sorted(allowed, key=len, reverse=True)))
        pos = 0
        for m in pat.finditer(text):
            out.extend(self._segment_plain(text[pos : m.start()]))
            out.append(allowed[m.group()])
            pos = m.end()
        out.extend(self._segment_plain(text[pos:]))
        return out

    def _encode_hf(self, text: str, allowed: dict[str, int]) -> list[int]:
        # HF added vocabulary: first the non-normalized added tokens on the raw text, then the
        # normalized ones on each normalized remaining piece; each pass leftmost-longest.
        raw_tokens = dict(allowed)
        norm_tokens: dict[str, int] = {}
        for a in self.src.added_tokens:
            (norm_tokens if a.normalized else raw_tokens)[a.content] = a.id

        def split(t: str, toks: dict[str, int]):
            if not toks or not t:
                return [(t, None)] if t else []
            pat = regex.compile("|".join(regex.escape(s) for s in sorted(toks, key=len, reverse=True)))
            res, pos = [], 0
            for m in pat.finditer(t):
                if m.start() > pos:
                    res.append((t[pos : m.start()], None))
                res.append((m.group(), toks[m.group()]))
                pos = m.end()
            if pos < len(t):
                res.append((t[pos:], None))
            return res

        out: list[int] = []
        for piece, tid in split(text, raw_tokens):
            if tid is not None:
                out.append(tid)
                continue
            piece = self._normalize(piece)
            for sub, tid2 in split(piece, norm_tokens):
                if tid2 is not None:
                    out.append(tid2)
                    continue
                if self.src.add_prefix_space and not sub.startswith(" "):
                    sub = " " + sub
                out.extend(self._encode_plain(sub))
        return out
