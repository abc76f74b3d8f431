"""The encoders read their tables from a copy in 2 MiB pages (FSTOK_TABLES_HUGE, lib_bpe.c tables_to_huge) and
answer most short-piece pair lookups from a rank/select bitmap of the pairs of the lowest-ranked tokens
(bpe_pair_get): ids with the copy and without it (the artifact's own mapping) are the same, and both equal the
reference's; the bitmap answers every pair of two small ids as the hashed pair table does."""
import json
import os
import subprocess
import sys

from bpe_helpers import tiktoken_encoding
from conftest import corpus_path

CODE = r"""
import json, sys, fstok
text = open(sys.argv[1], encoding="utf-8").read()[:200000]
out = {n: fstok.get_encoding(n).encode_ordinary(text) for n in ("cl100k_base", "o200k_base")}
print(json.dumps(out))
"""


def test_same_ids_with_and_without_the_huge_copy():
    path = corpus_path("multilingual")
    runs = []
    for flag in ("0", "1"):
        env = dict(os.environ, FSTOK_TABLES_HUGE=flag)
        r = subprocess.run([sys.executable, "-c", CODE, path], env=env, capture_output=True, text=True, check=True)
        runs.append(json.loads(r.stdout))
    assert runs[0] == runs[1]
    text = open(path, encoding="utf-8").read()[:200000]
    for name in ("cl100k_base", "o200k_base"):
        assert runs[1][name] == tiktoken_encoding(name).encode_ordinary(text)


def test_small_pair_bitmap_answers_as_the_hashed_table():
    import fstok
    from conftest import SHARED

    models = [fstok.get_encoding(n) for n in ("cl100k_base", "o200k_base")]
    # internal ids differ from external ones here (ranks are not ids)
    rob = fstok.compile(os.path.join(SHARED, "vocab", "models", "bytelevel-bpe", "roberta-base", "tokenizer.json"))
    models.append(rob._tables)
    for tok in models:
        held, bad = tok._model._pair_small_check()
        assert bad == 0
        assert held > 5000  # (o200k: 32k pairs of two ids below 1024)
