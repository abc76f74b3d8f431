"""TrainedBPE: what `fstok.train_bpe` returns.

A thin wrapper around the trained vocabulary that

  * exports it: ``export(path, format="tiktoken" | "tokenizer.json")``;
  * behaves like every other fstok BPE tokenizer: when `fstok.bpe` is available,
    ``to_tokenizer()`` builds ``fstok.bpe.BPETokenizer.from_ranks(ranks, pattern, special_tokens)`` once
    and ``encode`` / ``decode`` / ``save`` -- and any other attribute this class does not define
    (``__getattr__``) -- go to it;
  * without `fstok.bpe` (or with ``use_fstok=False``), encodes with a small pure-Python rank-based
    BPE (tiktoken's algorithm), which is also the tests' oracle.

Token ids: 0..255 are the single bytes (id == byte value), 256.. the merges in training order,
then the special tokens in the order given.
"""
from __future__ import annotations

import os
from typing import Iterable, Sequence

import regex

from . import export as _export
from .pretok import resolve_pattern
from ..reference.bpe import merge_ranks as _bpe  # the one pure-Python tiktoken merge


class TrainedBPE:
    def __init__(
        self,
        merges: Sequence[tuple[bytes, bytes]],
        special_tokens: Sequence[str] = (),
        pattern: str = "r50k_base",
        name: str = "trained-bpe",
        merge_counts: Sequence[int] | None = None,
        requested_vocab_size: int | None = None,
    ):
        pattern_name, rx = resolve_pattern(pattern)
        self.pattern_name = pattern_name
        self.pattern = rx
        self.name = name
        self.merges: list[tuple[bytes, bytes]] = [(bytes(a), bytes(b)) for a, b in merges]
        self.merge_counts = list(merge_counts) if merge_counts is not None else None
        self.requested_vocab_size = requested_vocab_size
        vocab = [bytes([i]) for i in range(256)]
        ranks = {t: i for i, t in enumerate(vocab)}
        for a, b in self.merges:
            if a not in ranks or b not in ranks:
                raise ValueError(f"merge ({a!r}, {b!r}) uses a token that does not exist yet")
            t = a + b
            if t in ranks:
                raise ValueError(f"merge ({a!r}, {b!r}) creates {t!r}, which already exists")
            ranks[t] = len(vocab)
            vocab.append(t)
        self.vocab: list[bytes] = vocab
        self.ranks: dict[bytes, int] = ranks
        specials = list(dict.fromkeys(special_tokens))
        self.special_tokens: dict[str, int] = {s: len(vocab) + i for i, s in enumerate(specials)}
        self._tok = None
        self._tok_failed = False
        self._cache: dict[bytes, list[int]] = {}
        self._rx = None

    # ----------------------------------------------------------------- info
    @property
    def n_vocab(self) -> int:
        return len(self.vocab) + len(self.special_tokens)

    vocab_size = n_vocab

    def __len__(self) -> int:
        return self.n_vocab

    def __repr__(self) -> str:
        pat = self.pattern_name or "custom regex"
        return f"TrainedBPE(vocab={self.n_vocab}, merges={len(self.merges)}, specials={len(self.special_tokens)}, pattern={pat})"

    # ----------------------------------------------------------------- fstok tokenizer
    def to_tokenizer(self):
        """The fstok BPETokenizer for this vocabulary (built once)."""
        if self._tok is None:
            from ..bpe import BPETokenizer

            self._tok = BPETokenizer.from_ranks(dict(self.ranks), self.pattern, dict(self.special_tokens), name=self.name)
        return self._tok

    def _fstok(self):
        if self._tok is None and not self._tok_failed:
            try:
                self.to_tokenizer()
            except ImportError:
                self._tok_failed = True
        return self._tok

    def __getattr__(self, item):
        if item.startswith("_"):
            raise AttributeError(item)
        tok = self._fstok()
        if tok is None:
            raise AttributeError(f"TrainedBPE has no attribute {item!r} (fstok.bpe is not available)")
        return getattr(tok, item)

    def save(self, path: str | os.PathLike):
        """Write an fstok artifact (via fstok.bpe.BPETokenizer.save)."""
        try:
            tok = self.to_tokenizer()
        except ImportError as e:
            raise RuntimeError(f"saving an fstok artifact needs fstok.bpe ({e}); use export(...) meanwhile") from None
        return tok.save(path)

    # ----------------------------------------------------------------- export
    def export(self, path: str | os.PathLike, format: str = "tiktoken") -> None:  # noqa: A002
        """Write the vocabulary as a `.tiktoken` file or an HF `tokenizer.json`."""
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
        fmt = str(format).lower()
        if fmt in ("tiktoken", ".tiktoken"):
            _export.write_tiktoken(path, self.vocab)
        elif fmt in ("tokenizer.json", "json", "hf", "huggingface"):
            _export.write_tokenizer_json(path, self.vocab, self.merges, self.special_tokens, self.pattern)
        elif fmt in ("fstok", "artifact", "fst"):
            self.save(path)
        else:
            raise ValueError(f"unknown export format {format!r}; use 'tiktoken', 'tokenizer.json' or 'fstok'")

    def export_tiktoken(self, path) -> None:
        self.export(path, format="tiktoken")

    def export_tokenizer_json(self, path) -> None:
        self.export(path, format="tokenizer.json")

    def tokenizer_json(self) -> dict:
        return _export.tokenizer_json_obj(self.vocab, self.merges, self.special_tokens, self.pattern)

    # ----------------------------------------------------------------- encode / decode
    def encode(self, text: str, *args, use_fstok: bool = True, **kw) -> list[int]:
        """Token ids of `text` with tiktoken's semantics (special-token text raises ValueError unless
        allowed_special=... lets it through).  Goes to fstok's BPETokenizer when available, else to
        `encode_py`."""
        if use_fstok:
            tok = self._fstok()
            if tok is not None:
                return tok.encode(text, *args, **kw)
        return self.encode_py(text, **kw)

    def decode(self, ids: Iterable[int], *args, use_fstok: bool = True, **kw) -> str:
        if use_fstok:
            tok = self._fstok()
            if tok is not None:
                return tok.decode(ids, *args, **kw)
        return self.decode_bytes(ids).decode("utf-8", errors=kw.get("errors", "replace"))

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        inv = {i: s.encode("utf-8") for s, i in self.special_tokens.items()}
        out = []
        nv = len(self.vocab)
        for i in ids:
            i = int(i)
            if 0 <= i < nv:
                out.append(self.vocab[i])
            elif i in inv:
                out.append(inv[i])
            else:
                raise ValueError(f"token id {i} is out of range (vocabulary has {self.n_vocab} tokens)")
        return b"".join(out)

    def encode_py(self, text: str, allowed_special=frozenset(), disallowed_special="all") -> list[int]:
        """Reference encoder (tiktoken's API): split at allowed special tokens, pre-tokenize with the
        `regex` module, rank-based BPE.  Disallowed special-token text raises ValueError."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        if self._rx is None:
            self._rx = regex.compile(self.pattern)
        if allowed_special == "all":
            allowed = list(self.special_tokens)
        else:
            allowed = [s for s in allowed_special if s in self.special_tokens]
        if disallowed_special == "all":
            disallowed = [s for s in self.special_tokens if s not in allowed]
        else:
            disallowed = [s for s in disallowed_special if s not in allowed]
        for s in disallowed:
            if s in text:
                raise ValueError(
                    f"text contains the special token {s!r}; pass allowed_special={{{s!r}}} (or 'all') to encode it "
                    "as a special token, or disallowed_special=() to encode it as ordinary text"
                )
        out: list[int] = []
        if allowed:
            srx = regex.compile("|".join(regex.escape(s) for s in sorted(allowed, key=lambda s: (-len(s), s))))
            pos = 0
            for m in srx.finditer(text):
                self._encode_ordinary(text[pos : m.start()], out)
                out.append(self.special_tokens[m.group()])
                pos = m.end()
            self._encode_ordinary(text[pos:], out)
        else:
            self._encode_ordinary(text, out)
        return out

    def _encode_ordinary(self, text: str, out: list[int]) -> None:
        ranks, cache = self.ranks, self._cache
        for piece in self._rx.findall(text):
            if not piece:
                continue
            b = piece.encode("utf-8")
            r = ranks.get(b)
            if r is not None:
                out.append(r)
                continue
            ids = cache.get(b)
            if ids is None:
                ids = _bpe(b, ranks)
                if len(cache) < 100_000:
                    cache[b] = ids
            out.extend(ids)


