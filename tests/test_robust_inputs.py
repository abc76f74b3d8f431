"""Odd arguments and malformed sources: each test reproduces one finding of an audit (its number in
the test name) and asserts the fixed behaviour: a clear error in the user's terms, naming the file,
or the documented result."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

import fstok
from fstok import artifact as A
from fstok.errors import InvalidTokenError

from conftest import VOCAB

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
R50K = os.path.join(ROOT, "fstok", "data", "tiktoken", "r50k_base.tiktoken")
GPT2 = os.path.join(VOCAB, "gpt2", "vocab.json")


@pytest.fixture(scope="module")
def bpe():
    return fstok.get_encoding("o200k_base")


@pytest.fixture(scope="module")
def wp():
    return fstok.get_encoding("bert-base-uncased")


def test_f3_no_backtracking_fallback(tmp_path):
    """Finding 3: a pattern the DFA compiler refuses ran on the backtracking `regex` module at encode
    time ((a|aa)+$ on 'a' * 40 + '!' never returned).  Now: a clear error when compiling, and an
    artifact whose meta asks for the regex engine is refused."""
    ranks = {bytes([i]): i for i in range(256)}
    from fstok.bpe import BPETokenizer

    with pytest.raises(ValueError, match="linear-time DFA"):
        BPETokenizer.from_ranks(ranks, r"(a|aa)+(?=x)\1", {})  # a backreference: no DFA
    tok = BPETokenizer.from_ranks(ranks, r"(a|aa)+$|\s+|.", {})  # compiles to a DFA: linear
    t0 = time.perf_counter()
    assert tok.encode("a" * 40 + "!") == list(b"a" * 40 + b"!")
    tok.encode("a" * 3000 + "!")
    assert time.perf_counter() - t0 < 10
    art = A.parse_artifact(tok.to_bytes())
    meta = dict(art.meta, pretok_mode="regex")
    data = A.write_artifact(None, art.kind, meta, {n: art.array(n) for n in art.sections if n != "meta"},
                            art.unicode_version, art.source_hash)
    with pytest.raises(A.ArtifactError, match=r"meta\.pretok_mode"):
        fstok.loads(data)


def test_f6_unknown_pattern_names_and_patterns_that_match_nothing():
    """Finding 6: pattern="gpt4" was taken as a literal regex and encode returned []; pattern="a*"
    trained a tokenizer whose encode("hello world") == []."""
    for name in ("gpt4", "llama4", "o200k"):
        with pytest.raises(ValueError, match="unknown encoding name"):
            fstok.compile(R50K, pattern=name)
    with pytest.raises(ValueError, match="matches only"):
        fstok.compile(R50K, pattern=r"[a-z]+")
    with pytest.raises(ValueError, match="matches only"):
        fstok.train_bpe(["hello world " * 50], 300, pattern="a*")
    with pytest.raises(ValueError, match="unknown encoding name"):
        fstok.train_bpe(["hello world " * 50], 300, pattern="gpt4")
    tok = fstok.compile(R50K, pattern="(?:gpt4)|\\s+|.")  # the escape hatch for a literal: covers all text
    assert tok.decode(tok.encode("Hello world, gpt4!")) == "Hello world, gpt4!"


def test_f7_chunks_join_to_text_with_lone_surrogates(bpe):
    """Finding 7: chunk_by_tokens replaced lone surrogates, so "".join(chunks) != text."""
    for text in ("x\ud800" * 300, "a\udc00b" * 50 + "\U0001F600" + "\ud83d\ude00 ok" * 20, "\ud800"):
        chunks = bpe.chunk_by_tokens(text, 5)
        assert "".join(chunks) == text
        pairs = bpe.chunk_by_tokens(text, 5, return_ids=True)
        assert "".join(c for c, _ in pairs) == text
        assert all(len(ids) <= 5 and ids == bpe.encode(c) for c, ids in pairs)


def _threads() -> int:
    return threading.active_count()


@pytest.mark.parametrize("kind", ["bpe", "wp"])
def test_f8_num_threads_checked_and_clamped(kind, bpe, wp):
    """Finding 8: num_threads=10**6 started 256 permanent pool threads; WordPiece with 2**31 raised
    OverflowError where BPE clamped; 0 was accepted by encode_word_batch.  Now both kinds accept a
    positive int and clamp it to the machine, and refuse 0, negatives, bools, floats."""
    tok = bpe if kind == "bpe" else wp
    text = "Hello world, this is a long text. " * 4000
    want = tok.encode(text)
    for n in (2**31, 10**6, 3):
        assert tok.encode(text, num_threads=n) == want
        assert tok.encode_batch([text[:500]] * 3, num_threads=n)[0] == tok.encode(text[:500])
    for bad in (0, -1, True, 2.0, "4", None if kind == "wp" else "x"):
        if bad is None:
            continue
        with pytest.raises(ValueError, match="num_threads"):
            tok.encode_batch(["a b"], num_threads=bad)
        with pytest.raises(ValueError, match="num_threads"):
            tok.encode(text, num_threads=bad)
    if kind == "wp":
        with pytest.raises(ValueError, match="num_threads"):
            wp.encode_word_batch(["unaffable"], num_threads=0)
        assert wp.encode_word_batch(["unaffable"], num_threads=2**31) == [wp.encode_word("unaffable")]


def test_f8_pool_threads_follow_the_machine_and_shrink():
    """The native pool starts at most one thread per CPU whatever num_threads asks, and its threads leave
    after ~10 s without work (checked in a child process: /proc/self/task counts native threads)."""
    code = r"""
import os, time, fstok
def n(): return len(os.listdir("/proc/self/task"))
tok = fstok.get_encoding("o200k_base")
text = "Hello world, this is a long text. " * 20000
base = n()
tok.encode(text, num_threads=10**6)
peak = n()
cpus = os.cpu_count()
assert peak - base <= cpus + 1, (base, peak, cpus)
for _ in range(40):
    if n() <= base + 1: break
    time.sleep(1)
print(base, peak, n())
assert n() <= base + 1, (base, peak, n())
"""
    if not os.path.isdir("/proc/self/task"):
        pytest.skip("needs /proc")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]


def test_f9_files_taken_for_the_wrong_kind(tmp_path, bpe):
    """Finding 9: each error says what the file was taken for and why it is refused."""
    from fstok.loaders.tiktoken_file import load_tiktoken

    spm = os.path.join(VOCAB, "models", "spm-bpe", "llama-2", "tokenizer.model")
    if os.path.exists(spm):  # (fstok.compile routes it to the SentencePiece compiler; the rank reader says what it is)
        with pytest.raises(ValueError, match="SentencePiece") as e:
            load_tiktoken(spm, pattern="r50k_base")
        assert spm in str(e.value)
    art = tmp_path / "o200k.fst"
    bpe.save(str(art))
    with pytest.raises(ValueError, match="fstok.load") as e:
        fstok.compile(str(art))
    assert str(art) in str(e.value)
    notes = tmp_path / "notes.txt"
    notes.write_text("Meeting notes\nbuy milk\n")
    with pytest.raises(ValueError, match="vocab.txt") as e:
        fstok.compile(str(notes))
    assert str(notes) in str(e.value) and "[UNK]" in str(e.value)
    if os.path.exists("/dev/null"):
        with pytest.raises(ValueError, match="not a regular file"):
            fstok.compile("/dev/null")
    with pytest.raises(A.ArtifactError, match="text file") as e:
        fstok.load(str(notes))
    assert "truncated" not in str(e.value)


def test_f10_decode_out_of_range_one_behaviour(bpe, wp):
    """Finding 10: BPE raised a bare KeyError, WordPiece a ValueError.  Now both raise
    InvalidTokenError (a ValueError and a KeyError) with the id and the vocabulary size."""
    for tok in (bpe, wp):
        for bad in (tok.n_vocab if hasattr(tok, "n_vocab") else tok.vocab_size, -1, 10**12):
            with pytest.raises(InvalidTokenError) as e:
                tok.decode([1, bad])
            assert isinstance(e.value, ValueError) and isinstance(e.value, KeyError)
            assert str(bad) in str(e.value) and f"vocab_size={tok.vocab_size}" in str(e.value)


def _cli(args, stdin=b"", timeout=300):
    return subprocess.run([sys.executable, "-m", "fstok", *args], input=stdin, capture_output=True, timeout=timeout)


def test_f11_cli_invalid_utf8_and_file_names(tmp_path):
    """Finding 11: invalid UTF-8 on stdin printed ids and then failed with a codec error."""
    r = _cli(["encode", "--model", "r50k_base", "-q"], stdin=b"hello \x80 world\n")
    assert r.returncode == 2 and r.stdout == b""
    assert b"<stdin>" in r.stderr and b"UTF-8" in r.stderr and b"byte 6" in r.stderr
    p = tmp_path / "bad.txt"
    p.write_bytes(b"ok\n\xff\xfe")
    r = _cli(["encode", "--model", "r50k_base", "-q", str(p)])
    assert r.returncode == 2 and r.stdout == b"" and str(p).encode() in r.stderr
    r = _cli(["encode", "--model", "r50k_base", "-q", str(tmp_path / "missing.txt")])
    assert r.returncode == 2 and b"missing.txt" in r.stderr


def test_f11_cli_broken_pipe(tmp_path):
    p = tmp_path / "big.txt"
    p.write_text("hello world\n" * 200_000)
    cmd = f"{sys.executable} -m fstok encode --model r50k_base --lines -q {p} | head -c 10"
    r = subprocess.run(["bash", "-c", cmd], capture_output=True, timeout=300)
    assert b"Broken pipe" not in r.stderr and b"Traceback" not in r.stderr, r.stderr[-2000:]


def test_f12_save_to_a_directory_leaves_nothing(tmp_path, wp):
    d = tmp_path / "out"
    d.mkdir()
    before = set(os.listdir(tmp_path))
    with pytest.raises(IsADirectoryError, match="is a directory"):
        wp.save(str(d))
    assert set(os.listdir(tmp_path)) == before and os.listdir(d) == []


def test_f13_malformed_sources_in_user_terms(tmp_path):
    """Finding 13: internal names and raw exceptions from malformed sources."""
    d = tmp_path / "g"
    d.mkdir()
    with open(GPT2, encoding="utf-8") as f:
        vocab = f.read()
    (d / "vocab.json").write_text(vocab)
    (d / "merges.txt").write_text("")
    with pytest.raises(ValueError, match="merges") as e:
        fstok.compile(str(d / "vocab.json"))
    assert "merges.txt" in str(e.value)
    from fstok.loaders.bpe_source import bytes_to_unicode

    b2u = bytes_to_unicode()
    base = {"model": {"type": "BPE", "vocab": {b2u[i]: i for i in range(256)}, "merges": []},
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False}}
    for k, change, want in [
        ("n1", {"normalizer": [1]}, "normalizer"),
        ("v1", {"model": dict(base["model"], vocab=dict(base["model"]["vocab"], ab="7"))}, "id"),
    ]:
        p = tmp_path / k / "tokenizer.json"
        p.parent.mkdir()
        p.write_text(json.dumps(dict(base, **change)))
        with pytest.raises(ValueError, match=want) as e:
            fstok.compile(str(p))
        assert str(p) in str(e.value)
    from fstok.bpe import BPETokenizer

    with pytest.raises(TypeError, match="special_tokens"):
        BPETokenizer.compile_tiktoken(R50K, pattern="r50k_base", special_tokens=["<|x|>"])
    with pytest.raises(ValueError, match="pattern") as e:
        fstok.compile(R50K, pattern="(")
    assert "regex" not in type(e.value).__module__
    with pytest.raises(ValueError, match="pattern"):
        fstok.compile(R50K, pattern="(" * 300 + "a" + ")" * 300)
    for path, kw in ((GPT2, {"lowercase": True}), (R50K, {"lowercase": True})):
        with pytest.raises(TypeError) as e:
            fstok.compile(path, **kw)
        assert "compile_source" not in str(e.value) and "lowercase" in str(e.value)


def test_f14_wrong_types_refused(tmp_path, wp):
    """Finding 14: accepted without error."""
    tj = {"model": {"type": "WordPiece", "vocab": {"[UNK]": 0, "a": 1}, "unk_token": "[UNK]",
                    "max_input_chars_per_word": "100"},
          "normalizer": None, "pre_tokenizer": {"type": "BertPreTokenizer"}}
    p = tmp_path / "tokenizer.json"
    p.write_text(json.dumps(tj))
    with pytest.raises(TypeError, match="max_input_chars_per_word") as e:
        fstok.compile(str(p))
    assert str(p) in str(e.value)
    with pytest.raises(ValueError, match="num_threads"):
        wp.encode_word_batch(["a"], num_threads=0)
    with pytest.raises(TypeError, match="skip_special_tokens"):
        wp.decode([101, 7592], skip_special_tokens="no")
