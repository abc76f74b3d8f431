"""Long spans on AVX-512 machines: the two-lane window encoder looks pairs up in a bucketed copy of the pair table
(lib_bpe.c `win_pair_buckets` / `pair_vb`: one 64-byte line per bucket, 7 slots and a sentinel; a bucket that
received more than 7 pairs is marked and its lookups go to the pair table).  Before the bucket, two 64-bit pair
signatures per token (bit h(b) of word 2a for every pair (a, b), bit h(a) of word 2b+1) rule out most absent pairs;
those read an always-empty bucket.  Stitched windows keep the tokens that end 8 bytes (WIN_MARGIN) before a window's
cut.

Each case runs in a subprocess because the switches are read once per process:
* default: the bucketed lookups where the CPU has AVX-512 (else the AVX2 path);
* $FSTOK_BPE_NO_AVX512=1: the AVX2 lanes with `pair_nb` (the path of machines without AVX-512);
* $FSTOK_BPE_NO_AVX2=1 too: one stitched window at a time (`encode_stitched`'s loop: machines without AVX2);
* $FSTOK_BPE_VB_PER_BUCKET=7 / 64: 7 or 64 pairs per bucket on average, so that many or nearly all buckets overflow
  and their lookups take the fallback;
* $FSTOK_BPE_WIN_MARGIN=3: more junction repairs.
Spans of 200-2600 bytes (after dense random spans, so that they take the window encoder: one lane below 1 KiB,
two above) are compared with the pure-Python oracle (`merge_ranks`) and the heap encoder; digit runs that leave
backtracking (r50k's `\\p{N}+`) and whole texts are compared with tiktoken.
"""
import os
import subprocess
import sys

import pytest
from conftest import needs_shared

pytestmark = needs_shared

_SCRIPT = r"""
import random, sys
sys.path[:0] = sys.argv[1:3]
from bpe_helpers import fstok_encoding, tiktoken_encoding, tiktoken_path
from fstok.reference.bpe import merge_ranks
from fstok.loaders.tiktoken_file import read_tiktoken_ranks
seed, count, lo, hi = (int(a) for a in sys.argv[3:7])
rnd = random.Random(seed)
pool = [chr(c) for c in range(0x21, 0x7F)] + [chr(c) for c in range(0xA1, 0x2FF)]
alphas = ["0123456789", "0123456789abc", "01", "aab", "aé中🙂xyz", "".join(chr(c) for c in range(0x21, 0x7F))]
for name in ("r50k_base", "cl100k_base", "o200k_base"):
    tok, ref = fstok_encoding(name), tiktoken_encoding(name)
    ranks = read_tiktoken_ranks(tiktoken_path(name))
    for k in range(count):
        piece = "".join(rnd.choice(alphas[k % len(alphas)]) for _ in range(rnd.randint(lo, hi))).encode()
        for _ in range(64):  # dense spans: the thread's next long spans take the window encoder
            tok._model.encode_piece("".join(rnd.choice(pool) for _ in range(40)).encode(), 0)
        got = tok._model.encode_piece(piece, 0)
        assert got == tok._model.encode_piece(piece, 3), (name, piece[:40])
        if k < 3:
            assert got == merge_ranks(piece, ranks), (name, piece[:40])
    digits = "".join(rnd.choice("0123456789") for _ in range(20_000))
    got = tok._model.encode_piece(digits.encode(), 2)  # backtracking hands the run to the window encoder
    assert got == tok._model.encode_piece(digits.encode(), 3), name
    if name == "r50k_base":  # one pre-token under \p{N}+
        assert got == ref.encode_ordinary(digits)
    text = digits[:9000] + " " + "".join(rnd.choice(alphas[4] + alphas[5]) for _ in range(9000))
    assert tok.encode_ordinary(text) == ref.encode_ordinary(text), name
print("ok")
"""


@pytest.mark.parametrize("env", [
    {},
    {"FSTOK_BPE_NO_AVX512": "1"},
    {"FSTOK_BPE_NO_AVX512": "1", "FSTOK_BPE_NO_AVX2": "1"},
    {"FSTOK_BPE_VB_PER_BUCKET": "7"},
    {"FSTOK_BPE_VB_PER_BUCKET": "64"},
    {"FSTOK_BPE_WIN_MARGIN": "3"},
])
def test_window_pair_lookups_exact(env):
    here = os.path.dirname(os.path.abspath(__file__))
    base = {k: v for k, v in os.environ.items()
            if k not in ("FSTOK_BPE_NO_AVX512", "FSTOK_BPE_NO_AVX2", "FSTOK_BPE_VB_PER_BUCKET", "FSTOK_BPE_WIN_MARGIN")}
    p = subprocess.run([sys.executable, "-c", _SCRIPT, here, os.path.dirname(here), "5", "12", "200", "2600"],
                       env=dict(base, **env), capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and p.stdout.strip().endswith("ok"), p.stdout + p.stderr
