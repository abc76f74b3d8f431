"""fstok.compile of a tokenizer.json / tekken.json through the artifact cache (fstok/_compile_cache.py): compiled
once, then loaded from the cache; a changed file, other options, a damaged entry or an unwritable cache
directory compile again."""
import glob
import os
import shutil

import pytest

import fstok
from fstok import api

from conftest import VOCAB
from pipeline_helpers import ROBERTA, compiled, corpus_sample

MINILM = os.path.join(VOCAB, "models", "wordpiece", "all-MiniLM-L6-v2", "tokenizer.json")
pytestmark = pytest.mark.skipif(not os.path.exists(MINILM), reason="shared models not present")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("FSTOK_CACHE_DIR", str(d))
    return d


def _entries(d):
    return sorted(glob.glob(os.path.join(str(d), "src-*.fst")))


def _no_compiling(monkeypatch):
    def refuse(path):
        raise AssertionError(f"compiled {path} again")
    monkeypatch.setattr(api, "_sniff_json_model", refuse)


def test_second_compile_loads_the_cached_artifact(cache, tmp_path, monkeypatch):
    src = tmp_path / "m" / "tokenizer.json"
    src.parent.mkdir()
    shutil.copy(MINILM, src)
    texts = list(corpus_sample(10))
    first = fstok.compile(src)
    assert len(_entries(cache)) == 1
    want = [first.encode(t) for t in texts]
    with monkeypatch.context() as m:
        _no_compiling(m)
        again = fstok.compile(src)
        assert type(again) is type(first)
        assert [again.encode(t) for t in texts] == want
        assert fstok.compile(str(src.parent)) is not None  # the directory form: the same file, the same entry
    assert len(_entries(cache)) == 1


def test_a_changed_file_or_other_options_compile_again(cache, tmp_path, monkeypatch):
    src = tmp_path / "tokenizer.json"
    shutil.copy(MINILM, src)
    fstok.compile(src)
    with open(src, "a", encoding="utf-8") as f:
        f.write("\n")  # other bytes, the same tokenizer
    with monkeypatch.context() as m:
        _no_compiling(m)
        with pytest.raises(AssertionError, match="compiled"):
            fstok.compile(src)
    fstok.compile(src)
    assert len(_entries(cache)) == 2
    moved = tmp_path / "other.json"
    shutil.copy(src, moved)  # another path: its name and messages differ, so another entry
    fstok.compile(moved)
    assert len(_entries(cache)) == 3


def test_damaged_entry_is_rebuilt(cache, tmp_path):
    src = tmp_path / "tokenizer.json"
    shutil.copy(MINILM, src)
    want = fstok.compile(src).encode("Hello world, again!")
    (entry,) = _entries(cache)
    data = bytearray(open(entry, "rb").read())
    data[len(data) // 2] ^= 0x55
    with open(entry, "wb") as f:
        f.write(bytes(data))
    assert fstok.compile(src).encode("Hello world, again!") == want
    assert fstok.load(entry).encode("Hello world, again!") == want  # written again, whole


def test_unwritable_cache_compiles_uncached(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv("FSTOK_CACHE_DIR", str(blocker / "cache"))
    src = tmp_path / "tokenizer.json"
    shutil.copy(MINILM, src)
    assert fstok.compile(src).encode("Hello") == fstok.compile(src).encode("Hello")


def test_pipeline_from_the_cache_is_the_same_tokenizer(monkeypatch):
    """A PipelineTokenizer (RoBERTa: added tokens and a post-processor) from the cache encodes, offsets and
    decodes as the compiled one; the cache entry was written by the first compile (pipeline_helpers)."""
    first = compiled(ROBERTA)
    with monkeypatch.context() as m:
        _no_compiling(m)
        again = fstok.compile(ROBERTA)
    assert type(again).__name__ == "PipelineTokenizer"
    for t in corpus_sample(8):
        assert again.encode(t, add_special_tokens=True) == first.encode(t, add_special_tokens=True)
        assert again.encode_with_offsets(t) == first.encode_with_offsets(t)
        ids = first.encode(t)
        assert again.decode(ids) == first.decode(ids)
