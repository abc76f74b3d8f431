"""The HF face's and the SentencePiece family's artifact caches are keyed on fstok's code as well as the file:
an artifact another build of fstok compiled is never reused (a changed compiler may give other tables)."""
import glob
import os

import pytest
from conftest import VOCAB, needs_shared

import fstok
from fstok import _compile_cache

pytestmark = needs_shared

MINILM = os.path.join(VOCAB, "models", "wordpiece", "all-MiniLM-L6-v2", "tokenizer.json")


def test_other_code_compiles_again(tmp_path, monkeypatch):
    monkeypatch.setenv("FSTOK_CACHE_DIR", str(tmp_path))
    first = fstok.Tokenizer.from_file(MINILM)
    entries = set(glob.glob(str(tmp_path / "hf-*.fst")))
    assert len(entries) == 1
    assert fstok.Tokenizer.from_file(MINILM).encode("hello world").ids == first.encode("hello world").ids
    assert set(glob.glob(str(tmp_path / "hf-*.fst"))) == entries  # the same code: a hit
    monkeypatch.setattr(_compile_cache, "_FINGERPRINT", ["another build"])
    again = fstok.Tokenizer.from_file(MINILM)
    assert len(set(glob.glob(str(tmp_path / "hf-*.fst"))) - entries) == 1  # compiled under a new key
    assert again.encode("hello world").ids == first.encode("hello world").ids


MAXTEXT = os.path.join(VOCAB, "models", "unigram", "maxtext-default-c4", "tokenizer.default")  # a .model file


def test_sentencepiece_cache_keyed_on_code(tmp_path, monkeypatch):
    monkeypatch.setenv("FSTOK_CACHE_DIR", str(tmp_path))
    first = fstok.compile(MAXTEXT)
    entries = set(glob.glob(str(tmp_path / "spm-*.fst")))
    assert len(entries) == 1
    assert fstok.compile(MAXTEXT).encode("hello world") == first.encode("hello world")
    assert set(glob.glob(str(tmp_path / "spm-*.fst"))) == entries  # the same code: a hit
    monkeypatch.setattr(_compile_cache, "_FINGERPRINT", ["another build"])
    again = fstok.compile(MAXTEXT)
    assert len(set(glob.glob(str(tmp_path / "spm-*.fst"))) - entries) == 1  # compiled under a new key
    assert again.encode("hello world") == first.encode("hello world")
