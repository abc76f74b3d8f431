"""The piece cache's two choices (docs/design/bpe.md "Runtime"): a piece lives in its own
line or in the buddy (the other line of its 128-byte pair), entries hit since they were last aged are not evicted
by a miss (the miss ages them instead), a hit in the buddy moves the entry back to its own line when that line can
take it, and pieces of 12-16 tokens or of 17-24 bytes take both lines (head + PC_CONT entry).  Checked against tiktoken over texts
whose pieces are slots (1-3 tokens), wide entries (4-11) and double entries (12-16), many passes, texts
alternating (so that entries age, move and are evicted), with the full cache and, in subprocesses, with
$FSTOK_BPE_PC_LINES = 2, 4, 6, 8 lines (every piece collides: buddies, aging, moves and doubles overwritten by other
pieces all run; from 4 lines on, pieces of 17-24 bytes also take their second pair, lines i ^ 2 and i ^ 3, and
with 6 lines lines 4-5 have none) and 3 (the last line is its own buddy)."""
from __future__ import annotations

import os
import random
import subprocess
import sys

import pytest

from bpe_helpers import fstok_encoding, tiktoken_encoding
from conftest import needs_shared, read_corpus

NAMES = ["r50k_base", "cl100k_base", "o200k_base"]


def _random_text(seed: int, n: int) -> str:
    # the bench's random text on a smaller pool: punctuation runs and rare characters give pieces of <= 16 bytes
    # with 12-16 tokens (double entries) besides slots and wide entries
    rnd = random.Random(seed)
    pool = [chr(c) for c in range(0x21, 0x7F)] + [chr(rnd.randint(0xA1, 0x2FF)) for _ in range(60)] + \
        [chr(rnd.randint(0x4E00, 0x9FFF)) for _ in range(60)]
    return "".join(rnd.choice(pool) for _ in range(n))


def _piece_kinds(name: str, text: str) -> dict:
    import regex
    tk = tiktoken_encoding(name)
    kinds: dict = {}
    for m in regex.finditer(tk._pat_str, text):
        p = m.group().encode()
        if len(p) <= 16:
            n = len(tk._core_bpe.encode_single_piece(p))
            k = "slot" if n <= 3 else "wide" if n <= 11 else "double"
            kinds[k] = kinds.get(k, 0) + 1
    return kinds


@needs_shared
@pytest.mark.parametrize("name", NAMES)
def test_two_choices_full_cache(name):
    enc, ref = fstok_encoding(name), tiktoken_encoding(name)
    texts = [_random_text(1, 40_000), read_corpus("english")[:60_000], _random_text(2, 40_000)]
    kinds = _piece_kinds(name, texts[0])
    assert kinds.get("double", 0) > 100 and kinds.get("wide", 0) > 1000 and kinds.get("slot", 0) > 1000, kinds
    wants = [ref.encode_ordinary(t) for t in texts]
    enc.clear_cache()
    for _ in range(3):
        for t, w in zip(texts, wants):
            assert enc.encode_ordinary(t) == w
            assert enc.encode_ordinary(t) == w
            assert enc.count(t) == len(w)
    enc.clear_cache()
    assert enc.encode_ordinary(texts[2]) == wants[2]


_FEW_LINES_SCRIPT = r"""
import random, sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
from bpe_helpers import fstok_encoding, tiktoken_encoding
from test_bpe_adv_piece_cache import _random_text
for name in ("r50k_base", "cl100k_base", "o200k_base"):
    enc, ref = fstok_encoding(name), tiktoken_encoding(name)
    rnd = random.Random(9)
    base = _random_text(4, 3000)
    # a few pieces repeated often (they stay and get hit), many once (misses that age and evict)
    hot = [base[i:i + rnd.randint(1, 16)] for i in range(0, 600, 16)]
    # pieces of 17-24 bytes (long entries over two lines) that share their first 16 bytes and their length: only
    # the third key word tells them apart
    hot += [" abcdefghijklmno" + "".join(rnd.choice("pqrstuvwxyz") for _ in range(k)) for k in (1, 4, 8) for _ in range(6)]
    hot += ["".join(rnd.choice("中文字符集") for _ in range(k)) for k in (6, 7, 8) for _ in range(4)]
    for rounds in range(4):
        cold = _random_text(10 + rounds, 2000)
        text = " ".join(rnd.choice(hot) for _ in range(3000)) + cold + " ".join(rnd.choice(hot) for _ in range(3000))
        want = ref.encode_ordinary(text)
        for _ in range(3):
            assert enc.encode_ordinary(text) == want, name
        for w in hot[:40]:  # alone: a double entry's two lines, then others taking one of them
            assert enc.encode_ordinary(w) == ref.encode_ordinary(w), (name, w)
            assert enc.encode_ordinary(w + w) == ref.encode_ordinary(w + w), (name, w)
        if rounds == 2:
            enc.clear_cache()  # a new generation: stale entries are free lines
print("ok")
"""


@needs_shared
@pytest.mark.parametrize("lines", ["2", "3", "4", "6", "8"])
def test_two_choices_few_lines(lines):
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, FSTOK_BPE_PC_LINES=lines)
    p = subprocess.run([sys.executable, "-c", _FEW_LINES_SCRIPT, here, os.path.dirname(here)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and p.stdout.strip().endswith("ok"), p.stdout + p.stderr
