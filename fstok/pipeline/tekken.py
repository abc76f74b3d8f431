"""Mistral tekken (`tekken.json`): tiktoken-style ranks behind a block of special-token ids.

    tok = fstok.compile("tekken.json")
    tok.encode("Hello")                           # == mistral_common Tekkenizer.encode(s, bos=False, eos=False)
    tok.encode("Hello", add_special_tokens=True)  # with the BOS id first (bos=True, eos=False)
    tok.decode(ids)                               # special ids dropped (mistral-common's default policy)

The file holds `config` (pattern, default_vocab_size, default_num_special_tokens, version), `vocab` (rank,
base64 token_bytes) and optionally `special_tokens` (rank, token_str).  As in mistral-common, the ranks are
cut to default_vocab_size - num_special_tokens, an ordinary token's id is its rank + num_special_tokens, and
the special tokens (listed, else mistral-common's three defaults <unk>, <s>, </s>, padded with
<SPECIAL_i> fillers) take ids 0 .. num_special_tokens - 1.  Special-token text in the input is ordinary
text.  The ranks compile to fstok's byte-level BPE tables (tiktoken semantics, the pattern read as
tiktoken reads it) and run in C.
"""
from __future__ import annotations

import binascii
import json
import os
from typing import Any, Collection, Optional, Sequence, Union

import numpy as np

_DEFAULT_SPECIALS = ("<unk>", "<s>", "</s>")


def _fail(path: str, msg: str) -> ValueError:
    return ValueError(f"{path}: {msg}")


class TekkenTokenizer:
    _fstok_kind = "tekken"

    def __init__(self, inner, n_special: int, specials: list[str], bos_id: int, eos_id: int, name: str):
        self.inner = inner  # fstok.bpe.BPETokenizer over the ranks (ids = ranks)
        self.n_special = n_special
        self.specials = specials
        self.special_tokens = {s: i for i, s in enumerate(specials)}
        self.bos_id, self.eos_id = bos_id, eos_id
        self.name = name
        self.n_vocab = n_special + inner.max_token_value + 1

    def encode(self, text: str, *, add_special_tokens: bool = False,
               allowed_special: Union[str, Collection[str]] = ()) -> list[int]:
        """Ids of text; add_special_tokens puts the BOS id first.  Special-token text is ordinary text (as in
        mistral-common) unless `allowed_special` names it ("all": every special token): then its id."""
        if allowed_special:
            ids = self._encode_allowed(text, allowed_special)
        else:
            ids = self.encode_to_numpy(text).tolist()
        return [self.bos_id] + ids if add_special_tokens else ids

    def _encode_allowed(self, text: str, allowed_special) -> list[int]:
        if isinstance(allowed_special, str) and allowed_special != "all":
            raise TypeError(f"allowed_special must be 'all' or a collection of special tokens, got {allowed_special!r}")
        names = self.special_tokens if allowed_special == "all" else list(allowed_special)
        for s in names:
            if s not in self.special_tokens:
                raise ValueError(f"{s!r} is not a special token of {self.name}")
        from ..literals import LiteralSet

        ids: list[int] = []
        pos = 0
        for a, b in LiteralSet(sorted(set(names))).finditer(text) if names else ():
            if a > pos:
                ids.extend(self.encode_to_numpy(text[pos:a]).tolist())
            ids.append(self.special_tokens[text[a:b]])
            pos = b
        if pos < len(text):
            ids.extend(self.encode_to_numpy(text[pos:]).tolist())
        return ids

    def encode_to_numpy(self, text: str) -> np.ndarray:
        a = self.inner.encode_to_numpy(text, disallowed_special=())
        return a + np.uint32(self.n_special)

    def encode_batch(self, texts: Sequence[str], *, add_special_tokens: bool = False,
                     allowed_special: Union[str, Collection[str]] = ()) -> list[list[int]]:
        return [self.encode(t, add_special_tokens=add_special_tokens, allowed_special=allowed_special) for t in texts]

    def count(self, text: str) -> int:
        return self.inner.count(text)

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """Text of ids; special ids are dropped (skip_special_tokens=False keeps their names)."""
        out: list[str] = []
        run: list[int] = []
        for i in ids:
            i = int(i)
            if i < self.n_special:
                if run:
                    out.append(self.inner.decode(run))
                    run = []
                if not skip_special_tokens:
                    out.append(self.specials[i])
            else:
                run.append(i - self.n_special)
        if run:
            out.append(self.inner.decode(run))
        return "".join(out)

    def to_bytes(self) -> bytes:
        """The artifact (kind "tekken"): the compiled ranks and the special-token block."""
        from .persist import tekken_artifact

        return tekken_artifact(self)

    def save(self, path) -> None:
        from .. import artifact as _art

        _art.save_bytes(path, self.to_bytes())

    @classmethod
    def from_artifact(cls, art) -> "TekkenTokenizer":
        from .persist import load_tekken_artifact

        return load_tekken_artifact(cls, art)

    def __reduce__(self):
        from .._load import loads

        return (loads, (self.to_bytes(),))

    def __repr__(self) -> str:
        return f"<TekkenTokenizer {self.name!r} vocab={self.n_vocab}>"


def _read(path: str):
    with open(path, "rb") as f:
        try:
            return json.loads(f.read().decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise _fail(path, f"not valid JSON ({e})") from None


def load_tekken(path: str, obj: Any = None) -> tuple[dict[bytes, int], str, int, list[str], dict]:
    """obj: the file already parsed (fstok.compile parses it once to recognise it)."""
    if obj is None:
        obj = _read(path)
    cfg = obj.get("config") if isinstance(obj, dict) else None
    vocab = obj.get("vocab") if isinstance(obj, dict) else None
    if not isinstance(cfg, dict) or not isinstance(vocab, list):
        raise _fail(path, "not a tekken file (needs 'config' and a 'vocab' list)")
    for k in ("pattern", "default_vocab_size", "default_num_special_tokens"):
        if k not in cfg:
            raise _fail(path, f"tekken config has no {k!r}")
    for k in ("image", "audio", "multimodal"):
        if obj.get(k):
            raise _fail(path, f"tekken {k!r} settings are not supported")
    n_special = int(cfg["default_num_special_tokens"])
    inner = int(cfg["default_vocab_size"]) - n_special
    if inner <= 0 or inner > len(vocab):
        raise _fail(path, f"default_vocab_size {cfg['default_vocab_size']} does not fit {len(vocab)} ranks + "
                          f"{n_special} special tokens")
    ranks: dict[bytes, int] = {}
    b64 = binascii.a2b_base64
    for i, x in enumerate(vocab[:inner]):
        if not isinstance(x, dict) or x.get("rank") != i or not isinstance(x.get("token_bytes"), str):
            raise _fail(path, f"vocab entry #{i} is not {{'rank': {i}, 'token_bytes': base64}}")
        try:
            ranks[b64(x["token_bytes"])] = i
        except (binascii.Error, ValueError):
            raise _fail(path, f"vocab entry #{i}: token_bytes is not base64") from None
    specials_raw = obj.get("special_tokens")
    if specials_raw is None:
        specials = list(_DEFAULT_SPECIALS)
    else:
        if not isinstance(specials_raw, list):
            raise _fail(path, "special_tokens is not a list")
        specials = []
        for k, s in enumerate(specials_raw):
            if not isinstance(s, dict) or s.get("rank") != k or not isinstance(s.get("token_str"), str):
                raise _fail(path, f"special token #{k} is not {{'rank': {k}, 'token_str': ...}}")
            specials.append(s["token_str"])
    if len(set(specials)) != len(specials) or len(specials) > n_special:
        raise _fail(path, "special tokens are not unique or exceed default_num_special_tokens")
    specials += [f"<SPECIAL_{i}>" for i in range(len(specials), n_special)]
    return ranks, str(cfg["pattern"]), n_special, specials, cfg


def compile_tekken(path: str | os.PathLike, name: Optional[str] = None, *, parsed: Any = None,
                   **options: Any) -> TekkenTokenizer:
    from ..bpe import BPETokenizer

    p = os.fspath(path)
    ranks, pattern, n_special, specials, _ = load_tekken(p, parsed)
    nm = name or os.path.splitext(os.path.basename(p))[0]
    inner = BPETokenizer.from_ranks(ranks, pattern, {}, name=nm, **options)
    idx = {s: i for i, s in enumerate(specials)}
    return TekkenTokenizer(inner, n_special, specials, idx.get("<s>", 1), idx.get("</s>", 2), nm)
