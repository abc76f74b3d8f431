"""Long spans of a small byte set (digit runs under r50k's `\\p{N}+`) on AVX2 machines (one instance of the lanes for
AVX-512 VBMI, one for AVX2: lib_bpe.c includes bpe_alpha_lanes.h twice): the two-lane window encoder renumbers the
tokens made only of the span's bytes (lib_bpe.c `win_alpha_get` / `wa_build`: at most 1023, alphabets of at most 32
bytes, 8 alphabets per model) and runs its windows on those local ids with 16-bit keys, an L1-sized pair table
(`pair_loc_avx512` / `pair_loc_avx2`), a window start (`wa_init_avx512` / `wa_init_avx2`) and up to two merges per
scan (`wa_step2`).

Covered here, each against the heap encoder (and a few against `merge_ranks` / tiktoken):
* alphabets of 1, 2, 10 (the 128-entry key tables), 12 and 13 bytes (the scalar start), bytes >= 0x80 (the high half
  of the byte map), alphabets with more than 1023 tokens (a-z; digits under cl100k: not usable, the full tables), more
  alphabets than the model keeps (the full tables again);
* a byte outside the sampled alphabet after the first 256 bytes (the lanes start over with the full tables);
* spans of 1.2-4.1 KB through `encode_piece(piece, 5)` (the window encoder: two lanes), 30k digits through the
  backtracking encoder's hand-off, and r50k's 100k-digit bench input against tiktoken;
* in subprocesses (the switches are read once): the default, $FSTOK_BPE_WIN_MARGIN=3 (junction repairs),
  $FSTOK_BPE_X2_JOIN=5 (failed lane joins), and the AVX2 instance ($FSTOK_BPE_NO_AVX512=1) with 12 pairs per bucket
  ($FSTOK_BPE_WA_PER_BUCKET: lookups that reach the buckets' upper halves; with ~4 r50k's digit pairs never do).
  ($FSTOK_BPE_NO_ALPHA=1 turns the local tables off: A/B.)

Planted bugs, each caught: the second merge allowed when the neighbourhoods overlap by one position; a window's live
mask cleared at the wrong bit; one entry of the index-times-|S| table (the first keys) off by one; the local junction
check (`wa_valid`) taking a crossing merge for a valid pair; the AVX2 lookup ignoring a bucket's upper half (caught by
the 12-per-bucket case only); the AVX2 window start reading the wrong byte of a first pair.  Not caught, and not a
bug: the byte map's two halves swapped (every byte then looks outside the alphabet, and the lanes start over with the
full tables).  The order test of the second merge dropped (k2 below the first merge's new keys) is caught by
test_small_alphabet_second_merge_order (synthetic chains abcde with ab < abc < abcd < de); the bundled encodings'
spans never reach it.
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
rnd = random.Random(int(sys.argv[3]))
alphas = ["0123456789", "01", "7", "aab", "0123456789ab", "0123456789abc", "é0123", "abcdefghijklmnopqrstuvwxyz",
          "ü9", "ab"]
alphas += [a + b for a, b in zip("bcdefghijklm", "nopqrstuvwxy")]  # more alphabets than a model keeps (8)
checked = 0
for name in ("r50k_base", "cl100k_base"):
    tok = fstok_encoding(name)
    ranks = read_tiktoken_ranks(tiktoken_path(name))
    for k, al in enumerate(alphas if name == "r50k_base" else alphas[:4]):  # cl100k: digits are not usable (1110)
        for n in (1500, 4100) if k < 10 else (1200,):
            piece = "".join(rnd.choice(al) for _ in range(n)).encode()
            if k == 0 and n == 4100:  # a byte outside the sampled alphabet (not at a sampled offset): start over
                piece = piece[:300] + b"x" + piece[301:]
            got = tok._model.encode_piece(piece, 5)  # the window encoder
            assert got == tok._model.encode_piece(piece, 3), (name, al, n)
            if k < 2 and n == 1500:
                assert got == merge_ranks(piece, ranks), (name, al)
            checked += 1
    digits = "".join(rnd.choice("0123456789") for _ in range(30_000))
    got = tok._model.encode_piece(digits.encode(), 2)  # backtracking hands the run to the window encoder
    assert got == tok._model.encode_piece(digits.encode(), 3), name
sys.path.insert(0, sys.argv[2] + "/tools")
from bench_bpe import _adversarial
adv = _adversarial()
text = adv[[k for k in adv if "digit" in k][0]]
assert fstok_encoding("r50k_base").encode(text) == tiktoken_encoding("r50k_base").encode(text)
print("ok", checked)
"""


@pytest.mark.parametrize("env", [
    {},
    {"FSTOK_BPE_WIN_MARGIN": "3"},
    {"FSTOK_BPE_X2_JOIN": "5"},
    {"FSTOK_BPE_NO_AVX512": "1", "FSTOK_BPE_WA_PER_BUCKET": "12"},  # the AVX2 lanes; pairs in the buckets' upper halves
])
def test_small_alphabet_windows_exact(env):
    here = os.path.dirname(os.path.abspath(__file__))
    base = {k: v for k, v in os.environ.items()
            if k not in ("FSTOK_BPE_NO_ALPHA", "FSTOK_BPE_WIN_MARGIN", "FSTOK_BPE_X2_JOIN", "FSTOK_BPE_NO_AVX512",
                         "FSTOK_BPE_WA_PER_BUCKET")}
    p = subprocess.run([sys.executable, "-c", _SCRIPT, here, os.path.dirname(here), "7"],
                       env=dict(base, **env), capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "ok" in p.stdout, p.stdout + p.stderr


def _chain_vocab(rnd, alpha, chain, n_merges):
    """256 byte tokens, then the chain's prefixes and its last pair in that rank order (ab < abc < abcd < de for
    chain abcde), then random merges of existing tokens up to 6 bytes: every token's parts rank below it."""
    ranks = {bytes([i]): i for i in range(256)}

    def add(t):
        ranks.setdefault(t, len(ranks))

    for k in range(2, len(chain)):
        add(chain[:k].encode())
    add(chain[-2:].encode())
    toks = [a.encode() for a in alpha] + [t for t in ranks if len(t) > 1]
    for _ in range(n_merges):
        t = rnd.choice(toks) + rnd.choice(toks)
        if len(t) <= 6 and t not in ranks:
            add(t)
            toks.append(t)
    return ranks


def test_small_alphabet_second_merge_order():
    """The second merge of a scan (`wa_step2`) must wait when the first one creates a lower key: in ...abcde...
    with ab < abc < abcd < de, merging ab makes abc, which comes before de (result abcd|e, not abc|de).  Spans
    with one chain per stretch of filler (so that the chain's first pair is the only one of its rank in a
    window) over synthetic vocabularies, the window encoder against the heap encoder.  Planted bug, caught
    (37 of 261 spans): the order test `k2 > ki || k2 > kp` dropped."""
    import random

    from fstok.bpe import BPETokenizer
    from fstok.reference.bpe import merge_ranks

    rnd = random.Random(1)
    spans = 0
    for trial in range(40):
        alpha = rnd.sample("abcdefgh", rnd.randint(3, 6))
        chain = "".join(rnd.sample(alpha, min(5, len(alpha))))
        ranks = _chain_vocab(rnd, alpha, chain, rnd.randint(5, 60))
        tok = BPETokenizer.from_ranks(ranks, r"[a-z]+|\s+|.", {}, name="chains")
        if not tok._art.meta["backtrack_ok"]:  # (the window encoder serves backtracking vocabularies only)
            continue
        fill = [c for c in alpha if c != chain[0]]
        for _ in range(2):
            parts, n = [], rnd.randint(1100, 3000)
            while sum(map(len, parts)) < n:
                parts.append("".join(rnd.choice(fill) for _ in range(rnd.randint(20, 200))) + chain)
            piece = "".join(parts)[:n].encode()
            got = tok._model.encode_piece(piece, 5)  # the window encoder (small-alphabet lanes on VBMI machines)
            assert got == tok._model.encode_piece(piece, 3), (alpha, chain, n)
            if trial < 3:
                assert got == merge_ranks(piece, ranks), (alpha, chain, n)
            assert tok.encode(piece.decode()) == got
            spans += 1
    assert spans >= 40, spans
