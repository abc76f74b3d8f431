"""The piece cache that the threads of one multi-threaded call share (bpe_shared_cache.h): a piece one thread
merged is read by the others.  Ids stay those of the reference whichever thread merged a piece: batches and
parallel long texts on several threads equal tiktoken / HF tokenizers, with the normal table and with a table of
16 entries whose generation moves on every few inserts (every lookup races with writers that reclaim entries).
Single-threaded calls never make the table; clear_cache() empties it."""
import json
import os
import subprocess
import sys

from conftest import SHARED, needs_shared

HERE = os.path.dirname(os.path.abspath(__file__))

SCRIPT = r"""
import json, random, sys
sys.path[:0] = [sys.argv[1]]
import fstok
from bpe_helpers import fstok_encoding, tiktoken_encoding
from conftest import read_corpus
from tokenizers import Tokenizer

rnd = random.Random(5)
alpha = "abcdefghijklmnopqrstuvwxyzéüßЖщ中文字日本語한국어ـعربي '1"
words = ["".join(rnd.choice(alpha) for _ in range(rnd.randint(1, 14))) for _ in range(4000)]
lines = [ln for ln in read_corpus("multilingual").split("\n") if ln.strip()][:1500]
lines += [" ".join(rnd.choice(words) for _ in range(rnd.randint(1, 30))) for _ in range(1500)]
rnd.shuffle(lines)
out = {"bad": [], "entries": {}}
for name in ("cl100k_base", "o200k_base"):
    enc, ref = fstok_encoding(name), tiktoken_encoding(name)
    want = ref.encode_ordinary_batch(lines, num_threads=1)
    out["entries"][name + " 1 thread"] = enc._model.shared_cache_entries()
    enc.encode_ordinary_batch(lines[:200], num_threads=1)
    out["entries"][name + " after 1 thread"] = enc._model.shared_cache_entries()
    for nt in (2, 4):
        for rep in range(2):
            if enc.encode_ordinary_batch(lines, num_threads=nt) != want:
                out["bad"].append(f"{name} batch {nt} threads")
            got = []
            for i in range(0, len(lines), 256):
                got += enc.encode_ordinary_batch(lines[i:i + 256], num_threads=nt)
            if got != want:
                out["bad"].append(f"{name} small batches {nt} threads")
    out["entries"][name + " after 4 threads"] = enc._model.shared_cache_entries()
    long_text = "\n".join(lines)
    if enc.encode_ordinary(long_text, num_threads=4) != ref.encode_ordinary(long_text):
        out["bad"].append(f"{name} long text 4 threads")
    enc.clear_cache()
    out["entries"][name + " after clear"] = enc._model.shared_cache_entries()
# tokenizer.json: the model's internal ids (ranks) differ from its vocabulary's: the shared table holds the latter
path = sys.argv[2]
tok, hf = fstok.compile(path), Tokenizer.from_file(path)
want = [e.ids for e in hf.encode_batch(lines, add_special_tokens=False)]
for nt in (1, 3):
    if tok.encode_batch(lines, num_threads=nt) != want:
        out["bad"].append(f"llama3 batch {nt} threads")
print(json.dumps(out))
"""


def _run(env_extra):
    env = dict(os.environ, **env_extra)
    llama = os.path.join(SHARED, "vocab", "hf-derived", "llama3.tokenizer.json")
    p = subprocess.run([sys.executable, "-c", SCRIPT, HERE, llama], capture_output=True, text=True, env=env,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@needs_shared
def test_shared_piece_cache_exact_and_filled():
    r = _run({})
    assert r["bad"] == []
    for name in ("cl100k_base", "o200k_base"):
        e = r["entries"]
        assert e[name + " 1 thread"] == -1 and e[name + " after 1 thread"] == -1  # never made by one thread
        assert e[name + " after 4 threads"] > 1000  # the threads' merged pieces are there
        assert e[name + " after clear"] == 0


@needs_shared
def test_shared_piece_cache_tiny_table_races():
    r = _run({"FSTOK_SHARED_CACHE_BITS": "4"})
    assert r["bad"] == []
    assert 0 <= r["entries"]["o200k_base after 4 threads"] <= 16


@needs_shared
def test_shared_piece_cache_off():
    r = _run({"FSTOK_SHARED_CACHE": "0"})
    assert r["bad"] == []
    assert r["entries"]["o200k_base after 4 threads"] == -1
