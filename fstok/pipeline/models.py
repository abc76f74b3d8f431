"""HF tokenizer.json models, pure Python (the oracle; the compiled byte-level BPE runs in C elsewhere).

    m = models.from_config(obj["model"], where="tokenizer.json")
    m.tokenize("Ġhello")      # [(id, start, end), ...] in characters of the piece

BPE (HF `models/bpe`): every character of a piece is a symbol (with `continuing_subword_prefix` on all
but the first and `end_of_word_suffix` on the last); a symbol missing from the vocabulary becomes
`unk_token` (runs fused with `fuse_unk`) or is dropped when there is no unk token; then the listed merges
apply lowest rank first, leftmost first (a pair listed twice keeps its last rank).  `ignore_merges` emits a
whole piece found in the vocabulary; `byte_fallback` turns a character the vocabulary lacks into its
`<0xXX>` byte tokens.  `dropout` (random) is refused.  Spans are kept in bytes, as HF's, and mapped to
characters at the end (`char_spans`).
WordLevel: the whole piece's id, else `unk_token`'s (an error if the vocabulary lacks it).
WordPiece: greedy longest match (HF `models/wordpiece`).  Unigram: Viterbi (HF `models/unigram`).
Every model accepts the older serializations: a model object without "type" (and BPE merges as "a b" or as
pairs).
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

    def token_text(self, i: int, piece: str, a: int, b: int) -> str:
        """HF's token string of a token (id i over characters [a, b) of piece): the vocabulary's."""
        return self.vocab_r[i]


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


def char_spans(piece: str, toks) -> list[tuple[int, int, int]]:
    """(id, byte start, byte end) tokens of `piece` as (id, char start, char end): a span that starts or ends
    inside a character covers that whole character, as HF's alignments (one per byte, each byte of a
    character sharing its character's) map it."""
    if piece.isascii():
        return [(t[0], t[1], t[2]) for t in toks]
    b2c: list[int] = []
    for ci, ch in enumerate(piece):
        b2c.extend([ci] * len(ch.encode("utf-8", "surrogatepass")))
    b2c.append(len(piece))
    last = len(b2c) - 1
    out = []
    for t, bs, be in toks:
        a = b2c[min(bs, last)]
        out.append((t, a, b2c[min(be - 1, last)] + 1 if be > bs else a))
    return out


class BPE(Model):
    MAX_CACHE = 1 << 16

    def __init__(self, vocab: dict[str, int], merges: list[tuple[str, str]], *, unk_token: Optional[str] = None,
                 continuing_subword_prefix: Optional[str] = None, end_of_word_suffix: Optional[str] = None,
                 fuse_unk: bool = False, ignore_merges: bool = False, byte_fallback: bool = False,
                 where: str = "tokenizer.json"):
        self.vocab = vocab
        self.n_ids = len(vocab)
        self.byte_fallback = byte_fallback
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
        """[id, byte start, byte end] per initial symbol, as HF's `merge_word` builds them: a symbol's span
        starts where the previous added symbol ended (`Word::add`), so a character dropped for want of a
        token (no unk) does not advance it; with byte_fallback a character the vocabulary lacks becomes its
        `<0xXX>` byte tokens (one byte each) when the vocabulary has them all."""
        vocab = self.vocab
        syms: list[list[int]] = []
        unk: Optional[list[int]] = None  # [id, byte length]
        pos = 0
        n = len(w)

        def add(i: int, k: int) -> None:
            nonlocal pos
            syms.append([i, pos, pos + k])
            pos += k

        for k, c in enumerate(w):
            blen = 1 if c < "\x80" else len(c.encode("utf-8", "surrogatepass"))
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
                add(i, blen)
                continue
            if self.byte_fallback:
                bt = [vocab.get(f"<0x{b:02X}>") for b in s.encode("utf-8", "surrogatepass")]
                if all(x is not None for x in bt):
                    for x in bt:
                        add(x, 1)
                    continue
            if self.unk_token is not None:
                uid = vocab.get(self.unk_token)
                if uid is None:
                    raise ValueError(f"BPE unk token {self.unk_token!r} is not in the vocabulary")
                if unk is not None and self.fuse_unk:
                    unk[1] += blen
                else:
                    if unk is not None:
                        add(*unk)
                    unk = [uid, blen]
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
            r = char_spans(piece, self._merge(self._symbols(piece)))
        if len(self._cache) < self.MAX_CACHE:
            self._cache[piece] = r
        return r


class WordLevel(Model):
    def __init__(self, vocab: dict[str, int], unk_token: str):
        self.vocab = vocab
        self.n_ids = len(vocab)
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


class WordPiece(Model):
    """HF `models/wordpiece`: greedy longest match from the start of the piece, `continuing_subword_prefix`
    before every match but the first; a piece longer than `max_input_chars_per_word` characters, or one with
    a part no token matches, is the unk token over the whole piece."""

    def __init__(self, vocab: dict[str, int], unk_token: str, prefix: str, max_chars: int):
        self.vocab = vocab
        self.n_ids = len(vocab)
        self.vocab_r = {i: s for s, i in vocab.items()}
        self.unk_token, self.prefix, self.max_chars = unk_token, prefix, max_chars
        self._maxlen = max((len(t) for t in vocab), default=0)
        self._cache: dict[str, list[tuple[int, int, int]]] = {}

    def _unk(self, n: int) -> list[tuple[int, int, int]]:
        i = self.vocab.get(self.unk_token)
        if i is None:
            raise ValueError(f"WordPiece: the unk token {self.unk_token!r} is missing from the vocabulary")
        return [(i, 0, n)]

    def tokenize(self, piece: str) -> list[tuple[int, int, int]]:
        r = self._cache.get(piece)
        if r is not None:
            return r
        n = len(piece)
        if n > self.max_chars:
            return self._unk(n)
        vocab, prefix = self.vocab, self.prefix
        out: list[tuple[int, int, int]] = []
        start = 0
        while start < n:
            end = min(n, start + self._maxlen)
            found = None
            while start < end:
                sub = piece[start:end]
                i = vocab.get(prefix + sub if start else sub)
                if i is not None:
                    found = (i, start, end)
                    break
                end -= 1
            if found is None:
                return self._unk(n)
            out.append(found)
            start = end
        if len(self._cache) < BPE.MAX_CACHE:
            self._cache[piece] = out
        return out


class Unigram(Model):
    """HF `models/unigram` (encode_optimized + tokenize): the Viterbi best path over the vocabulary's pieces
    (ties keep the earlier, shorter candidate), a character no piece starts with is an unknown node scored
    min score - 10, runs of unknown nodes fuse into one piece, and a piece not in the vocabulary becomes its
    `<0xXX>` byte tokens (byte_fallback, when the vocabulary has them all) or `unk_id` (an error without one)."""

    K_UNK_PENALTY = 10.0

    def __init__(self, pieces: list[tuple[str, float]], unk_id: Optional[int], byte_fallback: bool):
        self.pieces = pieces
        self.n_ids = len(pieces)
        self.vocab: dict[str, int] = {}
        for i, (t, _) in enumerate(pieces):
            self.vocab[t] = i  # the last of duplicates, as HF's token -> id map
        self.vocab_r = {i: t for i, (t, _) in enumerate(pieces)}
        self.scores = [float(sc) for _, sc in pieces]
        self.min_score = min(self.scores, default=0.0)
        self.prefixes = {t[:k] for t in self.vocab for k in range(1, len(t) + 1)}
        self.unk_id = unk_id
        self.byte_fallback = byte_fallback
        self._cache: dict[str, list[tuple[int, int, int]]] = {}

    def _best(self, w: str) -> list[tuple[int, int, bool]]:
        """(char start, char end, is unknown) of each node of the best path."""
        n = len(w)
        best = [0.0] * (n + 1)
        start: list[Optional[int]] = [None] * (n + 1)
        unk_node = [False] * (n + 1)
        vocab, scores, prefixes = self.vocab, self.scores, self.prefixes
        unk_score = self.min_score - self.K_UNK_PENALTY
        for st in range(n):
            here = best[st]
            single = False
            for end in range(st + 1, n + 1):
                sub = w[st:end]
                if sub not in prefixes:
                    break
                i = vocab.get(sub)
                if i is None:
                    continue
                cand = scores[i] + here
                if start[end] is None or cand > best[end]:
                    best[end], start[end], unk_node[end] = cand, st, i == self.unk_id
                if end == st + 1:
                    single = True
            if not single:
                cand = unk_score + here
                if start[st + 1] is None or cand > best[st + 1]:
                    if self.unk_id is None:
                        raise ValueError("Unigram: an unknown character and no unk_id in the model")
                    best[st + 1], start[st + 1], unk_node[st + 1] = cand, st, True
        nodes = []
        e = n
        while e > 0:
            b = start[e]
            nodes.append((b, e, unk_node[e]))
            e = b
        nodes.reverse()
        return nodes

    def token_text(self, i: int, piece: str, a: int, b: int) -> str:
        # HF keeps the text of an unknown piece as its token string
        return piece[a:b] if i == self.unk_id else self.vocab_r[i]

    def tokenize(self, piece: str) -> list[tuple[int, int, int]]:
        if not piece:
            return []
        r = self._cache.get(piece)
        if r is not None:
            return r
        merged: list[list] = []  # [start, end, unknown]: unknown runs fused (fuse_unk is always on)
        for a, b, unk in self._best(piece):
            if unk and merged and merged[-1][2]:
                merged[-1][1] = b
            else:
                merged.append([a, b, unk])
        out: list[tuple[int, int, int]] = []
        for a, b, _ in merged:
            s = piece[a:b]
            i = self.vocab.get(s)
            if i is None:
                if self.byte_fallback:
                    bt = [self.vocab.get(f"<0x{x:02X}>") for x in s.encode("utf-8", "surrogatepass")]
                    if all(x is not None for x in bt):
                        out.extend((x, a, b) for x in bt)
                        continue
                if self.unk_id is None:
                    raise ValueError("Unigram: an unknown piece and no unk_id in the model")
                i = self.unk_id
            out.append((i, a, b))
        if len(self._cache) < BPE.MAX_CACHE:
            self._cache[piece] = out
        return out


def _vocab(model: dict, where: str) -> dict[str, int]:
    v = model.get("vocab")
    if not isinstance(v, dict):
        raise UnsupportedComponent(f"{where}: model.vocab is not an object")
    hi = 2 * len(v) + (1 << 20)  # fstok's bound on sparse ids (fstok.loaders.bpe_source.ID_GAP_ALLOWANCE)
    for s, i in v.items():
        if not isinstance(i, int) or isinstance(i, bool) or i < 0:
            raise UnsupportedComponent(f"{where}: vocab entry {s!r} has invalid id {i!r}")
        if i > hi:
            raise UnsupportedComponent(f"{where}: token {s!r} has id {i}, outside [0, {hi}]: ids more than "
                                       f"{1 << 20} past twice the vocabulary's {len(v)} tokens are refused")
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
        if model.get("byte_fallback") and (model.get("continuing_subword_prefix") or model.get("end_of_word_suffix")):
            raise UnsupportedComponent(f"{where}: BPE byte_fallback with a continuing_subword_prefix or "
                                       "end_of_word_suffix is not supported (the byte tokens would span the affix)")
        return BPE(_vocab(model, where), parse_merges(model.get("merges", []), where),
                   unk_token=model.get("unk_token"), continuing_subword_prefix=model.get("continuing_subword_prefix"),
                   end_of_word_suffix=model.get("end_of_word_suffix"), fuse_unk=bool(model.get("fuse_unk", False)),
                   ignore_merges=bool(model.get("ignore_merges", False)),
                   byte_fallback=bool(model.get("byte_fallback", False)), where=where)
    if t == "WordLevel":
        return WordLevel(_vocab(model, where), str(model.get("unk_token", "<unk>")))
    if t == "WordPiece":
        mx = model.get("max_input_chars_per_word", 100)
        if type(mx) is not int or mx < 0:
            raise UnsupportedComponent(f"{where}: WordPiece max_input_chars_per_word {mx!r} is not a count")
        return WordPiece(_vocab(model, where), str(model.get("unk_token", "[UNK]")),
                         str(model.get("continuing_subword_prefix", "##")), mx)
    if t == "Unigram":
        v = model.get("vocab")
        if not isinstance(v, list) or not all(isinstance(e, (list, tuple)) and len(e) == 2 and isinstance(e[0], str)
                                              and isinstance(e[1], (int, float)) for e in v):
            raise UnsupportedComponent(f"{where}: Unigram vocab is not a list of [piece, score]")
        if any(not e[0] for e in v):
            raise UnsupportedComponent(f"{where}: Unigram vocab holds an empty piece")
        unk = model.get("unk_id")
        if unk is not None and (type(unk) is not int or not 0 <= unk < len(v)):
            raise UnsupportedComponent(f"{where}: Unigram unk_id {unk!r} is out of range")
        return Unigram([(e[0], float(e[1])) for e in v], unk, bool(model.get("byte_fallback", False)))
    raise UnsupportedComponent(f"{where}: model {t!r} is not supported by fstok's tokenizer.json pipeline "
                               "(supported here: BPE, WordPiece, WordLevel, Unigram)")
