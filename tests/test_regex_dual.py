"""Two DFA walks per window (`dual_window` in lib_dfa.c): `fstok_dfa_find_ends` walks the two halves of
every window of >= 64 bytes at once and joins them where the first walk meets a replay of the second.
The joined ends must be exactly the serial walk's, whatever happens in either half: give-back boundary
states, deaths (a match that needs backtracking) resolved in walk A, in walk B, in the replay, text no
match covers (gappy patterns), pieces longer than a window, walks that never meet.  Checked against
`fstok_dfa_find_all` (which has no second walk) on long random texts, corpora and hypothesis strings,
with window sizes around the 64-byte threshold and the 2 KiB clamp."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from fstok.pretokenize import CompiledPattern
from conftest import needs_shared, read_corpus

NAMED = ["r50k_base", "p50k_base", "cl100k_base", "o200k_base"]
# gappy patterns leave text uncovered: walk B can start where no match starts, or die with no match
GAPPY = [r"\p{L}+", r"[a-z]+|\d", r"\s+(?!\S)|\w+", r"a|ab|abc", r"x*y", r"'s|'t|\p{L}+", r"\n[ \t]*\S"]
# code indentation (deaths under o200k/cl100k), Indic marks (give-back states), long runs (pieces longer
# than a window, walks that never meet), and bytes of every width
ALPHABET = ["a", "B", " ", "  ", "\n", "\r\n", "\n    ", "\n\t\t", "'s", "'", "1", "12345", "é", "中", "!",
            "\t", "\u00a0", "\U0001F600", "x'", "\u0301", "y", "abc", "िन्दी", "தமிழ்", "    return x",
            "a" * 300, " " * 200, "7" * 150, "中" * 100, ".,;:"]
WINDOWS = (64, 65, 97, 128, 513, 2048, 4097, 1 << 20)


def _texts(n: int, seed: int, max_items: int) -> list[bytes]:
    rnd = random.Random(seed)
    return ["".join(rnd.choice(ALPHABET) for _ in range(rnd.randint(10, max_items))).encode()
            for _ in range(n)]


def _spanner(pattern: str):
    cp = CompiledPattern.named(pattern) if pattern in NAMED else CompiledPattern.compile(pattern)
    return cp.spanner


@pytest.mark.parametrize("pattern", NAMED + GAPPY)
def test_two_walks_equal_find_all(pattern):
    sp = _spanner(pattern)
    for t in _texts(60, hash(pattern) & 0xFFFF, 400):
        ref = sp.byte_spans(t)
        for window in WINDOWS:
            assert sp._byte_spans_ends(t, window) == ref, (pattern, window, t[:200])


@needs_shared
@pytest.mark.parametrize("corpus", ["english", "code", "multilingual", "stress"])
def test_two_walks_on_corpora(corpus):
    data = read_corpus(corpus)[:300_000].encode()
    for name in NAMED:
        sp = _spanner(name)
        ref = sp.byte_spans(data)
        for window in (64, 512, 1 << 20):
            assert sp._byte_spans_ends(data, window) == ref, (name, window)


@settings(max_examples=120, deadline=None)
@given(hs.lists(hs.sampled_from(ALPHABET), min_size=5, max_size=120).map("".join),
       hs.integers(min_value=64, max_value=5000))
def test_two_walks_hypothesis(s, window):
    data = s.encode()
    for name in ("cl100k_base", "o200k_base", r"\s+(?!\S)|\w+"):
        sp = _spanner(name)
        assert sp._byte_spans_ends(data, window) == sp.byte_spans(data)
