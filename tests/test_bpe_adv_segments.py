"""Dead boundaries found 63 at a time (lib_bpe.c `seg_dead_bits`, `encode_segmented_bits`): a bit per boundary
from one bigram flag and one trigram bit, no branch per boundary; the segments are taken from the bits by ctz, and
segments of one or two bytes are emitted without a branch on their length (three or more: `seg_emit`).  A segment
that runs on for 64 boundaries without a dead one takes the rest of the span.  The branchy scan (`seg_next`,
`encode_segmented`) stays for text where nearly every boundary is dead (r50k on random text); the choice follows the
share of dead boundaries counted per memo (`bpe_seg_rate`), and spans encoded without a memo always take the bits.

* pieces (`encode_piece` mode 0: no memo, so the bits) against the pure-Python oracle and the heap encoder, built so
  that every edge case occurs (checked with the rule in Python): the first dead boundary at the last boundary,
  segments across a 63-boundary block edge, segments of 3+ bytes, the 64-boundary cut, pieces of 1-200 bytes;
* whole texts and batches against tiktoken in subprocesses with `$FSTOK_BPE_SEG_RATE` = 0 (the scan, but one span in
  16), 257 (always the bits) and the default (the switch itself: random text, then natural text, then random).
"""
import os
import random
import subprocess
import sys

import pytest
from conftest import needs_shared
from test_bpe_segments import _dead, _pool, _ranks

from fstok.reference.bpe import merge_ranks

pytestmark = needs_shared

HEAP = 3


def _pieces(seed: int, count: int) -> list[bytes]:
    """random strings of the benchmark's pool and of a few narrower alphabets, words glued in (long live runs)"""
    rnd = random.Random(seed)
    pool = _pool(rnd)
    alphas = ["".join(pool), "".join(chr(c) for c in range(0x21, 0x7F)), "aé中ж!", "abcdefghijklmnop",
              "".join(chr(c) for c in range(0xA1, 0x2FF))]
    out = []
    for _ in range(count):
        n = rnd.choice([2, 3, 4, 5, 9, 17, 33, 61, 62, 63, 64, 65, 66, 67, 100, 125, 126, 127, 128, 129, 190, 200])
        a = rnd.choice(alphas)
        parts, size = [], 0
        while size < n:
            r = rnd.random()
            w = ("".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(3, 90))) if r < 0.06 else
                 rnd.choice(["a", "0", "ab"]) * rnd.randint(30, 60) if r < 0.1 else rnd.choice(a))
            parts.append(w)
            size += len(w.encode())
        out.append("".join(parts).encode()[:n])
    return out


@pytest.mark.parametrize("name", ["r50k_base", "cl100k_base", "o200k_base"])
def test_bits_pieces_match_reference(name):
    from bpe_helpers import fstok_encoding

    tok = fstok_encoding(name)
    ranks = _ranks(name)
    seen = set()
    for s in _pieces(len(name) * 7, 700):
        dead = _dead(name, s)
        n = len(s)
        if dead and dead[0] == n - 1:
            seen.add("first dead boundary is the last")
        edges = [0] + dead + [n]
        for a, b in zip(edges, edges[1:]):
            if a > 0 and b - a >= 3:
                seen.add("segment of 3+ bytes")
            if a > 0 and b - a >= 65:
                seen.add("64-boundary cut")
            if 0 < a and (a - dead[0] - 1) // 63 != (b - dead[0] - 1) // 63 and b < n:
                seen.add("segment across a block edge")
        if dead and n - dead[0] > 64:
            seen.add("more than one block")
        want = [ranks[s]] if s in ranks else merge_ranks(s, ranks)
        assert tok._model.encode_piece(s, 0) == want, s
        if s not in ranks and n > 1:
            assert tok._model.encode_piece(s, HEAP) == want, s
    assert seen == {"first dead boundary is the last", "segment of 3+ bytes", "64-boundary cut",
                    "segment across a block edge", "more than one block"}, seen


_SCRIPT = r"""
import random, sys
sys.path[:0] = sys.argv[1:3]
from bpe_helpers import fstok_encoding, tiktoken_encoding
from test_bpe_segments import _pool, _strings
rnd = random.Random(int(sys.argv[3]))
pool = _pool(rnd)
rand = "".join(rnd.choice(pool) for _ in range(60_000))
letters = "".join(rnd.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789!?") for _ in range(30_000))
natural = " ".join(s.decode("utf-8", "replace") for s in _strings(4, 300)) + " the quick brown fox, 12345 ok. " * 200
for name in sys.argv[4].split(","):
    tok, ref = fstok_encoding(name), tiktoken_encoding(name)
    for text in (rand, natural, letters, rand[::-1], natural + rand + natural):
        want = ref.encode_ordinary(text)
        for _ in range(2):
            assert tok.encode_ordinary(text) == want, name
        tok.clear_cache()
        assert tok.encode_ordinary(text) == want, name
        assert tok.count(text) == len(want), name
    texts = [rand[i:i + 700] for i in range(0, 30_000, 700)] + [natural[:5000], letters[:5000]]
    assert tok.encode_ordinary_batch(texts, num_threads=2) == [ref.encode_ordinary(t) for t in texts], name
print("ok")
"""


@pytest.mark.parametrize("rate", [None, "0", "257"])
def test_whole_texts_both_paths(rate):
    here = os.path.dirname(os.path.abspath(__file__))
    env = {k: v for k, v in os.environ.items() if k != "FSTOK_BPE_SEG_RATE"}
    if rate is not None:
        env["FSTOK_BPE_SEG_RATE"] = rate
    p = subprocess.run([sys.executable, "-c", _SCRIPT, here, os.path.dirname(here), "17",
                        "r50k_base,cl100k_base,o200k_base"], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and p.stdout.strip().endswith("ok"), p.stdout + p.stderr
