"""The encodings tiktoken ships, from the rank files bundled with fstok (fstok/data/tiktoken, offline).

`ENCODING_CONSTRUCTORS` has tiktoken's shape (name -> function returning `Encoding` keyword arguments),
so `Encoding(**ENCODING_CONSTRUCTORS[name]())` builds the encoding the generic way.  `get_encoding`
takes a faster route for these names: fstok's registry (`fstok.get_encoding`), which caches the
compiled artifact.  gpt2's ranks are r50k_base's (tiktoken reads the same ranks from GPT-2's
vocab.bpe / encoder.json); o200k_harmony is o200k_base's ranks with the harmony special tokens.
Patterns and special tokens: fstok.loaders.bpe_source.OPENAI_ENCODINGS (tiktoken's definitions).
"""
from __future__ import annotations

import os

from ..loaders.bpe_source import ENDOFPROMPT, ENDOFTEXT, FIM_MIDDLE, FIM_PREFIX, FIM_SUFFIX  # noqa: F401
from ..loaders.bpe_source import OPENAI_ENCODINGS, R50K_PATTERN
from ..registry import ENCODINGS as _FSTOK_ENCODINGS
from .load import load_tiktoken_bpe

r50k_pat_str = R50K_PATTERN

#: vocabulary sizes tiktoken checks with explicit_n_vocab
_EXPLICIT_N_VOCAB = {"gpt2": 50257, "r50k_base": 50257, "p50k_base": 50281}


def _constructor(name: str):
    def construct() -> dict:
        spec = _FSTOK_ENCODINGS[name]
        pattern, specials = OPENAI_ENCODINGS[name]
        (path,) = spec.paths()
        kw = {
            "name": name,
            "pat_str": pattern,
            "mergeable_ranks": load_tiktoken_bpe(path, expected_hash=spec.options.get("sha256")),
            "special_tokens": dict(specials),
        }
        if name in _EXPLICIT_N_VOCAB:
            kw["explicit_n_vocab"] = _EXPLICIT_N_VOCAB[name]
        return kw

    construct.__name__ = construct.__qualname__ = name
    construct.__doc__ = f"Keyword arguments of tiktoken's {name!r} encoding, from the bundled rank file."
    construct._fstok_bundled = name  # get_encoding builds these through fstok's registry cache
    return construct


ENCODING_CONSTRUCTORS = {
    name: _constructor(name)
    for name in ("gpt2", "r50k_base", "p50k_base", "p50k_edit", "cl100k_base", "o200k_base", "o200k_harmony")
}
gpt2 = ENCODING_CONSTRUCTORS["gpt2"]
r50k_base = ENCODING_CONSTRUCTORS["r50k_base"]
p50k_base = ENCODING_CONSTRUCTORS["p50k_base"]
p50k_edit = ENCODING_CONSTRUCTORS["p50k_edit"]
cl100k_base = ENCODING_CONSTRUCTORS["cl100k_base"]
o200k_base = ENCODING_CONSTRUCTORS["o200k_base"]
o200k_harmony = ENCODING_CONSTRUCTORS["o200k_harmony"]
