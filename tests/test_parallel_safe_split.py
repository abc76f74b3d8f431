"""Proven pre-tokenizer boundaries (fstok.safe_split) and the BPE safe split of encode_long.

Soundness of the table is checked three ways: brute force over small patterns and small alphabets (every
pair the table proves must split every sampled context exactly, with the `regex` module as the oracle),
random contexts around every proven pair of the real patterns, and corpus windows cut at every proven
point.  Then encode_long(strategy="safe"/"auto") against one-shot encoding for the BPE encodings."""
import functools
import os
import random

import numpy as np
import pytest
import regex
from conftest import VOCAB, needs_shared, read_corpus
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fstok
from fstok.safe_split import BoundaryTable, boundary_table
from fstok.parallel import LoptStats, bpe_splitter, encode_long
from fstok.pretokenize import CompiledPattern, compile_tables


def _find_spans(pattern, text):
    # rust-regex `$` is the end of the text; the regex module's also matches before a final "\n"
    return [m.span() for m in regex.finditer(pattern.replace("$", r"\Z"), text)]


def _split_spans(cp, text):
    return cp.reference_spans(text)


def _joined(spans_fn, left, right):
    p = len(left)
    return spans_fn(left) + [(a + p, b + p) for a, b in spans_fn(right)]


# ------------------------------------------------------------------------------ small patterns, brute force
SMALL = [
    (r"a+|b", "find"),
    (r"\s+(?!\S)|\s", "find"),
    (r"a+$|a", "find"),
    (r"ab|a|b", "find"),
    (r" ?a+| ?b+|\s+(?!\S)|\s+", "find"),
    (r"x(?=y)|y|x", "find"),
    (r"'s|a+|\s++$|\s", "find"),
    (r"[^\s]+|\s+", "find"),
    (r"\p{L}+|\p{N}{1,3}|\s+", "find"),
    (r"a+", "split"),
    (r" ?\p{L}+|\s+(?!\S)|\s+", "split"),
]
ALPHA = ["a", "b", " ", "\n", "x", "y", "'", "s", "1", "\u00e9", "\u4e2d", ".", "\U0001F600"]


@pytest.mark.parametrize("pattern,mode", SMALL)
def test_small_patterns_brute_force(pattern, mode):
    tables = compile_tables(pattern, "rust-regex")
    bt = BoundaryTable(tables, mode)
    cp = CompiledPattern([tables], mode)
    spans = (lambda t: _find_spans(pattern, t)) if mode == "find" else (lambda t: _split_spans(cp, t))
    rng = random.Random(hash(pattern) & 0xFFFF)
    proven = 0
    for c in ALPHA:
        for d in ALPHA:
            if not bt.ok[bt.cp_class[ord(c)], bt.cp_class[ord(d)]]:
                continue
            proven += 1
            for _ in range(120):
                x = "".join(rng.choice(ALPHA) for _ in range(rng.randrange(6)))
                y = "".join(rng.choice(ALPHA) for _ in range(rng.randrange(6)))
                left, right = x + c, d + y
                assert spans(left + right) == _joined(spans, left, right), (pattern, left, right)
    assert proven > 0, pattern


def test_small_pattern_expected_pairs():
    bt = BoundaryTable(compile_tables(r"a+|b", "rust-regex"), "find")
    ok = lambda c, d: bool(bt.ok[bt.cp_class[ord(c)], bt.cp_class[ord(d)]])  # noqa: E731
    assert ok("a", "b") and ok("b", "a") and ok("b", "b") and not ok("a", "a")
    # split mode: a gap ("b" is not matched) may not be cut, a match start may
    bs = BoundaryTable(compile_tables(r"a+", "rust-regex"), "split")
    oks = lambda c, d: bool(bs.ok[bs.cp_class[ord(c)], bs.cp_class[ord(d)]])  # noqa: E731
    assert oks("b", "a") and oks("a", "b") is False and not oks("b", "b") and not oks("a", "a")
    # lookahead: "  x" is " " + " x" for r50k-like patterns: never cut between spaces or before a letter
    bl = BoundaryTable(compile_tables(r" ?\p{L}+|\s+(?!\S)|\s+", "rust-regex"), "find")
    okl = lambda c, d: bool(bl.ok[bl.cp_class[ord(c)], bl.cp_class[ord(d)]])  # noqa: E731
    assert okl("a", " ") and not okl(" ", " ") and not okl(" ", "a")
    # surrogates are never a boundary
    assert not bl.ok[bl.cp_class[0xD800]].any() and not bl.ok[:, bl.cp_class[0xDC00]].any()


# ------------------------------------------------------------------------------ real patterns
REAL = ["r50k_base", "cl100k_base", "o200k_base", "llama3", "qwen2", "hf-llama3", "hf-qwen2", "hf-bytelevel"]


def _pool(bt, rng, per_class=3):
    """A few code points of every character class (ASCII first)."""
    out = []
    K = bt.n_classes - 1
    cls = bt.cp_class
    for k in range(K):
        cps = np.flatnonzero(cls == k)
        pick = [int(c) for c in cps[:2]] + [int(rng.choice(cps)) for _ in range(per_class - 1)]
        out += [chr(c) for c in pick]
    return out


@pytest.mark.parametrize("name", REAL)
def test_real_pattern_random_contexts(name):
    cp = CompiledPattern.named(name)
    bt = boundary_table(cp.levels[0], cp.mode)
    rng = random.Random(7)
    pool = _pool(bt, rng)
    extra = [" ", "\n", "\r\n", "'s", "'S", "  ", "123", "1234", "abc", "ABC", "\u3002", ".\n", "\t"]
    pieces = pool + extra
    pat = cp.levels[0].pattern
    use_regex = cp.mode == "find"
    spans = cp.spans
    pairs = [(c, d) for c in pool for d in pool if bt.ok[bt.cp_class[ord(c)], bt.cp_class[ord(d)]]]
    assert len(pairs) > 20
    for c, d in rng.sample(pairs, min(len(pairs), 400)):
        for _ in range(8):
            x = "".join(rng.choice(pieces) for _ in range(rng.randrange(5)))
            y = "".join(rng.choice(pieces) for _ in range(rng.randrange(5)))
            left, right = x + c, d + y
            full = spans(left + right)
            assert full == _joined(spans, left, right), (name, left, right)
            if use_regex:
                assert full == _find_spans(pat, left + right)


@functools.lru_cache(maxsize=None)
def corpus(name):
    return read_corpus(name)


@needs_shared
@pytest.mark.parametrize("name", REAL)
def test_real_pattern_corpus_windows(name):
    cp = CompiledPattern.named(name)
    bt = boundary_table(cp.levels[0], cp.mode)
    rng = random.Random(11)
    for doc in ["english", "chinese_long", "code", "stress", "multilingual"]:
        text = corpus(doc)
        s = rng.randrange(max(1, len(text) - 20_000))
        seg = text[s:s + 20_000]
        full = cp.spans(seg)
        if cp.mode == "find":
            assert full == _find_spans(cp.levels[0].pattern, seg)
        pos = bt.positions(seg).tolist()
        sample = range(1, min(len(seg), 3000))
        assert [p for p in pos if p < 3000] == [p for p in sample if bt.is_boundary(seg, p)]
        bounds = [0] + pos + [len(seg)]
        got = []
        for a, b in zip(bounds, bounds[1:]):
            got += [(x + a, y + a) for x, y in cp.spans(seg[a:b])]
        assert got == full, (name, doc)
        assert len(pos) > len(seg) / 1000, (name, doc)  # english/chinese/code: tens per KB


# ------------------------------------------------------------------------------ encode_long, BPE
BPES = ["r50k_base", "cl100k_base", "o200k_base", "llama3", "llama3-hf", "qwen"]
LONG = ["english", "chinese_long", "code", "stress"]


from long_helpers import bpe  # noqa: E402  (shared with test_parallel_native)


@needs_shared
@pytest.mark.parametrize("name", BPES)
def test_bpe_safe_basic(name):
    tok = bpe(name)
    assert bpe_splitter(tok) is not None
    for strategy in ("auto", "safe"):
        assert encode_long(tok, "", num_threads=2, strategy=strategy) == []
        assert encode_long(tok, "hello world", num_threads=2, chunk_chars=10_000, strategy=strategy) == \
            tok.encode_ordinary("hello world")
        assert encode_long(tok, "x", num_threads=4, chunk_chars=1, strategy=strategy) == tok.encode_ordinary("x")
    for doc in LONG:
        text = corpus(doc)[:100_000]
        ref = tok.encode_ordinary(text)
        s = LoptStats()
        assert encode_long(tok, text, num_threads=3, strategy="safe", stats=s) == ref, doc
        assert s.strategy == "safe" and s.num_chunks > 1


@needs_shared
@pytest.mark.parametrize("name", BPES)
def test_bpe_safe_special_tokens_across_cuts(name):
    tok = bpe(name)
    # tiktoken-style specials, or HF added tokens (always split out of the text)
    specials = sorted(tok.special_tokens)[:3] + sorted(a.content for a in tok._added if not a.special)
    base = corpus("english")[:40_000]
    rng = random.Random(3)
    parts, i = [], 0
    while i < len(base):
        k = rng.randrange(1, 900)
        parts.append(base[i:i + k])
        parts.append(rng.choice(specials))
        i += k
    text = "".join(parts)
    ref = tok.encode(text, allowed_special="all")
    for chunk in (None, 3, 50, 400, 5000):
        got = encode_long(tok, text, num_threads=2, chunk_chars=chunk, strategy="safe", allowed_special="all")
        assert got == ref, chunk
    assert encode_long(tok, text, num_threads=2, chunk_chars=700) == tok.encode_ordinary(text)
    sub = set(specials[:1])
    assert encode_long(tok, text, num_threads=2, chunk_chars=300, allowed_special=sub, disallowed_special=()) == \
        tok.encode(text, allowed_special=sub, disallowed_special=())
    with pytest.raises(ValueError):
        encode_long(tok, text, num_threads=2, chunk_chars=300, disallowed_special="all")


@needs_shared
def test_bpe_safe_no_boundary_falls_back_to_lopt():
    tok = bpe("cl100k_base")
    text = "abcdefghij" * 3000  # one letter run: no proven boundary anywhere
    assert bpe_splitter(tok).positions(text).size == 0
    s = LoptStats()
    assert encode_long(tok, text, num_threads=2, chunk_chars=5000, stats=s) == tok.encode_ordinary(text)
    assert s.strategy == "lopt"
    s = LoptStats()
    assert encode_long(tok, text, num_threads=2, chunk_chars=5000, strategy="safe", stats=s) == \
        tok.encode_ordinary(text)
    assert s.strategy == "safe" and s.num_chunks == 1


SURR = ["\ud83d", "\ude00", "\ud83d\ude00", " ", "a", "\n", ".", "\u4e2d", "<|endoftext|>", "'s", "12345"]


@settings(max_examples=60, deadline=None)
@given(parts=st.lists(st.sampled_from(SURR), max_size=80), threads=st.integers(2, 5),
       chunk=st.one_of(st.none(), st.integers(1, 20)), name=st.sampled_from(["cl100k_base", "o200k_base"]))
def test_bpe_safe_adversarial(parts, threads, chunk, name):
    tok = bpe(name)
    text = "".join(parts)
    assert encode_long(tok, text, num_threads=threads, chunk_chars=chunk, strategy="safe") == \
        tok.encode_ordinary(text)
    assert encode_long(tok, text, num_threads=threads, chunk_chars=chunk, strategy="safe",
                       allowed_special="all") == tok.encode(text, allowed_special="all")


@needs_shared
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(BPES), doc=st.sampled_from(LONG), start=st.integers(0, 2_000_000),
       length=st.integers(0, 40_000), threads=st.integers(1, 8),
       chunk=st.one_of(st.none(), st.integers(1, 50), st.integers(50, 5_000), st.integers(5_000, 50_000)))
def test_hypothesis_bpe_safe(name, doc, start, length, threads, chunk):
    text = corpus(doc)
    start = start % max(1, len(text) - length)
    text = text[start:start + length]
    tok = bpe(name)
    assert encode_long(tok, text, num_threads=threads, chunk_chars=chunk, strategy="safe") == \
        tok.encode_ordinary(text)


def test_concat_lists_moves_or_copies():
    import sys

    _dfa = pytest.importorskip("fstok.runtime._dfa")
    x = [object() for _ in range(3)]
    before = sys.getrefcount(x[0])
    outer = [list(x), x, [], [7]]
    moved = _dfa.concat_lists(outer)
    same = moved == x + x + [7]
    kept = outer[0] == [] and outer[1] is x and len(x) == 3  # moved / copied
    del moved, outer
    after = sys.getrefcount(x[0])  # (plain locals: pytest's assert rewriting would hold references)
    assert same and kept and after == before
    with pytest.raises(TypeError):
        _dfa.concat_lists([1])
    with pytest.raises(TypeError):
        _dfa.concat_lists((x,))


@needs_shared
def test_splitter_positions_avoid_guards():
    tok = bpe("cl100k_base")
    sp = bpe_splitter(tok)
    text = ("word <|endoftext|> more.\n" * 50) + "x<|fim_prefix|>y" * 20
    pos = sp.positions(text).tolist()
    assert pos and pos == [p for p in sp.table.positions(text).tolist() if not sp._guarded(text, p)]
    for p in pos:
        for g in sp.guards:
            i = text.find(g, max(0, p - len(g) + 1))
            assert i == -1 or i >= p or i + len(g) <= p


@needs_shared
@pytest.mark.parametrize("mode", ["threads", "batch"])
def test_bpe_safe_piece_modes(mode, monkeypatch):
    import fstok.parallel as par

    monkeypatch.setattr(par, "_PIECES_MODE", mode)
    tok = bpe("o200k_base")
    text = corpus("chinese_long")[:50_000] + corpus("code")[:50_000]
    for threads in (2, 3, 16):
        assert encode_long(tok, text, num_threads=threads) == tok.encode_ordinary(text), threads
    specials = "<|endoftext|>".join(text[i:i + 3000] for i in range(0, 30_000, 3000))
    assert encode_long(tok, specials, num_threads=3, chunk_chars=1000, allowed_special="all") == \
        tok.encode(specials, allowed_special="all")
