"""Streaming (incremental) decode: text for token ids as they are generated.

    stream = tok.decode_stream()            # or fstok.DecodeStream(tok); tok: BPE or WordPiece
    for tid in generated_ids:
        print(stream.step(tid), end="")     # "" while a UTF-8 character is still incomplete
    print(stream.flush())                   # the end of the stream: a dangling partial character

The contract, for every sequence of valid ids cut into calls in any way:

    stream.step_many(a) + stream.step(b) + ... + stream.flush() == tok.decode(a + [b] + ...)

Byte-level BPE: the bytes of the tokens go through one incremental UTF-8 decoder.  An incomplete trailing
UTF-8 sequence is buffered (never turned into U+FFFD early); bytes that can no longer become a valid
character are replaced by U+FFFD at once, exactly as `bytes.decode("utf-8", errors="replace")` of the
whole stream replaces them (one U+FFFD per maximal invalid subpart).  `flush()` replaces what is left
of an incomplete sequence at the end, as the one-shot decode does.

WordPiece: the decoder (HF's, see `fstok.wordpiece.WordPieceTokenizer.decode`) turns each token into
text on its own (a '##' piece glued to the previous word, any other token after a space, the cleanup
rules applied per token), so the only context is whether any text-producing token came before; each
step emits its token's text at once and `flush()` is always "".

Invalid input raises: TypeError for an id that is not an int (bool is refused too), ValueError for an id
the vocabulary does not have.  A call that raises consumes nothing (step_many checks every id first).
Special tokens are treated as `decode` treats them: a tiktoken-style BPE's `decode` spells them out (so
does the stream unless `skip_special_tokens=True`); WordPiece and tokenizers compiled from a tokenizer.json
drop them (unless `skip_special_tokens=False`).
"""
from __future__ import annotations

import codecs
from typing import Any, Iterable, Optional

__all__ = ["DecodeStream"]


def _check_id(tid: Any) -> int:
    if isinstance(tid, bool) or not _is_int(tid):
        raise TypeError(f"token id must be an int, got {type(tid).__name__} ({tid!r})")
    return int(tid)


def _is_int(x: Any) -> bool:
    if isinstance(x, int):
        return True
    try:  # numpy integers without importing numpy
        import numbers

        return isinstance(x, numbers.Integral)
    except Exception:  # pragma: no cover
        return False


# second-byte ranges of UTF-8 lead bytes (Unicode Table 3-7); later bytes are 80..BF
_SECOND = {**{b: (0x80, 0xBF) for b in range(0xC2, 0xF5)}, 0xE0: (0xA0, 0xBF), 0xED: (0x80, 0x9F),
           0xF0: (0x90, 0xBF), 0xF4: (0x80, 0x8F)}


def _completable(pending: bytes) -> bool:
    """pending (1-3 bytes) is a proper prefix of some well-formed UTF-8 sequence."""
    rng = _SECOND.get(pending[0])
    if rng is None:
        return False
    need = 2 if pending[0] < 0xE0 else 3 if pending[0] < 0xF0 else 4
    if len(pending) >= need:
        return False
    if len(pending) >= 2 and not rng[0] <= pending[1] <= rng[1]:
        return False
    return all(0x80 <= c <= 0xBF for c in pending[2:])


def _as_id_list(ids: Any) -> list[int]:
    if isinstance(ids, (str, bytes, bytearray)):
        raise TypeError("expected a sequence of token ids, got a " + type(ids).__name__)
    if hasattr(ids, "tolist") and hasattr(ids, "dtype"):  # numpy array
        if ids.dtype.kind not in "iu":
            raise TypeError(f"token id array must have an integer dtype, got {ids.dtype}")
        return [int(i) for i in ids.reshape(-1).tolist()]
    try:
        it = iter(ids)
    except TypeError:
        raise TypeError(f"expected a sequence of token ids, got {type(ids).__name__}") from None
    return [_check_id(i) for i in it]


class DecodeStream:
    """Incremental decoder for one stream of token ids (not thread-safe; one per generation).

    ``DecodeStream(tokenizer, *, skip_special_tokens=None, errors="replace", prefill=None)``

    tokenizer: a `fstok.bpe.BPETokenizer` (or anything with `decode_single_token_bytes`, e.g. a tiktoken
        Encoding) or a `fstok.wordpiece.WordPieceTokenizer`.
    skip_special_tokens: None = as the tokenizer's `decode` (tiktoken-style BPE: keep; WordPiece and BPE
        compiled from a tokenizer.json: skip); True/False forces it.
    errors: the UTF-8 error handler of BPE streams ("replace" as `decode`; "strict" raises
        UnicodeDecodeError for invalid bytes once they are known to be invalid; "ignore", ...).
    prefill: ids of the prompt, fed in first (`prefill`); the text they produce is dropped, so the
        stream's output starts with what the generated ids add (an incomplete character at the end of
        the prompt is completed by the first generated ids).
    """

    def __init__(self, tokenizer: Any, *, skip_special_tokens: Optional[bool] = None, errors: str = "replace",
                 prefill: Optional[Iterable[int]] = None):
        if skip_special_tokens is not None and not isinstance(skip_special_tokens, bool):
            raise TypeError(f"skip_special_tokens must be a bool or None, got {type(skip_special_tokens).__name__}")
        if not isinstance(errors, str):
            raise TypeError(f"errors must be a str, got {type(errors).__name__}")
        try:
            codecs.lookup_error(errors)
        except LookupError:
            raise ValueError(f"unknown error handler {errors!r}") from None
        self._tok = tokenizer
        self._errors = errors
        if hasattr(tokenizer, "decode_single_token_bytes"):
            self._byte_level = True
            # None: as the tokenizer's decode (one compiled from a tokenizer.json skips, as HF does)
            self._skip = (getattr(tokenizer, "_semantics", "tiktoken") == "hf") if skip_special_tokens is None \
                else skip_special_tokens
            self._bytes_cache: dict[int, bytes] = {}
            self._specials: frozenset = frozenset()
            if self._skip:
                st = getattr(tokenizer, "special_tokens", None)
                if isinstance(st, dict):
                    self._specials = frozenset(int(v) for v in st.values())
                else:  # a tiktoken Encoding
                    self._specials = frozenset(tokenizer.encode_single_token(s) for s in tokenizer.special_tokens_set)
        elif hasattr(tokenizer, "id_to_token") and hasattr(tokenizer, "decode"):
            self._byte_level = False
            self._skip = True if skip_special_tokens is None else skip_special_tokens
            self._vocab_size = int(getattr(tokenizer, "vocab_size"))
            self._wp_specials = frozenset(getattr(tokenizer, "special_tokens", ()))
        else:
            raise TypeError(f"DecodeStream needs a fstok BPE or WordPiece tokenizer, got {type(tokenizer).__name__}")
        self.reset()
        if prefill is not None:
            self.prefill(prefill)

    # ------------------------------------------------------------------ state

    def reset(self) -> None:
        """Forget everything: buffered bytes, prompt context, the token count."""
        self._dec = codecs.getincrementaldecoder("utf-8")(self._errors) if self._byte_level else None
        self._anchor: Optional[int] = None  # WordPiece: last id that produced text
        self._anchor_text = ""
        self._n = 0

    @property
    def pending_bytes(self) -> bytes:
        """Bytes of an incomplete UTF-8 character held back (always b"" for WordPiece)."""
        if not self._byte_level:
            return b""
        return self._dec.getstate()[0]

    @property
    def num_tokens(self) -> int:
        """How many ids this stream has consumed since it was created or reset (prefill included)."""
        return self._n

    def __repr__(self) -> str:
        kind = "bytes" if self._byte_level else "wordpiece"
        return f"<DecodeStream {kind} tokens={self._n} pending={self.pending_bytes!r}>"

    # ------------------------------------------------------------------ BPE

    def _token_bytes(self, tid: int) -> bytes:
        b = self._bytes_cache.get(tid)
        if b is None:
            if tid < 0:
                raise ValueError(f"invalid token id {tid} (ids are >= 0)")
            try:
                b = self._tok.decode_single_token_bytes(tid)
            except (KeyError, OverflowError, IndexError, ValueError):
                n = getattr(self._tok, "n_vocab", None)
                raise ValueError(f"invalid token id {tid}: not in the vocabulary (n_vocab={n})") from None
            if len(self._bytes_cache) < 1 << 18:
                self._bytes_cache[tid] = b
        return b

    def _decode(self, data: bytes) -> str:
        dec = self._dec
        out = dec.decode(data, False)
        pending = dec.getstate()[0]
        if pending and self._errors != "surrogatepass" and not _completable(pending):
            # CPython holds back ED A0..BF (a surrogate's prefix), which no later byte can make valid:
            # replace it now, as the one-shot decode will (its subparts end inside it)
            out += dec.decode(b"", True)
            dec.reset()
        return out

    def _bytes_of_ids(self, ids: list[int]) -> bytes:
        if self._skip and self._specials:
            ids = [i for i in ids if i not in self._specials]
        if len(ids) > 16 and hasattr(self._tok, "decode_bytes"):
            try:
                return self._tok.decode_bytes(ids)
            except Exception:
                pass  # find and report the bad id below
        return b"".join([self._token_bytes(i) for i in ids])

    # ------------------------------------------------------------------ WordPiece

    def _wp_check(self, tid: int) -> None:
        if not 0 <= tid < self._vocab_size:
            raise ValueError(f"invalid token id {tid}: not in the vocabulary (vocab_size={self._vocab_size})")

    def _wp_step(self, tid: int) -> str:
        tok, skip = self._tok, self._skip
        if self._anchor is None:
            out = tok.decode([tid], skip_special_tokens=skip)
            if not (skip and tok.id_to_token(tid) in self._wp_specials):  # decode counts this token
                self._anchor, self._anchor_text = tid, out
            return out
        both = tok.decode([self._anchor, tid], skip_special_tokens=skip)
        if not both.startswith(self._anchor_text):  # pragma: no cover - the decoder is per token
            raise RuntimeError("WordPiece decoder is not incremental: decode([a, b]) does not extend decode([a])")
        return both[len(self._anchor_text):]

    # ------------------------------------------------------------------ public

    def step(self, token_id: int) -> str:
        """Feed one id; returns the text it completes ("" while a UTF-8 character is still incomplete)."""
        tid = _check_id(token_id)
        if self._byte_level:
            b = self._token_bytes(tid)
            if self._skip and tid in self._specials:
                b = b""
            out = self._decode(b)
        else:
            self._wp_check(tid)
            out = self._wp_step(tid)
        self._n += 1
        return out

    def step_many(self, token_ids: Iterable[int]) -> str:
        """Feed many ids (a list, tuple, iterable or integer numpy array); returns the text they complete.
        Every id is checked before any is consumed."""
        ids = _as_id_list(token_ids)
        if not ids:
            return ""
        if self._byte_level:
            for i in ids:
                if i < 0:
                    raise ValueError(f"invalid token id {i} (ids are >= 0)")
            data = self._bytes_of_ids(ids)
            out = self._decode(data)
        else:
            for i in ids:
                self._wp_check(i)
            out = "".join([self._wp_step(i) for i in ids])
        self._n += len(ids)
        return out

    def prefill(self, token_ids: Iterable[int]) -> str:
        """Feed the prompt's ids: the same as `step_many` (the returned text is the prompt's own, which a
        caller usually already shows and drops).  What matters is the context it leaves: the bytes of an
        incomplete character at the end of the prompt, and (WordPiece) that the next word gets a space."""
        return self.step_many(token_ids)

    def flush(self) -> str:
        """End of the stream: the text of what is still buffered (an incomplete UTF-8 sequence becomes
        U+FFFD with errors="replace", as the one-shot decode does).  Context is kept: ids fed after a
        flush continue the same text (WordPiece spacing); the byte buffer starts empty."""
        if not self._byte_level:
            return ""
        out = self._dec.decode(b"", True)
        self._dec.reset()
        return out
