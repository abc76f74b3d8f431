"""Token limits for byte-level BPE tokenizers: truncate, chunk and count with a maximum.

    tok = fstok.get_encoding("cl100k_base")
    r = tok.truncate(text, 100)              # Truncation(ids, text, split)
    chunks = tok.chunk_by_tokens(text, 512)  # "".join(chunks) == text, tok.count(c) <= 512 for each
    tok.count_up_to(text, 4096)              # exact count, or 4097 meaning "more than 4096"

BPE is not prefix-stable: encode(text[:i]) need not be a prefix of encode(text), and token counts are
not monotonic in the length of the text.  So the semantics are stated precisely:

* ``truncate(text, N)`` (side="right") returns the first k ids of ``encode(text)`` for the largest
  k <= N at which those ids end on a character boundary (k < N only when token N+1 starts inside a
  character, i.e. a multi-byte character is split across tokens), ``text[:split]`` (their decode), and
  ``split``.  ``ids`` are exactly what a model sees when ``encode(text)`` is cut there, which is what
  truncation means for a model's context.  A fresh ``encode(text[:split])`` usually gives the same ids
  but need not (the last pre-token was cut); use ``chunk_by_tokens`` when the re-encoded prefix must fit.
  side="left" keeps the last k ids instead (the first kept token starts on a character boundary) and
  the text ``text[split:]``.
* ``chunk_by_tokens(text, N)`` cuts the text into consecutive non-empty pieces with
  ``"".join(chunks) == text`` and ``len(encode(chunk)) <= N`` for every chunk (checked by encoding each
  chunk).  Cuts are placed at token boundaries of ``encode(text)`` on character boundaries, as late as
  the limit allows, then moved earlier if the re-encoded chunk is over the limit.  The ids of the
  chunks concatenated usually equal ``encode(text)`` but need not: each chunk is a text of its own.
  ValueError if one character alone needs more than N tokens (only possible for N < 4).
* ``count_up_to(text, N)`` is ``min(count(text), N + 1)``: exact up to N, N + 1 meaning "more".

Early stop: when the tokenizer has a compiled DFA pre-tokenizer, the text is encoded in growing pieces
cut at proven pre-tokenizer boundaries (`fstok.splitters.ProvenSplitter`: encode(text) ==
encode(text[:c]) + encode(text[c:]) at such a cut c), from the start (truncate right, count_up_to) or
from the end (truncate left), and stops once enough tokens are known; the results are those of one
whole encode.  Without such a pre-tokenizer the whole text is encoded.

Special tokens: ``allowed_special`` / ``disallowed_special`` mean what they mean for ``encode`` (truncate
and chunk_by_tokens default to encode's: raise on special-token text; count_up_to defaults to count's:
special-token text is ordinary) and the disallowed check covers the whole text.  An allowed special
token is one token and is never cut.

Text: lone surrogates are repaired first as ``encode`` repairs them (U+FFFD, surrogate pairs joined);
``split`` then refers to the repaired text, while the chunks are slices of the text given (they join to it
exactly).  Tokenizers that change the text before
encoding (an HF normalizer or prefix space) are refused with ValueError: their tokens do not decode to
the input, so "a prefix of the text" has no meaning there.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ._text import fix_surrogates
from .splitters import bpe_splitter

__all__ = ["Truncation", "truncate", "chunk_by_tokens", "count_up_to"]

_EARLY_MIN_CHARS = 4096  # texts shorter than this are encoded whole
_CUT_SEARCH = 4096  # how far from a target a proven cut is looked for
_MIN_STEP = 1024  # the smallest piece (characters); the first piece is _MIN_STEP + _STEP_PER_TOKEN * need
_STEP_PER_TOKEN = 6  # characters per token guessed for the first piece (later: measured, x1.25)
_MAX_STEP = 1 << 62  # the largest piece (tests make every piece small)


class Truncation(NamedTuple):
    """Result of `truncate`: ``ids`` (at most max_tokens), their ``text`` and the character index
    ``split`` of the cut (side="right": text == input[:split]; side="left": text == input[split:])."""

    ids: list
    text: str
    split: int


# ---------------------------------------------------------------------------------------------- helpers


def _check_limit(max_tokens: Any, minimum: int) -> int:
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, (int, np.integer)):
        raise TypeError(f"max_tokens must be an int, got {type(max_tokens).__name__}")
    if max_tokens < minimum:
        raise ValueError(f"max_tokens must be >= {minimum}, got {max_tokens}")
    return int(max_tokens)


def _prepare(tok: Any, text: Any, allowed_special, disallowed_special) -> tuple[str, frozenset]:
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if tok._python_text_path():
        raise ValueError(
            f"{tok.name}: token limits need a tokenizer whose tokens decode to the input text; this one "
            "changes the text before encoding (HF normalizer or prefix space)")
    allowed, disallowed = tok._resolve_special(allowed_special, disallowed_special)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = fix_surrogates(text)
    tok._check_disallowed(text, disallowed)
    return text, allowed


def _enc(tok: Any, piece: str, allowed: frozenset) -> list[int]:
    return tok.encode(piece, allowed_special=allowed, disallowed_special=())


def _token_lengths(tok: Any, ids: list[int]) -> np.ndarray:
    """Byte length of each token (specials: their UTF-8 text)."""
    if not ids:
        return np.zeros(0, dtype=np.int64)
    off = getattr(tok, "_dec_off", None)
    if off is not None:
        a = np.asarray(ids, dtype=np.int64)
        return off[a + 1].astype(np.int64) - off[a]
    return np.array([len(b) for b in tok.decode_tokens_bytes(ids)], dtype=np.int64)


def _splitter(tok: Any):
    return bpe_splitter(tok)


def _cut_forward(sp, text: str, target: int) -> int:
    """The first proven, unguarded cut at or after target (len(text) if none near)."""
    n = len(text)
    lo, w = max(1, target), 64
    while lo < min(n, target + _CUT_SEARCH):
        hi = min(n, target + _CUT_SEARCH, lo + w)
        for p in sp.table.positions(text, lo, hi).tolist():
            if not sp._guarded(text, p):
                return p
        lo, w = hi, w * 4
    return n


def _cut_backward(sp, text: str, target: int) -> int:
    """The last proven, unguarded cut at or before target (0 if none near)."""
    hi, w = min(len(text), target + 1), 64
    while hi > max(1, target - _CUT_SEARCH):
        lo = max(1, target - _CUT_SEARCH, hi - w)
        for p in sp.table.positions(text, lo, hi)[::-1].tolist():
            if not sp._guarded(text, p):
                return p
        hi, w = lo, w * 4
    return 0


def _prefix_ids(tok: Any, text: str, need: int, allowed: frozenset) -> tuple[list[int], int]:
    """(ids, end) with ids == encode(text[:end]) == encode(text)[:len(ids)] and (len(ids) >= need or
    end == len(text))."""
    n = len(text)
    sp = _splitter(tok) if n > _EARLY_MIN_CHARS else None
    if sp is None:
        return _enc(tok, text, allowed), n
    ids: list[int] = []
    pos, step = 0, min(_MAX_STEP, _MIN_STEP + _STEP_PER_TOKEN * need)
    while pos < n:
        c = _cut_forward(sp, text, pos + step) if pos + step < n else n
        ids += _enc(tok, text[pos:c], allowed)
        pos = c
        if len(ids) >= need:
            break
        cpt = pos / max(1, len(ids))  # characters per token so far
        step = min(_MAX_STEP, max(_MIN_STEP, int((need - len(ids)) * cpt * 1.25)))
    return ids, pos


def _suffix_ids(tok: Any, text: str, need: int, allowed: frozenset) -> tuple[list[int], int]:
    """(ids, start) with ids == encode(text[start:]) == encode(text)[-len(ids):] (or [] ) and
    (len(ids) >= need or start == 0)."""
    n = len(text)
    sp = _splitter(tok) if n > _EARLY_MIN_CHARS else None
    if sp is None:
        return _enc(tok, text, allowed), 0
    parts: list[list[int]] = []
    got, pos, step = 0, n, min(_MAX_STEP, _MIN_STEP + _STEP_PER_TOKEN * need)
    while pos > 0:
        c = _cut_backward(sp, text, pos - step) if pos - step > 0 else 0
        part = _enc(tok, text[c:pos], allowed)
        parts.append(part)
        got += len(part)
        pos = c
        if got >= need:
            break
        cpt = (n - pos) / max(1, got)
        step = min(_MAX_STEP, max(_MIN_STEP, int((need - got) * cpt * 1.25)))
    ids: list[int] = []
    for p in reversed(parts):
        ids += p
    return ids, pos


def _lead_bytes(data: bytes) -> np.ndarray:
    """lead[i]: byte i starts a character; one extra True at len(data)."""
    d = np.frombuffer(data, dtype=np.uint8)
    lead = np.ones(len(d) + 1, dtype=bool)
    lead[:-1] = (d & 0xC0) != 0x80
    return lead


# ---------------------------------------------------------------------------------------------- API


def truncate(tok: Any, text: str, max_tokens: int, *, side: str = "right", allowed_special=frozenset(),
             disallowed_special="all") -> Truncation:
    """At most ``max_tokens`` ids of ``encode(text)`` cut on a character boundary (see module docstring).

    side="right": the first ids; Truncation(ids, text[:split], split).
    side="left": the last ids; Truncation(ids, text[split:], split)."""
    n_max = _check_limit(max_tokens, 0)
    if side not in ("right", "left"):
        raise ValueError(f"side must be 'right' or 'left', got {side!r}")
    text, allowed = _prepare(tok, text, allowed_special, disallowed_special)
    n = len(text)
    if side == "right":
        ids, end = _prefix_ids(tok, text, n_max + 1, allowed)
        if len(ids) <= n_max and end == n:
            return Truncation(ids, text, n)
        head = ids[:n_max]
        data = text[:end].encode("utf-8")
        cum = np.zeros(len(head) + 1, dtype=np.int64)
        np.cumsum(_token_lengths(tok, head), out=cum[1:])
        lead = _lead_bytes(data)
        k = len(head)
        while k > 0 and not lead[cum[k]]:
            k -= 1
        prefix = data[: cum[k]].decode("utf-8")
        return Truncation(head[:k], prefix, len(prefix))
    ids, start = _suffix_ids(tok, text, n_max + 1, allowed)
    if len(ids) <= n_max and start == 0:
        return Truncation(ids, text, 0)
    tail = ids[len(ids) - n_max:] if n_max else []
    data = text[start:].encode("utf-8")
    lens = _token_lengths(tok, tail)
    # byte offset (in data) where each kept token starts
    starts = len(data) - np.cumsum(lens[::-1])[::-1] if len(tail) else np.zeros(0, dtype=np.int64)
    lead = _lead_bytes(data)
    j = 0
    while j < len(tail) and not lead[starts[j]]:
        j += 1
    kept = tail[j:]
    sb = int(starts[j]) if j < len(tail) else len(data)
    suffix = data[sb:].decode("utf-8")
    return Truncation(kept, suffix, n - len(suffix))


def count_up_to(tok: Any, text: str, max_tokens: int, *, allowed_special=frozenset(),
                disallowed_special=()) -> int:
    """``min(count(text), max_tokens + 1)``: the exact count when it is <= max_tokens, else max_tokens + 1.
    Long texts stop being encoded once the limit is passed (see module docstring)."""
    n_max = _check_limit(max_tokens, 0)
    text, allowed = _prepare(tok, text, allowed_special, disallowed_special)
    ids, _ = _prefix_ids(tok, text, n_max + 1, allowed)
    return min(len(ids), n_max + 1)


def chunk_by_tokens(tok: Any, text: str, max_tokens: int, *, return_ids: bool = False,
                    allowed_special=frozenset(), disallowed_special="all"):
    """Consecutive non-empty chunks of ``text`` with ``"".join(chunks) == text`` and
    ``len(encode(chunk)) <= max_tokens`` each (see module docstring).  return_ids=True: a list of
    (chunk, encode(chunk)) pairs instead."""
    n_max = _check_limit(max_tokens, 1)
    original = text
    text, allowed = _prepare(tok, text, allowed_special, disallowed_special)
    if not text:
        return []
    if text is not original and isinstance(original, str):
        # lone surrogates were repaired for encoding: cut the repaired text, return slices of the original
        # (a repaired character is one original character, or two for a surrogate pair) so that the
        # chunks still join to exactly the text given
        k = _orig_index(original)
        return [((original[k[a]:k[b]], ids) if return_ids else original[k[a]:k[b]])
                for a, b, ids in _spans_of(chunk_by_tokens(tok, text, max_tokens, return_ids=True,
                                                           allowed_special=allowed, disallowed_special=()))]
    ids = _enc(tok, text, allowed)
    data = text.encode("utf-8")
    cum = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum(_token_lengths(tok, ids), out=cum[1:])
    if cum[-1] != len(data):  # pragma: no cover - lossless byte-level BPE
        raise ValueError(f"{tok.name}: tokens do not decode to the text; cannot chunk")
    lead = _lead_bytes(data)
    nlead = np.cumsum(lead)
    char_at = nlead - 1  # char_at[b] = index of the character that starts at byte b (lead bytes)
    nlead = nlead - lead  # nlead[b] = characters that start before byte b
    ok = lead[cum]  # token boundaries that are character boundaries
    bidx = np.flatnonzero(ok)  # token indices
    bpos = char_at[cum[bidx]]  # their character positions (strictly increasing, 0 .. len(text))
    n = len(text)
    out = []
    p = 0
    while p < n:
        j = int(np.searchsorted(bpos, p, side="right"))  # first boundary after p
        base = int(bidx[j - 1])  # token index of the boundary at or before p
        hi = int(np.searchsorted(bidx, base + n_max, side="right")) - 1
        found = None
        # (when p is inside a token, the global tokens bound nothing: hi can fall below j; still try j)
        for k in _candidates(max(hi, j), j):
            c = int(bpos[k])
            piece_ids = _enc(tok, text[p:c], allowed)
            if len(piece_ids) <= n_max:
                found = (c, piece_ids)
                break
        if found is None:  # even the next token boundary is too far: cut between characters, starting
            # at the last character boundary within max_tokens tokens of the boundary before p
            b_end = int(cum[min(base + n_max, len(ids))])
            c0 = int(nlead[b_end]) - (0 if lead[b_end] else 1)
            for c in range(min(max(c0, p + 1), int(bpos[j]) - 1), p, -1):
                piece_ids = _enc(tok, text[p:c], allowed)
                if len(piece_ids) <= n_max:
                    found = (c, piece_ids)
                    break
        if found is None:
            raise ValueError(f"the character at index {p} ({text[p]!r}) needs more than max_tokens={n_max} "
                             "tokens on its own")
        c, piece_ids = found
        out.append((text[p:c], piece_ids) if return_ids else text[p:c])
        p = c
    return out


def _orig_index(original: str) -> list[int]:
    """k[i] = index in `original` of the i-th character of its surrogate-repaired form (plus the end)."""
    k, i, n = [], 0, len(original)
    while i < n:
        k.append(i)
        c = ord(original[i])
        i += 2 if 0xD800 <= c < 0xDC00 and i + 1 < n and 0xDC00 <= ord(original[i + 1]) < 0xE000 else 1
    k.append(n)
    return k


def _spans_of(chunks: list) -> list:
    out, pos = [], 0
    for c, ids in chunks:
        out.append((pos, pos + len(c), ids))
        pos += len(c)
    return out


def _candidates(hi: int, lo: int):
    """Boundary indices to try, latest first: hi, hi-1, ..., hi-7, then halving the distance to lo."""
    k, tried = hi, 0
    while k >= lo:
        yield k
        if k == lo:
            return
        tried += 1
        k = k - 1 if tried < 8 else lo + (k - lo) // 2
