"""Training pre-tokenization: patterns, special-token splitting, streaming == whole text, DFA == oracle."""
import os

import pytest
from conftest import CORPORA, corpus_path, needs_shared, read_corpus

from fstok.train import PATTERNS, as_dict, count_corpus, resolve_pattern
from fstok.train.naive import count_texts_naive
from fstok.train.pretok import Pretokenizer, iter_chunks_file, iter_chunks_text

NAMES = ["r50k_base", "cl100k_base", "o200k_base"]


def test_patterns_are_tiktokens():
    oa = pytest.importorskip("tiktoken_ext.openai_public")
    import inspect

    src = inspect.getsource(oa)
    assert PATTERNS["r50k_base"] == oa.r50k_pat_str
    # cl100k / o200k are built inside functions that download ranks: compare with the source text
    assert PATTERNS["cl100k_base"] in src
    for part in PATTERNS["o200k_base"].split("|"):
        assert part in src


def test_resolve_pattern():
    assert resolve_pattern("cl100k_base") == ("cl100k_base", PATTERNS["cl100k_base"])
    assert resolve_pattern(r"\w+") == (None, r"\w+")
    with pytest.raises(ValueError, match="unknown encoding name"):
        resolve_pattern("cl200k_base")
    with pytest.raises(ValueError, match="not a valid regex"):
        resolve_pattern("([a-")
    with pytest.raises(TypeError):
        resolve_pattern(3)


def _oracle(text, pattern, specials=("<|endoftext|>",)):
    return dict(count_texts_naive([text], pattern, specials))


@needs_shared
@pytest.mark.parametrize("name", CORPORA)
def test_streamed_file_equals_whole_text(name):
    # tiny chunks: many cut points, each must give exactly the whole text's pre-tokens (regex oracle)
    text = read_corpus(name)[:400_000]
    path = corpus_path(name)
    for pattern in NAMES:
        whole = _oracle(text, pattern)
        pieces = list(iter_chunks_text(text, ("<|endoftext|>",), chunk_chars=2048))
        assert "".join(pieces) == text
        assert len(pieces) > 10 or name == "chinese_long"
        got = as_dict(count_corpus(pieces, pattern, ("<|endoftext|>",), pretokenizer="regex", chunk_chars=1 << 30))
        assert got == whole, (name, pattern)
    # the file reader cuts at the same kind of points
    chunks = list(iter_chunks_file(path, ("<|endoftext|>",), chunk_chars=4096))
    with open(path, encoding="utf-8", newline="") as f:
        assert "".join(chunks) == f.read()


@needs_shared
def test_streamed_files_whole_corpus_cl100k():
    path = corpus_path("english")
    text = read_corpus("english")
    got = as_dict(count_corpus(path, "cl100k_base", ("<|endoftext|>",), chunk_chars=8192))
    assert got == _oracle(text, "cl100k_base")


def test_cut_points_crlf_and_specials():
    text = ("word\r\nnext line\r\n\r\n  x?\n/y\n" * 300) + "<|endoftext|>tail" * 50
    for pattern in NAMES:
        pieces = list(iter_chunks_text(text, ("<|endoftext|>",), chunk_chars=64))
        assert "".join(pieces) == text and len(pieces) > 5
        got = as_dict(count_corpus(pieces, pattern, ("<|endoftext|>",), pretokenizer="regex", chunk_chars=1 << 30))
        assert got == _oracle(text, pattern)


def test_no_cut_point_reads_whole():
    text = "\r\n".join(["  "] * 1000)  # whitespace only: never a safe cut
    assert list(iter_chunks_text(text, (), chunk_chars=16)) == [text]


@needs_shared
@pytest.mark.parametrize("name", ["english", "multilingual", "code", "chinese_long"])
def test_dfa_counts_equal_regex_oracle(name):
    pt = Pretokenizer("o200k_base")
    if pt.backend != "dfa":
        pytest.skip("fstok.pretokenize not available")
    text = read_corpus(name)[:300_000]
    for pattern in NAMES:
        dfa = as_dict(count_corpus([text], pattern, ("<|endoftext|>",), pretokenizer="dfa"))
        assert dfa == _oracle(text, pattern), (name, pattern)


def test_specials_split_and_dropped():
    text = "a<|endoftext|>b<|fim|>c<|endoftext|>"
    got = as_dict(count_corpus([text], "r50k_base", ("<|endoftext|>", "<|fim|>")))
    assert got == {b"a": 1, b"b": 1, b"c": 1}
    # longest special wins
    got = as_dict(count_corpus(["x<ab>y<a"], r"\S", ("<a", "<ab>")))
    assert got == {b"x": 1, b"y": 1}


def test_surrogates_become_replacement_char():
    got = as_dict(count_corpus(["a\ud800b"], r"\S", ()))
    assert got == {b"a": 1, "\ufffd".encode(): 1, b"b": 1}


def test_threads_give_same_counts(tmp_path):
    p = tmp_path / "c.txt"
    text = "Hello world, hello again!\nNumbers 12345 and more text\n" * 4000
    p.write_text(text, encoding="utf-8")
    one = as_dict(count_corpus(str(p), "cl100k_base", (), chunk_chars=1000))
    two = as_dict(count_corpus(str(p), "cl100k_base", (), num_threads=2, chunk_chars=1000))
    ora = as_dict(count_corpus(str(p), "cl100k_base", (), num_threads=2, chunk_chars=1000, pretokenizer="regex"))
    assert one == two == ora == _oracle(text, "cl100k_base", ())


def test_invalid_utf8_file(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_bytes(b"hello \xff\xfe world")
    with pytest.raises(ValueError, match="not valid UTF-8"):
        count_corpus(str(p))


def test_env_forces_regex(monkeypatch):
    monkeypatch.setenv("FSTOK_TRAIN_PRETOKENIZER", "regex")
    assert Pretokenizer("r50k_base").backend == "regex"
    monkeypatch.delenv("FSTOK_TRAIN_PRETOKENIZER")
    assert Pretokenizer(r"\w+", backend="regex").backend == "regex"
    assert os.environ.get("FSTOK_TRAIN_PRETOKENIZER") is None
