"""Lossless parallel encoding of one very long text.

Two strategies, both exact (equal to one-shot ``tokenizer.encode(text)``):

* ``"lopt"`` -- LoPT (../shared/seeds/lopt-paper.md): split the text into overlapping character chunks
  ``s_i = S[Lc*i : Lc*(i+1) + Lo]``, encode them on threads with character offsets, and merge adjacent
  results at a run of consecutive tokens whose *global* character positions and ids agree in both chunks
  (found with two pointers over the ordered positions of the overlap region: linear, no LCS over ids).
  A run shorter than ``min_overlap_tokens`` doubles the chunk length and restarts (growth, never a
  wrong answer); when the chunk covers the whole text this is one-shot encoding.
* ``"safe"`` -- beyond the paper, for BERT-style WordPiece: ASCII whitespace (space, tab, newline, CR)
  is always a word boundary after BERT normalization (clean_text maps it to a space, the pre-tokenizer
  drops it, it is not case-ignorable so it never changes lowercasing context), so the text is cut at a
  whitespace character near each ``len/threads`` boundary and the pieces are encoded independently on
  native threads (GIL released) and concatenated: no overlap work at all.

* ``"safe"`` for fstok BPE: the text is cut at positions the compiled pre-tokenizer DFA *proves* are piece
  boundaries in every parse (``fstok.safe_split``; proof and numbers in docs/design/parallel.md), never
  inside a special / added token, and the pieces are encoded on threads and concatenated.

``strategy="auto"`` uses "safe" for fstok WordPiece tokenizers (when the pieces cannot contain a
whitespace-bearing special token) and for fstok BPE tokenizers with a compiled DFA pre-tokenizer and no
text-changing HF step (normalizer, prefix space), with encode options ``allowed_special`` /
``disallowed_special`` only; a BPE text without any proven boundary falls back to "lopt". Everything else
uses "lopt".

Any object with ``encode_with_offsets(text, **kw) -> (ids, offsets)`` works with "lopt" (the result equals
its one-shot ids; for fstok BPE that means special-token text is ordinary unless ``allowed_special`` is
passed, as in ``BPETokenizer.encode_with_offsets``); offsets may be
``(start, end)`` pairs (HF, fstok WordPiece) or start positions only (fstok BPE, tiktoken style; the end
of a token is then the start of the next one). ``HFOffsetsAdapter`` wraps a HF ``tokenizers.Tokenizer``.
"""
from __future__ import annotations

import itertools
import threading
from bisect import bisect_left
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional, Sequence

import numpy as np

from ._load import fstok_kind
from .validate import machine_threads
from .splitters import _WS, ProvenSplitter, bpe_splitter, safe_split_points

__all__ = ["encode_long", "encode_long_with_offsets", "HFOffsetsAdapter", "lopt_merge", "safe_split_points",
           "max_token_chars", "LoptStats", "ProvenSplitter", "bpe_splitter"]



class HFOffsetsAdapter:
    """Give a HF ``tokenizers.Tokenizer`` the ``encode_with_offsets`` / ``encode`` interface used here.

    Offsets are HF's character offsets into the original text (add_special_tokens=False)."""

    def __init__(self, hf_tokenizer: Any):
        if not hasattr(hf_tokenizer, "encode") or not hasattr(hf_tokenizer, "get_vocab"):
            raise TypeError(f"expected a tokenizers.Tokenizer, got {type(hf_tokenizer).__name__}")
        self.hf = hf_tokenizer

    def encode(self, text: str) -> list[int]:
        return self.hf.encode(text, add_special_tokens=False).ids

    def encode_with_offsets(self, text: str):
        enc = self.hf.encode(text, add_special_tokens=False)
        return enc.ids, enc.offsets

    def get_vocab(self) -> dict[str, int]:
        return self.hf.get_vocab()


class LoptStats:
    """Filled in by ``encode_long(..., stats=LoptStats())``: what the run did."""

    def __init__(self) -> None:
        self.strategy = ""
        self.rounds = 0          # LoPT attempts (1 = no growth)
        self.chunk_chars = 0     # final chunk length
        self.overlap_chars = 0
        self.num_chunks = 0
        self.runs: list[int] = []  # agreeing-run length per merged boundary

    def __repr__(self) -> str:
        return (f"LoptStats(strategy={self.strategy!r}, rounds={self.rounds}, chunk_chars={self.chunk_chars}, "
                f"overlap_chars={self.overlap_chars}, num_chunks={self.num_chunks}, min_run="
                f"{min(self.runs) if self.runs else None})")


# ---------------------------------------------------------------------------------------------- helpers
def _is_fstok_wordpiece(tok: Any) -> bool:
    return fstok_kind(tok) == "wordpiece"


def _is_fstok_bpe(tok: Any) -> bool:
    return fstok_kind(tok) == "bpe"


def max_token_chars(tok: Any) -> int:
    """Longest vocabulary token in characters (the theorem's T); continuation prefixes ("##") and
    byte-level markers count as they are spelled, which only over-estimates. 16 when unknown."""
    cached = getattr(tok, "_fstok_max_token_chars", None)
    if cached:
        return cached
    n = 0
    try:
        if hasattr(tok, "token_byte_values"):  # byte-level BPE: bytes >= characters
            n = max((len(t) for t in tok.token_byte_values()), default=0)
            specials = getattr(tok, "special_tokens", None)
            if isinstance(specials, dict):
                n = max([n] + [len(t) for t in specials])
        else:
            n = max((len(t) for t in tok.get_vocab()), default=0)
    except Exception:
        n = 0
    if not n:
        n = 16
    try:
        tok._fstok_max_token_chars = n
    except Exception:
        pass
    return n


def _continuation_mask(tok: Any):
    """For WordPiece tokenizers (fstok, or HF through HFOffsetsAdapter): list[bool] by id, True for
    continuation tokens ("##" prefix). None for other models (the paper's rule is used as is)."""
    cached = getattr(tok, "_fstok_cont_mask", None)
    if cached is not None:
        return cached or None
    prefix = None
    if _is_fstok_wordpiece(tok):
        prefix = getattr(tok, "_prefix", None) or tok._art.meta.get("continuing_subword_prefix", "##")
    elif isinstance(tok, HFOffsetsAdapter):
        model = getattr(tok.hf, "model", None) or getattr(getattr(tok.hf, "_tokenizer", None), "model", None)
        if model is not None and type(model).__name__ == "WordPiece":
            prefix = model.continuing_subword_prefix
    mask: list = []
    if prefix:
        vocab = tok.get_vocab()
        mask = [False] * (max(vocab.values(), default=-1) + 1)
        for t, i in vocab.items():
            if t.startswith(prefix):
                mask[i] = True
    try:
        tok._fstok_cont_mask = mask
    except Exception:
        pass
    return mask or None


def _check_args(text, num_threads, chunk_chars, overlap_chars, min_overlap_tokens, strategy):
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if num_threads is not None and (not isinstance(num_threads, int) or isinstance(num_threads, bool)
                                    or num_threads < 1):
        raise ValueError(f"num_threads must be a positive int or None, got {num_threads!r}")
    if chunk_chars is not None and (not isinstance(chunk_chars, int) or chunk_chars < 1):
        raise ValueError(f"chunk_chars must be a positive int or None, got {chunk_chars!r}")
    if overlap_chars is not None and (not isinstance(overlap_chars, int) or overlap_chars < 1):
        raise ValueError(f"overlap_chars must be a positive int or None, got {overlap_chars!r}")
    if not isinstance(min_overlap_tokens, int) or min_overlap_tokens < 1:
        raise ValueError(f"min_overlap_tokens must be a positive int, got {min_overlap_tokens!r}")
    if strategy not in ("auto", "safe", "lopt"):
        raise ValueError(f"strategy must be 'auto', 'safe' or 'lopt', got {strategy!r}")


class _Encoder:
    """Uniform (ids, starts, ends) access to a tokenizer: numpy int64 arrays, local char positions."""

    def __init__(self, tok: Any, encode_kwargs: dict):
        self.tok = tok
        self.kw = encode_kwargs
        self.fast_np = (not encode_kwargs) and hasattr(tok, "encode_with_offsets_numpy") and _is_fstok_wordpiece(tok)
        if not self.fast_np and not hasattr(tok, "encode_with_offsets"):
            raise TypeError(f"{type(tok).__name__} has no encode_with_offsets(text); wrap a HF tokenizer in "
                            "fstok.parallel.HFOffsetsAdapter")
        self.cont = _continuation_mask(tok)

    def __call__(self, chunk: str):
        if self.fast_np:
            ids, offs = self.tok.encode_with_offsets_numpy(chunk)
            offs = offs.astype(np.int64)
            return ids, offs[:, 0], offs[:, 1]
        ids, offs = self.tok.encode_with_offsets(chunk, **self.kw)
        ids = np.asarray(ids, dtype=np.int64)
        n = len(ids)
        if n == 0:
            z = np.zeros(0, dtype=np.int64)
            return ids, z, z
        offs = np.asarray(offs, dtype=np.int64)
        if offs.ndim == 2:
            return ids, offs[:, 0], offs[:, 1]
        # start positions only: a token ends where the next one starts (the last at the chunk end)
        ends = np.empty(n, dtype=np.int64)
        ends[:-1] = offs[1:]
        ends[-1] = len(chunk)
        return ids, offs, ends

    def encode(self, text: str) -> list[int]:
        """One-shot ids with the same semantics as the chunk encoder (``encode_with_offsets``)."""
        if self.fast_np:
            return self.tok.encode(text)
        if not self.kw and _is_fstok_bpe(self.tok):
            return self.tok.encode_ordinary(text)  # == encode_with_offsets ids, without the offsets work
        return list(self.tok.encode_with_offsets(text, **self.kw)[0])


def _pool_map(fn, items, num_threads):
    if num_threads <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(num_threads, len(items))) as ex:
        return list(ex.map(fn, items))


# ---------------------------------------------------------------------------------------------- LoPT merge
def lopt_merge(a, b, b_off: int, a_end: int, min_run: int, cont=None):
    """Match chunk A (starting at global 0 of its own frame) with chunk B that starts ``b_off`` characters
    later (A's frame), overlapping A on [b_off, a_end).

    a, b: (ids, starts, ends) local arrays.  Returns (cut_a, cut_b, run) where the merged sequence is
    A[:cut_a] + B[cut_b:], or None when the longest run of consecutive agreeing tokens (same global
    start, end and id in both) is shorter than ``min_run``.  Linear in the overlap tokens: positions are
    ordered in both, so two pointers walk them once.

    ``cont`` (WordPiece: ``cont[id]`` is True for continuation tokens "##..."): the cut must also fall at
    a word start -- a non-continuation token that is not B's first token -- inside an agreeing run of
    ``min_run`` tokens; A then keeps the complete words before it and B the words from it on.  Without
    this, a word that spans the whole overlap (e.g. > max_input_chars_per_word, which one-shot maps to
    one [UNK]) can be truncated in both chunks and still agree at positions: the paper's rule alone
    is not exact for WordPiece."""
    a_ids, a_st, a_en = a
    b_ids, b_st, b_en = b
    # A tokens that lie inside the overlap: global start >= b_off; B tokens with global end <= a_end
    i = int(np.searchsorted(a_st, b_off, side="left"))
    na = len(a_ids)
    nb = int(np.searchsorted(b_en, a_end - b_off, side="right"))
    if i >= na or nb == 0:
        return None
    # small slices -> python lists for the scalar walk
    ast = (a_st[i:] - b_off).tolist()
    aen = (a_en[i:] - b_off).tolist()
    aid = a_ids[i:].tolist()
    bst = b_st[:nb].tolist()
    ben = b_en[:nb].tolist()
    bid = b_ids[:nb].tolist()
    x = y = 0
    la, lb = len(ast), nb
    best = 0
    best_end = (0, 0)
    run = 0
    prev = (-2, -2)
    ws = None  # first word start (x, y) in the current run (WordPiece mode)
    while x < la and y < lb:
        ka = (ast[x], aen[x])
        kb = (bst[y], ben[y])
        if ka == kb:
            if aid[x] == bid[y]:
                if prev == (x - 1, y - 1):
                    run += 1
                else:
                    run, ws = 1, None
                prev = (x, y)
                if cont is not None:
                    if ws is None and y >= 1 and not cont[bid[y]]:
                        ws = (x, y)
                    if ws is not None and run >= min_run:
                        return i + ws[0], ws[1], run
                elif run > best:
                    best = run
                    best_end = (x + 1, y + 1)
            x += 1
            y += 1
        elif ka < kb:
            x += 1
        else:
            y += 1
    if cont is not None or best < min_run:
        return None
    return i + best_end[0], best_end[1], best


def _assemble(results, cuts):
    parts = []
    lo = 0
    for k, (ids, _, _) in enumerate(results):
        hi = cuts[k][0] if k < len(cuts) else len(ids)
        parts.append(ids[lo:hi])
        lo = cuts[k][1] if k < len(cuts) else 0
    return np.concatenate(parts).tolist() if parts else []


def _lopt_local(enc: _Encoder, text: str, num_threads: int, chunk: int, overlap: int, min_run: int, stats):
    """LoPT with local growth: a boundary without a valid overlap run joins its two chunks into one
    (doubling that chunk) and only the joined chunks are re-encoded; boundaries between unchanged
    chunks keep their merge.  Ends, at worst, with one chunk = one-shot."""
    n = len(text)
    if chunk >= n or overlap >= n:
        if stats is not None:
            stats.rounds, stats.chunk_chars, stats.overlap_chars, stats.num_chunks = 1, n, overlap, 1
        return enc.encode(text)
    if chunk < 2:
        chunk = 2
    ov = min(overlap, chunk - 1)
    starts = list(range(0, n, chunk))
    bounds = [(st_, min(n, st_ + chunk + ov)) for st_ in starts]
    if len(bounds) > 1 and bounds[-2][1] >= n:
        bounds.pop()  # the previous chunk already reaches the end
    bounds[-1] = (bounds[-1][0], n)
    results = _pool_map(lambda b: enc(text[b[0]:b[1]]), bounds, num_threads)
    memo: dict = {}
    rounds = 1
    while True:
        cuts = []
        bad = set()
        for k in range(len(bounds) - 1):
            key = (bounds[k], bounds[k + 1])
            m = memo.get(key)
            if m is None:
                (a_s, a_e), (b_s, _) = key
                m = lopt_merge(results[k], results[k + 1], b_s - a_s, a_e - a_s, min_run, enc.cont) or False
                memo[key] = m
            if m is False:
                bad.add(k)
            cuts.append(m)
        for k in range(len(cuts) - 1):  # chunk k+1: its left cut must not pass its right cut
            if cuts[k] and cuts[k + 1] and cuts[k][1] > cuts[k + 1][0]:
                bad.add(k + 1)
        if not bad:
            if stats is not None:
                stats.rounds, stats.overlap_chars, stats.num_chunks = rounds, ov, len(bounds)
                stats.chunk_chars = max(e - s_ for s_, e in bounds) - (ov if len(bounds) > 1 else 0)
                stats.runs = [c[2] for c in cuts]
            return _assemble(results, cuts)
        rounds += 1
        new_bounds, new_results, todo = [], [], []
        k = 0
        while k < len(bounds):
            j = k
            while j in bad:
                j += 1
            if j == k:
                new_bounds.append(bounds[k])
                new_results.append(results[k])
            else:
                new_bounds.append((bounds[k][0], bounds[j][1]))
                new_results.append(None)
                todo.append(len(new_bounds) - 1)
            k = j + 1
        encoded = _pool_map(lambda i: enc(text[new_bounds[i][0]:new_bounds[i][1]]), todo, num_threads)
        for i, r in zip(todo, encoded):
            new_results[i] = r
        bounds, results = new_bounds, new_results
        if len(bounds) == 1:
            if stats is not None:
                stats.rounds, stats.chunk_chars, stats.overlap_chars, stats.num_chunks = rounds, n, ov, 1
            return results[0][0].tolist()


def _lopt(enc: _Encoder, text: str, num_threads: int, chunk: int, overlap: int, min_run: int, stats):
    """The paper's LoPT: any failed boundary doubles the chunk length and restarts the whole split."""
    n = len(text)
    rounds = 0
    while True:
        rounds += 1
        if chunk >= n or overlap >= n:
            # one chunk: one-shot
            if stats is not None:
                stats.rounds, stats.chunk_chars, stats.overlap_chars, stats.num_chunks = rounds, n, overlap, 1
            return enc.encode(text)
        # LoPT needs disjoint overlap regions per chunk: overlap < chunk
        ov = min(overlap, chunk - 1) if chunk > 1 else 0
        if ov <= 0:
            chunk *= 2
            continue
        starts = list(range(0, n, chunk))
        pieces = [(s, text[s:min(n, s + chunk + ov)]) for s in starts]
        if len(pieces) > 1 and pieces[-2][0] + chunk + ov >= n:
            # previous chunk already reaches the end: the last one is redundant
            pieces.pop()
        results = _pool_map(lambda p: enc(p[1]), pieces, num_threads)
        cuts = []
        ok = True
        runs = []
        for k in range(len(pieces) - 1):
            a_off, a_txt = pieces[k]
            b_off, _ = pieces[k + 1]
            m = lopt_merge(results[k], results[k + 1], b_off - a_off, len(a_txt), min_run, enc.cont)
            if m is None:
                ok = False
                break
            cuts.append(m)
            runs.append(m[2])
        if ok:
            # cut of chunk k+1 at its start (cuts[k][1]) must not pass its end cut (cuts[k+1][0])
            for k in range(len(cuts) - 1):
                if cuts[k][1] > cuts[k + 1][0]:
                    ok = False
                    break
        if not ok:
            chunk *= 2
            continue
        if stats is not None:
            stats.rounds, stats.chunk_chars, stats.overlap_chars = rounds, chunk, ov
            stats.num_chunks, stats.runs = len(pieces), runs
        return _assemble(results, cuts)


# ---------------------------------------------------------------------------------------------- safe split
def _safe_ok(tok: Any, encode_kwargs: dict) -> bool:
    if not _is_fstok_wordpiece(tok):
        return False
    if set(encode_kwargs) - {"allowed_special"}:
        return False
    allowed = encode_kwargs.get("allowed_special") or ()
    specials = tok.special_tokens if allowed == "all" else list(allowed)
    return not any(any(c in s for c in _WS) or not s for s in specials)


def _safe(tok: Any, text: str, num_threads: int, chunk: Optional[int], encode_kwargs: dict, stats):
    n = len(text)
    native = getattr(tok, "_encode_split_native", None)
    if native is not None and not encode_kwargs.get("allowed_special") and set(encode_kwargs) <= {"allowed_special"} \
            and num_threads > 1:
        # fstok WordPiece: the same whitespace cuts made in C on the UTF-8 (converted once, not per
        # piece), pieces on pthreads, the result list built while they run
        parts = 4 * num_threads if chunk is None else max(1, -(-n // chunk))
        if stats is not None:
            stats.rounds, stats.chunk_chars, stats.overlap_chars, stats.num_chunks = 1, chunk or 0, 0, parts
        return native(text, num_threads, parts)
    if chunk is None:
        # 4 pieces per thread: the native encode_batch hands pieces to threads from a shared queue
        # (load balance) and only uses k threads for >= 4(k-1) texts
        parts = 1 if num_threads == 1 else 4 * num_threads
    else:
        parts = max(1, -(-n // chunk))
    cuts = safe_split_points(text, parts)
    bounds = [0] + cuts + [n]
    pieces = [text[bounds[k]:bounds[k + 1]] for k in range(len(bounds) - 1)]
    if stats is not None:
        stats.rounds, stats.chunk_chars, stats.overlap_chars, stats.num_chunks = 1, chunk or 0, 0, len(pieces)
    if len(pieces) == 1:
        return tok.encode(text, **encode_kwargs)
    if not encode_kwargs and len(pieces) >= 4 * (num_threads - 1):
        res = tok.encode_batch(pieces, num_threads=num_threads)  # native threads, GIL released
    else:
        res = _pool_map(lambda p: tok.encode(p, **encode_kwargs), pieces, num_threads)
    out: list[int] = []
    for r in res:
        out.extend(r)
    return out


# ---------------------------------------------------------------------------------------------- BPE: proven boundaries
_BPE_SAFE_KW = {"allowed_special", "disallowed_special"}


def _bpe_safe_ok(tok: Any, encode_kwargs: dict) -> bool:
    return not (set(encode_kwargs) - _BPE_SAFE_KW) and bpe_splitter(tok) is not None


def _safe_bpe(tok: Any, text: str, num_threads: int, chunk: Optional[int], encode_kwargs: dict, stats,
              fallback: bool) -> Optional[list[int]]:
    """Cut at proven boundaries, encode the pieces with ``encode_batch`` (C threads, GIL released) and
    concatenate.  None when no cut was found and ``fallback`` (the caller then runs LoPT)."""
    n = len(text)
    if chunk is None:
        # a few pieces per thread: encode_batch's threads take pieces from a shared queue (load balance)
        parts = 1 if num_threads == 1 else 4 * num_threads
    else:
        parts = max(1, -(-n // chunk))
    kw = {"allowed_special": encode_kwargs.get("allowed_special", set()),
          "disallowed_special": encode_kwargs.get("disallowed_special", ())}
    enc_split = getattr(tok, "_encode_split", None)
    if enc_split is not None and chunk is None and num_threads > 1 and _PIECES_MODE is None:
        # native: the same proven boundaries searched in C on the UTF-8, pieces on pthreads
        allowed, disallowed = tok._resolve_special(kw["allowed_special"], kw["disallowed_special"])
        tok._check_disallowed(text, disallowed)
        ids = enc_split(text, num_threads, allowed)
        if ids is not None:
            if stats is not None:
                stats.strategy = "safe"
                stats.rounds, stats.chunk_chars, stats.overlap_chars, stats.num_chunks = 1, 0, 0, parts
            return ids
    cuts = bpe_splitter(tok).split_points(text, parts) if parts > 1 else []
    if not cuts and parts > 1 and fallback:
        return None
    if stats is not None:
        stats.strategy = "safe"
        stats.rounds, stats.chunk_chars, stats.overlap_chars, stats.num_chunks = 1, chunk or 0, 0, len(cuts) + 1
    if not cuts:
        return tok.encode(text, **kw)
    enc_cuts = getattr(tok, "_encode_cuts", None)
    if enc_cuts is not None and _PIECES_MODE is None:
        # native: UTF-8 once, pieces on pthreads, the result list built while they run
        allowed, disallowed = tok._resolve_special(kw["allowed_special"], kw["disallowed_special"])
        tok._check_disallowed(text, disallowed)
        ids = enc_cuts(text, cuts, num_threads, allowed)
        if ids is not None:
            return ids
    bounds = [0] + cuts + [n]
    pieces = [text[bounds[k]:bounds[k + 1]] for k in range(len(bounds) - 1)]
    mode = _PIECES_MODE or ("threads" if num_threads <= _THREADS_MAX else "batch")
    if mode == "batch":
        res = tok.encode_batch(pieces, num_threads=num_threads, **kw)
    else:
        res = _encode_pieces(tok, pieces, num_threads, kw)
    return _concat(res)


# How the pieces are encoded: "threads" (persistent Python threads calling tok.encode: the GIL-bound UTF-8
# conversion and result list of one piece overlap the BPE of the others) or "batch" (one encode_batch call:
# C threads, but those steps run one after the other).  None: threads up to _THREADS_MAX, batch above
# (16 Python threads contend for the GIL; measured on a 16-core machine, docs/bench/long.md).
_PIECES_MODE: Optional[str] = None
_THREADS_MAX = 8
_pools: dict = {}
_pools_lock = threading.Lock()


def _pool(n: int) -> ThreadPoolExecutor:
    with _pools_lock:
        ex = _pools.get(n)
        if ex is None:
            ex = _pools[n] = ThreadPoolExecutor(max_workers=n, thread_name_prefix=f"fstok-long{n}")
        return ex


def _encode_pieces(tok: Any, pieces: list, num_threads: int, kw: dict) -> list:
    """``tok.encode(piece, **kw)`` for every piece on ``num_threads`` persistent Python threads taking pieces
    in order from a shared counter.  The C encoder releases the GIL for the BPE work (texts >= 4 KiB), so one
    thread's GIL-bound steps (UTF-8 conversion of its piece, building its result list) overlap the others'
    BPE instead of all running one after the other as in a single encode_batch call."""
    nt = min(num_threads, len(pieces))
    if nt <= 1:
        return [tok.encode(p, **kw) for p in pieces]
    out: list = [None] * len(pieces)
    counter = itertools.count()
    enc = tok.encode

    def work() -> None:
        n = len(pieces)
        while True:
            i = next(counter)
            if i >= n:
                return
            out[i] = enc(pieces[i], **kw)

    futs = [_pool(nt).submit(work) for _ in range(nt)]
    for f in futs:
        f.result()
    return out


def _concat(lists: list) -> list:
    """One list from encode_batch's per-piece lists (moved by C when the extension is built)."""
    try:
        from .runtime._dfa import concat_lists
    except ImportError:  # pragma: no cover
        concat_lists = None
    if concat_lists is not None:
        return concat_lists(lists)
    out: list = []
    for r in lists:
        out.extend(r)
    return out


# ---------------------------------------------------------------------------------------------- entry
def encode_long(tokenizer: Any, text: str, num_threads: Optional[int] = None, chunk_chars: Optional[int] = None,
                overlap_chars: Optional[int] = None, min_overlap_tokens: int = 2, *, strategy: str = "auto",
                stats: Optional[LoptStats] = None, growth: str = "local", **encode_kwargs) -> list[int]:
    """Token ids of ``text``, identical to ``tokenizer.encode(text, **encode_kwargs)``, computed on
    ``num_threads`` threads (default: all cores).

    chunk_chars: chunk length (default ``len(text) / num_threads``); overlap_chars: LoPT overlap (default
    and minimum: the longest vocabulary token in characters (the theorem's T), at least 8; a chunk is
    always longer than the overlap); min_overlap_tokens: the paper's threshold
    (consecutive position-agreeing tokens needed to merge two chunks; fewer doubles the chunk length).
    strategy: "auto" (safe split for fstok WordPiece -- whitespace -- and fstok BPE -- proven pre-tokenizer
    boundaries --, LoPT otherwise), "safe" or "lopt".
    growth (LoPT): "local" joins only the two chunks of a failed boundary (re-encoding just those);
    "global" is the paper's restart of the whole split with a doubled chunk length.
    ``encode_kwargs`` (e.g. ``allowed_special``) are passed to every chunk encode."""
    _check_args(text, num_threads, chunk_chars, overlap_chars, min_overlap_tokens, strategy)
    if num_threads is None:
        num_threads = machine_threads()  # the CPUs this process may run on, not the whole machine
    if stats is not None:
        stats.strategy = strategy
    if strategy in ("auto", "safe") and _is_fstok_bpe(tokenizer) and _bpe_safe_ok(tokenizer, encode_kwargs):
        if stats is not None:
            stats.strategy = "safe"
        if not text:
            return []
        out = _safe_bpe(tokenizer, text, num_threads, chunk_chars, encode_kwargs, stats, strategy == "auto")
        if out is not None:
            return out
    elif strategy in ("auto", "safe"):
        if _safe_ok(tokenizer, encode_kwargs):
            if stats is not None:
                stats.strategy = "safe"
            if not text:
                return []
            return _safe(tokenizer, text, num_threads, chunk_chars, encode_kwargs, stats)
        if strategy == "safe":
            raise ValueError(f"strategy='safe' needs a fstok WordPiece tokenizer without whitespace in its "
                             f"allowed special tokens, or a fstok BPE tokenizer with a compiled DFA pre-tokenizer "
                             f"and no normalizer / prefix space (encode options allowed_special, "
                             f"disallowed_special only); got {type(tokenizer).__name__} (use 'lopt')")
    if stats is not None:
        stats.strategy = "lopt"
    enc = _Encoder(tokenizer, encode_kwargs)
    if not text:
        return []
    n = len(text)
    chunk = chunk_chars if chunk_chars is not None else max(1, -(-n // num_threads))
    # the theorem needs overlap >= T (longest token, special tokens included): with less, a special token
    # can span the whole overlap and be cut identically in both chunks; smaller requests are raised to T,
    # and a chunk must be longer than its overlap (tiny chunks grow to T + 1 at once)
    t_max = max(8, max_token_chars(tokenizer))
    overlap = max(overlap_chars or 0, t_max)
    chunk = max(chunk, overlap + 1)
    if growth not in ("local", "global"):
        raise ValueError(f"growth must be 'local' or 'global', got {growth!r}")
    run = _lopt_local if growth == "local" else _lopt
    return run(enc, text, num_threads, chunk, overlap, min_overlap_tokens, stats)


def encode_long_with_offsets(tokenizer: Any, text: str, num_threads: Optional[int] = None,
                             chunk_chars: Optional[int] = None, **kw):
    """(ids, [(start, end), ...]) for the safe strategy (fstok WordPiece): offsets shifted per piece."""
    if not _is_fstok_wordpiece(tokenizer):
        raise TypeError("encode_long_with_offsets supports fstok WordPiece tokenizers")
    _check_args(text, num_threads, chunk_chars, None, 1, "safe")
    if num_threads is None:
        num_threads = machine_threads()  # the CPUs this process may run on, not the whole machine
    n = len(text)
    parts = num_threads if chunk_chars is None else max(1, -(-n // chunk_chars))
    bounds = [0] + safe_split_points(text, parts) + [n]
    pieces = [(bounds[k], text[bounds[k]:bounds[k + 1]]) for k in range(len(bounds) - 1)]
    res = _pool_map(lambda p: tokenizer.encode_with_offsets(p[1], **kw), pieces, num_threads)
    ids: list[int] = []
    offs: list[tuple[int, int]] = []
    for (s, _), (i, o) in zip(pieces, res):
        ids.extend(i)
        offs.extend((a + s, b + s) for a, b in o)
    return ids, offs
