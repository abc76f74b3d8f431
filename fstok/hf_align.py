"""HF Encoding rows (ids, character offsets, word ids, tokens) of a "guarded" pipeline tokenizer
(`fstok.pipeline.tokenizer.PipelineTokenizer` with a normalizer or an `end_of_word_suffix`, e.g. CLIP) from
its compiled tables, without running its stages in Python.

The compiled tables encode the normalized UTF-8 (the normalizer's fast form, `fstok.pipeline.fastnorm`).
HF's offsets point into the original text through the NormalizedString's alignments; here they are carried
as one original character index per normalized byte, moved by each fast step as HF's NormalizedString moves
them:

  NFC / NFD / NFKC / NFKD  a text the form leaves unchanged keeps its alignments (otherwise: the stages)
  Lowercase                each character lowercased to a character of the same UTF-8 length keeps its
                           alignment (otherwise: the stages)
  Replace                  the content takes the alignment of the last replaced character
  Prepend                  the prefix takes the alignment of the first character
  Strip                    the stripped characters' alignments go with them
  StripAccents             a text it leaves unchanged keeps its alignments (otherwise: the stages)

Every step keeps one original character per normalized byte, in order, so a token's offsets are the
character of its first byte and one past that of its last (HF's min / max over the token's alignments).
The words are the pre-tokenizer's pieces: with an `end_of_word_suffix` the tables end each piece with the
sentinel byte, so a piece's last token is the one whose bytes end with it.

`fstok.hf_tokenizer._PipelineCore.python_encode` (the stages in Python) is the oracle; a text any of the
above leaves to the stages gives None here.
"""
from __future__ import annotations

from array import array
from typing import Optional

import numpy as np

from .runtime import _hfalign as _H

__all__ = ["aligned_normalize", "GuardedRows"]

NONE = 0xFFFFFFFF


def _char_of_byte(data: bytes) -> bytes:
    """The character index (int32) of each byte of UTF-8 `data`."""
    if data.isascii():
        return np.arange(len(data), dtype=np.int32).tobytes()
    return _H.chars(data)


def replaced_reference(o: np.ndarray, spans: np.ndarray, n_content: int) -> np.ndarray:
    """`fstok.runtime._hfalign.replace` in numpy (its oracle): the alignments after replacing the byte spans
    with n_content bytes each, which take the alignment of the last replaced byte."""
    cnt = np.ones(len(o), dtype=np.int64)
    delta = np.zeros(len(o) + 1, dtype=np.int64)
    np.add.at(delta, spans[:, 0], 1)
    np.add.at(delta, spans[:, 1], -1)
    cnt[np.cumsum(delta[:-1]) > 0] = 0
    cnt[spans[:, 1] - 1] = n_content
    return np.repeat(o, cnt)


def _literal_spans(data: bytes, pat: bytes) -> bytes:
    """uint64 (start, end) pairs of the leftmost non-overlapping occurrences of pat (as bytes.replace)."""
    out, pos = [], 0
    while True:
        j = data.find(pat, pos)
        if j < 0:
            return np.array(out, dtype=np.uint64).tobytes()
        out += (j, j + len(pat))
        pos = j + len(pat)


def _stage_step(stage, x, o: Optional[bytes], in_bytes: bool):
    """One normalizer step by its stage form (`fstok.pipeline.normalizers`, HF's alignment bookkeeping in
    Python) on x with alignments o: (the result in x's domain, its alignments), or None where a character
    does not come out aligned to exactly one original character."""
    from .pipeline.normalized import Piece

    s = x.decode("utf-8") if in_bytes else x
    b = x if in_bytes else x.encode("utf-8")
    oa = np.frombuffer(o if o is not None else _char_of_byte(b), dtype=np.int32)
    if not b.isascii():
        oa = oa[(np.frombuffer(b, dtype=np.uint8) & 0xC0) != 0x80]
    starts = oa.tolist()
    q = stage.normalize(Piece(s, starts, [a + 1 for a in starts], 0))
    if any(e != a + 1 for a, e in zip(q.starts, q.ends)):
        return None
    nb = [len(c.encode("utf-8")) for c in q.text] if not q.text.isascii() else 1
    o2 = np.repeat(np.asarray(q.starts, dtype=np.int32), nb).astype(np.int32).tobytes()
    return (q.text.encode("utf-8") if in_bytes else q.text), o2


def aligned_normalize(plan, text: str, stages=None) -> Optional[tuple[bytes, Optional[bytes]]]:
    """(normalized UTF-8, original character index of each of its bytes as native int32 bytes) by the fast
    form `plan` (a `fstok.pipeline.fastnorm.NormPlan`, or None: no normalizer); the alignment is None where
    it is the identity (each byte's own character in `text`).  `stages()`: the stage normalizer of each step
    (`fstok.pipeline.normalizers`) or None, which runs a step on a text its fast form does not keep aligned (a
    composition, a lowercase of another length); without them such a text gives None (the stages)."""
    from .pipeline import fastnorm as fn

    x = text
    in_bytes = False
    o: Optional[bytes] = None
    try:
        for k, st in enumerate(plan.steps if plan is not None else ()):
            if st.domain == "b" and not in_bytes:
                x, in_bytes = x.encode("utf-8"), True
            elif st.domain == "s" and in_bytes:
                x, in_bytes = x.decode("utf-8"), False
            if isinstance(st, (fn._Unicode, fn._StripAccents, fn._Lowercase)):
                y = st(x)
                if y is x or (y is not None and (
                        y == x or (isinstance(st, fn._Lowercase) and (
                            (x.isascii() and len(y) == len(x)) or _H.same_lead(x, y))))):
                    x = y  # each character keeps its place (and its alignment)
                    continue
                sl = stages() if stages is not None else None
                if sl is None:
                    return None
                r = _stage_step(sl[k], x, o, in_bytes)
                if r is None:
                    return None
                x, o = r
            elif isinstance(st, (fn._ReplaceRegex, fn._ReplaceString)):
                if isinstance(st, fn._ReplaceRegex):
                    sp = st.cp.spanner.byte_spans(x) if st.cp.spanner is not None else \
                        st.cp.byte_spans(x).astype(np.uint64).tobytes()
                else:
                    sp = _literal_spans(x, st.pat)
                if not sp:
                    continue
                o = _H.replace(o if o is not None else _char_of_byte(x), len(x), sp, len(st.content))
                y = st(x)
                if o is None or len(o) != 4 * len(y):
                    return None  # an empty match: the stages
                x = y
            elif isinstance(st, fn._Prepend):
                if x and st.pre:
                    oo = o if o is not None else _char_of_byte(x)
                    o = oo[:4] * len(st.pre) + oo  # HF's prepend: the alignment of the first character
                    x = st.pre + x
            elif isinstance(st, fn._Strip):
                y = st(x)
                if y == x:
                    continue
                a_b = len(x[:x.find(y)].encode("utf-8"))
                n_b = len(y.encode("utf-8"))
                oo = o if o is not None else _char_of_byte(x.encode("utf-8"))
                o = oo[4 * a_b:4 * (a_b + n_b)]
                x = y
            else:
                return None  # a step without alignments here: the stages
        data = x if in_bytes else x.encode("utf-8")
    except UnicodeEncodeError:
        return None  # lone surrogates: the stages see the text as given
    return data, o


class GuardedRows:
    """Rows of one guarded pipeline tokenizer (see the module docstring)."""

    def __init__(self, tok):
        self.tok = tok
        tb = tok._tables
        self.model = tb._model
        self.lens = np.ascontiguousarray(tok._lens, dtype=np.int64)
        self.suffix = bool(tok._suffix)
        self.sentinel = tok.SENTINEL
        self.ends = None
        if self.suffix:
            dec = np.frombuffer(bytes(tb._tables["dec_bytes"]), dtype=np.uint8)
            off = tb._tables["dec_off"].astype(np.int64)
            ends = off[1:]
            last = np.full(len(ends), -1, dtype=np.int64)
            has = ends > off[:-1]
            last[has] = dec[ends[has] - 1]
            self.ends = (last == self.sentinel).astype(np.uint8)  # by id: the token ends its piece
        self.norm_guards = tuple(g.encode("utf-8") for g in tok._norm_guards if g)
        self.lo = -1 if tok._standin_lo is None else int(tok._standin_lo)
        self.tok_of = tok._token_strings()

    def _stages(self):
        """The stage normalizer of each step of the fast form (built on first need)."""
        st = self.__dict__.get("_stage_list")
        if st is None:
            from .pipeline import fastnorm as fn
            from .pipeline import normalizers as nz

            cfg = self.tok._parsed_obj().get("normalizer")
            try:
                st = [nz.from_config(c, self.tok.where) for c in fn._flatten(cfg)]
            except Exception:  # a component without a stage form here: the stages decide per text
                st = False
            if st and len(st) != len(self.tok._norm_fast.steps):
                st = False
            self._stage_list = st
        return st or None

    def normalized(self, text: str) -> Optional[tuple[bytes, bytes]]:
        """(the UTF-8 the tables encode, the original character (int32) of each byte), the bytes as
        `_native_text` gives them; None where the stages must run."""
        tok = self.tok
        for g in tok._raw_guards:
            if g in text:
                return None
        r = aligned_normalize(tok._norm_fast, text, self._stages)
        if r is None:
            return None
        data, o = r
        for g in self.norm_guards:
            if g in data:
                return None
        if o is None:
            o = _char_of_byte(data)
        if tok._prefix_space and data and data[:1] != b" ":
            # HF's prepend: the prefix takes the alignment of the first character
            return b" " + data, o[:4] + o
        return data, o

    def row(self, text: str) -> Optional[tuple]:
        """(ids, offsets, word ids, tokens) of `text` before post-processing, or None (the stages)."""
        r = self.normalized(text)
        if r is None:
            return None
        data, o = r
        if not data:
            return [], [], [], []
        tok = self.tok
        starts = None
        if tok._pieces is not None:
            pieces = tok._pieces.triples(data)
            if not pieces:
                return [], [], [], []
            if self.suffix:
                ids = self.model.encode_spans(data, pieces, 1, self.sentinel)
            else:
                il, starts = self.model.encode_spans(data, pieces, 3)
                ids = array("I", il).tobytes()
        else:
            tb = tok._tables
            sp1, sp2 = tb._matchers(frozenset())
            il, starts = self.model.encode(data, sp1, 3, sp2, 1)
            ids = array("I", il).tobytes()
            pat = tb._pattern
            sp = pat.byte_spans(data) if pat is not None else np.array([[0, len(data)]], dtype=np.int64)
            tri = np.full((len(sp), 3), NONE, dtype=np.uint32)
            tri[:, :2] = sp
            pieces = tri.tobytes()
        got = _H.rows(o, ids, self.lens, self.ends if starts is None else None, pieces, starts, self.lo)
        if got is None:
            return None
        il = memoryview(ids).cast("I").tolist()
        return il, got[0], got[1], list(map(self.tok_of, il))
