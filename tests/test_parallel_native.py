"""Native long-text paths: BPE Model.encode_cuts (pieces between proven boundaries on pthreads, one
list) and encode(text, num_threads=N) routing; bad cut lists are refused."""
import functools

import pytest
from conftest import needs_shared, read_corpus
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fstok
from fstok.parallel import bpe_splitter
from long_helpers import bpe


@functools.lru_cache(maxsize=None)
def enc(name):
    return fstok.get_encoding(name)


@needs_shared
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(["r50k_base", "cl100k_base", "o200k_base"]),
       corpus=st.sampled_from(["english", "chinese_long", "stress", "code"]),
       start=st.integers(0, 200_000), length=st.integers(0, 20_000),
       parts=st.integers(1, 40), threads=st.integers(1, 5))
def test_encode_cuts_equals_one_shot(name, corpus, start, length, parts, threads):
    tok = enc(name)
    text = read_corpus(corpus)[start:start + length]
    cuts = bpe_splitter(tok).split_points(text, parts)
    assert tok._model.encode_cuts(text, cuts, None, threads) == tok.encode_ordinary(text)


@needs_shared
def test_encode_num_threads_routes_natively():
    tok = enc("cl100k_base")
    text = read_corpus("english")[:300_000] + " <|endoftext|> " + read_corpus("chinese_long")[:100_000]
    want = tok.encode(text, allowed_special="all")
    assert tok._encode_split(text, 3, frozenset(tok.special_tokens_set)) == want
    assert tok.encode(text, allowed_special="all", num_threads=3) == want
    with pytest.raises(ValueError, match="disallowed special"):
        tok.encode(text, num_threads=3)


def test_encode_cuts_bad_cuts():
    tok = enc("r50k_base")
    with pytest.raises(ValueError, match="increasing"):
        tok._model.encode_cuts("hello world", [5, 3], None, 2)
    with pytest.raises(ValueError, match="increasing"):
        tok._model.encode_cuts("hello world", [0], None, 2)
    with pytest.raises(ValueError, match="increasing"):
        tok._model.encode_cuts("hello world", [11], None, 2)
    with pytest.raises(TypeError):
        tok._model.encode_cuts(b"hello", [], None, 2)
    with pytest.raises(UnicodeEncodeError):
        tok._model.encode_cuts("a\ud800b", [], None, 2)


@needs_shared
def test_encode_ordinary_num_threads():
    tok = enc("o200k_base")
    text = read_corpus("code")[:300_000] + "<|endoftext|>" + read_corpus("stress")[:50_000]
    assert tok.encode_ordinary(text, num_threads=4) == tok.encode_ordinary(text)


# encode_proven: the proven-boundary search in C (bytes) + pieces on pthreads, for every BPE kind,
# including an HF tokenizer.json with added tokens (guards: no cut inside an occurrence)
@needs_shared
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(["r50k_base", "cl100k_base", "o200k_base", "llama3", "llama3-hf", "qwen"]),
       corpus=st.sampled_from(["english", "chinese_long", "stress", "code"]),
       start=st.integers(0, 200_000), length=st.integers(0, 30_000), threads=st.integers(2, 9),
       specials=st.booleans())
def test_encode_split_native_all_kinds(name, corpus, start, length, threads, specials):
    tok = bpe(name)
    text = read_corpus(corpus)[start:start + length]
    if specials and tok.special_tokens_set:
        sp = sorted(tok.special_tokens_set)[0]
        text = text[: len(text) // 3] + sp + text[len(text) // 3:] + sp
    allowed = frozenset(tok.special_tokens_set) if specials else frozenset()
    want = tok.encode(text, allowed_special=allowed, disallowed_special=())
    got = tok._encode_split(text, threads, allowed)
    assert got is None or got == want


def test_boundary_table_disk_cache(tmp_path, monkeypatch):
    import numpy as np

    from fstok import safe_split
    from fstok.pretokenize import CompiledPattern

    monkeypatch.setenv("FSTOK_CACHE_DIR", str(tmp_path))
    tok = enc("r50k_base")

    def fresh():
        safe_split._cache.clear()
        cp = CompiledPattern.from_sections(tok._art, "dfa.")
        return safe_split.boundary_table(cp.levels[0], cp.mode)

    built = fresh()
    files = list(tmp_path.glob("boundary-*.npz"))
    assert len(files) == 1 and built.view is not None
    loaded = fresh()
    assert loaded.view is None  # came from disk
    assert np.array_equal(loaded.ok, built.ok) and np.array_equal(loaded.cp_class, built.cp_class)
    text = "Hello world, 12345 times!\n  indented code();"
    assert loaded.positions(text).tolist() == built.positions(text).tolist()
    files[0].write_bytes(b"not an npz")  # a damaged file is recomputed, never trusted
    again = fresh()
    assert again.view is not None and np.array_equal(again.ok, built.ok)
