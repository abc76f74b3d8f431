"""The HF `tokenizers.Encoding` record and the operations on it: merge, truncate (with stride), pad.

Semantics are those of HF `tokenizers` (its `Encoding` struct and `truncate_encodings` / `pad_encodings`),
field by field, including the quirks a model pipeline can observe: truncation drops the sequence ranges,
overflowing windows are padded to the same length as their parent, merging a pair whose parts both
overflow yields the cross product of the windows, and an encoding without sequence ranges reports every
token (pads included) as sequence 0.

This module is pure Python and imports nothing from the compiler; the per-text path of `fstok.Tokenizer`
builds one `Encoding` per text, while the numpy batch path never builds these objects.
"""
from __future__ import annotations

from typing import Iterable, Optional

__all__ = ["Encoding", "truncate_encodings", "truncation_lengths", "windows", "pad_encodings", "TruncationError"]


class TruncationError(ValueError):
    """Truncation cannot produce what was asked (HF raises an Exception with the same message)."""


def _check_direction(direction: str, what: str) -> str:
    if direction not in ("right", "left"):
        raise ValueError(f"Invalid {what} direction value : {direction}")
    return direction


class Encoding:
    """The result of encoding one text (or one pair), with the fields and methods of `tokenizers.Encoding`."""

    __slots__ = ("_ids", "_type_ids", "_tokens", "_words", "_offsets", "_special", "_attention",
                 "_overflowing", "_ranges")

    def __init__(self, ids=(), type_ids=None, tokens=None, words=None, offsets=None,
                 special_tokens_mask=None, attention_mask=None, overflowing=None, sequence_ranges=None):
        n = len(ids)
        self._ids = list(ids)
        self._type_ids = list(type_ids) if type_ids is not None else [0] * n
        self._tokens = list(tokens) if tokens is not None else [""] * n
        self._words = list(words) if words is not None else [None] * n
        self._offsets = [tuple(o) for o in offsets] if offsets is not None else [(0, 0)] * n
        self._special = list(special_tokens_mask) if special_tokens_mask is not None else [0] * n
        self._attention = list(attention_mask) if attention_mask is not None else [1] * n
        self._overflowing = list(overflowing) if overflowing is not None else []
        self._ranges = dict(sequence_ranges) if sequence_ranges is not None else {}
        for name in ("_type_ids", "_tokens", "_words", "_offsets", "_special", "_attention"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"Encoding: field {name[1:]} has {len(getattr(self, name))} items, ids has {n}")

    @classmethod
    def _raw(cls, ids, type_ids, tokens, words, offsets, special, attention, overflowing, ranges) -> "Encoding":
        """Build from lists the caller hands over (no copies, no checks): the hot path."""
        e = cls.__new__(cls)
        e._ids, e._type_ids, e._tokens, e._words, e._offsets = ids, type_ids, tokens, words, offsets
        e._special, e._attention, e._overflowing, e._ranges = special, attention, overflowing, ranges
        return e

    @classmethod
    def from_tokens(cls, ids, tokens, offsets, words=None, type_id: int = 0) -> "Encoding":
        """What a model produces for one sequence: no special tokens, every token attended."""
        n = len(ids)
        return cls._raw(list(ids), [type_id] * n, list(tokens), list(words) if words is not None else [None] * n,
                        [tuple(o) for o in offsets], [0] * n, [1] * n, [], {})

    def copy(self) -> "Encoding":
        return Encoding._raw(self._ids[:], self._type_ids[:], self._tokens[:], self._words[:], self._offsets[:],
                             self._special[:], self._attention[:], [o.copy() for o in self._overflowing],
                             dict(self._ranges))

    # --- fields (copies, as HF returns new lists) ---
    @property
    def ids(self) -> list[int]:
        return self._ids[:]

    @property
    def type_ids(self) -> list[int]:
        return self._type_ids[:]

    @property
    def tokens(self) -> list[str]:
        return self._tokens[:]

    @property
    def offsets(self) -> list[tuple[int, int]]:
        return self._offsets[:]

    @property
    def word_ids(self) -> list[Optional[int]]:
        return self._words[:]

    @property
    def words(self) -> list[Optional[int]]:
        import warnings

        warnings.warn("The `words` attribute is deprecated and will be removed in a future version. "
                      "Please use `word_ids` instead.", DeprecationWarning, stacklevel=2)
        return self._words[:]

    @property
    def special_tokens_mask(self) -> list[int]:
        return self._special[:]

    @property
    def attention_mask(self) -> list[int]:
        return self._attention[:]

    @property
    def overflowing(self) -> list["Encoding"]:
        return [o.copy() for o in self._overflowing]

    @property
    def n_sequences(self) -> int:
        return len(self._ranges) or 1

    @property
    def sequence_ids(self) -> list[Optional[int]]:
        out: list[Optional[int]] = [None] * len(self._ids)
        for seq in range(self.n_sequences):
            s, e = self._range(seq)
            out[s:e] = [seq] * (e - s)
        return out

    def __len__(self) -> int:
        return len(self._ids)

    def __repr__(self) -> str:
        return (f"Encoding(num_tokens={len(self._ids)}, attributes=[ids, type_ids, tokens, offsets, "
                f"attention_mask, special_tokens_mask, overflowing])")

    def __eq__(self, other) -> bool:
        if not isinstance(other, Encoding):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in Encoding.__slots__)

    # --- alignment queries (HF semantics, `None` where HF returns None) ---
    def _range(self, seq: int) -> tuple[int, int]:
        return self._ranges.get(seq, (0, len(self._ids)))

    def set_sequence_id(self, sequence_id: int) -> None:
        self._ranges[sequence_id] = (0, len(self._ids))

    def token_to_sequence(self, token_index: int) -> Optional[int]:
        if token_index > len(self._ids):
            return None
        if not self._ranges:
            return 0
        for seq, (s, e) in self._ranges.items():
            if s <= token_index < e:
                return seq
        return None

    def token_to_chars(self, token_index: int) -> Optional[tuple[int, int]]:
        if self.token_to_sequence(token_index) is None or not 0 <= token_index < len(self._offsets):
            return None
        return self._offsets[token_index]

    def token_to_word(self, token_index: int) -> Optional[int]:
        if self.token_to_sequence(token_index) is None or not 0 <= token_index < len(self._words):
            return None
        return self._words[token_index]

    def word_to_tokens(self, word_index: int, sequence_index: int = 0) -> Optional[tuple[int, int]]:
        s0, e0 = self._range(sequence_index)
        if e0 > len(self._words) or s0 > e0:
            return None
        start = end = None
        for i, w in enumerate(self._words[s0:e0]):
            # HF stops at the first word id greater than the one asked (None sorts below every id)
            if w is not None and w > word_index:
                break
            if w == word_index:
                if start is None:
                    start = i
                end = i + 1
        if start is None:
            return None
        return (s0 + start, s0 + end)

    def word_to_chars(self, word_index: int, sequence_index: int = 0) -> Optional[tuple[int, int]]:
        r = self.word_to_tokens(word_index, sequence_index)
        if r is None or r[1] == 0:
            return None
        return (self._offsets[r[0]][0], self._offsets[r[1] - 1][1])

    def char_to_token(self, char_pos: int, sequence_index: int = 0) -> Optional[int]:
        s0, e0 = self._range(sequence_index)
        if e0 > len(self._offsets) or s0 > e0:
            return None
        for i in range(s0, e0):
            a, b = self._offsets[i]
            if a <= char_pos < b:
                return i
        return None

    def char_to_word(self, char_pos: int, sequence_index: int = 0) -> Optional[int]:
        t = self.char_to_token(char_pos, sequence_index)
        return None if t is None else self.token_to_word(t)

    # --- operations ---
    def merge_with(self, pair: "Encoding", growing_offsets: bool) -> None:
        """Append `pair` to self; overflowing windows combine as HF does (the cross product)."""
        # (merge_with only reads `pair`, so HF's clones of the right-hand side are not needed here)
        overflowings = []
        for self_o in self._overflowing:
            n = self_o.copy()
            n.merge_with(pair, growing_offsets)
            overflowings.append(n)
            for other_o in pair._overflowing:
                n = self_o.copy()
                n.merge_with(other_o, growing_offsets)
                overflowings.append(n)
        for other_o in pair._overflowing:
            n = self.copy()
            n.merge_with(other_o, growing_offsets)
            overflowings.append(n)
        base = len(self._ids)
        for seq, (s, e) in pair._ranges.items():
            self._ranges[seq] = (base + s, base + e)
        self._ids.extend(pair._ids)
        self._type_ids.extend(pair._type_ids)
        self._tokens.extend(pair._tokens)
        self._words.extend(pair._words)
        shift = self._offsets[-1][1] if growing_offsets and self._offsets else 0
        if shift:
            self._offsets.extend((a + shift, b + shift) for a, b in pair._offsets)
        else:
            self._offsets.extend(pair._offsets)
        self._special.extend(pair._special)
        self._attention.extend(pair._attention)
        self._overflowing = overflowings

    @staticmethod
    def merge(encodings: Iterable["Encoding"], growing_offsets: bool = True) -> "Encoding":
        out = Encoding()
        for e in encodings:
            out.merge_with(e.copy(), growing_offsets)
        return out

    def _slice(self, a: int, b: int) -> "Encoding":
        return Encoding._raw(self._ids[a:b], self._type_ids[a:b], self._tokens[a:b], self._words[a:b],
                             self._offsets[a:b], self._special[a:b], self._attention[a:b], [], {})

    def truncate(self, max_length: int, stride: int = 0, direction: str = "right") -> None:
        """Keep `max_length` tokens; the rest become overflowing windows overlapping by `stride` tokens."""
        _check_direction(direction, "truncation")
        n = len(self._ids)
        if max_length >= n:
            return
        if max_length == 0:
            old = Encoding._raw(self._ids, self._type_ids, self._tokens, self._words, self._offsets,
                                self._special, self._attention, self._overflowing, self._ranges)
            self.__init__()
            self._overflowing.append(old)
            return
        parts = windows(n, max_length, stride, direction)
        first = self._slice(*parts[0])
        first._overflowing = [self._slice(a, b) for a, b in parts[1:]]
        (self._ids, self._type_ids, self._tokens, self._words, self._offsets, self._special, self._attention,
         self._overflowing, self._ranges) = (first._ids, first._type_ids, first._tokens, first._words,
                                             first._offsets, first._special, first._attention,
                                             first._overflowing, {})

    def pad(self, length: int, direction: str = "right", pad_id: int = 0, pad_type_id: int = 0,
            pad_token: str = "[PAD]") -> None:
        """Pad to `length` tokens (overflowing windows too); longer encodings are left as they are."""
        _check_direction(direction, "padding")
        for o in self._overflowing:
            o.pad(length, direction, pad_id, pad_type_id, pad_token)
        k = length - len(self._ids)
        if k <= 0:
            return
        if direction == "left":
            self._ids[:0] = [pad_id] * k
            self._type_ids[:0] = [pad_type_id] * k
            self._tokens[:0] = [pad_token] * k
            self._words[:0] = [None] * k
            self._attention[:0] = [0] * k
            self._special[:0] = [1] * k
            self._offsets[:0] = [(0, 0)] * k
            self._ranges = {seq: (s + k, e + k) for seq, (s, e) in self._ranges.items()}
        else:
            self._ids.extend([pad_id] * k)
            self._type_ids.extend([pad_type_id] * k)
            self._tokens.extend([pad_token] * k)
            self._words.extend([None] * k)
            self._attention.extend([0] * k)
            self._special.extend([1] * k)
            self._offsets.extend([(0, 0)] * k)


def windows(n: int, max_length: int, stride: int = 0, direction: str = "right") -> list[tuple[int, int]]:
    """The [start, stop) token spans `Encoding.truncate` cuts n tokens into (0 < max_length < n): the kept
    one first, then the overflowing windows, each overlapping the one before by `stride` tokens."""
    if stride >= max_length:
        raise TruncationError(f"`stride` must be strictly less than `max_len={max_length}` (note that `max_len` "
                              "may be shorter than the max length of the original model, as it subtracts the "
                              "number of special characters")
    step = max_length - stride
    parts: list[tuple[int, int]] = []
    if direction == "right":
        for start in range(0, n, step):
            stop = min(start + max_length, n)
            parts.append((start, stop))
            if stop == n:
                break
    else:
        for stop in range(n, 0, -step):
            start = max(stop - max_length, 0)
            parts.append((start, stop))
            if start == 0:
                break
    return parts


def truncation_lengths(n1: int, n2: Optional[int], max_length: int,
                       strategy: str = "longest_first") -> tuple[Optional[int], Optional[int]]:
    """The max_length `truncate_encodings` truncates each sequence to (None: left untouched), for sequences of
    n1 and n2 (None: no pair) tokens and max_length > 0."""
    total = n1 + (n2 if n2 is not None else 0)
    if total <= max_length:
        return None, None
    to_remove = total - max_length
    if strategy == "longest_first":
        if n2 is None:
            return total - to_remove, None
        swap = n1 > n2
        if swap:
            n1, n2 = n2, n1
        n2 = n1 if n1 > max_length else max(n1, max_length - n1)
        if n1 + n2 > max_length:
            n1 = max_length // 2
            n2 = n1 + max_length % 2
        if swap:
            n1, n2 = n2, n1
        return n1, n2
    if strategy in ("only_first", "only_second"):
        if strategy == "only_first":
            n = n1
        elif n2 is not None:
            n = n2
        else:
            raise TruncationError("Truncation error: Second sequence not provided")
        if n <= to_remove:
            raise TruncationError("Truncation error: Sequence to truncate too short to respect the provided max_length")
        return (n - to_remove, None) if strategy == "only_first" else (None, n - to_remove)
    raise ValueError(f"Unknown truncation strategy {strategy!r} (expected longest_first, only_first, only_second)")


def truncate_encodings(enc: Encoding, pair: Optional[Encoding], max_length: int, stride: int = 0,
                       strategy: str = "longest_first", direction: str = "right") -> None:
    """Truncate `enc` (and `pair`) in place so that together they hold at most `max_length` tokens."""
    if max_length == 0:
        enc.truncate(0, stride, direction)
        if pair is not None:
            pair.truncate(0, stride, direction)
        return
    k1, k2 = truncation_lengths(len(enc), None if pair is None else len(pair), max_length, strategy)
    if k1 is not None:
        enc.truncate(k1, stride, direction)
    if k2 is not None:
        pair.truncate(k2, stride, direction)


def pad_encodings(encodings: list[Encoding], length: Optional[int] = None, pad_to_multiple_of: Optional[int] = None,
                  direction: str = "right", pad_id: int = 0, pad_type_id: int = 0, pad_token: str = "[PAD]") -> None:
    """Pad every encoding to `length` (None: the longest of the batch), rounded up to `pad_to_multiple_of`."""
    if not encodings:
        return
    target = length if length is not None else max(len(e) for e in encodings)
    if pad_to_multiple_of and target % pad_to_multiple_of:
        target += pad_to_multiple_of - target % pad_to_multiple_of
    for e in encodings:
        e.pad(target, direction, pad_id, pad_type_id, pad_token)


try:
    from .runtime._untrack import untrack as _untrack_lists
except ImportError:  # a build without the extension: the lists stay with the collector
    _untrack_lists = None


def untrack(encodings: Iterable[Encoding]) -> None:
    """Takes the field lists of `encodings` (and of their overflowing windows) off the cyclic garbage
    collector: they hold ints, strs, None and pairs of ints, which form no cycle, and each full collection
    would otherwise visit every token of every Encoding the program holds (HF's Encodings are opaque to it)."""
    if _untrack_lists is None:
        return
    lists: list = []
    stack = list(encodings)
    while stack:
        e = stack.pop()
        lists += (e._ids, e._type_ids, e._tokens, e._words, e._offsets, e._special, e._attention)
        if e._overflowing:
            stack += e._overflowing
    _untrack_lists(lists)
