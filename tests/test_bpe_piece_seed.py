"""The piece cache's seed (bpe_piece_cache.h pc_seed_build): once a memo has encoded 16 KiB of text, the free lines of
its piece cache get an image holding every token of <= 16 bytes as the one-token piece the miss path would make of it.  The ids equal the reference's with the
seed and without it, on text whose pieces are mostly vocabulary tokens (the seeded entries are hit), with the seed
applied after clear_cache, on a cache of three lines (the seed's entries evicted and stored back), and on
tokenizer.json models whose ids are not their ranks."""
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

rnd = random.Random(5)
bad, seeds = [], {}


def token_texts(values):
    # pieces that are whole tokens: each token's bytes (valid UTF-8) on a line of its own, and runs of them
    toks = [v.decode("utf-8") for v in values if len(v) <= 16 and _utf8(v)]
    rnd.shuffle(toks)
    return ["\n".join(toks[i:i + 400]) for i in range(0, len(toks), 400)] + ["".join(toks[:3000])]


def _utf8(b):
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


corpus = [read_corpus("multilingual")[:40_000], read_corpus("english")[:40_000]]
for name in ("cl100k_base", "o200k_base"):
    enc, ref = fstok_encoding(name), tiktoken_encoding(name)
    texts = token_texts(ref.token_byte_values())[:60] + corpus
    for seed in (False, True, False, True):
        _bpe._set_seed(seed)
        enc.clear_cache()
        enc.encode_ordinary("warm")  # (seeded, when on, once 16 KiB of the texts below have been encoded)
        for t in texts:
            if enc.encode_ordinary(t) != ref.encode_ordinary(t):
                bad.append((name, seed, t[:40]))
        lines = [ln for t in texts[:8] for ln in t.split("\n")]
        if enc.encode_ordinary_batch(lines, num_threads=1) != ref.encode_ordinary_batch(lines, num_threads=1):
            bad.append((name, seed, "lines"))
    seeds[name] = enc._model._seed_entries()
_bpe._set_seed(True)
for path in sys.argv[2:]:
    tok, hf = fstok.compile(path), Tokenizer.from_file(path)
    model = tok._model if hasattr(tok, "_model") else tok._tables._model  # (a pipeline: its BPE tables' model)
    vocab = sorted(hf.get_vocab().items(), key=lambda kv: kv[1])
    texts = [hf.decode([i]) for _, i in vocab[:20000] if 0 < len(hf.decode([i]).encode()) <= 16]
    texts = ["\n".join(texts[i:i + 300]) for i in range(0, len(texts), 300)][:40] + [c[:20_000] for c in corpus]
    model.clear_cache()
    tok.encode("warm")
    for t in texts:
        if tok.encode(t) != hf.encode(t, add_special_tokens=False).ids:
            bad.append((path, t[:40]))
    seeds[path] = model._seed_entries()
print(json.dumps({"bad": bad[:5], "seeds": seeds}))
"""


def _run(env_extra):
    llama = os.path.join(SHARED, "vocab", "hf-derived", "llama3.tokenizer.json")
    roberta = os.path.join(SHARED, "vocab", "models", "bytelevel-bpe", "roberta-base", "tokenizer.json")
    env = dict(os.environ, **env_extra)
    r = subprocess.run([sys.executable, "-c", SCRIPT, HERE, llama, roberta], env=env, capture_output=True, text=True,
                       check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


@needs_shared
@pytest.mark.parametrize("env", [{}, {"FSTOK_BPE_PC_LINES": "3"}], ids=["full", "three-lines"])
def test_seeded_cache_exact(env):
    out = _run(env)
    assert out["bad"] == []
    seeds = out["seeds"]
    if env:  # three lines: at most two entries a line
        assert all(0 <= n <= 6 for n in seeds.values()), seeds
    else:  # most tokens of <= 16 bytes are in the seed
        assert seeds["o200k_base"] > 150_000 and seeds["cl100k_base"] > 80_000, seeds
        assert all(n > 20_000 for n in seeds.values()), seeds


def test_seed_not_built_for_one_call():
    # one short text in a fresh process: no seed is built (less than 16 KiB went through its memo)
    code = ("import fstok; e = fstok.get_encoding('cl100k_base'); e.encode_ordinary('hello world'); "
            "print(e._model._seed_entries())")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "-1"
