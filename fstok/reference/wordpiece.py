"""Pure-Python oracles for WordPiece.

* `original_maxmatch` - the original greedy longest-match-first WordPiece (quadratic), as
  HF tokenizers' WordPiece model runs it on one word.
* `TableExecutor` - runs the *same compiled tables* as the C runtime (dense delta'/sigma' rows,
  sparse edges, failure links and pops, the normalization table) one byte at a time, and
  counts table lookups (for `fstok inspect` and docs/design/wordpiece.md).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..wordpiece_layout import NONE, node_fields

KIND_REG, KIND_DEL, KIND_SPACE, KIND_ISO, KIND_MAP = 0, 1, 2, 3, 4


def original_maxmatch(word: str, vocab: dict[str, int], unk: str, prefix: str, max_chars: int) -> list[str]:
    """The original (quadratic) greedy longest-match-first WordPiece, as HF tokenizers runs it."""
    if len(word) > max_chars:
        return [unk]
    out: list[str] = []
    start = 0
    n = len(word)
    while start < n:
        end = n
        cur = None
        while start < end:
            sub = word[start:end]
            if start > 0:
                sub = prefix + sub
            if sub in vocab:
                cur = sub
                break
            end -= 1
        if cur is None:
            return [unk]
        out.append(cur)
        start = end
    return out


@dataclass
class Stats:
    bytes_fed: int = 0
    lookups: int = 0  # dense-row reads + sparse-node edge searches
    failure_steps: int = 0

    @property
    def lookups_per_byte(self) -> float:
        return self.lookups / max(1, self.bytes_fed)


class TableExecutor:
    """Executes a WordPieceTokenizer's tables in Python (slow; for tests and statistics)."""

    def __init__(self, tok):
        a = tok._tables
        es, nc, _, row = node_fields(a["wp.node"])
        self.es, self.nc, self.row = es.tolist(), nc.tolist(), row.tolist()
        self.el = a["wp.edge_label"].tolist()
        self.et = a["wp.edge_target"].tolist()
        self.fail = a["wp.fail"].tolist()
        self.pops = a["wp.pops"].tolist()
        self.pool = a["wp.pool"].tolist()
        self.dt = a["wp.dense_target"]
        self.dp = a["wp.dense_pops"]
        self.s1 = a["norm.stage1"]
        self.s2 = a["norm.stage2"]
        self.npool = a["norm.pool"]
        m = tok._art.meta
        self.n_dense, self.root, self.sroot = m["n_dense"], m["root"], m["suffix_root"]
        self.suffix_word = a["wp.suffix_word"][: m.get("n_suffix_word", 0)].tolist()
        self.unk = tok.unk_id
        self.max_chars = tok.options["max_input_chars_per_word"]
        self.strip = tok.options["strip"]
        self.stats = Stats()

    def _slice(self, packed: int) -> list[int]:
        return self.pool[(packed >> 8):(packed >> 8) + (packed & 0xFF)]

    def step(self, u: int, b: int, out: list[int]) -> int:
        st = self.stats
        while True:
            st.lookups += 1
            if self.row[u] != 0xFFFF:
                k = self.row[u] * 256 + b
                out.extend(self._slice(int(self.dp[k])))
                t = int(self.dt[k])
                return t
            for i in range(self.es[u], self.es[u] + self.nc[u]):
                if self.el[i] == b:
                    return self.et[i]
            f = self.fail[u]
            if f == NONE:
                return NONE
            st.failure_steps += 1
            out.extend(self._slice(self.pops[u]))
            u = f

    def word(self, data: bytes, nchars: int) -> list[int]:
        """LinMaxMatch of one (already normalized) word given as UTF-8 bytes."""
        if not data:
            return []
        if nchars > self.max_chars:
            return [self.unk]
        out: list[int] = []
        u = self.root
        for b in data:
            self.stats.bytes_fed += 1
            u = self.step(u, b, out)
            if u == NONE:
                return [self.unk]
        while self.fail[u] != NONE:
            out.extend(self._slice(self.pops[u]))
            u = self.fail[u]
        if u not in (self.root, self.sroot):
            return [self.unk]
        if u == self.sroot and not out:
            return list(self.suffix_word) or [self.unk]
        return out

    def normalize_words(self, text: str) -> list[str]:
        """Apply the compiled normalization table: the list of words (pre-tokenized)."""
        words: list[str] = []
        cur: list[str] = []
        pend: list[tuple[int, int, int]] = []

        def end():
            if cur:
                words.append("".join(cur))
                cur.clear()

        def emit(cp: int, cls: int):
            if cls == 1:
                end()
            elif cls == 2:
                end()
                words.append(chr(cp))
            else:
                cur.append(chr(cp))

        def flush():
            if pend:
                for cp, _, cls in sorted(pend, key=lambda x: x[1]):
                    emit(cp, cls)
                pend.clear()

        for ch in text:
            cp = ord(ch)
            e = int(self.s2[(int(self.s1[cp >> 8]) << 8) | (cp & 0xFF)])
            kind = e & 7
            if kind == KIND_REG:
                flush()
                cur.append(ch)
            elif kind == KIND_DEL:
                pass
            elif kind == KIND_SPACE:
                flush()
                end()
            elif kind == KIND_ISO:
                flush()
                end()
                words.append(ch)
            else:
                off = e >> 3
                hdr = int(self.npool[off])
                iso = hdr >> 16
                if iso:
                    flush()
                    end()
                for k in range(1, (hdr & 0xFFFF) + 1):
                    it = int(self.npool[off + k])
                    icp, cls, dropped, ccc = it & 0x1FFFFF, (it >> 21) & 3, (it >> 23) & 1, it >> 24
                    if ccc == 0:
                        flush()
                    if dropped:
                        continue
                    if ccc:
                        pend.append((icp, ccc, cls))
                    else:
                        emit(icp, cls)
                if iso:
                    flush()
                    end()
        flush()
        end()
        return words

    def encode(self, text: str) -> list[int]:
        out: list[int] = []
        for w in self.normalize_words(text):
            out.extend(self.word(w.encode("utf-8"), len(w)))
        return out
