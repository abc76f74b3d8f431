"""Pieces that miss the piece cache on text new to it are encoded several at a time, in lockstep (pc_fill_cold,
bpe_piece_cache.h), while many pieces miss: the ids equal the reference's with the fill on, with it off
($FSTOK_BPE_LANES=0), with the baseline build of the merge loop on a machine with AVX2 ($FSTOK_BPE_LANES=sse2),
and with a piece cache of three lines (each filled piece is evicted again before it is
emitted, and the emitting loop encodes it itself).  Pieces of 17-24 bytes take the lanes too (long entries);
test_bpe_cold_lanes_long.py checks them against the pure-Python oracle."""
import json
import os
import subprocess
import sys

import pytest

from conftest import SHARED, needs_shared

HERE = os.path.dirname(os.path.abspath(__file__))

SCRIPT = r"""
import json, random, sys
sys.path[:0] = [sys.argv[1]]
import fstok
from fstok.runtime import _bpe
from bpe_helpers import fstok_encoding, tiktoken_encoding
from conftest import read_corpus
from tokenizers import Tokenizer

rnd = random.Random(3)
alpha = "abcdefghijklmnopqrstuvwxyzéüßЖщ中文字日本語한국어ـعربي '1"
words = ["".join(rnd.choice(alpha) for _ in range(rnd.randint(1, 18))) for _ in range(6000)]
texts = [read_corpus("multilingual")[:60_000], " ".join(words[:3000])]
bad, before, before_long = [], _bpe.lanes_filled(), _bpe.lanes_filled_long()
for name in ("cl100k_base", "o200k_base"):
    enc, ref = fstok_encoding(name), tiktoken_encoding(name)
    for t in texts:
        enc.clear_cache()
        if enc.encode_ordinary(t) != ref.encode_ordinary(t):
            bad.append(name)
        # documents one call each, and a batch of lines
        docs = [t[i:i + 2000] for i in range(0, len(t), 2000)]
        enc.clear_cache()
        if [enc.encode_ordinary(d) for d in docs] != [ref.encode_ordinary(d) for d in docs]:
            bad.append(name + " docs")
        lines = t.split("\n")
        enc.clear_cache()
        if enc.encode_ordinary_batch(lines, num_threads=1) != ref.encode_ordinary_batch(lines, num_threads=1):
            bad.append(name + " lines")
# tokenizer.json: internal ids (ranks) differ from the vocabulary's ids
for path in (sys.argv[2], sys.argv[3]):
    tok, hf = fstok.compile(path), Tokenizer.from_file(path)
    for t in texts:
        for d in [t[i:i + 4000] for i in range(0, len(t), 4000)]:
            if tok.encode(d) != hf.encode(d, add_special_tokens=False).ids:
                bad.append(path)
                break
print(json.dumps({"bad": bad, "filled": _bpe.lanes_filled() - before,
                  "filled_long": _bpe.lanes_filled_long() - before_long}))
"""


def _run(env_extra):
    llama = os.path.join(SHARED, "vocab", "hf-derived", "llama3.tokenizer.json")
    roberta = os.path.join(SHARED, "vocab", "models", "bytelevel-bpe", "roberta-base", "tokenizer.json")
    env = dict(os.environ, **env_extra)
    r = subprocess.run([sys.executable, "-c", SCRIPT, HERE, llama, roberta], env=env, capture_output=True, text=True,
                       check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


@needs_shared
@pytest.mark.parametrize("env", [{}, {"FSTOK_BPE_LANES": "0"}, {"FSTOK_BPE_LANES": "sse2"}, {"FSTOK_BPE_PC_LINES": "3"}],
                         ids=["lanes", "no-lanes", "sse2-lanes", "three-lines"])
def test_cold_lanes_exact(env):
    out = _run(env)
    assert out["bad"] == []
    if env.get("FSTOK_BPE_LANES") == "0":
        assert out["filled"] == out["filled_long"] == 0
    else:
        assert out["filled"] > 2000  # the lanes ran on these texts
        assert out["filled_long"] > 100  # pieces of 17-24 bytes among them (long entries)
