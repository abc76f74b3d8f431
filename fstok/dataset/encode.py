"""Documents -> token ids with one special-token policy; long documents in pieces cut at proven boundaries.

``DocEncoder.encode(text)`` equals ``tok.encode(text, allowed_special=..., disallowed_special=...)`` as a
uint32 array.  A long document arrives in parts (``feed``); the encoder keeps the text since the last
cut, and when that is long it encodes the prefix up to a position where a cut cannot change the ids:

* fstok BPE with a compiled pre-tokenizer: a boundary ``fstok.parallel.ProvenSplitter`` proves (a piece
  boundary in every parse, never inside a special-token occurrence);
* fstok WordPiece: ASCII whitespace, a word boundary under every BERT normalization (``fstok.parallel``'s
  safe split), when no allowed special token contains whitespace.

Other kinds (SentencePiece models) are never cut: each document is encoded whole.

Both are the cuts ``fstok.parallel.encode_long`` makes, whose pieces are encoded as texts of their own and
concatenated.  Where neither applies (a BPE model pre-tokenized by the Python ``regex`` module, or with a
normalizer), the whole document is held and encoded at once.  Memory per document is therefore bounded
by the longest stretch without a proven boundary, not by the document.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ..parallel import _WS, bpe_splitter

#: hold at most about this many characters of a long document before encoding a prefix
PIECE_CHARS = 1 << 22


def _is_bpe(tok: Any) -> bool:
    from ..bpe import BPETokenizer

    return isinstance(tok, BPETokenizer)


def _is_wordpiece(tok: Any) -> bool:
    from ..wordpiece import WordPieceTokenizer

    return isinstance(tok, WordPieceTokenizer)


def special_kwargs(tok: Any, allowed_special=None, disallowed_special=None) -> dict:
    """The encode keyword arguments of a special-token policy, validated for ``tok``'s kind.

    None means the tokenizer's default (tiktoken's for BPE: no special allowed, all disallowed -- text
    that spells one is an error; WordPiece: special-token text is ordinary)."""
    kw: dict = {}
    known = getattr(tok, "special_tokens", None)
    known = set(known) if known is not None else None
    if allowed_special is not None:
        if allowed_special != "all":
            allowed_special = set(allowed_special)
            bad = sorted(allowed_special - known) if known is not None else []
            if bad:
                raise ValueError(f"not a special token of this tokenizer: {', '.join(map(repr, bad))} "
                                 f"(special tokens: {', '.join(sorted(known or ())[:12])})")
        kw["allowed_special"] = allowed_special
    if disallowed_special is not None:
        if not _is_bpe(tok):
            if disallowed_special == "all" or not disallowed_special:
                pass  # only BPE raises on special-token text; "none" is the others' only behaviour
            else:
                raise ValueError(f"{type(tok).__name__} has no disallowed special tokens (special-token text "
                                 "is ordinary unless allowed)")
        else:
            if disallowed_special != "all":
                disallowed_special = set(disallowed_special)
                bad = sorted(disallowed_special - set(tok.special_tokens))
                if bad:
                    raise ValueError(f"not a special token of this tokenizer: {', '.join(map(repr, bad))}")
            kw["disallowed_special"] = disallowed_special
    return kw


class DocEncoder:
    def __init__(self, tok: Any, special: dict, eot: Optional[int] = None, piece_chars: Optional[int] = None):
        self.tok = tok
        self.kw = dict(special)
        self.eot = None if eot is None else np.array([eot], dtype=np.uint32)
        self.piece_chars = piece_chars or PIECE_CHARS
        self.parts: list[np.ndarray] = []   # ids of the encoded prefix of the current long document
        self.pending = ""                   # text of the current long document not yet encoded
        self.bpe = _is_bpe(tok)
        self._fast = None
        if self.bpe:
            allowed, disallowed = tok._resolve_special(self.kw.get("allowed_special", set()),
                                                       self.kw.get("disallowed_special", "all"))
            self._allowed, self._disallowed = allowed, disallowed
            self._fast = not tok._python_text_path()
            self.splitter = bpe_splitter(tok)
            self.margin = max((len(g) for g in self.splitter.guards), default=1) if self.splitter else 0
        else:
            self.splitter = None
            self.margin = 1
            self.ws_ok = False  # other kinds (SentencePiece, ...): no proven cut, a document is encoded whole
            self.wordpiece = _is_wordpiece(tok)
            if self.wordpiece:
                allowed = self.kw.get("allowed_special") or ()
                specials = tok.special_tokens if allowed == "all" else list(allowed)
                self.ws_ok = not any(any(c in s for c in _WS) or not s for s in specials)

    # ------------------------------------------------------------------ one text
    def _ids(self, text: str) -> np.ndarray:
        """``tok.encode(text, **policy)`` as uint32 (disallowed special-token text raises ValueError)."""
        tok = self.tok
        if self.bpe:
            tok._check_disallowed(text, self._disallowed)
            return np.frombuffer(tok._run(text, self._allowed, 1)[0], dtype=np.uint32)
        if self.wordpiece and not self.kw.get("allowed_special"):
            return tok.encode_to_numpy(text)
        return np.asarray(tok.encode(text, **self.kw), dtype=np.uint32)

    def encode(self, text: str) -> np.ndarray:
        """Ids of one whole document (+ the end-of-document token when asked)."""
        if self.pending or self.parts:
            return self.finish(text)
        ids = self._ids(text)
        if self.eot is not None:
            ids = np.concatenate([ids, self.eot])
        return ids

    # ------------------------------------------------------------------ long documents
    def _cut(self, s: str) -> int:
        """A position 0 < p <= len(s) - margin where s can be cut without changing the ids of the text
        s starts (whatever follows s), or 0.  The margin keeps cuts out of a special-token occurrence
        that runs past the end of s."""
        n = len(s)
        if n <= 2 * self.margin:
            return 0
        if self.bpe:
            if self.splitter is None:
                return 0
            w = 1 << 12
            while True:
                lo = max(0, n - w)
                pos = self.splitter.positions(s[lo:]) + lo
                # a special-token occurrence that starts before lo or ends after n is not seen whole
                pos = pos[(pos <= n - self.margin) & ((pos >= lo + self.margin) | (lo == 0))]
                if len(pos):
                    return int(pos[-1])
                if lo == 0:
                    return 0
                w *= 4
        if not self.ws_ok:
            return 0
        best = 0
        for c in _WS:
            j = s.rfind(c, 1, n - self.margin + 1)
            if j > best:
                best = j
        return best

    def feed(self, part: str) -> None:
        """More text of the current document (not its end)."""
        s = self.pending + part if self.pending else part
        if len(s) >= self.piece_chars:
            p = self._cut(s)
            if p > 0:
                self.parts.append(self._ids(s[:p]))
                s = s[p:]
        self.pending = s

    def finish(self, last: str) -> np.ndarray:
        """The end of the current document: all its ids."""
        s = self.pending + last if self.pending else last
        i = 0
        while len(s) - i > 2 * self.piece_chars:  # a long text given at once: encode it in pieces too
            p = self._cut(s[i:i + self.piece_chars])
            if p <= 0:
                break
            self.parts.append(self._ids(s[i:i + p]))
            i += p
        self.parts.append(self._ids(s[i:] if i else s))
        if self.eot is not None:
            self.parts.append(self.eot)
        out = np.concatenate(self.parts) if len(self.parts) > 1 else self.parts[0]
        self.parts, self.pending = [], ""
        return out

    def reset(self) -> None:
        self.parts, self.pending = [], ""
