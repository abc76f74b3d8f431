"""Pure-Python oracles of HF `tokenizers`' Unigram and (non-byte-level) BPE models, from the library's
definitions (models/unigram/model.rs encode_optimized + tokenize; models/bpe/model.rs merge_word +
word.rs merge_all).  Input: one pre-tokenized piece; output: (id, byte start, byte end) tokens."""
from __future__ import annotations

import heapq

K_UNK_PENALTY = 10.0


class HFUnigram:
    def __init__(self, vocab: list[tuple[str, float]], unk_id: int | None, byte_fallback: bool):
        self.vocab = vocab
        self.tok_id: dict[bytes, int] = {}
        for i, (t, _) in enumerate(vocab):
            self.tok_id[t.encode()] = i  # last duplicate wins
        self.min_score = min((s for _, s in vocab), default=0.0)
        self.maxlen = max((len(k) for k in self.tok_id), default=0)
        self.unk_id = unk_id
        self.byte_fallback = byte_fallback

    def encode(self, s: bytes) -> list[bytes]:
        size = len(s)
        if size == 0:
            return []
        unk_score = self.min_score - K_UNK_PENALTY
        best = [0.0] * (size + 1)
        start = [None] * (size + 1)
        ids = [-1] * (size + 1)
        st = 0
        while st < size:
            here = best[st]
            single = False
            b0 = s[st]
            mblen = 1 if b0 < 0x80 else 2 if b0 < 0xE0 else 3 if b0 < 0xF0 else 4
            for ln in range(1, min(self.maxlen, size - st) + 1):
                tid = self.tok_id.get(s[st : st + ln])
                if tid is None:
                    continue
                end = st + ln
                cand = self.vocab[tid][1] + here
                if start[end] is None or cand > best[end]:
                    best[end], start[end], ids[end] = cand, st, tid
                if ln == mblen:
                    single = True
            if not single:
                end = st + mblen
                cand = unk_score + here
                if start[end] is None or cand > best[end]:
                    best[end], start[end], ids[end] = cand, st, self.unk_id
            st += mblen
        out: list[bytes] = []
        tok: list[bytes] = []
        e = size
        while e > 0:
            b = start[e]
            if self.unk_id is not None and ids[e] == self.unk_id:
                tok.append(s[b:e])
            else:
                if tok:
                    out.append(b"".join(reversed(tok)))
                    tok = []
                out.append(s[b:e])
            e = b
        if tok:
            out.append(b"".join(reversed(tok)))
        out.reverse()
        return out

    def tokenize(self, s: bytes) -> list[tuple[int, int, int]]:
        res = []
        off = 0
        for piece in self.encode(s):
            ln = len(piece)
            tid = self.tok_id.get(piece)
            if tid is None:
                if self.byte_fallback:
                    bt = [self.tok_id.get(f"<0x{c:02X}>".encode()) for c in piece]
                    if all(x is not None for x in bt):
                        res.extend((x, off, off + ln) for x in bt)
                        off += ln
                        continue
                if self.unk_id is None:
                    raise ValueError("Encountered an unknown token but `unk_id` is missing")
                tid = self.unk_id
            res.append((tid, off, off + ln))
            off += ln
        return res


class HFBPE:
    """BPE with a merge list over characters (SentencePiece-style when byte_fallback / fuse_unk are set)."""

    def __init__(self, vocab: dict[str, int], merges: list[tuple[str, str]], unk_token: str | None,
                 byte_fallback: bool, fuse_unk: bool, continuing_subword_prefix: str | None = None,
                 end_of_word_suffix: str | None = None, ignore_merges: bool = False):
        self.vocab = vocab
        self.merges: dict[tuple[int, int], tuple[int, int]] = {}
        prefix = continuing_subword_prefix or ""
        for rank, (a, b) in enumerate(merges):
            new = a + (b[len(prefix):] if prefix and b.startswith(prefix) else b)
            self.merges[(vocab[a], vocab[b])] = (rank, vocab[new])
        self.unk_token = unk_token
        self.byte_fallback = byte_fallback
        self.fuse_unk = fuse_unk
        self.prefix = continuing_subword_prefix
        self.suffix = end_of_word_suffix
        self.ignore_merges = ignore_merges

    def tokenize(self, w: str) -> list[tuple[int, int, int]]:
        if not w:
            return []
        if self.ignore_merges and w in self.vocab:
            return [(self.vocab[w], 0, len(w.encode()))]
        syms: list[list[int]] = []  # [id, byte len]
        unk = None
        n = len(w)
        for k, ch in enumerate(w):
            s = ch
            blen = len(ch.encode())
            if k > 0 and self.prefix:
                s = self.prefix + s
            if k == n - 1 and self.suffix:
                s = s + self.suffix
            tid = self.vocab.get(s)
            if tid is not None:
                if unk is not None:
                    syms.append(unk)
                    unk = None
                syms.append([tid, blen])
                continue
            if self.byte_fallback:
                bt = [self.vocab.get(f"<0x{c:02X}>") for c in s.encode()]
                if all(x is not None for x in bt):
                    syms.extend([x, 1] for x in bt)
                    continue
            if self.unk_token is not None:
                uid = self.vocab.get(self.unk_token)
                if uid is None:
                    raise ValueError(f"unk token {self.unk_token!r} is not in the vocabulary")
                if unk is not None and self.fuse_unk:
                    unk = [unk[0], unk[1] + blen]
                else:
                    if unk is not None:
                        syms.append(unk)
                    unk = [uid, blen]
        if unk is not None:
            syms.append(unk)
        m = len(syms)
        prev = list(range(-1, m - 1))
        nxt = list(range(1, m + 1))
        if m:  # every character dropped (unknown, and no unk token): nothing to merge
            nxt[-1] = -1
        heap = []
        merges = self.merges
        for i in range(m - 1):
            r = merges.get((syms[i][0], syms[i + 1][0]))
            if r is not None:
                heap.append((r[0], i, r[1]))
        heapq.heapify(heap)
        while heap:
            rank, pos, new_id = heapq.heappop(heap)
            if syms[pos][1] == 0 or nxt[pos] == -1:
                continue
            np_ = nxt[pos]
            r = merges.get((syms[pos][0], syms[np_][0]))
            if r is None or r[1] != new_id:
                continue
            syms[pos] = [new_id, syms[pos][1] + syms[np_][1]]
            syms[np_][1] = 0
            nxt[pos] = nxt[np_]
            if nxt[np_] != -1:
                prev[nxt[np_]] = pos
            if prev[pos] >= 0:
                r = merges.get((syms[prev[pos]][0], new_id))
                if r is not None:
                    heapq.heappush(heap, (r[0], prev[pos], r[1]))
            if nxt[pos] != -1:
                r = merges.get((new_id, syms[nxt[pos]][0]))
                if r is not None:
                    heapq.heappush(heap, (r[0], pos, r[1]))
        out = []
        off = 0
        for tid, ln in syms:
            if ln:
                out.append((tid, off, off + ln))
                off += ln
        return out
