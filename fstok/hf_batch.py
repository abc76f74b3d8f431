"""A padded, truncated batch as numpy arrays for `fstok.Tokenizer.encode_batch_numpy`.

The compiled core returns all ids of the batch as one uint32 array and a count per text; truncation, the
post-processor's special tokens and padding are then placed with a few vectorized numpy operations over the
whole batch (no Python object per token). The rows equal `Tokenizer.encode_batch(...)`'s ids, type ids and
attention masks (the first window of each text: overflowing windows are not rows here).

The post-processor's layout is read by running it once on symbolic one-token sequences: the result lists the
special tokens, where sequence A and B go and the type id of every position, for any supported processor.
"""
from __future__ import annotations

import gc
import os
from contextlib import contextmanager
from functools import lru_cache
from typing import Optional, Sequence

import numpy as np

from .hf_encoding import Encoding
from .postprocess import finish

__all__ = ["encode_batch_numpy", "layout", "Assembler", "overflowing", "batch_threads", "gc_paused"]


def layout(processor, pair: bool, add_special_tokens: bool) -> list[tuple[object, int]]:
    """[(piece, type_id)]: piece is "A", "B" or a special token id, in the order the processor emits them."""
    a = Encoding.from_tokens([-1], ["A"], [(0, 1)], [0], type_id=0)
    b = Encoding.from_tokens([-2], ["B"], [(0, 1)], [0], type_id=1) if pair else None
    enc = finish(processor, a, b, add_special_tokens)
    out: list[tuple[object, int]] = []
    for i, t in zip(enc._ids, enc._type_ids):
        out.append(("A" if i == -1 else "B" if i == -2 else i, t))
    if [p for p, _ in out].count("A") != 1 or [p for p, _ in out].count("B") != (1 if pair else 0):
        raise NotImplementedError("post-processor repeats or drops a sequence: use encode_batch")
    return out


def batch_threads() -> int:
    """Threads for a batch when the caller names none, following HF tokenizers' settings: one with
    TOKENIZERS_PARALLELISM=false (or 0/off/no), RAYON_NUM_THREADS when set, else every core."""
    par = os.environ.get("TOKENIZERS_PARALLELISM", "").strip().lower()
    if par in ("false", "0", "off", "no"):
        return 1
    try:
        n = int(os.environ.get("RAYON_NUM_THREADS", "0"))
    except ValueError:
        n = 0
    return n if n > 0 else _cores()


@lru_cache(maxsize=1)
def _cores() -> int:
    """The cores this process may run on (asked once: os.cpu_count() takes tens of microseconds a call)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@contextmanager
def gc_paused():
    """The cyclic garbage collector paused for a block that allocates many acyclic objects (it is switched
    back on afterwards only if it was on: a concurrent caller's pause is never undone early for good)."""
    was = gc.isenabled()
    if was:
        gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class Assembler:
    """Encodings of a batch put together from the model's per-sequence results without running the
    post-processor object per text: the processor is run once on symbolic one-token sequences, and its output
    (special tokens, their type ids, where A and B go, which sequences get ranges) is the template every text
    is laid into.  Only for processors that keep the model's offsets, and only for texts that truncation
    leaves whole; `fits` says which."""

    def __init__(self, processor, pair: bool, add_special_tokens: bool, truncation: Optional[dict],
                 pretrimmed: bool = False):
        self._symbolic = (processor, pair, add_special_tokens)
        self._windows: Optional[dict] = None
        a = Encoding.from_tokens([-1], ["A"], [(0, 1)], [0], type_id=0)
        b = Encoding.from_tokens([-2], ["B"], [(0, 1)], [0], type_id=1) if pair else None
        enc = finish(processor, a, b, add_special_tokens)
        # pretrimmed: the caller gives offsets the processor's one byte-level trimming already trimmed
        # (`fstok.postprocess.trim_spec`): the template then places them as they are
        from .postprocess import trim_spec

        self.ok = offsets_untouched(processor) or (pretrimmed and trim_spec(processor) in (True, False))
        self.parts: list[tuple] = []  # ("seq", 0 | 1, type_id) or ("tok", id, token, type_id)
        for i, t, ty, w, o, sp, at in zip(enc._ids, enc._tokens, enc._type_ids, enc._words, enc._offsets,
                                          enc._special, enc._attention):
            if i in (-1, -2):
                self.ok &= (w, o, sp, at) == (0, (0, 1), 0, 1)
                self.parts.append(("seq", -1 - i, ty))
            else:
                self.ok &= (w, o, sp, at) == (None, (0, 0), 1, 1)
                self.parts.append(("tok", i, t, ty))
        seqs = [p[1] for p in self.parts if p[0] == "seq"]
        self.ok &= seqs == ([0, 1] if pair else [0]) and not enc._overflowing
        # a sequence's range in the symbolic result is its one token's position: it has one here too
        self.ranged = {seq for seq, (s, e) in enc._ranges.items()}
        self.ok &= all(enc._ranges[q][1] - enc._ranges[q][0] == 1 for q in self.ranged)
        self.limit = None
        if truncation is not None:
            n_added = sum(1 for p in self.parts if p[0] == "tok")
            self.limit = max(truncation["max_length"] - (n_added if add_special_tokens else 0), 0)
        # the special tokens before, between and after the sequences: (ids, tokens, word ids, offsets, type ids)
        runs: list[list[tuple]] = [[]]
        self._seq_types: list[int] = []
        for p in self.parts:
            if p[0] == "seq":
                self._seq_types.append(p[2])
                runs.append([])
            else:
                runs[-1].append(p)
        runs += [[]] * (3 - len(runs))
        self._runs = [([p[1] for p in r], [p[2] for p in r], [None] * len(r), [(0, 0)] * len(r), [p[3] for p in r])
                      for r in runs]
        self._masks: dict = {}
        self._bare = not any(r[0] for r in self._runs)  # the template adds no token to a text

    def fits(self, n: int) -> bool:
        """A text (pair) of n model tokens can be assembled: truncation (if any) leaves it whole."""
        return self.ok and (self.limit is None or n <= self.limit)

    def window_ranges(self) -> dict:
        """{(first window of A?, first window of B?): the sequences that get a range} for the windows of
        truncation with overflow, read off the processor's own result on symbolic two-token sequences cut into
        one-token windows; {} where laying the windows into the template (`overflowing`) would not give that
        result (then each text goes through the processor)."""
        if self._windows is None:
            self._windows = self._window_ranges() if self.ok else {}
        return self._windows

    def _window_ranges(self) -> dict:
        processor, pair, add_special_tokens = self._symbolic
        n_added = sum(1 for p in self.parts if p[0] == "tok") if add_special_tokens else 0
        trunc = {"max_length": n_added + (2 if pair else 1), "stride": 0, "strategy": "longest_first",
                 "direction": "right"}

        def sym(pair_side: bool) -> Encoding:
            i, j = (-2, -4) if pair_side else (-1, -3)
            return Encoding.from_tokens([i, j], ["AXBY"[-1 - i], "AXBY"[-1 - j]], [(0, 1), (1, 2)], [0, 1],
                                        type_id=int(pair_side))

        try:
            want = finish(processor, sym(False), sym(True) if pair else None, add_special_tokens, trunc)
        except Exception:
            return {}
        out: dict = {}

        def read(e: Encoding) -> bool:
            key = (-1 in e._ids, -2 in e._ids if pair else True)
            if out.setdefault(key, set(e._ranges)) != set(e._ranges):
                return False
            return all(read(o) for o in e._overflowing)

        if not read(want):
            return {}

        def window(pair_side: bool, first: bool) -> Encoding:
            e = sym(pair_side)
            return e._slice(0, 1) if first else e._slice(1, 2)

        # the windows laid into the template as `overflowing` lays them: they must give the processor's result
        wa = [window(False, True), window(False, False)]
        wb = [window(True, True), window(True, False)] if pair else None
        return out if _same(_lay(self, wa, wb, out), want) else {}

    def _masks_of(self, na: int, nb: int) -> tuple:
        """(type ids, special-tokens mask, range of A, range of B) of an encoding of na + nb model tokens."""
        (_, _, _, _, t0), (_, _, _, _, t1), (_, _, _, _, t2) = self._runs
        ta = self._seq_types[0] if self._seq_types else 0
        tb = self._seq_types[1] if len(self._seq_types) > 1 else 0
        types = [*t0, *[ta] * na, *t1, *[tb] * nb, *t2]
        special = [1] * len(t0) + [0] * na + [1] * len(t1) + [0] * nb + [1] * len(t2)
        s1 = len(t0) + na + len(t1)
        m = (types, special, (len(t0), len(t0) + na), (s1, s1 + nb))
        if len(self._masks) < 4096:  # lengths repeat (windows of truncation above all): bounded memory
            self._masks[na, nb] = m
        return m

    def __call__(self, a: Encoding, b: Optional[Encoding], ranged: Optional[set] = None,
                 own: bool = False) -> Encoding:
        """a (and b) laid into the template; `ranged`: the sequences that get a range (the template's);
        `own`: a's lists are the caller's to give away (fresh, held by nothing else), so a template that adds
        no token takes them as they are."""
        ranged = self.ranged if ranged is None else ranged
        na = len(a._ids)
        nb = 0 if b is None else len(b._ids)
        m = self._masks.get((na, nb)) or self._masks_of(na, nb)
        r0, r1, r2 = self._runs
        if b is None and own and self._bare:
            ids, toks, words, offs = a._ids, a._tokens, a._words, a._offsets
        elif b is None:
            ids = [*r0[0], *a._ids, *r1[0]]
            toks = [*r0[1], *a._tokens, *r1[1]]
            words = [*r0[2], *a._words, *r1[2]]
            offs = [*r0[3], *a._offsets, *r1[3]]
        else:
            ids = [*r0[0], *a._ids, *r1[0], *b._ids, *r2[0]]
            toks = [*r0[1], *a._tokens, *r1[1], *b._tokens, *r2[1]]
            words = [*r0[2], *a._words, *r1[2], *b._words, *r2[2]]
            offs = [*r0[3], *a._offsets, *r1[3], *b._offsets, *r2[3]]
        ranges = {}
        if ranged:
            if 0 in ranged:
                ranges[0] = m[2]
            if 1 in ranged:
                ranges[1] = m[3]
        return Encoding._raw(ids, m[0][:], toks, words, offs, m[1][:], [1] * len(ids), [], ranges)


def overflowing(asm: Assembler, ra: tuple, rb: Optional[tuple], truncation: dict,
                trim: Optional[bool]) -> Optional[Encoding]:
    """The encoding of a text (pair) that truncation cuts into overflowing windows, each window (pair of
    windows) laid into the Assembler's template, in the nesting HF's merge of overflowing encodings gives (the
    per-window post-processor and `Encoding.merge_with` are the oracle).  ra / rb: the model's rows (ids,
    offsets, word ids, tokens[, offsets trimmed by the processor's byte-level trimming, whose add_prefix_space
    is `trim`]).  None where this layout does not apply (then `finish` does the work, or raises)."""
    from .hf_encoding import TruncationError, truncation_lengths, windows
    from .postprocess import trim_first

    limit, direction = asm.limit, truncation.get("direction", "right")
    if not asm.ok or not limit or direction not in ("right", "left"):
        return None
    stride = truncation.get("stride", 0)
    try:
        k1, k2 = truncation_lengths(len(ra[0]), None if rb is None else len(rb[0]), limit,
                                    truncation.get("strategy", "longest_first"))
    except (TruncationError, ValueError):
        return None
    if k1 == 0 or k2 == 0:
        return None

    def parts(r, k):
        ids, offs, words, toks = r[0], r[1], r[2], r[3]
        n = len(ids)
        if trim is not None:
            offs = r[4]
        try:
            spans = [(0, n)] if k is None or k >= n else windows(n, k, stride, direction)
        except TruncationError:
            return None
        out = []
        for a, b in spans:
            o = offs[a:b]
            if a and trim:  # a window's first token keeps the one leading space add_prefix_space put there
                o[0] = trim_first(toks[a], *r[1][a], True)
            # the template reads ids, tokens, word ids and offsets only
            out.append(Encoding._raw(ids[a:b], None, toks[a:b], words[a:b], o, None, None, None, None))
        return out

    rg = asm.window_ranges()
    if not rg:
        return None
    wa = parts(ra, k1)
    wb = None if rb is None else parts(rb, k2)
    if wa is None or (rb is not None and wb is None):
        return None
    return _lay(asm, wa, wb, rg)


def _lay(asm: Assembler, wa: list, wb: Optional[list], rg: dict) -> Encoding:
    """The windows wa of A (and wb of B) laid into the template, nested as HF's merge of overflowing
    encodings nests them, each with the sequence ranges `rg` (`Assembler.window_ranges`) of its kind."""
    if wb is None:
        top = asm(wa[0], None, rg[True, True])
        r = rg[False, True] if len(wa) > 1 else None
        top._overflowing = [asm(w, None, r) for w in wa[1:]]
        return top
    # HF's merge of A's and B's windows: A0+B0 on top; then each later A window with B0 (nesting it with every
    # later B window) followed by it with each later B window; then A0 with each later B window (nesting every
    # later A window with that B window)
    top = asm(wa[0], wb[0], rg[True, True])
    ov = []
    for x in wa[1:]:
        n = asm(x, wb[0], rg[False, True])
        n._overflowing = [asm(x, y, rg[False, False]) for y in wb[1:]]
        ov.append(n)
        ov += [asm(x, y, rg[False, False]) for y in wb[1:]]
    for y in wb[1:]:
        n = asm(wa[0], y, rg[True, False])
        n._overflowing = [asm(x, y, rg[False, False]) for x in wa[1:]]
        ov.append(n)
    top._overflowing = ov
    return top


def _same(x: Encoding, y: Encoding) -> bool:
    """Every field equal, the overflowing windows too (recursively)."""
    return ((x._ids, x._type_ids, x._tokens, x._words, x._offsets, x._special, x._attention, x._ranges)
            == (y._ids, y._type_ids, y._tokens, y._words, y._offsets, y._special, y._attention, y._ranges)
            and len(x._overflowing) == len(y._overflowing)
            and all(_same(a, b) for a, b in zip(x._overflowing, y._overflowing)))


def _truncate_lengths(la: np.ndarray, lb: Optional[np.ndarray], max_length: int, strategy: str):
    """Per-row kept lengths, as HF's truncate_encodings (first window)."""
    if lb is None:
        if strategy == "only_second":
            if np.any(la > max_length):
                raise ValueError("Truncation error: Second sequence not provided")
            return la, None
        return np.minimum(la, max_length), None
    total = la + lb
    over = total > max_length
    if strategy == "longest_first":
        n1 = np.minimum(la, lb)
        n2 = np.where(n1 > max_length, n1, np.maximum(n1, max_length - n1))
        both = n1 + n2 > max_length
        n1 = np.where(both, max_length // 2, n1)
        n2 = np.where(both, max_length // 2 + max_length % 2, n2)
        swap = la > lb
        ka, kb = np.where(swap, n2, n1), np.where(swap, n1, n2)
        return np.where(over, np.minimum(la, ka), la), np.where(over, np.minimum(lb, kb), lb)
    to_remove = total - max_length
    if strategy == "only_first":
        if np.any(over & (la <= to_remove)):
            raise ValueError("Truncation error: Sequence to truncate too short to respect the provided max_length")
        return np.where(over, la - to_remove, la), lb
    if np.any(over & (lb <= to_remove)):
        raise ValueError("Truncation error: Sequence to truncate too short to respect the provided max_length")
    return la, np.where(over, lb - to_remove, lb)


def _check_texts(xs, what: str) -> list[str]:
    if isinstance(xs, str) or not isinstance(xs, (list, tuple)):
        raise TypeError(f"encode_batch_numpy: {what} must be a list of str, got {type(xs).__name__}")
    xs = list(xs)
    for i, t in enumerate(xs):
        if not isinstance(t, str):
            raise TypeError(f"encode_batch_numpy: {what}[{i}] must be a str, got {type(t).__name__} "
                            "(pairs go in pair=, pre-tokenized input through encode_batch)")
    return xs


def offsets_untouched(processor) -> bool:
    """The processor keeps the model's offsets (no byte-level trimming): the batch can place them as they are."""
    from .postprocess import ByteLevelProcessing, RobertaProcessing, SequenceProcessing

    if processor is None:
        return True
    if isinstance(processor, SequenceProcessing):
        return all(offsets_untouched(p) for p in processor.processors)
    if isinstance(processor, ByteLevelProcessing):
        return not processor.trim_offsets
    if isinstance(processor, RobertaProcessing):
        return not processor.trim_offsets
    return True


def encode_batch_numpy(tok, texts: Sequence[str], pair: Optional[Sequence[str]] = None, add_special_tokens: bool = True,
                       num_threads: Optional[int] = None, dtype=np.int64, return_offsets_mapping: bool = False,
                       return_special_tokens_mask: bool = False) -> dict[str, np.ndarray]:
    texts = _check_texts(texts, "texts")
    if pair is not None:
        pair = _check_texts(pair, "pair")
        if len(pair) != len(texts):
            raise ValueError(f"encode_batch_numpy: {len(texts)} texts but {len(pair)} pairs")
    if num_threads is None:
        num_threads = batch_threads()
    B = len(texts)
    oa = ob = None
    if return_offsets_mapping:
        if not offsets_untouched(tok._processor):
            raise NotImplementedError("encode_batch_numpy: offsets of a post-processor that trims them "
                                      "(byte-level trim_offsets) come from encode_batch")
        fa, la, oa = tok._core.offsets_batch(texts, num_threads)
    else:
        fa, la = tok._core.ids_batch(texts, num_threads)
    fb = lb = None
    if pair is not None:
        if return_offsets_mapping:
            fb, lb, ob = tok._core.offsets_batch(pair, num_threads)
        else:
            fb, lb = tok._core.ids_batch(pair, num_threads)
    lay = layout(tok._processor, pair is not None, add_special_tokens)
    n_added = sum(1 for p, _ in lay if p not in ("A", "B"))
    ka, kb = la, lb
    direction = "right"
    tr = tok._truncation
    if tr is not None:
        m = tr["max_length"] - (n_added if add_special_tokens else 0)
        m = max(m, 0)
        ka, kb = _truncate_lengths(la, lb, m, tr["strategy"])
        direction = tr["direction"]
    rows = ka + (kb if kb is not None else 0) + n_added
    pd = tok._padding
    if pd is not None:
        width = pd["length"] if pd["length"] is not None else int(rows.max(initial=0))
        mult = pd["pad_to_multiple_of"]
        if mult and width % mult:
            width += mult - width % mult
        width = max(width, int(rows.max(initial=0)))
        if np.any(rows > width):
            raise ValueError("encode_batch_numpy: rows are longer than the padding length (enable truncation)")
        pad_id, pad_type, pad_left = pd["pad_id"], pd["pad_type_id"], pd["direction"] == "left"
    else:
        width = int(rows.max(initial=0))
        if B and np.any(rows != width):
            raise ValueError("encode_batch_numpy: rows of different lengths need padding (enable_padding)")
        pad_id = pad_type = 0
        pad_left = False
    ids = np.full((B, width), pad_id, dtype=dtype)
    types = np.full((B, width), pad_type, dtype=dtype)
    mask = np.zeros((B, width), dtype=dtype)
    offs = np.zeros((B, width, 2), dtype=dtype) if return_offsets_mapping else None
    # special tokens and pads are 1 (HF's pad marks its tokens special); the model's tokens 0
    special = np.ones((B, width), dtype=dtype) if return_special_tokens_mask else None
    shift = (width - rows) if pad_left else np.zeros(B, dtype=np.int64)
    col = shift.copy()
    ar = np.arange(B)
    for piece, type_id in lay:
        if piece in ("A", "B"):
            flat, full_len, kept = (fa, la, ka) if piece == "A" else (fb, lb, kb)
            tot = int(kept.sum())
            if tot:
                starts = np.cumsum(full_len) - full_len
                if direction == "left":
                    starts = starts + (full_len - kept)
                r = np.repeat(ar, kept)
                within = np.arange(tot) - np.repeat(np.cumsum(kept) - kept, kept)
                c = np.repeat(col, kept) + within
                src = np.repeat(starts, kept) + within
                ids[r, c] = flat[src]
                types[r, c] = type_id
                if offs is not None:
                    offs[r, c] = (oa if piece == "A" else ob)[src]
                if special is not None:
                    special[r, c] = 0
            col = col + kept
        else:
            if B:
                ids[ar, col] = piece
                types[ar, col] = type_id
            col = col + 1
    if B:
        r = np.arange(width)
        mask[(r[None, :] >= shift[:, None]) & (r[None, :] < (shift + rows)[:, None])] = 1
    out = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
    if special is not None:
        out["special_tokens_mask"] = special
    if offs is not None:
        out["offset_mapping"] = offs
    return out
