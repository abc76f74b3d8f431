"""The added/special-token matcher of the byte-level BPE (`Specials.find`: leftmost-longest over UTF-8) against a
plain Python oracle, for token sets starting with 1, 2-4 (a vector compare finds their first bytes) and more
distinct bytes, with matches at every offset around 16-byte blocks and at the end of the text."""
import json
import os
import random

import pytest
from conftest import VOCAB, needs_shared, spread_sample

from fstok.runtime import _bpe


def oracle(data: bytes, toks: dict, pos: int):
    for i in range(pos, len(data)):
        best = None
        for t, tid in toks.items():
            if data.startswith(t, i) and (best is None or len(t) > len(best[0])):
                best = (t, tid)
        if best is not None:
            return (i, len(best[0]), best[1])
    return None


SETS = {
    "one": [b"<|a|>", b"<|ab|>", b"<s>"],
    "two": [b"<|x|>", b"|||IP|||", b"<pad>", b"||"],
    "four": [b"<a>", b"|b", b"\xef\xbd\x9c", b"\x00z", b"<ab>"],
    "six": [b"<a>", b"|b", b"\xef\xbd", b"\x00z", b"qq", b"a "],
}


@pytest.mark.parametrize("name", sorted(SETS))
def test_find_equals_oracle(name):
    toks = {t: 100 + k for k, t in enumerate(SETS[name])}
    sp = _bpe.Specials(list(toks.items()))
    rng = random.Random(name)
    alphabet = [b"<", b"|", b"a", b"b", b">", b"x", b" ", b"\xef", b"\xbd", b"\x9c", b"\x00", b"z", b"q", b"pad",
                b"IP", b"s"]
    for trial in range(400):
        n = rng.choice([0, 1, 5, 15, 16, 17, 31, 32, 33, 40, 70])
        data = b"".join(rng.choice(alphabet) for _ in range(n))[:n]
        if trial % 3 == 0 and toks:  # a token at a chosen offset, often across or at the end of a block
            t = rng.choice(list(toks))
            at = rng.choice([0, 14, 15, 16, 17, 31, 32, max(0, len(data) - len(t))])
            data = (b"x" * at + data)[:at] + t + data[at:]
        for pos in {0, 1, 15, 16, len(data) // 2, len(data)}:
            assert sp.find(data, pos) == oracle(data, toks, pos), (name, data, pos)


def test_find_in_long_text_without_tokens():
    sp = _bpe.Specials([(b"<|x|>", 7), (b"|y", 8)])
    data = b"plain text with < and | but no token " * 100
    assert sp.find(data, 0) is None
    data2 = data + b"<|x|>"
    assert sp.find(data2, 0) == (len(data), 5, 7)
    assert sp.find(data2, len(data) + 1) is None


@needs_shared
@pytest.mark.parametrize("rel", ["models/bytelevel-bpe/olmo-2/allenai_dolma2.json", "hf/deepseek_tokenizer.json"])
def test_added_tokens_of_two_first_bytes_equal_hf(rel):
    """OLMo-2's added tokens start with '<' or '|', DeepSeek's with '<' or a full-width bar: ids as HF's on
    texts full of both bytes and of the tokens themselves."""
    tokenizers = pytest.importorskip("tokenizers")
    import fstok

    path = os.path.join(VOCAB, rel)
    with open(path, encoding="utf-8") as f:
        added = [a["content"] for a in json.load(f)["added_tokens"]][:40]
    tok, ref = fstok.compile(path), tokenizers.Tokenizer.from_file(path)
    rng = random.Random(3)
    texts = spread_sample(4)
    for _ in range(60):
        parts = [rng.choice(added + ["<", "|", "||", "<|", " x ", "\uff5c", "a|b<c", "\n"]) for _ in range(rng.randint(1, 12))]
        texts.append("".join(parts))
    texts.append(" ".join(added))
    want = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    got = [tok.encode(t, allowed_special="all") if hasattr(tok, "encode_ordinary") else tok.encode(t) for t in texts]
    assert [t for t, g, w in zip(texts, got, want) if g != w] == []
