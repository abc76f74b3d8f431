"""The whole-text hot path of the BPE runtime: consecutive piece ends from the DFA
(`fstok_dfa_find_ends`, checked against `fstok_dfa_find_all`) and the piece cache in front of the
span encoders (checked against tiktoken, cold and warm, with many colliding pieces; in a subprocess with
$FSTOK_BPE_PC_LINES the cache has 1-3 lines, so every piece collides and slot 1, the swap to slot 0 and
wide entries replacing slots and back all run)."""
from __future__ import annotations

import os
import random
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from fstok.pretokenize import CompiledPattern
from bpe_helpers import fstok_encoding, tiktoken_encoding
from conftest import needs_shared, read_corpus

NAMED = ["r50k_base", "p50k_base", "cl100k_base", "o200k_base"]
# patterns that leave text uncovered (regex finditer skips it), lookahead, alternatives of different length
GAPPY = [r"\p{L}+", r"[a-z]+|\d", r"\s+(?!\S)|\w+", r"a|ab|abc", r"x*y", r"\d{1,3}", r"'s|'t|\p{L}+"]
ALPHABET = ["a", "B", " ", "  ", "\n", "\r\n", "'s", "'", "1", "12345", "é", "中", "!", "\t", "\u00a0",
            "\U0001F600", "x'", "\u0301", "\x00", "y", "abc"]


def _random_texts(n: int, seed: int) -> list[bytes]:
    rnd = random.Random(seed)
    return ["".join(rnd.choice(ALPHABET) for _ in range(rnd.randint(0, 40))).encode() for _ in range(n)]


@pytest.mark.parametrize("pattern", NAMED + GAPPY)
def test_find_ends_equals_find_all(pattern):
    cp = CompiledPattern.named(pattern) if pattern in NAMED else CompiledPattern.compile(pattern)
    sp = cp.spanner
    for t in _random_texts(400, hash(pattern) & 0xFFFF):
        ref = sp.byte_spans(t)
        for window in (1, 2, 3, 7, 512):
            assert sp._byte_spans_ends(t, window) == ref, (pattern, window, t)


@needs_shared
@pytest.mark.parametrize("corpus", ["english", "code", "stress"])
def test_find_ends_on_corpora(corpus):
    data = read_corpus(corpus)[:200_000].encode()
    for name in ("cl100k_base", "o200k_base"):
        sp = CompiledPattern.named(name).spanner
        ref = sp.byte_spans(data)
        for window in (5, 512, 4096):
            assert sp._byte_spans_ends(data, window) == ref


def test_find_ends_window_is_validated():
    sp = CompiledPattern.named("o200k_base").spanner
    with pytest.raises(ValueError, match="window"):
        sp._byte_spans_ends(b"abc", 0)


@settings(max_examples=150, deadline=None)
@given(hs.lists(hs.sampled_from(ALPHABET), max_size=40).map("".join))
def test_find_ends_hypothesis(s):
    for name in ("cl100k_base", "o200k_base"):
        sp = CompiledPattern.named(name).spanner
        assert sp._byte_spans_ends(s.encode(), 3) == sp.byte_spans(s.encode())


@needs_shared
@pytest.mark.parametrize("name", ["r50k_base", "cl100k_base", "o200k_base"])
def test_piece_cache_cold_warm_and_colliding(name):
    enc, ref = fstok_encoding(name), tiktoken_encoding(name)
    rnd = random.Random(7)
    # 40k distinct short pieces of 1-11 tokens: slots and wide entries of the same lines replace each other
    words = ["".join(rnd.choice("abcdefghijklmnopqrstuvwxyzéü中'1 ") for _ in range(rnd.randint(1, 17)))
             for _ in range(40_000)]
    text = " ".join(words)
    want = ref.encode_ordinary(text)
    enc.clear_cache()
    assert enc.encode_ordinary(text) == want  # cold
    assert enc.encode_ordinary(text) == want  # warm
    assert enc.count(text) == len(want)
    # pieces that end near the end of the text (fewer than 16 readable bytes: keys from a padded copy)
    for w in words[:300]:
        assert enc.encode_ordinary(w) == ref.encode_ordinary(w)
        assert enc.encode_ordinary(" " + w) == ref.encode_ordinary(" " + w)
    enc.clear_cache()
    assert enc.encode_ordinary(text) == want


@needs_shared
@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_piece_cache_keys_compare_every_byte(name):
    # 30k distinct pieces of the same length that share their first 8 bytes (and others that share
    # all but their length): they fill the same cache slots, and only the full key tells them apart
    enc, ref = fstok_encoding(name), tiktoken_encoding(name)
    rnd = random.Random(11)
    tails = {"".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(4)) for _ in range(30_000)}
    text = " ".join("question" + t for t in sorted(tails)) + " " + " ".join("a" * k for k in range(1, 17))
    want = ref.encode_ordinary(text)
    enc.clear_cache()
    for _ in range(3):
        assert enc.encode_ordinary(text) == want


@needs_shared
def test_piece_cache_with_specials_and_offsets():
    enc, ref = fstok_encoding("cl100k_base"), tiktoken_encoding("cl100k_base")
    text = read_corpus("english")[:50_000]
    text = text[:20_000] + "<|endoftext|>" + text[20_000:]
    want = ref.encode(text, allowed_special="all")
    for _ in range(2):
        assert enc.encode(text, allowed_special="all") == want
        ids, offs = enc.encode_with_offsets(text)  # offsets take the uncached path: same ids
        assert ids == ref.encode_ordinary(text) and len(offs) == len(ids)


_FEW_LINES_SCRIPT = r"""
import random, sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
from bpe_helpers import fstok_encoding, tiktoken_encoding
rnd = random.Random(5)
# pieces of 1 token (' the'), 2-3 tokens (slots), 4-11 tokens (wide entries: CJK, accented, digits mixes)
alpha = "abcdefghijklmnopqrstuvwxyzéü中文Жß'1 "
for name in ("r50k_base", "cl100k_base", "o200k_base"):
    enc, ref = fstok_encoding(name), tiktoken_encoding(name)
    words = [" the", " of", "中文字符", " étéüß", "xqЖz"]
    words += ["".join(rnd.choice(alpha) for _ in range(rnd.randint(1, 16))) for _ in range(3000)]
    # same length, same first 8 bytes: only the second key word tells them apart (slot 0 and slot 1)
    words += [" question" + "".join(rnd.choice("abcdefgh") for _ in range(3)) for _ in range(300)]
    for rounds in range(3):
        text = " ".join(rnd.choice(words) for _ in range(20000))
        want = ref.encode_ordinary(text)
        assert enc.encode_ordinary(text) == want, name
        assert enc.encode_ordinary(text) == want, name  # warm: hits in slot 0, slot 1 and wide entries
        enc.clear_cache()  # a new generation: stale wide entries must not make slot 1 look valid
        for w in words[:200]:
            assert enc.encode_ordinary(w + w) == ref.encode_ordinary(w + w), (name, w)
print("ok")
"""


@needs_shared
@pytest.mark.parametrize("lines", ["1", "3"])
def test_piece_cache_with_few_lines(lines):
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, FSTOK_BPE_PC_LINES=lines)
    p = subprocess.run([sys.executable, "-c", _FEW_LINES_SCRIPT, here, os.path.dirname(here)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and p.stdout.strip().endswith("ok"), p.stdout + p.stderr
