"""Long spans on AVX2 machines: two stitched lanes encoded in lockstep (lib_bpe.c encode_stitched_x2), and the
adaptive pre-token memo (skipped while its sampled sets keep missing).

Lane A encodes s[0:mid+64), lane B s[mid:n); they are joined at a shared token boundary checked with the
pair-validity test, else lane A goes on alone.  $FSTOK_BPE_X2_JOIN=j (subprocess) allows the join only at mid+j,
next to lane B's left edge, where it is often invalid or impossible: both fallbacks run.  Results are compared
with the heap encoder and the pure-Python oracle (`merge_ranks`).  Digit runs long enough to leave backtracking
(>= 8 KiB that keep undoing tokens) take the same path.
"""
import os
import random
import subprocess
import sys

import pytest
from bpe_helpers import fstok_encoding, read_corpus, tiktoken_encoding, tiktoken_path
from conftest import needs_shared

from fstok.reference.bpe import merge_ranks
from fstok.loaders.tiktoken_file import read_tiktoken_ranks

pytestmark = needs_shared

BACKTRACK, HEAP = 2, 3
NAMES = ["r50k_base", "cl100k_base", "o200k_base"]
ALPHABETS = ["0123456789", "0123456789abc", "01", "aab", "aé中🙂xyz", "".join(chr(c) for c in range(0x21, 0x7F))]


def _prime_window(tok, rnd: random.Random) -> None:
    pool = [chr(c) for c in range(0x21, 0x7F)] + [chr(c) for c in range(0xA1, 0x2FF)]
    for _ in range(64):
        tok._model.encode_piece("".join(rnd.choice(pool) for _ in range(40)).encode(), 0)


def _longs(seed: int, count: int, lo: int, hi: int) -> list[bytes]:
    rnd = random.Random(seed)
    return ["".join(rnd.choice(a) for _ in range(rnd.randint(lo, hi))).encode()
            for a in (rnd.choice(ALPHABETS) for _ in range(count))]


@pytest.mark.parametrize("name", NAMES)
def test_lanes_match_reference(name):
    """spans of 1-3 KB (two lanes from 1024 bytes) against the Python oracle and the heap encoder"""
    tok = fstok_encoding(name)
    ranks = read_tiktoken_ranks(tiktoken_path(name))
    rnd = random.Random(11)
    for piece in _longs(len(name), 10, 1000, 3000):
        _prime_window(tok, rnd)
        got = tok._model.encode_piece(piece, 0)
        assert got == tok._model.encode_piece(piece, HEAP) == merge_ranks(piece, ranks), piece[:40]


@pytest.mark.parametrize("name", NAMES)
def test_long_digit_runs_leave_backtracking(name):
    """>= 8 KiB digit runs: the backtracking encoder hands them to the window encoder (r50k: one pre-token)"""
    tok, ref = fstok_encoding(name), tiktoken_encoding(name)
    rnd = random.Random(7)
    for n in (8192, 20_000, 33_333):
        piece = "".join(rnd.choice("0123456789") for _ in range(n)).encode()
        assert tok._model.encode_piece(piece, BACKTRACK) == tok._model.encode_piece(piece, HEAP)
    text = "".join(rnd.choice("0123456789") for _ in range(30_000))
    assert tok.encode_ordinary(text) == ref.encode_ordinary(text)


_JOIN_SCRIPT = r"""
import random, sys
sys.path[:0] = sys.argv[1:3]
from bpe_helpers import fstok_encoding
rnd = random.Random(int(sys.argv[3]))
count, lo, hi = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
pool = [chr(c) for c in range(0x21, 0x7F)] + [chr(c) for c in range(0xA1, 0x2FF)]
alphas = ["0123456789", "0123456789abc", "01", "aab", "aé中🙂xyz"]
for name in ("r50k_base", "cl100k_base", "o200k_base"):
    tok = fstok_encoding(name)
    for k in range(count):
        piece = "".join(rnd.choice(alphas[k % 5]) for _ in range(rnd.randint(lo, hi))).encode()
        for _ in range(64):
            tok._model.encode_piece("".join(rnd.choice(pool) for _ in range(40)).encode(), 0)
        assert tok._model.encode_piece(piece, 0) == tok._model.encode_piece(piece, 3), (name, piece[:40])
print("ok")
"""


@pytest.mark.parametrize("env,args", [
    ({"FSTOK_BPE_X2_JOIN": "2", "FSTOK_BPE_WIN_MARGIN": "2"}, ("2", "100", "1100", "1100")),  # 2 invalid joins
    ({"FSTOK_BPE_X2_JOIN": "1"}, ("1", "40", "1024", "1200")),
    ({"FSTOK_BPE_WIN_MARGIN": "2"}, ("3", "15", "1024", "6000")),
])
def test_lane_join_fallbacks(env, args):
    """joins forced next to both lanes' cuts (invalid or impossible joins: both fallbacks) and tiny margins (lane
    repairs): still exact.  The first case meets two invalid joins (a join without its pair check fails it)."""
    here = os.path.dirname(os.path.abspath(__file__))
    p = subprocess.run([sys.executable, "-c", _JOIN_SCRIPT, here, os.path.dirname(here), *args],
                       env=dict(os.environ, **env), capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and p.stdout.strip().endswith("ok"), p.stdout + p.stderr


def test_memo_skipping_is_transparent():
    """random text drives the memo into skipping, natural text brings it back: ids never change"""
    rnd = random.Random(3)
    pool = [chr(c) for c in range(0x21, 0x7F)] + [chr(rnd.randint(0x4E00, 0x9FFF)) for _ in range(200)]
    rand = "".join(rnd.choice(pool) for _ in range(60_000))
    natural = read_corpus("english")[:60_000] + read_corpus("multilingual")[:40_000]
    for name in ("cl100k_base", "o200k_base"):
        tok, ref = fstok_encoding(name), tiktoken_encoding(name)
        want_r, want_n = ref.encode_ordinary(rand), ref.encode_ordinary(natural)
        for _ in range(3):
            assert tok.encode_ordinary(rand) == want_r
            assert tok.encode_ordinary(natural) == want_n
            assert tok.encode_ordinary(rand[:20_000] + natural[:20_000]) == ref.encode_ordinary(rand[:20_000] + natural[:20_000])
        tok.clear_cache()
        assert tok.encode_ordinary(natural) == want_n
