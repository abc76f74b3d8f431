"""One HF Split(Isolated) level runs through the piece cache like tiktoken's find mode, with the text between
matches kept as pieces of their own: ids == HF tokenizers, on patterns that leave gaps and on Llama 3's, which
leaves none."""
import functools
import json
import random
import unicodedata

import pytest
from bpe_helpers import sample_lines
from conftest import VOCAB, needs_shared, read_corpus

from fstok.bpe import BPETokenizer

pytestmark = needs_shared

LLAMA3 = f"{VOCAB}/hf-derived/llama3.tokenizer.json"
# patterns that leave text between matches (letters only; two-digit groups; a lookahead at the end of the text)
GAP_PATTERNS = [r"\p{L}+", r"\p{N}{2}| ?[a-z]+", r"\s+(?!\S)|[^\s]{1,4}"]


@functools.lru_cache(maxsize=None)
def pair(pattern: str | None, tmp: str):
    from tokenizers import Tokenizer

    with open(LLAMA3, encoding="utf-8") as f:
        obj = json.load(f)
    if pattern is not None:
        obj["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {"Regex": pattern}
    path = f"{tmp}/tok{abs(hash(pattern))}.json"
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f)
    return BPETokenizer.compile_tokenizer_json(path, name="gaps"), Tokenizer.from_file(path)


def _texts(seed: int) -> list[str]:
    rng = random.Random(seed)
    out = sample_lines("multilingual", 60, seed=seed) + sample_lines("code", 40, seed=seed)
    alphabet = "ab z9 0\n\t.,'é中  \u00a0-" + "".join(chr(rng.randrange(0x20, 0x3000)) for _ in range(30))
    out += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 60))) for _ in range(300)]
    out += ["", " ", "  ", "a", "9", "99", "999 ", " x ", "\n\n", "abc   ", "12ab34", "  ab  "]
    return out


@pytest.mark.parametrize("pattern", GAP_PATTERNS + [None])
def test_split_level_matches_hf(pattern, tmp_path_factory):
    f, hf = pair(pattern, str(tmp_path_factory.getbasetemp()))
    assert f._meta["pretok_mode"] == "split"
    texts = _texts(len(pattern or ""))
    for t in texts:
        assert f.encode_ordinary(t) == hf.encode(t, add_special_tokens=False).ids, repr(t)
    # a second pass: the same pieces now come from the piece cache
    for t in texts:
        assert f.encode_ordinary(t) == hf.encode(t, add_special_tokens=False).ids, repr(t)
    got = f.encode_ordinary_batch(texts, num_threads=2)
    assert got == [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    chunk = read_corpus("multilingual")[20_000:60_000]
    assert f.encode_ordinary(chunk) == hf.encode(chunk, add_special_tokens=False).ids
    ids, offs = f.encode_with_offsets(chunk[:3000]) if hasattr(f, "encode_with_offsets") else (None, None)
    if ids is not None:
        assert ids == hf.encode(chunk[:3000], add_special_tokens=False).ids


@functools.lru_cache(maxsize=None)
def nfc_pair(tmp: str):
    """Llama 3's tokenizer.json with an NFC normalizer (as Qwen2/3 have) and added tokens, normalized and not."""
    from tokenizers import Tokenizer

    with open(LLAMA3, encoding="utf-8") as f:
        obj = json.load(f)
    obj["normalizer"] = {"type": "NFC"}
    n = len(obj["model"]["vocab"])
    obj["added_tokens"] = [
        {"id": n, "content": "<|im_start|>", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True},
        {"id": n + 1, "content": "e\u0301x", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": False},
        {"id": n + 2, "content": "caf\u00e9", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": True, "special": False},
    ]
    path = f"{tmp}/nfc.json"
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f)
    return BPETokenizer.compile_tokenizer_json(path, name="nfc"), Tokenizer.from_file(path)


def test_normalizer_text_already_normalized_takes_native_path(tmp_path_factory):
    f, hf = nfc_pair(str(tmp_path_factory.getbasetemp()))
    assert f._python_text_path()
    texts = sample_lines("multilingual", 80, seed=5) + [
        "caf\u00e9 <|im_start|>user", "cafe\u0301 and caf\u00e9", "e\u0301x", "xe\u0301xe\u0301", "\u0301abc",
        "\u1100\u1161\u11a8 \uac00", "A\u030a\u0323 \u212b", "<|im_start|>\u0301", "ab<|im_start|>e\u0301x\u0301",
        "", "plain ascii text", "\ufb01ne \u2460",
    ]
    want = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    assert [f.encode(t, allowed_special="all") for t in texts] == want
    assert f.encode_batch(texts, allowed_special="all", num_threads=2) == want
    assert f.count_batch(texts) == [len(f.encode_ordinary(t)) for t in texts]
    # texts in NFC never reach the Python planning; the others do
    calls = []
    f._plan = lambda text, allowed: calls.append(text) or BPETokenizer._plan(f, text, allowed)
    try:
        for t in texts:
            f.encode(t, allowed_special="all")
    finally:
        del f._plan
    # (a text not in NFC is normalized whole by C where it holds no first-pass token: not all of them plan)
    assert calls and all(not unicodedata.is_normalized("NFC", t) for t in calls)
