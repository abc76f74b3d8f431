"""The incremental BPE merge loop in pure Python.

Same algorithm and data layout as the native loop in fstok/runtime/csrc/mod_train.c (which is what
`train_bpe` uses); this module is its readable twin, the fallback when the extension is not built,
and a second oracle in the tests.

Layout over the distinct pre-tokens (each weighted by its frequency):
    sym[i]        token id at symbol position i (-1 once merged into its left neighbour)
    prv[i]/nxt[i] links between the live symbols of one pre-token (-1 at the ends)
    word[i]       pre-token of position i; freq[word[i]] its frequency
    count[pair]   current (64-bit in C) weighted count of each adjacent pair
    where[pair]   positions of the left symbol, add-only: validated when the pair is merged
    heap          lazy max-heap of (count, pair).  An existing pair's count can only go down (every
                  pair that gains occurrences contains the brand-new token and is pushed once, after
                  the merge), so a popped entry with a stale count is re-pushed with the current one
                  and a popped entry whose count is current is the true maximum.

Ties (equal counts): mode "bytes" (fstok's rule) takes the lexicographically greatest pair of byte
strings (bytes(a), bytes(b)); mode "hf" takes the smallest HF-BpeTrainer ids, to cross-check HF.
"""
from __future__ import annotations

import heapq
from typing import Callable, Mapping


class _Greatest:
    """Heap key: orders byte-string pairs so that heapq's minimum is the lexicographically greatest."""

    __slots__ = ("k",)

    def __init__(self, k):
        self.k = k

    def __lt__(self, other: "_Greatest") -> bool:
        return self.k > other.k

    def __eq__(self, other) -> bool:
        return self.k == other.k


def hf_byte_order() -> list[int]:
    """Rank of each byte in HF's ByteLevel alphabet (HF sorts its alphabet by code point)."""
    cps = []
    extra = 0
    for b in range(256):
        printable = 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255
        if printable:
            cps.append(b)
        else:
            cps.append(256 + extra)
            extra += 1
    order = sorted(range(256), key=lambda b: cps[b])
    rank = [0] * 256
    for r, b in enumerate(order):
        rank[b] = r
    return rank


class FastTrainer:
    """Incremental merge loop: FastTrainer(word_counts, mode).step(n) -> [(a_id, b_id, count), ...]."""

    def __init__(self, word_counts: Mapping[bytes, int], mode: str = "bytes"):
        if mode not in ("bytes", "hf"):
            raise ValueError("mode must be 'bytes' or 'hf'")
        self.mode = mode
        self.tokens: list[bytes] = [bytes([i]) for i in range(256)]
        self.ord: list[int] = hf_byte_order() if mode == "hf" else list(range(256))
        sym: list[int] = []
        prv: list[int] = []
        nxt: list[int] = []
        word: list[int] = []
        freq: list[int] = []
        count: dict[tuple[int, int], int] = {}
        where: dict[tuple[int, int], list[int]] = {}
        for w, f in word_counts.items():
            if len(w) < 2:
                continue
            wi = len(freq)
            freq.append(int(f))
            s = len(sym)
            n = len(w)
            for j, c in enumerate(w):
                i = s + j
                sym.append(c)
                word.append(wi)
                prv.append(i - 1 if j > 0 else -1)
                nxt.append(i + 1 if j + 1 < n else -1)
                if j + 1 < n:
                    p = (c, w[j + 1])
                    count[p] = count.get(p, 0) + f
                    lst = where.get(p)
                    if lst is None:
                        where[p] = [i]
                    else:
                        lst.append(i)
        self.sym, self.prv, self.nxt, self.word, self.freq = sym, prv, nxt, word, freq
        self.count, self.where = count, where
        self.heap = [self._entry(c, p) for p, c in count.items()]
        heapq.heapify(self.heap)

    def _entry(self, c: int, p: tuple[int, int]):
        if self.mode == "bytes":
            return (-c, _Greatest((self.tokens[p[0]], self.tokens[p[1]])), p)
        return (-c, (self.ord[p[0]], self.ord[p[1]]), p)

    def step(self, max_merges: int, on_merge: Callable | None = None) -> list[tuple[int, int, int]]:
        out: list[tuple[int, int, int]] = []
        heap, count = self.heap, self.count
        while len(out) < max_merges and heap:
            negc, _, p = heapq.heappop(heap)
            cur = count.get(p, 0)
            if cur != -negc:
                if cur > 0:
                    heapq.heappush(heap, self._entry(cur, p))
                else:
                    self.where.pop(p, None)
                continue
            self._merge(p)
            out.append((p[0], p[1], cur))
            if on_merge is not None:
                on_merge(len(out))
        return out

    def _merge(self, pair: tuple[int, int]) -> int:
        a, b = pair
        n = len(self.tokens)
        self.tokens.append(self.tokens[a] + self.tokens[b])
        self.ord.append(n + 1000)
        sym, prv, nxt, word, freq = self.sym, self.prv, self.nxt, self.word, self.freq
        count, where = self.count, self.where
        positions = where.pop(pair, [])
        if a == b:
            positions.sort()  # left to right inside a pre-token: "aaa" -> "aa a"
        touched: set[tuple[int, int]] = set()
        for p in positions:
            if sym[p] != a:
                continue
            q = nxt[p]
            if q < 0 or sym[q] != b:
                continue
            w = freq[word[p]]
            pp, nn = prv[p], nxt[q]
            if pp >= 0:
                x = sym[pp]
                count[(x, a)] -= w
                k = (x, n)
                count[k] = count.get(k, 0) + w
                where.setdefault(k, []).append(pp)
                touched.add(k)
            if nn >= 0:
                y = sym[nn]
                count[(b, y)] -= w
                k = (n, y)
                count[k] = count.get(k, 0) + w
                where.setdefault(k, []).append(p)
                touched.add(k)
            sym[p] = n
            sym[q] = -1
            nxt[p] = nn
            if nn >= 0:
                prv[nn] = p
            prv[q] = nxt[q] = -1
        count.pop(pair, None)
        for k in touched:
            c = count[k]
            if c > 0:
                heapq.heappush(self.heap, self._entry(c, k))
            else:
                del count[k]
                where.pop(k, None)
        return n
