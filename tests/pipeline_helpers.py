"""Shared by the tokenizer.json pipeline tests: the real files and each one compiled once per process."""
from __future__ import annotations

import functools
import os

from conftest import CORPUS, VOCAB

MODELS = os.path.join(VOCAB, "models")
ROBERTA = os.path.join(MODELS, "bytelevel-bpe/roberta-base/tokenizer.json")
FALCON = os.path.join(MODELS, "bytelevel-bpe/falcon-7b/tokenizer.json")
CLIP = os.path.join(MODELS, "charbpe/clip-vit-base-patch32/tokenizer.json")
OLMO = os.path.join(MODELS, "bytelevel-bpe/olmo-2/allenai_dolma2.json")
WHISPER = os.path.join(MODELS, "bytelevel-bpe/whisper-large-v3/tokenizer.json")
TEKKEN = os.path.join(MODELS, "tekken/mistral-nemo/tekken_240718.json")


@functools.lru_cache(maxsize=None)
def compiled(path: str):
    """fstok.compile(path), once per process (compiling takes seconds)."""
    import fstok

    return fstok.compile(path)


@functools.lru_cache(maxsize=None)
def hf(path: str):
    import tokenizers

    return tokenizers.Tokenizer.from_file(path)


@functools.lru_cache(maxsize=None)
def corpus_sample(per_file: int = 40) -> tuple[str, ...]:
    out = ["", " ", "Hello  world!", "It's 1234567...", "a\u0301e\u0301\u0323 Ǖ ﬁ İ Σ", "日本語 😀👍🏽", "\t\r\n x  ",
           "<s>x</s> <mask>  <mask>", "<|endoftext|>a <|startoftext|>b", "<s>x</s> a</s><pad>é<unk>  </s>"]
    for f in sorted(os.listdir(CORPUS)):
        with open(os.path.join(CORPUS, f), encoding="utf-8") as fh:
            lines = fh.read(200_000).splitlines()
        out += lines[:: max(1, len(lines) // per_file)][:per_file]
    return tuple(out)
