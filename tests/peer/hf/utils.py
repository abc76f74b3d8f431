"""Local replacements for the network fixtures of HF tokenizers' Python tests (tests/utils.py upstream).

Upstream downloads bert-base-uncased-vocab.txt and roberta-base-vocab.json / -merges.txt from the HF hub and
builds the tokenizers with `tokenizers.implementations`. Here the same files come from the shared data
(bert-base-uncased/vocab.txt; roberta-base's tokenizer.json, whose vocab and merges are written out as the
two files), HF's implementation class assembles the same pipeline, and `fstok.Tokenizer` runs its
tokenizer.json: every assertion is then about fstok's results.
"""
from __future__ import annotations

import json
import os
import tempfile
from functools import lru_cache

import fstok

DATA = "/work/shared/data"
if not os.path.isdir(DATA):
    DATA = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "shared", "data")
BERT_VOCAB = os.path.join(DATA, "vocab", "bert-base-uncased", "vocab.txt")
ROBERTA_JSON = os.path.join(DATA, "vocab", "models", "bytelevel-bpe", "roberta-base", "tokenizer.json")


def as_fstok(hf_impl) -> "fstok.Tokenizer":
    """fstok.Tokenizer for the pipeline an HF implementation class (or Tokenizer) was built with."""
    inner = getattr(hf_impl, "_tokenizer", hf_impl)
    return fstok.Tokenizer.from_str(inner.to_str())


def bert_tokenizer(**kw):
    from tokenizers import BertWordPieceTokenizer

    return as_fstok(BertWordPieceTokenizer.from_file(BERT_VOCAB, **kw))


@lru_cache(maxsize=1)
def roberta_files() -> dict:
    d = tempfile.mkdtemp(prefix="fstok-roberta-")
    with open(ROBERTA_JSON, encoding="utf-8") as f:
        model = json.load(f)["model"]
    with open(os.path.join(d, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(model["vocab"], f, ensure_ascii=False)
    with open(os.path.join(d, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for m in model["merges"]:
            f.write((m if isinstance(m, str) else " ".join(m)) + "\n")
    return {"vocab": os.path.join(d, "vocab.json"), "merges": os.path.join(d, "merges.txt")}


def byte_level_tokenizer(**kw):
    from tokenizers import ByteLevelBPETokenizer

    f = roberta_files()
    return as_fstok(ByteLevelBPETokenizer.from_file(f["vocab"], f["merges"], **kw))
