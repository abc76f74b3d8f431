"""Where a long text may be cut so that its pieces encode independently (below fstok.bpe, fstok.parallel and
fstok.token_limits, which all cut texts).

* ``safe_split_points``: ASCII whitespace near evenly spaced targets (a word boundary for BERT WordPiece).
* ``ProvenSplitter`` / ``bpe_splitter``: positions the compiled pre-tokenizer DFA proves are piece boundaries in
  every parse (``fstok.safe_split``), never inside a special or added token (byte-level BPE).
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from ._load import fstok_kind

_WS = " \t\n\r"
_SAFE_SEARCH = 4096  # how far (chars) to look for whitespace around a target split point


def safe_split_points(text: str, parts: int, search: int = _SAFE_SEARCH) -> list[int]:
    """Cut positions (strictly increasing, in (0, len)) at ASCII whitespace near k*len/parts.

    Each cut is the index of a whitespace character (the piece to its right starts with it), searched
    forward then backward within ``search`` characters of the target; a target with no whitespace
    nearby is skipped (its neighbours just get longer)."""
    n = len(text)
    cuts: list[int] = []
    last = 0
    for k in range(1, parts):
        t = (n * k) // parts
        if t <= last:
            continue
        best = -1
        # forward
        hi = min(n, t + search)
        for c in _WS:
            j = text.find(c, t, hi)
            if j != -1 and (best == -1 or j < best):
                best = j
        if best == -1:
            lo = max(last + 1, t - search)
            for c in _WS:
                j = text.rfind(c, lo, t)
                if j > best:
                    best = j
        if best > last and best < n:
            cuts.append(best)
            last = best
    return cuts



_SAFE_ALL_POSITIONS = 64  # from this many cut targets on, compute the proven boundaries of the whole text once


class ProvenSplitter:
    """Split points of a fstok BPE tokenizer where every parse has a piece boundary.

    ``table`` is the level-0 `fstok.safe_split.BoundaryTable` of the tokenizer's compiled
    pre-tokenizer (proof in that module); ``guards`` are the strings that are matched before
    pre-tokenization (special tokens, HF added tokens): a cut never falls inside an occurrence of
    one, so the special-token split of every piece is the one of the whole text."""

    def __init__(self, table: Any, guards: Sequence[str]):
        self.table = table
        self.guards = tuple(g for g in sorted(set(guards), key=len) if len(g) >= 2)

    def _guarded(self, text: str, p: int) -> bool:
        for g in self.guards:
            k = len(g)
            if text.find(g, max(0, p - k + 1), p + k - 1) != -1:
                return True
        return False

    def positions(self, text: str) -> np.ndarray:
        """All proven cut positions of ``text`` (character offsets in (0, len)), guards applied."""
        pos = self.table.positions(text)
        if self.guards and len(pos):
            bad = np.zeros(len(text) + 1, dtype=np.int32)  # +1 / -1 at the inside of every guard occurrence
            for g in self.guards:
                i = text.find(g)
                while i != -1:
                    bad[i + 1] += 1
                    bad[i + len(g)] -= 1
                    i = text.find(g, i + 1)
            if bad.any():
                pos = pos[np.cumsum(bad)[pos] == 0]
        return pos

    def split_points(self, text: str, parts: int, search: int = _SAFE_SEARCH) -> list[int]:
        """Strictly increasing cuts near k*len/parts (the nearest proven boundary at or after the target
        within ``search`` characters, else the nearest before it); a target without one is skipped."""
        n = len(text)
        if parts <= 1 or n < 2:
            return []
        targets = [(n * k) // parts for k in range(1, parts)]
        cuts: list[int] = []
        last = 0
        if parts >= _SAFE_ALL_POSITIONS and parts * 256 >= n:
            allp = self.positions(text)
            for t in targets:
                if t <= last:
                    continue
                i = int(np.searchsorted(allp, t))
                c = -1
                if i < len(allp) and allp[i] < t + search:
                    c = int(allp[i])
                elif i > 0 and allp[i - 1] > max(last, t - search):
                    c = int(allp[i - 1])
                if c > last:
                    cuts.append(c)
                    last = c
            return cuts
        for t in targets:
            if t <= last:
                continue
            c = -1
            lo, w = t, 64  # forward, in windows growing 64, 256, ... chars (a boundary is usually close)
            while c < 0 and lo < min(n, t + search):
                hi = min(n, t + search, lo + w)
                for p in self.table.positions(text, lo, hi).tolist():
                    if not self._guarded(text, p):
                        c = p
                        break
                lo, w = hi, w * 4
            hi, w = t, 64  # then backward
            while c < 0 and hi > max(last + 1, t - search):
                lo = max(last + 1, t - search, hi - w)
                for p in self.table.positions(text, lo, hi)[::-1].tolist():
                    if not self._guarded(text, p):
                        c = p
                        break
                hi, w = lo, w * 4
            if c > last:
                cuts.append(c)
                last = c
        return cuts


def bpe_splitter(tok: Any) -> Optional[ProvenSplitter]:
    """The ProvenSplitter of a fstok BPE tokenizer, or None where no proof applies: no compiled DFA
    pre-tokenizer (a Python-regex or whole-text model), or an HF model whose text is changed before
    pre-tokenization (a normalizer can join characters across a cut, a prefix space is added per
    piece).  Cached on the tokenizer."""
    cached = getattr(tok, "_fstok_splitter", None)
    if cached is not None:
        return cached or None
    sp = None
    if (fstok_kind(tok) == "bpe" and getattr(tok, "_pt_mode", None) in ("find", "split")
            and not tok._python_text_path()):
        from .safe_split import boundary_table
        from .pretokenize import CompiledPattern

        cp = CompiledPattern.from_sections(tok._art, "dfa.")
        guards = list(tok.special_tokens) + [a.content for a in getattr(tok, "_added", ())]
        sp = ProvenSplitter(boundary_table(cp.levels[0], cp.mode), guards)
    try:
        tok._fstok_splitter = sp or False
    except Exception:  # pragma: no cover
        pass
    return sp
