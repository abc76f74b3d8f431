"""The word cache of SentencePiece BPE (`.model`: words of up to 24 bytes) and the piece cache of tokenizer.json
pipelines (pieces of up to 26 bytes) key an entry by the word's bytes read as 8-byte words, zero past its end.
Words that differ only in their last byte, in a byte past 8 or 16, words one byte shorter or longer than the
cache holds, and the same word in the middle of a text and at its very end (where fewer than 24 or 32 bytes
follow it and the key is read through a copy) must each get their own ids, equal to the model's own library,
on the first encode and on the later encodes that read the cache."""
from __future__ import annotations

import os

import pytest

import fstok
from conftest import VOCAB, needs_shared

M = os.path.join(VOCAB, "models", "spm-bpe")


def _words() -> list[str]:
    """Long words of the corpus (a few pieces each: their results are cached) and variants of the same length
    that differ in one byte: the last, or one past the first or second 8 bytes of the key."""
    from collections import Counter

    from conftest import read_corpus

    words = [w for w in read_corpus("english").split() if w.isalpha() and w.isascii()]
    freq = Counter(w for w in words if 6 <= len(w) <= 13).most_common(100)
    freq += Counter(w for w in words if 14 <= len(w) <= 26).most_common(200)
    out = []
    for w, _ in freq:
        out.append(w)
        for i in {len(w) - 1, 5, 6, 7, 13, 14, 15, 21, 22, 23} & set(range(len(w))):
            out.append(w[:i] + ("z" if w[i] != "z" else "y") + w[i + 1 :])
    out += ["é" * 8, "é" * 12, "é" * 13, "東京" * 4, "東京都" * 3, "▁x", "xx▁"]
    return out


def _texts() -> list[str]:
    ws = _words()
    texts = [" ".join(ws), " ".join(reversed(ws))]
    texts += [f"lead {w}" for w in ws]  # the word last: fewer bytes than a key follow it
    texts += [w for w in ws]  # the word alone
    return texts


@needs_shared
@pytest.mark.parametrize("name", ["llama-2/tokenizer.model", "mistral-7b-v0.1/tokenizer.model.v1"])
def test_model_word_cache_keys(name):
    spm = pytest.importorskip("sentencepiece")
    path = os.path.join(M, name)
    if not os.path.exists(path):
        pytest.skip(f"{path} not present")
    sp = spm.SentencePieceProcessor(model_file=path)
    tok = fstok.compile(path)
    texts = _texts()
    for rnd in range(2):  # the second round reads what the first stored
        for t in texts:
            assert tok.encode(t) == sp.encode(t), (rnd, t)


@needs_shared
def test_tokenizer_json_piece_cache_keys():
    tokenizers = pytest.importorskip("tokenizers")
    path = os.path.join(M, "phi-3-mini", "tokenizer.json")
    if not os.path.exists(path):
        pytest.skip(f"{path} not present")
    hf = tokenizers.Tokenizer.from_file(path)
    tok = fstok.compile(path)
    texts = _texts()
    for rnd in range(2):
        for t in texts:
            assert tok.encode(t) == hf.encode(t, add_special_tokens=False).ids, (rnd, t)
