"""Tokenizers pickle by their artifact and hash by its content, so HF `datasets` can fingerprint them
(`datasets.fingerprint.Hasher`, the key of `Dataset.map`'s cache) the same way in every process."""
from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys

import pytest

from bpe_helpers import tiktoken_path
from conftest import needs_shared

pytestmark = needs_shared

datasets = pytest.importorskip("datasets")

# each process compiles into its own empty cache, so equal hashes mean equal compiled content
PROG = f"""
import json, sys
import fstok, fstok.tiktoken as ftk, fstok.tiktoken.openai_public
from datasets.fingerprint import Hasher

ranks = ftk.load.load_tiktoken_bpe({tiktoken_path("r50k_base")!r})
small = ftk.Encoding("small", pat_str=ftk.openai_public.r50k_pat_str,
                     mergeable_ranks={{b: i for b, i in ranks.items() if i < 500}}, special_tokens={{"<|s|>": 500}})
toks = {{
    "bpe": fstok.get_encoding("r50k_base"),
    "wordpiece": fstok.get_encoding("bert-base-uncased"),
    "face_registered": ftk.get_encoding("r50k_base"),
    "face_custom": small,
}}
print(json.dumps({{k: Hasher.hash(v) for k, v in toks.items()}}))
"""


def _hashes(cache: str) -> dict[str, str]:
    env = dict(os.environ, FSTOK_CACHE_DIR=cache)
    r = subprocess.run([sys.executable, "-c", PROG], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_hasher_is_stable_across_processes(tmp_path):
    a = _hashes(str(tmp_path / "a"))
    b = _hashes(str(tmp_path / "b"))
    assert a == b
    assert len(set(a.values())) == len(a)  # different tokenizers, different fingerprints


def test_pickle_roundtrips_by_artifact():
    import fstok
    import fstok.tiktoken as ftk

    for tok in (fstok.get_encoding("r50k_base"), fstok.get_encoding("bert-base-uncased")):
        data = pickle.dumps(tok)
        back = pickle.loads(data)
        assert type(back) is type(tok) and back.to_bytes() == tok.to_bytes()
        assert back.encode("Hello wörld, tokenizers!") == tok.encode("Hello wörld, tokenizers!")
        assert pickle.dumps(back) == data  # the pickle is a function of the artifact alone
    enc = ftk.get_encoding("r50k_base")
    assert pickle.loads(pickle.dumps(enc)) is enc


def test_datasets_map_fingerprint_uses_tokenizer_content():
    """The fingerprint `Dataset.map` derives from a function that closes over a tokenizer is the same on
    a second, equal tokenizer and differs for another tokenizer."""
    import fstok
    from datasets.fingerprint import Hasher

    a, b = fstok.get_encoding("r50k_base"), fstok.loads(fstok.get_encoding("r50k_base").to_bytes())
    other = fstok.get_encoding("p50k_base")

    def make(tok):
        def fn(batch):
            return {"ids": tok.encode_batch(batch["text"])}

        return fn

    assert Hasher.hash(make(a)) == Hasher.hash(make(b))
    assert Hasher.hash(make(a)) != Hasher.hash(make(other))
