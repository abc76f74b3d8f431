"""`Encoding`: tiktoken's class, running on a compiled fstok BPE tokenizer (`fstok.bpe.BPETokenizer`).

The argument handling (allowed / disallowed special tokens, batch shapes) is tiktoken 0.14's, so calls
give tiktoken's results and raise tiktoken's exception types; the work runs in fstok's C runtime.
`Encoding(name=, pat_str=, mergeable_ranks=, special_tokens=)` compiles the vocabulary with fstok; the
artifact is cached under the content hash of its arguments (fstok.registry.cache_dir()/tiktoken/), so
building the same encoding again only hashes the arguments and maps the cached file.

Docstrings and argument handling follow tiktoken 0.14's `tiktoken/core.py`
(MIT License, Copyright (c) 2022 OpenAI, Shantanu Jain).
"""
from __future__ import annotations

import bisect
import functools
import gc
import hashlib
import json
import operator
import os
import threading
from collections.abc import Sequence as _SequenceABC
from typing import TYPE_CHECKING, AbstractSet, Collection, Literal, NoReturn, Sequence

from ..bpe import raise_disallowed_special_token as _raise_disallowed

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ..bpe import BPETokenizer

_U32 = 1 << 32
_NONE = 0xFFFFFFFF
# Rust's char::is_whitespace (the Unicode White_Space property), which tiktoken's unstable-token
# search uses; Python's str.isspace differs (it also accepts U+001C..U+001F)
_WHITE_SPACE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)


class Encoding:
    def __init__(
        self,
        name: str,
        *,
        pat_str: str,
        mergeable_ranks: dict[bytes, int],
        special_tokens: dict[str, int],
        explicit_n_vocab: int | None = None,
    ):
        """Creates an Encoding object (compiled with fstok; cached by content).

        Args:
            name: The name of the encoding. Encodings with different special tokens should have
                different names.
            pat_str: A regex pattern string that is used to split the input text.
            mergeable_ranks: A dictionary mapping mergeable token bytes to their ranks. The ranks
                must correspond to merge priority.
            special_tokens: A dictionary mapping special token strings to their token values.
            explicit_n_vocab: The number of tokens in the vocabulary. If provided, it is checked
                that the number of mergeable tokens and special tokens is equal to this number.
        """
        self.name = name
        self._pat_str = pat_str
        self._ranks = mergeable_ranks
        self._special_tokens = special_tokens

        self.max_token_value = max(max(mergeable_ranks.values()), max(special_tokens.values(), default=0))
        if explicit_n_vocab:
            assert len(mergeable_ranks) + len(special_tokens) == explicit_n_vocab
            assert self.max_token_value == explicit_n_vocab - 1

        self._special_token_values = set(self._special_tokens.values())
        self._set_tokenizer(_compiled(name, pat_str, mergeable_ranks, special_tokens))

    @classmethod
    def _from_tokenizer(cls, tok: "BPETokenizer", name: str | None = None) -> "Encoding":
        """An Encoding over an already compiled fstok BPE tokenizer (tiktoken semantics)."""
        if getattr(tok, "_semantics", None) != "tiktoken":
            raise TypeError(f"{tok!r} is not a tiktoken-style BPE tokenizer (HF tokenizer.json models have their own face)")
        self = cls.__new__(cls)
        self.name = tok.name if name is None else name
        self._pat_str = tok.pattern
        self._ranks = None  # built from the artifact when first read
        self._special_tokens = tok.special_tokens
        self.max_token_value = tok.max_token_value
        self._special_token_values = set(self._special_tokens.values())
        self._set_tokenizer(tok)
        return self

    def _set_tokenizer(self, tok: "BPETokenizer") -> None:
        self._tok = tok
        self._model = tok._model
        self._ranks_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<Encoding {self.name!r}>"

    # ====================
    # Encoding
    # ====================

    def encode_ordinary(self, text: str) -> list[int]:
        """Encodes a string into tokens, ignoring special tokens.

        This is equivalent to `encode(text, disallowed_special=())` (but slightly faster).

        ```
        >>> enc.encode_ordinary("hello world")
        [31373, 995]
        """
        if not isinstance(text, str):
            raise TypeError(f"'{type(text).__name__}' object is not an instance of 'str'")
        return self._tok._run(text, frozenset(), 0)[0]

    def encode(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = set(),  # noqa: B006
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> list[int]:
        """Encodes a string into tokens.

        By default, encode raises ValueError on text that corresponds to a special token.
        - `disallowed_special=()` encodes such text as ordinary text;
        - `allowed_special="all"` (or a set of special tokens) encodes it as special tokens.

        ```
        >>> enc.encode("hello world")
        [31373, 995]
        >>> enc.encode("<|endoftext|>", allowed_special={"<|endoftext|>"})
        [50256]
        >>> enc.encode("<|endoftext|>", allowed_special="all")
        [50256]
        >>> enc.encode("<|endoftext|>")
        # Raises ValueError
        >>> enc.encode("<|endoftext|>", disallowed_special=())
        [27, 91, 437, 1659, 5239, 91, 29]
        ```
        """
        allowed = self._checked_special(text, allowed_special, disallowed_special)
        return self._tok._run(text, allowed, 0)[0]

    def _checked_special(self, text, allowed_special, disallowed_special) -> frozenset:
        """tiktoken's special-token argument handling: raises ValueError for disallowed special text,
        TypeError for argument shapes tiktoken rejects; returns the allowed set."""
        if allowed_special == "all":
            allowed_special = self.special_tokens_set
        if disallowed_special == "all":
            disallowed_special = self._disallowed_all(allowed_special)
        if not isinstance(text, str):
            raise TypeError(f"expected string or buffer, got {type(text).__name__}")
        if disallowed_special:
            if not isinstance(disallowed_special, frozenset):
                disallowed_special = frozenset(disallowed_special)
            self._check_disallowed(text, disallowed_special)
        return self._allowed(allowed_special)

    def _check_disallowed(self, text: str, disallowed: frozenset) -> None:
        # special tokens share a prefix ("<|"): text without it has none of them (one search instead of one
        # per token, or a 1,100-way regex for o200k_harmony)
        if len(disallowed) > 1:
            cache = self.__dict__.setdefault("_prefix_of", {})
            p = cache.get(disallowed)
            if p is None:
                if len(cache) > 16:
                    cache.clear()
                p = cache[disallowed] = os.path.commonprefix(list(disallowed))
            if p and p not in text:
                return
        self._tok._check_disallowed(text, disallowed)

    def _all_specials(self) -> frozenset:
        fs = self.__dict__.get("_all_specials_fs")
        if fs is None:
            fs = self.__dict__["_all_specials_fs"] = frozenset(self._special_tokens)
        return fs

    def _disallowed_all(self, allowed_special):
        """`special_tokens_set - allowed_special` (tiktoken's "all"); the common cases reuse one frozenset, so
        an encoding with many special tokens (o200k_harmony: 1,100) does not rebuild and rehash it per call."""
        if allowed_special is self.special_tokens_set:
            return frozenset()
        if type(allowed_special) in (set, frozenset) and not allowed_special:
            return self._all_specials()
        return self.special_tokens_set - allowed_special

    def _allowed(self, allowed_special) -> frozenset:
        if allowed_special is self.special_tokens_set:
            return self._all_specials()
        return _allowed_set(allowed_special)

    def encode_to_numpy(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = set(),  # noqa: B006
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> "npt.NDArray[np.uint32]":
        """Encodes a string into tokens, returning a numpy array (no Python int per token)."""
        import numpy as np

        allowed = self._checked_special(text, allowed_special, disallowed_special)
        if not text.isascii():
            text.encode("utf-8")  # tiktoken rejects lone surrogates here (UnicodeEncodeError)
        return np.frombuffer(self._tok._run(text, allowed, 1)[0], dtype=np.uint32)

    def encode_ordinary_batch(self, text: list[str], *, num_threads: int = 8) -> list[list[int]]:
        """Encodes a list of strings into tokens, in parallel, ignoring special tokens.

        ```
        >>> enc.encode_ordinary_batch(["hello world", "goodbye world"])
        [[31373, 995], [11274, 16390, 995]]
        ```
        """
        texts = list(text)
        for t in texts:
            if not isinstance(t, str):
                raise TypeError(f"'{type(t).__name__}' object is not an instance of 'str'")
        return self._tok.encode_batch(texts, num_threads=num_threads, disallowed_special=())

    def encode_batch(
        self,
        text: list[str],
        *,
        num_threads: int = 8,
        allowed_special: Literal["all"] | AbstractSet[str] = set(),  # noqa: B006
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> list[list[int]]:
        """Encodes a list of strings into tokens, in parallel (fstok's C threads).

        See `encode` for `allowed_special` and `disallowed_special`.

        ```
        >>> enc.encode_batch(["hello world", "goodbye world"])
        [[31373, 995], [11274, 16390, 995]]
        ```
        """
        if allowed_special == "all":
            allowed_special = self.special_tokens_set
        if disallowed_special == "all":
            disallowed_special = self._disallowed_all(allowed_special)
        if not isinstance(disallowed_special, frozenset):
            disallowed_special = frozenset(disallowed_special)
        texts = list(text)
        if not texts:
            return []
        # tiktoken encodes the texts in order, so the first bad text (or argument) raises
        allowed = self._checked_special(texts[0], allowed_special, disallowed_special)
        check = self._check_disallowed
        for t in texts:
            if not isinstance(t, str):
                raise TypeError(f"expected string or buffer, got {type(t).__name__}")
            if disallowed_special:
                check(t, disallowed_special)
        return self._tok.encode_batch(texts, num_threads=num_threads, allowed_special=allowed, disallowed_special=())

    def encode_with_unstable(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = set(),  # noqa: B006
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> tuple[list[int], list[list[int]]]:
        """Encodes a string into stable tokens and possible completion sequences.

        Note that the stable tokens will only represent a substring of `text`.
        See `encode` for `allowed_special` and `disallowed_special`.  This API should itself be
        considered unstable (as in tiktoken).

        ```
        >>> stable_tokens, completions = enc.encode_with_unstable(text)
        >>> assert text.encode().startswith(enc.decode_bytes(stable_tokens))
        >>> assert all(enc.decode_bytes(stable_tokens + seq).startswith(text.encode()) for seq in completions)
        ```
        """
        allowed = self._checked_special(text, allowed_special, disallowed_special)
        text.encode("utf-8")  # tiktoken rejects lone surrogates here (UnicodeEncodeError)
        tokens, last = self._encode_last_piece(text, allowed)
        if last == 0:
            return tokens, []
        last = self._increase_last_piece_token_len(tokens, last)
        unstable = self.decode_bytes(tokens[len(tokens) - last:])
        del tokens[len(tokens) - last:]
        if not unstable:
            return tokens, []
        # a piece of a 200k vocabulary can have 10^6 completions: tuples and lists, none in a cycle, over
        # which the cyclic GC would pass again and again while they are made (half the call's time)
        gc_was = gc.isenabled()
        gc.disable()
        try:
            return tokens, self._completions(unstable)
        finally:
            if gc_was:
                gc.enable()

    def _completions(self, unstable: bytes) -> list[list[int]]:
        """encode_with_unstable's completion sequences of the unstable bytes (tiktoken's algorithm)."""
        completions: set[tuple[int, ...]] = set()
        sorted_bytes = self._sorted_token_bytes()
        ranks = self._mergeable_ranks
        lo, hi = _prefix_range(sorted_bytes, unstable)
        completions.update((ranks[b],) for b in sorted_bytes[lo:hi])
        # each split of the unstable bytes into a prefix and a token starting with the rest, encoded; a piece
        # of a 200k vocabulary can have 10^5 of them, so the valid UTF-8 ones are encoded in one batch call
        texts: list[str] = []
        encoded_raw: list[list[int]] = []
        for i in range(1, len(unstable)):
            prefix, suffix = unstable[:i], unstable[i:]
            lo, hi = _prefix_range(sorted_bytes, suffix)
            for b in sorted_bytes[lo:hi]:
                possibility = prefix + b
                try:
                    texts.append(possibility.decode("utf-8"))
                except UnicodeDecodeError:
                    encoded_raw.append(self._bpe(possibility))
        if texts:
            encoded_raw += self._tok.encode_batch(texts, num_threads=1, disallowed_special=())
        blen = self._rank_byte_lens()
        for encoded in encoded_raw:
            seq: list[int] = []
            seq_len = 0
            for token in encoded:
                seq.append(token)
                seq_len += blen[token]
                if seq_len >= len(unstable):
                    break
            completions.add(tuple(seq))
        # a whitespace character at the end can gain a split before it (\s+(?!\S)): both halves are possible
        if len(unstable) > 1:
            ch, size = _decode_last_utf8(unstable)
            if len(unstable) - size > 0 and ch is not None and ch in _WHITE_SPACE:
                completions.add(tuple(self._bpe(unstable[:-size]) + self._bpe(unstable[-size:])))
        return [list(c) for c in completions]

    def encode_single_token(self, text_or_bytes: str | bytes) -> int:
        """Encodes text corresponding to a single token to its token value.

        NOTE: this will encode all special tokens.

        Raises `KeyError` if the token is not in the vocabulary.

        ```
        >>> enc.encode_single_token("hello")
        31373
        ```
        """
        if isinstance(text_or_bytes, str):
            text_or_bytes = text_or_bytes.encode("utf-8")
        if not isinstance(text_or_bytes, bytes):
            raise TypeError(f"'{type(text_or_bytes).__name__}' object is not an instance of 'bytes'")
        tid = self._tok._token_id_for_bytes(text_or_bytes)
        if tid is not None:
            return tid
        try:
            s = text_or_bytes.decode("utf-8")
        except UnicodeDecodeError:
            s = None
        if s is not None and s in self._special_tokens:
            return self._special_tokens[s]
        raise KeyError(text_or_bytes)

    # ====================
    # Decoding
    # ====================

    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        """Decodes a list of tokens into bytes.

        ```
        >>> enc.decode_bytes([31373, 995])
        b'hello world'
        ```
        """
        t = type(tokens)
        if t is list or t is tuple:
            try:
                return self._model.decode_bytes(tokens)
            except (TypeError, KeyError):
                pass  # the slow path below raises tiktoken's exception
        elif hasattr(tokens, "__array__") and hasattr(tokens, "tolist"):
            tokens = tokens.tolist()
            if type(tokens) is list:
                try:
                    return self._model.decode_bytes(tokens)
                except (TypeError, KeyError):
                    pass
        ids = _rank_vec(tokens)
        try:
            return self._model.decode_bytes(ids)
        except KeyError as e:
            raise KeyError(f"Invalid token for decoding: {e.args[0]}") from None

    def decode(self, tokens: Sequence[int], errors: str = "replace") -> str:
        """Decodes a list of tokens into a string.

        WARNING: the default behaviour of this function is lossy, since decoded bytes are not
        guaranteed to be valid UTF-8. You can control this behaviour using the `errors` parameter,
        for instance, setting `errors=strict`.

        ```
        >>> enc.decode([31373, 995])
        'hello world'
        ```
        """
        return self.decode_bytes(tokens).decode("utf-8", errors=errors)

    def decode_single_token_bytes(self, token: int) -> bytes:
        """Decodes a token into bytes.

        NOTE: this will decode all special tokens.

        Raises `KeyError` if the token is not in the vocabulary.

        ```
        >>> enc.decode_single_token_bytes(31373)
        b'hello'
        ```
        """
        t = _rank(token)
        try:
            return self._model.decode_bytes([t])
        except KeyError:
            raise KeyError(str(t)) from None

    def decode_tokens_bytes(self, tokens: Sequence[int]) -> list[bytes]:
        """Decodes a list of tokens into a list of bytes.

        Useful for visualising tokenisation.
        >>> enc.decode_tokens_bytes([31373, 995])
        [b'hello', b' world']
        """
        return [self.decode_single_token_bytes(token) for token in tokens]

    def decode_with_offsets(self, tokens: Sequence[int]) -> tuple[str, list[int]]:
        """Decodes a list of tokens into a string and a list of offsets.

        Each offset is the index into text corresponding to the start of each token.
        If UTF-8 character boundaries do not line up with token boundaries, the offset is the index
        of the first character that contains bytes from the token.

        This raises if given tokens that decode to invalid UTF-8 (as in tiktoken).

        >>> enc.decode_with_offsets([31373, 995])
        ('hello world', [0, 5])
        """
        token_bytes = self.decode_tokens_bytes(tokens)

        text_len = 0
        offsets = []
        for token in token_bytes:
            offsets.append(max(0, text_len - (0x80 <= token[0] < 0xC0)))
            text_len += sum(1 for c in token if not 0x80 <= c < 0xC0)

        text = b"".join(token_bytes).decode("utf-8", errors="strict")
        return text, offsets

    def decode_batch(
        self, batch: Sequence[Sequence[int]], *, errors: str = "replace", num_threads: int = 8
    ) -> list[str]:
        """Decodes a batch (list of lists of tokens) into a list of strings."""
        if not isinstance(num_threads, int) or num_threads <= 0:
            raise ValueError("max_workers must be greater than 0")
        return [self.decode(t, errors=errors) for t in batch]

    def decode_bytes_batch(self, batch: Sequence[Sequence[int]], *, num_threads: int = 8) -> list[bytes]:
        """Decodes a batch (list of lists of tokens) into a list of bytes."""
        if not isinstance(num_threads, int) or num_threads <= 0:
            raise ValueError("max_workers must be greater than 0")
        return [self.decode_bytes(t) for t in batch]

    # ====================
    # Miscellaneous
    # ====================

    def token_byte_values(self) -> list[bytes]:
        """Returns the list of all token byte values (the mergeable tokens, sorted)."""
        return list(self._sorted_token_bytes())

    @property
    def eot_token(self) -> int:
        return self._special_tokens["<|endoftext|>"]

    @functools.cached_property
    def special_tokens_set(self) -> set[str]:
        return set(self._special_tokens.keys())

    def is_special_token(self, token: int) -> bool:
        assert isinstance(token, int)
        return token in self._special_token_values

    @property
    def n_vocab(self) -> int:
        """For backwards compatibility. Prefer to use `enc.max_token_value + 1`."""
        return self.max_token_value + 1

    @property
    def _mergeable_ranks(self) -> dict[bytes, int]:
        """token bytes -> rank: the dict this Encoding was built from, or read back from the artifact."""
        r = self._ranks
        if r is None:
            with self._ranks_lock:
                if self._ranks is None:
                    tab = self._tok._tables
                    off, arena, kinds = tab["dec_off"], tab["dec_bytes"], tab["dec_kind"]
                    import numpy as np

                    ids = np.nonzero(kinds == 1)[0].tolist()
                    offs = off.tolist()
                    raw = arena.tobytes()
                    self._ranks = {raw[offs[i] : offs[i + 1]]: i for i in ids}
                r = self._ranks
        return r

    @_mergeable_ranks.setter
    def _mergeable_ranks(self, value: dict[bytes, int]) -> None:
        self._ranks = value

    # ====================
    # Private
    # ====================

    def _encode_single_piece(self, text_or_bytes: str | bytes) -> list[int]:
        """Encodes text corresponding to bytes without a regex split.

        NOTE: this will not encode any special tokens.

        ```
        >>> enc._encode_single_piece("helloqqqq")
        [31373, 38227, 38227]
        ```
        """
        if isinstance(text_or_bytes, str):
            text_or_bytes = text_or_bytes.encode("utf-8")
        if not isinstance(text_or_bytes, bytes):
            raise TypeError(f"'{type(text_or_bytes).__name__}' object is not an instance of 'bytes'")
        return self._bpe(text_or_bytes)

    def _encode_only_native_bpe(self, text: str) -> list[int]:
        """Encodes a string into tokens, but do regex splitting in Python."""
        # `regex` compiles pat_str (\p classes, possessive quantifiers) as tiktoken does here
        import regex

        _unused_pat = regex.compile(self._pat_str)
        ret = []
        for piece in regex.findall(_unused_pat, text):
            ret.extend(self._bpe(piece.encode("utf-8")))
        return ret

    def _encode_bytes(self, text: bytes) -> list[int]:
        """Encodes bytes that may not be valid UTF-8: the valid prefix as text, the rest by BPE
        together with the last piece of the prefix (tiktoken's `_encode_bytes`)."""
        if not isinstance(text, bytes):
            raise TypeError(f"'{type(text).__name__}' object is not an instance of 'bytes'")
        try:
            return self.encode_ordinary(text.decode("utf-8"))
        except UnicodeDecodeError as e:
            valid = e.start
        tokens, last = self._encode_last_piece(text[:valid].decode("utf-8"), frozenset())
        last = self._increase_last_piece_token_len(tokens, last)
        if tokens and last > 0:
            unstable = self.decode_bytes(tokens[len(tokens) - last:]) + text[valid:]
            del tokens[len(tokens) - last:]
        else:
            unstable = text[valid:]
        if unstable:
            tokens.extend(self._bpe(unstable))
        return tokens

    def _bpe(self, piece: bytes) -> list[int]:
        """BPE of one piece of bytes, no regex split (tiktoken's byte_pair_encode; a piece that is a
        token is that token)."""
        if not piece:
            return []
        import numpy as np

        spans = np.array([0, len(piece), _NONE], dtype=np.uint32)
        return self._model.encode_spans(piece, spans.tobytes(), 0)

    def _encode_last_piece(self, text: str, allowed: frozenset) -> tuple[list[int], int]:
        """(encode(text) with `allowed` specials, number of tokens of the last regex piece after the
        last special token; 0 when the text ends in a special token or is empty)."""
        tokens = self._tok._run(text, allowed, 0)[0]
        start = 0
        specials = [s for s in allowed if s in self._special_tokens]
        if specials:
            for m in self._tok._special_regex(frozenset(specials)).finditer(text):
                start = m.end()
        tail = text[start:]
        if not tail:
            return tokens, 0
        spans = self._piece_spans(tail)
        if not spans:
            return tokens, 0
        return tokens, len(self._bpe(tail[spans[-1][0] : spans[-1][1]].encode("utf-8")))

    def _piece_spans(self, text: str) -> list[tuple[int, int]]:
        """The split pattern's pieces of text (character offsets), by the pre-tokenizer encoding uses: the
        artifact's compiled DFA (its Unicode tables are tiktoken's), else the `regex` module."""
        cp = self.__dict__.get("_pieces")
        if cp is None:
            cp = self._tok._pattern or False  # the compiled pre-tokenizer (C spanner), when the artifact has one
            self.__dict__["_pieces"] = cp
        if cp:
            return cp.spans(text)
        flat: list[int] = []
        self._tok._spanner.char_spans(text, 0, flat)
        return list(zip(flat[::2], flat[1::2]))

    def _increase_last_piece_token_len(self, tokens: list[int], last: int) -> int:
        # regex splits of trailing whitespace are unstable (e.g. cl100k's \s*[\r\n]+ turns "\n" + " "
        # into "\n \n"): whitespace-only tokens before the last piece count as unstable too
        def all_space(token: int) -> bool:
            if token in self._special_token_values:
                return False
            try:
                b = self.decode_single_token_bytes(token)
            except KeyError:
                return False
            return all(c in b" \n\t" for c in b)

        if last > 0 and all_space(tokens[len(tokens) - last]):
            while last < len(tokens) and all_space(tokens[len(tokens) - last - 1]):
                last += 1
        return last

    def _rank_byte_lens(self) -> list[int]:
        """rank -> its token's number of bytes (0 where no token has the rank)."""
        s = self.__dict__.get("_byte_lens")
        if s is None:
            ranks = self._mergeable_ranks
            s = [0] * (max(ranks.values(), default=-1) + 1)
            for b, r in ranks.items():
                s[r] = len(b)
            self.__dict__["_byte_lens"] = s
        return s

    def _sorted_token_bytes(self) -> list[bytes]:
        s = self.__dict__.get("_sorted_bytes")
        if s is None:
            s = sorted(self._mergeable_ranks)
            self.__dict__["_sorted_bytes"] = s
        return s

    # ====================
    # Pickling and hashing
    # ====================

    def __reduce__(self):
        # registered encodings pickle by name (as in tiktoken); the artifact digest makes the pickle,
        # and so HF datasets' fingerprint, change when the compiled tables do
        reg = _REGISTRY
        if reg is not None and self is reg.ENCODINGS.get(self.name):
            return (reg._registered, (self.name, _digest(self._tok)))
        return (_from_artifact, (self.name, self._tok.to_bytes()))


#: fstok.tiktoken.registry, which imports this module and sets this when it is imported (an Encoding can be
#: registered only there, so while it is None nothing is registered)
_REGISTRY = None

#: the tiktoken release whose API this package follows (fstok.tiktoken.__version__)
TIKTOKEN_VERSION = "0.14.0"


def _from_artifact(name: str, data: bytes) -> Encoding:
    from .._load import loads

    return Encoding._from_tokenizer(loads(data), name)


def _digest(tok: "BPETokenizer") -> str:
    # the header holds the payload's crc32 and the sources' sha256: it identifies the artifact
    return hashlib.sha256(bytes(memoryview(tok._art.buffer)[:128])).hexdigest()


def _allowed_set(allowed_special) -> frozenset:
    # tiktoken hands allowed_special to Rust as a set of str
    if isinstance(allowed_special, frozenset):
        allowed = allowed_special
    elif isinstance(allowed_special, (set, frozenset)):
        allowed = frozenset(allowed_special)
    else:
        raise TypeError(f"'{type(allowed_special).__name__}' object is not an instance of 'set'")
    for s in allowed:
        if not isinstance(s, str):
            raise TypeError(f"'{type(s).__name__}' object is not an instance of 'str'")
    return allowed


def _prefix_range(sorted_bytes: list[bytes], p: bytes) -> tuple[int, int]:
    """[lo, hi): the entries of sorted_bytes that start with p (those from p up to the first byte string
    after every continuation of p)."""
    lo = bisect.bisect_left(sorted_bytes, p)
    q = p.rstrip(b"\xff")
    if not q:
        return lo, len(sorted_bytes)
    return lo, bisect.bisect_left(sorted_bytes, q[:-1] + bytes((q[-1] + 1,)), lo)


def _rank(x) -> int:
    v = operator.index(x)
    if not 0 <= v < _U32:
        raise OverflowError("out of range integral type conversion attempted")
    return v


def _rank_vec(tokens) -> list[int]:
    """tiktoken's conversion of a token sequence to u32 ranks (its TypeError / OverflowError)."""
    if isinstance(tokens, str):
        raise TypeError("Can't extract `str` to `Vec`")
    if isinstance(tokens, dict) or not (isinstance(tokens, _SequenceABC) or hasattr(type(tokens), "__getitem__")):
        raise TypeError(f"'{type(tokens).__name__}' object is not an instance of 'Sequence'")
    return [_rank(x) for x in tokens]


def _decode_last_utf8(b: bytes) -> tuple[str | None, int]:
    """The last UTF-8 character of b and its length in bytes ((None, 1) if b does not end in one)."""
    for k in range(1, min(4, len(b)) + 1):
        try:
            s = b[-k:].decode("utf-8")
        except UnicodeDecodeError:
            continue
        if len(s) == 1:
            return s, k
    return None, 1


# ---------------------------------------------------------------- compiling and caching

_MEMO: dict[str, "BPETokenizer"] = {}
_MEMO_LOCK = threading.Lock()


def _content_key(pat_str: str, mergeable_ranks: dict, special_tokens: dict) -> str:
    """sha256 of what the compiled tables depend on (and of the fstok build that compiles them).
    Raises tiktoken's TypeError / OverflowError for arguments of the wrong type or range."""
    import numpy as np

    from .. import __version__
    from ..artifact import FORMAT_VERSION
    from ..registry import _code_fingerprint

    if not isinstance(pat_str, str):
        raise TypeError(f"'{type(pat_str).__name__}' object is not an instance of 'str'")
    if not isinstance(mergeable_ranks, dict):
        raise TypeError(f"'{type(mergeable_ranks).__name__}' object is not an instance of 'dict'")
    if not isinstance(special_tokens, dict):
        raise TypeError(f"'{type(special_tokens).__name__}' object is not an instance of 'dict'")
    toks = list(mergeable_ranks)
    for t in toks:
        if type(t) is not bytes:
            if isinstance(t, str):
                raise TypeError("Can't extract `str` to `Vec`")
            if not isinstance(t, bytes):
                raise TypeError(f"'{type(t).__name__}' object is not an instance of 'bytes'")
    vals = [_rank(v) for v in mergeable_ranks.values()]
    for k, v in special_tokens.items():
        if not isinstance(k, str):
            raise TypeError(f"'{type(k).__name__}' object is not an instance of 'str'")
        _rank(v)
    h = hashlib.sha256()
    h.update(f"fstok.tiktoken|{FORMAT_VERSION}|{__version__}|{_code_fingerprint()}".encode())
    h.update(pat_str.encode("utf-8", "surrogatepass") + b"\0")
    h.update(np.fromiter(map(len, toks), dtype=np.int64, count=len(toks)).tobytes())
    h.update(b"".join(toks))
    h.update(np.array(vals, dtype=np.int64).tobytes())
    h.update(json.dumps([[k, int(v)] for k, v in special_tokens.items()]).encode())
    return h.hexdigest()[:32]


def _compiled(name: str, pat_str: str, mergeable_ranks: dict, special_tokens: dict) -> "BPETokenizer":
    """The fstok tokenizer for these arguments: from this process's memo, the on-disk cache, or compiled."""
    key = _content_key(pat_str, mergeable_ranks, special_tokens)
    tok = _MEMO.get(key)
    if tok is not None:
        return tok
    from .. import api
    from ..artifact import ArtifactError
    from ..bpe import BPETokenizer
    from ..registry import cache_dir

    path = os.path.join(cache_dir(), "tiktoken", f"{key}.fst")
    if os.path.exists(path):
        try:
            tok = api.load(path)
        except ArtifactError:
            tok = None  # a damaged cache entry is rebuilt
    if tok is None:
        tok = BPETokenizer.from_ranks(dict(mergeable_ranks), pat_str, dict(special_tokens), name=name)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tok.save(path)
        except OSError:
            pass  # an unwritable cache only costs the next process a compile
    with _MEMO_LOCK:
        if len(_MEMO) > 32:
            _MEMO.clear()
        _MEMO[key] = tok
    return tok


def raise_disallowed_special_token(token: str) -> NoReturn:
    _raise_disallowed(token)
