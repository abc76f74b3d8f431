"""Native long-text path of WordPiece: encode(text, num_threads=N) cuts the UTF-8 at whitespace and
encodes the pieces on threads (Model.encode_split); the ids must equal one-shot encode(text)."""
import functools

import pytest
from conftest import needs_shared, read_corpus
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fstok

BERTS = ["bert-base-uncased", "bert-base-multilingual-cased"]


@functools.lru_cache(maxsize=None)
def tok(name):
    return fstok.get_encoding(name)


# characters that stress the cut: whitespace of every kind, combining marks (reordered and stripped
# by the uncased normalizer), CJK (split around), punctuation, format characters HF deletes
ALPHABET = list("ab Z\t\n\r.,-'") + ["\u0301", "\u0316", "\u0323", "\u00e9", "\u4e2d", "\u6587", "\u00a0",
                                       "\u200b", "\u3000", "\ufeff", "\U0001f600", "\u0e01", "\u0e34"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(alphabet=st.sampled_from(ALPHABET), max_size=400),
       threads=st.integers(1, 5), parts=st.integers(0, 60), name=st.sampled_from(BERTS))
def test_split_equals_one_shot_random(text, threads, parts, name):
    t = tok(name)
    assert t._model.encode_split(text, threads, parts) == t.encode(text)
    got = t._model.encode_split(text, threads, parts, 2)
    assert got == t._model.encode(text, 2)


@needs_shared
@pytest.mark.parametrize("name", BERTS)
@pytest.mark.parametrize("corpus", ["english", "chinese_long", "stress", "code"])
def test_split_equals_one_shot_corpus(name, corpus):
    t = tok(name)
    text = read_corpus(corpus)[:300_000]
    want = t.encode(text)
    assert t.encode(text, num_threads=3) == want  # public route (text >= PARALLEL_THRESHOLD chars)
    for threads, parts in ((2, 0), (4, 37), (1, 500)):
        assert t._model.encode_split(text, threads, parts) == want


def test_split_no_whitespace_and_empty():
    t = tok("bert-base-uncased")
    assert t._model.encode_split("", 4) == []
    s = "x" * 5000 + "\u00e9" * 3000  # no cut point anywhere: one piece
    assert t._model.encode_split(s, 4, 64) == t.encode(s)


def test_split_bad_input():
    t = tok("bert-base-uncased")
    with pytest.raises(ValueError, match="lone surrogate"):
        t.encode("a b " * 70_000 + "\ud800", num_threads=2)
    with pytest.raises(TypeError):
        t._model.encode_split(b"abc", 2)
    with pytest.raises(ValueError):
        t._model.encode_split("abc", 2, 0, 1)


@needs_shared
def test_encode_to_numpy_threads():
    t = tok("bert-base-multilingual-cased")
    text = read_corpus("stress")[:300_000]
    assert t.encode_to_numpy(text, num_threads=3).tolist() == t.encode(text)


@pytest.mark.parametrize("bad", ["2", 2.5, 0, -1, True])
def test_num_threads_validated(bad):
    t = tok("bert-base-uncased")
    with pytest.raises(ValueError, match="num_threads"):
        t.encode("hello world", num_threads=bad)
    with pytest.raises(ValueError, match="num_threads"):
        t.encode_to_numpy("hello world", num_threads=bad)
    with pytest.raises(ValueError, match="num_threads"):
        t.encode_batch(["hello world"], num_threads=bad)
