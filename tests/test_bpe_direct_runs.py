"""Direct runs (mod_bpe.c direct_run, docs/design/bpe.md "Runtime"): on random text the piece loop stops using the piece
cache and encodes runs of pieces at once, cut into segments at dead boundaries and at piece ends: segments of 1-3
bytes without a merge search, longer ones as pre-tokens of their own.  The boundary flags come from AVX-512 gathers
where the CPU has them, else from AVX2 gathers ($FSTOK_BPE_NO_AVX512=1), else from a branch-free scalar loop
($FSTOK_BPE_NO_AVX2=1 too); all three are run here, in subprocesses.

Texts that switch the mode on and off (random text, natural text, multilingual text, back), runs cut at DIRECT_MAX
bytes, pieces longer than a run, segments of every length, several passes (the cache and the memo warm), batches;
every result against tiktoken.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import needs_shared

pytestmark = needs_shared

_SCRIPT = r"""
import random, sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
from bpe_helpers import fstok_encoding, tiktoken_encoding
from conftest import read_corpus
from test_bpe_segments import _pool

rnd = random.Random(15)
pool = _pool(rnd)

def rand(n, alphabet=None):
    a = alphabet or pool
    return "".join(rnd.choice(a) for _ in range(n))

eng = read_corpus("english")[:20000]
ml = read_corpus("multilingual")[:20000]
texts = [
    rand(40000),
    # a letter run longer than a run (DIRECT_MAX), runs of pieces cut just below and above it, a digit run
    rand(8000) + "x" * 3000 + rand(3000) + "y" * 2040 + rand(50) + "z" * 2049 + rand(3000) + "7" * 500 + rand(3000),
    # the mode switching: random, natural text, random, multilingual, random, code-like
    rand(9000) + eng + rand(9000) + ml + rand(9000) + eng[:3000] + rand(2000),
    # small alphabets: segments of 3 bytes, and of >= 4 bytes (words glued to junk) among the short ones
    rand(20000, "aé中ж!") + rand(20000, "abcdefghijklmnop!?") + rand(20000, "thein!#$%&*@"),
    rand(20000, [w for w in ("the", "ing", "tion", "中文", "привет", "ñandú", "12", "!!", "é", "x", "@")] + pool[:50]),
]
for name in ("r50k_base", "p50k_base", "cl100k_base", "o200k_base"):
    enc, ref = fstok_encoding(name), tiktoken_encoding(name)
    for i, t in enumerate(texts):
        want = ref.encode_ordinary(t)
        for p in range(3):
            got = enc.encode_ordinary(t)
            assert got == want, (name, i, p, next(j for j in range(min(len(got), len(want))) if got[j] != want[j]) if got[:len(want)] != want[:len(got)] else len(got))
    lines = [rand(rnd.randint(1, 6000)) for _ in range(40)]
    assert enc.encode_ordinary_batch(lines, num_threads=2) == [ref.encode_ordinary(x) for x in lines], name
    big = rand(60000)
    want = ref.encode_ordinary(big)
    assert enc.encode_ordinary(big, num_threads=2) == want, name
    assert enc.count(big) == len(want) and enc.count(big, num_threads=2) == len(want), name  # count mode: flushes
    assert enc.encode_to_numpy(big).tolist() == want, name
print("ok")
"""


@pytest.mark.parametrize("no_avx512,no_avx2", [("0", "0"), ("1", "0"), ("1", "1")])
def test_direct_runs_match_tiktoken(no_avx512, no_avx2):
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, FSTOK_BPE_NO_AVX512=no_avx512, FSTOK_BPE_NO_AVX2=no_avx2)
    p = subprocess.run([sys.executable, "-c", _SCRIPT, here, os.path.dirname(here)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and p.stdout.strip().endswith("ok"), p.stdout + p.stderr
