"""HF tokenizer.json models, pure Python (the oracle; the compiled byte-level BPE runs in C elsewhere).

    m = models.from_config(obj["model"], where="tokenizer.json")
    m.tokenize("Ġhello")      # [(id, start, end), ...] in characters of the piece

BPE (HF `models/bpe`): every character of a piece is a symbol (with `continuing_subword_prefix` on all
but the first and `end_of_word_suffix` on the last); a symbol missing from the vocabulary becomes
`unk_token` (runs fused with `fuse_unk`) or is dropped when there is no unk token; then the listed merges
apply lowest rank first, leftmost first (a pair listed twice keeps its last rank).  `ignore_merges` emits a
whole piece found in the vocabulary.  `dropout` (random) and `byte_fallback` are refused here.
WordLevel: the whole piece's id, else `unk_token`'s (an error if the vocabulary lacks it).
Both accept the older serializations: a model object without "type", merges as "a b" or as pairs.
"""
from __future__ import annotations

import heapq
from typing import Any, Optional

from . import UnsupportedComponent


class Model:
    vocab: dict[str, int]
    vocab_r: dict[int, str]

    def tokenize(self, piece: str) -> list[tuple[int, int, int]]:
        raise NotImplementedError

    def id_to_token(self, i: int) -> Optional[str]:
        return self.vocab_r.get(i)


def parse_merges(raw: Any, where: str) -> list[tuple[str, str]]:
    if not isinstance(raw, list):
        raise UnsupportedComponent(f"{where}: BPE merges is not a list")
    out = []
    for k, m in enumerate(raw):
        if isinstance(m, str):
            parts = m.split(" ")
            if len(parts) != 2:
                raise UnsupportedComponent(f"{where}: merge #{k} {m!r} is not 'a b'")
        elif isinstance(m, (list, tuple)) and len(m) == 2 and all(isinstance(x, str) for x in m):
            parts = m
        else:
            raise UnsupportedComponent(f"{where}: merge #{k} {m!r} is not a pair of strings")
        out.append((parts[0], parts[1]))
    return out


class BPE(Model):
    MAX_CACHE = 1 << 16

    def __init__(self, vocab: dict[str, int], merges: list[tuple[str, str]], *, unk_token: Optional[str] = None,
                 continuing_subword_prefix: Optional[str] = None, end_of_word_suffix: Optional[str] = None,
                 fuse_unk: bool = False, ignore_merges: bool = False, where: str = "tokenizer.json"):
        self.vocab = vocab
        self.vocab_r = {i: s for s, i in vocab.items()}
        self.unk_token = unk_token
        self.prefix = continuing_subword_prefix or None
        self.suffix = end_of_word_suffix or None
        self.fuse_unk = fuse_unk
        self.ignore_merges = ignore_merges
        plen = len(self.prefix) if self.prefix else 0
        self.merges: dict[tuple[int, int], tuple[int, int]] = {}
        for rank, (a, b) in enumerate(merges):
            if a not in vocab or b not in vocab:
                raise UnsupportedComponent(f"{where}: merge #{rank} ({a!r}, {b!r}) uses a token missing from the vocab")
            new = a + b[plen:]
            if new not in vocab:
                raise UnsupportedComponent(f"{where}: merge #{rank} ({a!r}, {b!r}): {new!r} is missing from the vocab")
            self.merges[(vocab[a], vocab[b])] = (rank, vocab[new])
        self._cache: dict[str, list[tuple[int, int, int]]] = {}

    def _symbols(self, w: str) -> list[list[int]]:
        """[id, start, end] per initial symbol.  As in HF's `Word::add`, a symbol's span starts where the
        previous added symbol ended: a character dropped for want of a token (no unk) does not advance it."""
        vocab = self.vocab
        syms: list[list[int]] = []
        unk: Optional[list[int]] = None  # [id, char count]
        pos = 0
        n = len(w)

        def add(i: int, k: int) -> None:
            nonlocal pos
            syms.append([i, pos, pos + k])
            pos += k

        for k, c in enumerate(w):
            s = c
            if k and self.prefix:
                s = self.prefix + s
            if k == n - 1 and self.suffix:
                s = s + self.suffix
            i = vocab.get(s)
            if i is not None:
                if unk is not None:
                    add(*unk)
                    unk = None
                add(i, 1)
            elif self.unk_token is not None:
                uid = vocab.get(self.unk_token)
                if uid is None:
                    raise ValueError(f"BPE unk token {self.unk_token!r} is not in the vocabulary")
                if unk is not None and self.fuse_unk:
                    unk[1] += 1
                else:
                    if unk is not None:
                        add(*unk)
                    unk = [uid, 1]
        if unk is not None:
            add(*unk)
        return syms

    def _merge(self, syms: list[list[int]]) -> list[list[int]]:
        n = len(syms)
        if n < 2:
            return syms
        merges = self.merges
        ids = [s[0] for s in syms]
        nxt = list(range(1, n + 1))
        prv = list(range(-1, n - 1))
        alive = [True] * n
        nxt[-1] = -1
        heap = []
        for i in range(n - 1):
            m = merges.get((ids[i], ids[i + 1]))
            if m is not None:
                heap.append((m[0], i, m[1]))
        heapq.heapify(heap)
        while heap:
            rank, pos, new_id = heapq.heappop(heap)
            if not alive[pos]:
                continue
            j = nxt[pos]
            if j == -1:
                continue
            m = merges.get((ids[pos], ids[j]))
            if m is None or m[1] != new_id:
                continue
            ids[pos] = new_id
            syms[pos][2] = syms[j][2]
            alive[j] = False
            nj = nxt[j]
            nxt[pos] = nj
            if nj != -1:
                prv[nj] = pos
            p = prv[pos]
            if p != -1:
                m = merges.get((ids[p], ids[pos]))
                if m is not None:
                    heapq.heappush(heap, (m[0], p, m[1]))
            if nj != -1:
                m = merges.get((ids[pos], ids[nj]))
                if m is not None:
                    heapq.heappush(heap, (m[0], pos, m[1]))
        return [[ids[i], syms[i][1], syms[i][2]] for i in range(n) if alive[i]]

    def tokenize(self, piece: str) -> list[tuple[int, int, int]]:
        if not piece:
            return []
        r = self._cache.get(piece)
        if r is not None:
            return r
        if self.ignore_merges and piece in self.vocab:
            r = [(self.vocab[piece], 0, len(piece))]
        else:
            r = [tuple(s) for s in self._merge(self._symbols(piece))]
        if len(self._cache) < self.MAX_CACHE:
            self._cache[piece] = r
        return r


class WordLevel(Model):
    def __init__(self, vocab: dict[str, int], unk_token: str):
        self.vocab = vocab
        self.vocab_r = {i: s for s, i in vocab.items()}
        self.unk_token = unk_token

    def tokenize(self, piece: str) -> list[tuple[int, int, int]]:
        i = self.vocab.get(piece)
        if i is None:
            i = self.vocab.get(self.unk_token)
            if i is None:
                raise ValueError(f"WordLevel: {piece!r} is not in the vocabulary and the unk token "
                                 f"{self.unk_token!r} is missing from it")
        return [(i, 0, len(piece))]


def _vocab(model: dict, where: str) -> dict[str, int]:
    v = model.get("vocab")
    if not isinstance(v, dict):
        raise UnsupportedComponent(f"{where}: model.vocab is not an object")
    for s, i in v.items():
        if not isinstance(i, int) or isinstance(i, bool) or i < 0:
            raise UnsupportedComponent(f"{where}: vocab entry {s!r} has invalid id {i!r}")
    return v


def model_type(model: dict) -> str:
    """The model's type, inferring it for the older serializations without "type" (as HF does)."""
    t = model.get("type")
    if t:
        return str(t)
    if "merges" in model:
        return "BPE"
    if "continuing_subword_prefix" in model or "max_input_chars_per_word" in model:
        return "WordPiece"
    if isinstance(model.get("vocab"), list):
        return "Unigram"
    return "WordLevel"


def from_config(model: Any, where: str = "tokenizer.json") -> Model:
    if not isinstance(model, dict):
        raise UnsupportedComponent(f"{where}: no 'model' object")
    t = model_type(model)
    if t == "BPE":
        if model.get("dropout") not in (None, 0, 0.0):
            raise UnsupportedComponent(f"{where}: BPE dropout={model.get('dropout')!r} is not supported "
                                       "(it makes encoding random)")
        if model.get("byte_fallback"):
            raise UnsupportedComponent(f"{where}: BPE byte_fallback=true is handled by the SentencePiece-style "
                                       "BPE compiler, not this pipeline")
        return BPE(_vocab(model, where), parse_merges(model.get("merges", []), where),
                   unk_token=model.get("unk_token"), continuing_subword_prefix=model.get("continuing_subword_prefix"),
                   end_of_word_suffix=model.get("end_of_word_suffix"), fuse_unk=bool(model.get("fuse_unk", False)),
                   ignore_merges=bool(model.get("ignore_merges", False)), where=where)
    if t == "WordLevel":
        return WordLevel(_vocab(model, where), str(model.get("unk_token", "<unk>")))
    raise UnsupportedComponent(f"{where}: model {t!r} is not supported by fstok's tokenizer.json pipeline "
                               "(supported here: BPE, WordLevel)")
