"""The anchored match's run skip (lib_dfa.c `fstok_dfa_match`): where a byte's class leads a state back to
itself, the rest of the run of that class is skipped by comparing classes.  Checked against the pure-Python executor
of the same tables (`DFATables.match`) and against `fstok_dfa_find_all` through the piece-end walker with tiny
windows (every piece longer than the window is matched anchored), on texts made of long runs: runs that end in a
byte of another class, at the end of the text (the EOI transition), runs whose class self-loops in one state but
not in the state before (x*y, a{3}, [ab]+c), and lookahead (\\s+(?!\\S))."""
from __future__ import annotations

import random

import pytest

from fstok.pretokenize import CompiledPattern

NAMED = ["r50k_base", "cl100k_base", "o200k_base"]
PATTERNS = [r"\p{N}+", r"a+|b", r"x*y", r"a{3}|a+b", r"[ab]+c|a", r"\s+(?!\S)|\S+", r"\d{1,3}", r"(?:ab)+|a+"]
RUNS = ["7", "a", "b", "ab", " ", "x", "y", "c", "é", "中", "\n", "'", "!", "A", "0"]


def _texts(seed: int, n: int) -> list[bytes]:
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        parts = [rnd.choice(RUNS) * rnd.choice([1, 2, 3, 5, 64, 300, 2100]) for _ in range(rnd.randint(1, 5))]
        out.append("".join(parts).encode())
    return out


@pytest.mark.parametrize("pattern", NAMED + PATTERNS)
def test_match_skips_runs_exactly(pattern):
    cp = CompiledPattern.named(pattern) if pattern in NAMED else CompiledPattern.compile(pattern)
    sp, tab = cp.spanner, cp.levels[0]
    rnd = random.Random(hash(pattern) & 0xFFFF)
    for t in _texts(hash(pattern) & 0xFFF, 60):
        starts = {0, len(t)} | {rnd.randrange(len(t) + 1) for _ in range(6)}
        for pos in sorted(starts):
            assert sp.match(t, pos) == tab.match(t, pos), (pattern, pos, t[:40])
        ref = sp.byte_spans(t)
        for window in (1, 3, 512):
            assert sp._byte_spans_ends(t, window) == ref, (pattern, window, t[:40])


def test_r50k_digit_run_is_one_piece():
    sp = CompiledPattern.named("r50k_base").spanner
    for n in (1, 2, 100, 4096, 100_000):
        t = ("1234567890" * (n // 10 + 1))[:n].encode()
        assert sp.match(t, 0) == n
        assert sp.match(t + b"x", 0) == n
        assert sp.match(b"x" + t, 1) == n + 1
