"""Vocabularies whose merges are not rank-monotone (Llama 3: a token ranked before one of its parts).  Long spans
that hold none of those tokens' byte strings take the linear monotone encoders, the others the heap; both give
BPE's ids (pure-Python references: merge_ranks, HF tokenizers)."""
import functools
import random

import numpy as np
import pytest
from bpe_helpers import token_concat_strings
from conftest import VOCAB, needs_shared, read_corpus

from fstok.bpe import BPETokenizer
from fstok.loaders.tiktoken_file import read_tiktoken_ranks
from fstok.pretokenize import LLAMA3_PAT
from fstok.reference.bpe import merge_ranks
from fstok.runtime import _bpe

pytestmark = needs_shared

TIKTOKEN_PATH = f"{VOCAB}/llama3/tokenizer.model"
HF_PATH = f"{VOCAB}/hf-derived/llama3.tokenizer.json"


@functools.lru_cache(maxsize=None)
def llama3_tiktoken():
    return BPETokenizer.compile_tiktoken(TIKTOKEN_PATH, pattern=LLAMA3_PAT, special_tokens={}, name="llama3"), \
        read_tiktoken_ranks(TIKTOKEN_PATH)


def non_monotone_tokens(tok) -> list[bytes]:
    """Python oracle of the runtime's set: internal tokens with a split part ranked after them."""
    info = tok._art.array("int_info").reshape(-1, 4).astype(np.int64)
    ar = np.arange(len(info))
    bad = ((info[:, 1] != ar) | (info[:, 2] != ar)) & ((info[:, 1] > ar) | (info[:, 2] > ar))
    ext = tok._art.array("int_ext")
    return [tok.decode_bytes([int(ext[i])]) for i in np.nonzero(bad)[0]]


def _long_spans(tok, nm: list[bytes], seed: int) -> list[bytes]:
    rnd = random.Random(seed)
    out = [s for s in token_concat_strings(tok, 300, seed=seed, max_tokens=24) if len(s) > 16]
    for _ in range(150):  # spans holding non-monotone tokens between ordinary bytes
        parts = [rnd.choice(nm) if rnd.random() < 0.4 else rnd.choice([b"a", b"ng", b".:", b":", b"\xe1\xbb\x87", b" th"])
                 for _ in range(rnd.randint(4, 14))]
        out.append(b"".join(parts))
    for ch in (b"a", b" ", b"0", b".:", b"ab", "é".encode(), "中".encode(), b"\xe1\xbb"):
        out.append(ch * rnd.randint(20, 120))
    words = [w for w in read_corpus("multilingual").encode().split(b" ") if len(w) > 16]
    out += rnd.sample(words, min(150, len(words)))
    return [s for s in out if len(s) > 16]


def test_long_spans_exact_and_routed_by_the_filter():
    tok, ranks = llama3_tiktoken()
    assert not tok._meta["backtrack_ok"]
    nm = non_monotone_tokens(tok)
    assert 0 < len(nm) < 1000
    before = _bpe.nm_spans()
    for span in _long_spans(tok, nm, seed=11):
        want = merge_ranks(span, ranks)
        heap0 = _bpe.nm_spans()[0]
        assert tok._model.encode_piece(span, 0) == want, span
        assert tok._model.encode_piece(span, 1) == want, span
        assert tok._model.encode_piece(span, 3) == want, span
        if not any(t in span for t in nm):  # the monotone encoders must have taken every long segment
            assert _bpe.nm_spans()[0] == heap0, span
    after = _bpe.nm_spans()
    assert after[0] > before[0] and after[1] > before[1]  # both routes ran


def test_every_token_encodes_to_itself_including_backtracking():
    tok, _ = llama3_tiktoken()
    assert tok._model.self_check() == (0, -1)


def test_forcing_the_heap_gives_the_same_ids():
    tok, ranks = llama3_tiktoken()
    text = read_corpus("multilingual")[:60_000] + " " + "a" * 3000 + " " + ".:" * 700 + "9" * 500
    fast = tok.encode_ordinary(text)
    m = tok._meta
    tok._model._tune(m["short_max"], False, m["hash_max"], m["short_max_mb"])
    try:
        before = _bpe.nm_spans()
        tok.clear_cache()
        assert tok.encode_ordinary(text) == fast
        assert _bpe.nm_spans() == before  # no span was routed
    finally:
        tok._model._tune(m["short_max"], True, m["hash_max"], m["short_max_mb"])


@pytest.mark.parametrize("text", ["a" * 20_000, " " * 20_000, ".:" * 5000, "0" * 20_000, "é" * 9000,
                                  "x" + " nghiệ" * 2000, "maktadır" * 2000])
def test_hf_llama3_long_runs(text):
    from tokenizers import Tokenizer

    f = BPETokenizer.compile_tokenizer_json(HF_PATH, name="llama3")
    hf = Tokenizer.from_file(HF_PATH)
    assert f.encode_ordinary(text) == hf.encode(text, add_special_tokens=False).ids


def test_hf_llama3_random_text_direct_runs():
    # random text takes the direct runs of the piece loop (internal ids mapped to external ones for HF models)
    from tokenizers import Tokenizer

    f = BPETokenizer.compile_tokenizer_json(HF_PATH, name="llama3")
    hf = Tokenizer.from_file(HF_PATH)
    rnd = random.Random(4)
    texts = [bytes(rnd.randrange(256) for _ in range(60_000)).decode("latin-1"),
             "".join(chr(rnd.randrange(0x20, 0x800)) for _ in range(30_000)),
             "".join(rnd.choice("ab .:,9\n\u00e9") for _ in range(60_000))]
    for t in texts:
        f.clear_cache()
        assert f.encode_ordinary(t) == hf.encode(t, add_special_tokens=False).ids
        assert f.encode_ordinary(t) == hf.encode(t, add_special_tokens=False).ids  # warm
