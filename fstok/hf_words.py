"""Word ids, character offsets and token strings of a byte-level BPE pass, without running the pre-tokenizer
in Python.

HF numbers the words of an Encoding by the splits of its PreTokenizedString: each added-token match is one
split, and the text between matches is cut by the pre-tokenizer into the others (empty ones dropped); every
token carries the index of the split it came from.  The compiled tables (`fstok.bpe.BPETokenizer`) give each
token's id and first byte; here the same compiled pre-tokenizer (`fstok.pretokenize.CompiledPattern`, one C
call per stretch of text between added tokens) gives the byte at which every split starts, and a token's word
is the last split starting at or before its first byte.  A byte-level token never straddles a split, so this
is exact in byte space, also where a split falls inside one character (stages after ByteLevel).

An added-token match is told apart from a model token with the same id by its text: the match spells the
token's content at the token's first byte.  A model token whose string is an added token's content never
spells that content in the text (HF would have matched it there), so the test cannot mistake one for the
other.  `fstok.hf_tokenizer._PipelineCore.python_encode` is the oracle (the pre-tokenizer run in Python).
"""
from __future__ import annotations

import bisect
from array import array
from typing import Optional

import numpy as np

__all__ = ["WordPlan", "trim_offsets"]


def trim_offsets(ids: np.ndarray, cs: np.ndarray, ce: np.ndarray, first: np.ndarray, lead: np.ndarray,
                 trail: np.ndarray, add_prefix_space: bool) -> tuple[np.ndarray, np.ndarray]:
    """HF's byte-level offset trimming over flat arrays (`fstok.postprocess._trim_offsets` per token is the
    oracle): a token's leading / trailing space characters are left out of its offsets, except the one
    leading space of a sequence's first token (or of a token at offset 0) under add_prefix_space.  `first`
    marks the first token of each sequence; `lead` / `trail` are the space counts by id."""
    ld = lead[ids]
    tl = trail[ids]
    if add_prefix_space:
        ld = np.where((ld == 1) & (first | (cs == 0)), 0, ld)
    a = np.where(ld > 0, np.minimum(cs + ld, ce), cs)
    b = np.where((tl > 0) & (ce >= tl), np.maximum(ce - tl, a), ce)
    return a, b



def batch_ids(model, texts: list[str], num_threads: int) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """The ids of every text from one threaded C call of the tables' `model` (no added-token matching), as
    one uint32 array with no Python int per token: (ids, token count per kept text, indices of the kept
    texts).  A text the C path does not take as it is (lone surrogates) is left out of all three."""
    (flat_b, starts_b), missing = model.encode_batch(texts, None, num_threads, 1, None, True)
    flat = np.frombuffer(flat_b, dtype=np.uint32)
    lens = np.diff(np.frombuffer(starts_b, dtype=np.int64))
    keep = list(range(len(texts)))
    if missing:
        gone = set(missing)
        keep = [k for k in keep if k not in gone]
        lens = lens[keep]
    return flat, lens, keep


_IDENT = [memoryview(b"")]
_HFALIGN: list = []


def char_offsets(data: bytes, text: str, bs, be) -> list[tuple[int, int]]:
    """(start, end) character offsets of the UTF-8 byte spans [bs[k], be[k]) of `data` (the UTF-8 of `text`)."""
    if len(data) == len(text):
        return list(zip(bs, be))
    ci, c = [], -1  # the character holding each byte
    for byte in data:
        if byte & 0xC0 != 0x80:
            c += 1
        ci.append(c)
    return [(ci[a], ci[e - 1] + 1) for a, e in zip(bs, be)]


def _identity(n: int) -> memoryview:
    """int32 0..n-1 as a buffer (the alignment of an ASCII text: each byte its own character)."""
    m = _IDENT[0]
    if len(m) < 4 * n:
        m = _IDENT[0] = memoryview(np.arange(max(n, 2 * len(m) // 4, 4096), dtype=np.int32).tobytes())
    return m[:4 * n]


def _hfalign_mod():
    if not _HFALIGN:
        from .runtime import _hfalign

        _HFALIGN.append(_hfalign)
    return _HFALIGN[0]


#: texts of up to this many tokens are numbered in plain Python (`WordPlan.row_small`)
SMALL_ROW = 64


class WordPlan:
    """What word numbering needs from one compiled tokenizer."""

    def __init__(self, pattern, added: dict[int, str], tok_len: np.ndarray, tok_of):
        self.pattern = pattern  # CompiledPattern of the pre-tokenizer, or None (each stretch is one split)
        self.added = {i: c.encode("utf-8") for i, c in added.items() if c}
        self.added_ids = np.fromiter(self.added, dtype=np.int64, count=len(self.added))
        self.tok_len = tok_len  # bytes of each token id
        self.tok_of = tok_of  # id -> token string

    def _split_starts(self, data: bytes, lo: int, hi: int) -> np.ndarray:
        """Byte starts (into `data`) of the non-empty pre-tokenizer splits of data[lo:hi]."""
        if hi <= lo:
            return np.zeros(0, dtype=np.int64)
        if self.pattern is None:
            return np.array([lo], dtype=np.int64)
        sp = self.pattern.byte_spans(data[lo:hi])
        sp = sp[sp[:, 1] > sp[:, 0]]
        return sp[:, 0] + lo

    def _added_at(self, data: bytes, ids: np.ndarray, bs: np.ndarray) -> np.ndarray:
        """Indices of the tokens that are added-token matches."""
        if not len(self.added_ids):
            return np.zeros(0, dtype=np.int64)
        cand = np.flatnonzero(np.isin(ids, self.added_ids))
        added = self.added
        return np.asarray([k for k in cand.tolist()
                           if data.startswith(added[int(ids[k])], int(bs[k]))], dtype=np.int64)

    def split_starts(self, data: bytes, ids: np.ndarray, bs: np.ndarray, be: np.ndarray) -> np.ndarray:
        """Byte starts of every split of the text (added-token matches and pre-tokenizer pieces), in order;
        sets the end byte of each added-token match in `be` (the match spans its content, which is not the
        byte string of the id's vocabulary entry where the content is one)."""
        hits = self._added_at(data, ids, bs)
        if not len(hits):
            return self._split_starts(data, 0, len(data))
        for k in hits.tolist():
            be[k] = bs[k] + len(self.added[int(ids[k])])
        parts = []
        pos = 0
        for k in hits.tolist():
            a = int(bs[k])
            parts.append(self._split_starts(data, pos, a))
            parts.append(np.array([a], dtype=np.int64))
            pos = a + len(self.added[int(ids[k])])
        parts.append(self._split_starts(data, pos, len(data)))
        return np.concatenate(parts)

    def _batch_starts(self, texts: list[str], blob: bytes, byte0: np.ndarray, nbytes: np.ndarray):
        """(split starts of every text shifted into the joined `blob`, number of splits per text)."""
        pat = self.pattern
        sp = pat.spanner if pat is not None else None
        if sp is None:
            starts = [self._split_starts(blob, int(b0), int(b0 + nb)) for b0, nb in zip(byte0.tolist(), nbytes.tolist())]
            ns = np.fromiter((len(x) for x in starts), dtype=np.int64, count=len(starts))
            return (np.concatenate(starts) if starts else np.zeros(0, np.int64)), ns
        raws = [sp.byte_spans(t) for t in texts]  # one C call per text, no numpy per text
        v = np.frombuffer(b"".join(raws), dtype=np.uint64).astype(np.int64)
        cnt = np.fromiter((len(r) >> 3 for r in raws), dtype=np.int64, count=len(raws))
        if pat.mode == "find":  # (start, end) pairs: the gaps are not splits
            cnt >>= 1
            st, en = v[0::2], v[1::2]
        else:  # piece ends: each piece starts where the one before it ends (a text's first at 0)
            en = v
            st = np.empty_like(en)
            if len(en):
                st[1:] = en[:-1]
                st[(np.cumsum(cnt) - cnt)[cnt > 0]] = 0
        owner = np.repeat(np.arange(len(texts)), cnt)
        keep = en > st
        ns = np.bincount(owner[keep], minlength=len(texts)).astype(np.int64)
        return st[keep] + byte0[owner[keep]], ns

    def space_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """(leading, trailing) space characters of every token string, by id (what the byte-level offset
        trimming looks at)."""
        sc = self.__dict__.get("_spaces")
        if sc is None:
            from .postprocess import space_run

            n = len(self.tok_len)
            lead = np.zeros(n, dtype=np.int64)
            trail = np.zeros(n, dtype=np.int64)
            for i in range(n):
                try:
                    t = self.tok_of(i)
                except (KeyError, IndexError):
                    continue
                if t:
                    lead[i], trail[i] = space_run(t)
            sc = self._spaces = (lead, trail)
        return sc

    def _split_starts_list(self, data: bytes, lo: int, hi: int) -> list[int]:
        """`_split_starts` as a list, without numpy (a short text pays ~1 us per numpy call)."""
        if hi <= lo:
            return []
        pat = self.pattern
        if pat is None:
            return [lo]
        sp = pat.spanner
        if sp is None:
            return self._split_starts(data, lo, hi).tolist()
        raw = memoryview(sp.byte_spans(data[lo:hi])).cast("Q").tolist()
        if pat.mode == "find":  # (start, end) pairs
            pairs = zip(raw[0::2], raw[1::2])
        else:  # piece ends: each piece starts where the one before it ends
            pairs = zip([0] + raw[:-1], raw)
        return [a + lo for a, b in pairs if b > a]

    def row_small(self, text: str, ids: list[int], bs: list[int]) -> tuple:
        """`row` in plain Python for a short text (the same steps; `row` is its reference)."""
        data = text.encode("utf-8")
        tl = self.__dict__.get("_tok_len_list")
        if tl is None:
            tl = self._tok_len_list = self.tok_len.tolist()
        be = [b + tl[i] for b, i in zip(bs, ids)]
        added = self.added
        hits = [k for k, i in enumerate(ids) if i in added and data.startswith(added[i], bs[k])] if added else []
        if not hits:
            starts = self._split_starts_list(data, 0, len(data))
        else:
            starts, pos = [], 0
            for k in hits:
                a = bs[k]
                be[k] = a + len(added[ids[k]])
                starts += self._split_starts_list(data, pos, a)
                starts.append(a)
                pos = be[k]
            starts += self._split_starts_list(data, pos, len(data))
        words = [bisect.bisect_right(starts, b) - 1 for b in bs]
        return ids, char_offsets(data, text, bs, be), words, list(map(self.tok_of, ids))

    def trim_table(self) -> Optional[bytes]:
        """`space_counts` as interleaved uint8 (leading, trailing) pairs by id, for `_hfalign.rows`; None
        where a token has more spaces than a byte counts (the face then trims in Python)."""
        tt = self.__dict__.get("_trim_table", False)
        if tt is False:
            lead, trail = self.space_counts()
            ok = not len(lead) or max(int(lead.max()), int(trail.max())) < 256
            tt = self._trim_table = np.stack([lead, trail], axis=1).astype(np.uint8).tobytes() if ok else None
        return tt

    def row_native(self, text: str, ids: list[int], starts: bytes, trim: Optional[bool] = None) -> Optional[tuple]:
        """`row` by one C call (`fstok.runtime._hfalign.rows`) from the tokens' first bytes as uint32
        `starts`, for a text none of whose ids is an added token's (an added-token match spans its content,
        not its id's bytes, and is a split of its own: `row` handles those); None otherwise.  With `trim`
        (the add_prefix_space of the post-processor's byte-level offset trimming) the row also carries its
        trimmed offsets (a fifth item), as `batch` gives them."""
        added = self.__dict__.get("_added_set")
        if added is None:
            added = self._added_set = frozenset(self.added)
        if added and not added.isdisjoint(ids):
            return None
        pat = self.pattern
        sp = pat.spanner if pat is not None else None
        if pat is not None and sp is None:
            return None
        _hfalign = _hfalign_mod()
        data = text.encode("utf-8")
        if sp is None:
            pieces, kind = np.array([0, len(data)], dtype=np.uint64).tobytes(), 1
        else:
            pieces, kind = sp.byte_spans(data), (1 if pat.mode == "find" else 2)
        tl = self.__dict__.get("_tok_len64")
        if tl is None:
            tl = self._tok_len64 = np.ascontiguousarray(self.tok_len, dtype=np.int64)
        align = _identity(len(data)) if len(data) == len(text) else _hfalign.chars(data)
        tt = None if trim is None else self.trim_table()
        if tt is None:
            trim = None
            got = _hfalign.rows(align, array("I", ids).tobytes(), tl, None, pieces, starts, -1, kind)
        else:
            got = _hfalign.rows(align, array("I", ids).tobytes(), tl, None, pieces, starts, -1, kind,
                                tt, trim)
        if got is None:
            return None
        if trim is None:
            return ids, got[0], got[1], list(map(self.tok_of, ids))
        return ids, got[0], got[1], list(map(self.tok_of, ids)), got[2]

    def row(self, text: str, ids: list[int], bs: np.ndarray) -> tuple:
        """(ids, character offsets, word ids, token strings) of one text from its token ids and first bytes."""
        if len(ids) <= SMALL_ROW:
            return self.row_small(text, ids, bs.tolist())
        return self.row_numpy(text, ids, bs)

    def row_numpy(self, text: str, ids: list[int], bs: np.ndarray) -> tuple:
        a = np.asarray(ids, dtype=np.int64)
        data = text.encode("utf-8")
        be = bs + self.tok_len[a]
        words = np.searchsorted(self.split_starts(data, a, bs, be), bs, side="right") - 1
        if len(data) != len(text):
            d = np.frombuffer(data, dtype=np.uint8)
            ci = np.cumsum((d & 0xC0) != 0x80) - 1  # the character holding each byte
            cs, ce = ci[bs], ci[be - 1] + 1
        else:
            cs, ce = bs, be
        return ids, list(zip(cs.tolist(), ce.tolist())), words.tolist(), list(map(self.tok_of, ids))

    def batch(self, model, texts: list[str], num_threads: int, standin_lo: Optional[int] = None,
              trim: Optional[bool] = None) -> list:
        """Rows of texts holding no added-token text, the ids of all of them from one threaded C call of the
        tables' `model` (no added-token matching); None for a text the C path does not take as it is (lone
        surrogates) or whose ids hold a stand-in id from `standin_lo` on.  With `trim` (the add_prefix_space of
        the post-processor's byte-level offset trimming, `fstok.postprocess.trim_spec`) each row also carries
        its trimmed offsets (a fifth item)."""
        flat, lens, keep = batch_ids(model, texts, num_threads)
        flat = flat.astype(np.int64)
        out: list = [None] * len(texts)
        if not keep or not len(flat):
            for k in keep:
                out[k] = ([], [], [], []) if trim is None else ([], [], [], [], [])
            return out
        sub = [texts[k] for k in keep]
        blob = "".join(sub).encode("utf-8")
        tl = self.tok_len[flat]
        be = np.cumsum(tl)
        bs = be - tl  # the tokens of a text spell its UTF-8 exactly: first bytes are running sums
        nbytes = np.fromiter((len(t) if t.isascii() else len(t.encode("utf-8")) for t in sub), dtype=np.int64,
                             count=len(sub))
        byte0 = np.cumsum(nbytes) - nbytes
        if len(blob) != sum(len(t) for t in sub):
            d = np.frombuffer(blob, dtype=np.uint8)
            cum = np.zeros(len(d) + 1, dtype=np.int64)
            np.cumsum((d & 0xC0) != 0x80, out=cum[1:])
            cs, ce = cum[bs + 1] - 1, cum[be]  # the character of the first byte; one past that of the last
            char0 = cum[byte0]
        else:
            cs, ce = bs, be
            char0 = byte0
        rep = np.repeat(char0, lens)
        cs = cs - rep
        ce = ce - rep
        # split starts of every text, shifted into the joined blob, then one searchsorted for the batch
        gstarts, ns = self._batch_starts(sub, blob, byte0, nbytes)
        w = np.searchsorted(gstarts, bs, side="right") - 1 - np.repeat(np.cumsum(ns) - ns, lens)
        tr = None
        if trim is not None:  # the byte-level offset trimming of the post-processor, for the whole batch
            first = np.zeros(len(flat), dtype=bool)
            nz = lens > 0
            first[(np.cumsum(lens) - lens)[nz]] = True
            tcs, tce = trim_offsets(flat, cs, ce, first, *self.space_counts(), trim)
            tr = (tcs.tolist(), tce.tolist())
        il, wl, sl, el = flat.tolist(), w.tolist(), cs.tolist(), ce.tolist()
        tok_of = self.tok_of
        a = 0
        for k, n in zip(keep, lens.tolist()):
            b = a + n
            ids = il[a:b]
            if standin_lo is not None and n and max(ids) >= standin_lo:
                a = b
                continue
            row = (ids, list(zip(sl[a:b], el[a:b])), wl[a:b], list(map(tok_of, ids)))
            out[k] = row if tr is None else row + (list(zip(tr[0][a:b], tr[1][a:b])),)
            a = b
        return out
