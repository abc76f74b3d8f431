"""Shared fixtures for the BPE tests: tiktoken built offline from the shared rank files, HF tokenizers."""
from __future__ import annotations

import functools
import os
import random

from conftest import VOCAB, read_corpus

OPENAI = ["r50k_base", "p50k_base", "p50k_edit", "cl100k_base", "o200k_base"]
RANK_FILE = {"r50k_base": "r50k_base", "p50k_base": "p50k_base", "p50k_edit": "p50k_base",
             "cl100k_base": "cl100k_base", "o200k_base": "o200k_base"}


def tiktoken_path(name: str) -> str:
    return os.path.join(VOCAB, "tiktoken", f"{RANK_FILE[name]}.tiktoken")


@functools.lru_cache(maxsize=None)
def tiktoken_encoding(name: str):
    """tiktoken.Encoding with tiktoken's own pattern/specials, ranks read from the local file."""
    import tiktoken
    import tiktoken_ext.openai_public as op
    from tiktoken.load import load_tiktoken_bpe

    ctor = getattr(op, name)
    orig = op.load_tiktoken_bpe
    op.load_tiktoken_bpe = lambda *a, **k: load_tiktoken_bpe(tiktoken_path(name), expected_hash=k.get("expected_hash"))
    try:
        spec = ctor()
    finally:
        op.load_tiktoken_bpe = orig
    return tiktoken.Encoding(spec["name"], pat_str=spec["pat_str"], mergeable_ranks=spec["mergeable_ranks"],
                             special_tokens=spec["special_tokens"])


@functools.lru_cache(maxsize=None)
def fstok_encoding(name: str):
    import fstok

    return fstok.get_encoding(name)


@functools.lru_cache(maxsize=None)
def corpus_lines(name: str) -> list[str]:
    return read_corpus(name).split("\n")


def sample_lines(name: str, k: int, seed: int = 0) -> list[str]:
    lines = [ln for ln in corpus_lines(name) if ln]
    rnd = random.Random(seed)
    return rnd.sample(lines, min(k, len(lines)))


def token_concat_strings(enc, n: int, seed: int = 0, max_tokens: int = 12) -> list[bytes]:
    """rust-gems style test inputs: concatenations of random vocabulary tokens."""
    rnd = random.Random(seed)
    vals = enc.token_byte_values()
    out = []
    for _ in range(n):
        out.append(b"".join(rnd.choice(vals) for _ in range(rnd.randint(1, max_tokens))))
    return out
