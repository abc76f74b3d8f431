"""The window encoder (lib_bpe.c win_encode / encode_stitched) on adversarial and random spans.

The runtime sends a span to the window encoder instead of backtracking while the token density of the spans
the thread encoded last is high (random text); a run of random junk first drives it there.  Every result is
compared with the pure-Python oracle (`merge_ranks`), the heap encoder and tiktoken.  Spans longer than one
window are cut into windows whose junctions are checked with the pair-validity test (docs/design/bpe.md, "The window encoder");
with a tiny margin (subprocess, $FSTOK_BPE_WIN_MARGIN) many junctions are invalid and get re-encoded.
"""
import os
import random
import subprocess
import sys

import pytest
from bpe_helpers import fstok_encoding, tiktoken_encoding, tiktoken_path
from conftest import needs_shared

from fstok.reference.bpe import merge_ranks
from fstok.loaders.tiktoken_file import read_tiktoken_ranks

pytestmark = needs_shared

HEAP = 3
NAMES = ["r50k_base", "cl100k_base", "o200k_base"]


def _junk(rnd: random.Random, n: int) -> bytes:
    """random printable ASCII and 2-byte characters: one or two bytes per token under every encoding"""
    pool = [chr(c) for c in range(0x21, 0x7F)] + [chr(c) for c in range(0xA1, 0x2FF)]
    return "".join(rnd.choice(pool) for _ in range(n)).encode()


def _prime_window(tok, rnd: random.Random) -> None:
    """drive this thread's span density up (the next spans take the window encoder)"""
    for _ in range(64):
        tok._model.encode_piece(_junk(rnd, 40), 0)


def _prime_backtrack(tok) -> None:
    for _ in range(64):
        tok._model.encode_piece(b" internationalization", 0)


def _random_strings(seed: int, count: int) -> list[bytes]:
    """hypothesis-style random strings: digits, letters, mixed scripts, repeated characters, of many lengths
    around the window size (128) and its margin"""
    rnd = random.Random(seed)
    alphabets = ["0123456789", "01", "9", "abcdefghij", "aab", "aé中🙂", "αβγδ", "xyz09 .,!",
                 "".join(chr(c) for c in range(0x21, 0x7F))]
    out = []
    for _ in range(count):
        alpha = rnd.choice(alphabets)
        n = rnd.choice([rnd.randint(5, 40), rnd.randint(100, 140), rnd.randint(200, 700)])
        out.append("".join(rnd.choice(alpha) for _ in range(n)).encode()[:n])
    return out


@pytest.mark.parametrize("name", NAMES)
def test_window_encoder_matches_reference(name):
    tok = fstok_encoding(name)
    ranks = read_tiktoken_ranks(tiktoken_path(name))
    rnd = random.Random(len(name))
    pieces = _random_strings(len(name) * 7, 160) + [_junk(rnd, rnd.randint(5, 300)) for _ in range(40)]
    pieces += [bytes(rnd.randint(0, 255) for _ in range(rnd.randint(5, 300))) for _ in range(20)]
    for piece in pieces:
        want = merge_ranks(piece, ranks)
        for window in (True, False):
            if window:
                _prime_window(tok, rnd)
            else:
                _prime_backtrack(tok)
            got = tok._model.encode_piece(piece, 0)
            assert got == ([ranks[piece]] if piece in ranks else want), (piece, window)


@pytest.mark.parametrize("name", NAMES)
def test_window_encoder_long_spans(name):
    """spans of many windows against the heap encoder"""
    tok = fstok_encoding(name)
    rnd = random.Random(3 + len(name))
    longs = [
        "".join(rnd.choice("0123456789") for _ in range(5000)).encode(),
        "".join(rnd.choice("0123456789abc") for _ in range(5000)).encode(),
        ("12" * 1500 + "3" * 700).encode(),
        _junk(rnd, 6000),
        "".join(rnd.choice("aé中🙂xyz") for _ in range(3000)).encode(),
        bytes(rnd.randint(0, 255) for _ in range(5000)),
        b"a" * 3000,
    ]
    for piece in longs:
        want = tok._model.encode_piece(piece, HEAP)
        _prime_window(tok, rnd)
        assert tok._model.encode_piece(piece, 0) == want


@pytest.mark.parametrize("name", NAMES)
def test_adversarial_texts_match_tiktoken(name):
    """the benchmark's adversarial inputs (shortened), whole texts, against tiktoken"""
    tok = fstok_encoding(name)
    ref = tiktoken_encoding(name)
    rnd = random.Random(0)
    pool = [chr(c) for c in range(0x21, 0x7F)] + [chr(rnd.randint(0xA1, 0x2FF)) for _ in range(200)] + \
        [chr(rnd.randint(0x4E00, 0x9FFF)) for _ in range(200)] + [chr(rnd.randint(0x400, 0x4FF)) for _ in range(100)]
    rand = "".join(rnd.choice(pool) for _ in range(120_000))
    digits = "".join(rnd.choice("0123456789") for _ in range(20_000))
    for text in (rand, "a" * 50_000, digits, rand[:5000] + " " + digits[:3000] + " the end"):
        assert tok.encode_ordinary(text) == ref.encode_ordinary(text)


_SMALL_MARGIN_SCRIPT = r"""
import random, sys
sys.path[:0] = sys.argv[1:3]
from bpe_helpers import fstok_encoding
rnd = random.Random(5)
pool = [chr(c) for c in range(0x21, 0x7F)] + [chr(c) for c in range(0xA1, 0x2FF)]
for name in ("r50k_base", "cl100k_base", "o200k_base"):
    tok = fstok_encoding(name)
    for k in range(12):
        alpha = ["0123456789", "0123456789abc", "aab", "aé中🙂", "01"][k % 5]
        piece = "".join(rnd.choice(alpha) for _ in range(rnd.randint(300, 3000))).encode()
        for _ in range(64):
            tok._model.encode_piece("".join(rnd.choice(pool) for _ in range(40)).encode(), 0)
        assert tok._model.encode_piece(piece, 0) == tok._model.encode_piece(piece, 3), (name, piece[:40])
print("ok")
"""


def test_window_junction_repairs():
    """with a 2-byte margin many window junctions are invalid and get re-encoded: still exact"""
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, FSTOK_BPE_WIN_MARGIN="2")
    p = subprocess.run([sys.executable, "-c", _SMALL_MARGIN_SCRIPT, here, os.path.dirname(here)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and p.stdout.strip().endswith("ok"), p.stdout + p.stderr
