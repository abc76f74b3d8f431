"""Added tokens matched after a BertNormalizer (`"normalized": true`) in WordPiece tokenizer.json files:
fstok.Tokenizer against HF tokenizers 0.23.3 on the real all-MiniLM-L6-v2 file with crafted added tokens
(special and not, in and outside the vocabulary, single_word / lstrip / rstrip, CJK, accents, case), over a
corpus sample, crafted texts and hypothesis strings: every Encoding field, encode_batch, the numpy batch,
decode, id_to_token.  And the refusal where a match would split one character's normalized form."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import VOCAB, needs_shared, spread_sample

tokenizers = pytest.importorskip("tokenizers")
import fstok  # noqa: E402

pytestmark = needs_shared
MINILM = os.path.join(VOCAB, "models", "wordpiece", "all-MiniLM-L6-v2", "tokenizer.json")


def _obj(normalizer=None, extra=()):
    with open(MINILM, encoding="utf-8") as f:
        obj = json.load(f)
    obj["truncation"] = obj["padding"] = None
    if normalizer is not None:
        obj["normalizer"] = dict(obj["normalizer"], **normalizer)
    base = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": True, "special": False}
    for i, c, kw in [(30522, "[NEW]", {"special": True}), (30523, "Ünï", {}), (30524, "中x", {}),
                     (30525, "<raw>", {"normalized": False}), (30526, "Hello", {"single_word": True}),
                     (30527, "wor", {"lstrip": True, "rstrip": True}), (2088, "world", {}),
                     (100, "[UNK]", {"special": True}), *extra]:
        obj["added_tokens"] = [a for a in obj["added_tokens"] if a["id"] != i] + [dict(base, id=i, content=c, **kw)]
    return obj


VARIANTS = {
    "uncased": None,
    "cased": {"lowercase": False, "strip_accents": None},
    "lower-keep-accents": {"lowercase": True, "strip_accents": False},
    "no-cjk-no-clean": {"handle_chinese_chars": False, "clean_text": False},
}
_CACHE: dict = {}


def _pair(name):
    if name not in _CACHE:
        s = json.dumps(_obj(VARIANTS[name]))
        _CACHE[name] = (fstok.Tokenizer.from_str(s), tokenizers.Tokenizer.from_str(s))
    return _CACHE[name]


TEXTS = ["a [new] b", "A[NEW]b", "UNI uni ÜNÏ ünï", "我中x们", "xx中xx 中 x", "hello world HELLO<raw>x", "Hellos wor ld  WOR  x",
         "Ünïcode  World", "abc\x00[new]\u0301", "[NEW][new] [unk] [UNK]", "\tworld\u00a0world\u3000wor", ""]


def _fields(e):
    return (e.ids, e.tokens, e.offsets, e.word_ids, e.type_ids, e.special_tokens_mask, e.attention_mask,
            e.sequence_ids)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_against_hf(name):
    ours, hf = _pair(name)
    texts = TEXTS + spread_sample()
    for t in texts:
        assert _fields(ours.encode(t)) == _fields(hf.encode(t)), t
        ids = hf.encode(t).ids
        for skip in (True, False):
            assert ours.decode(ids, skip_special_tokens=skip) == hf.decode(ids, skip_special_tokens=skip), t
    pairs = [(a, b) for a, b in zip(texts, texts[1:] + texts[:1])]
    assert [_fields(e) for e in ours.encode_batch(pairs)] == [_fields(e) for e in hf.encode_batch(pairs)]
    for i in range(30522, 30528):
        assert ours.id_to_token(i) == hf.id_to_token(i)
    ours.enable_padding(pad_id=0, pad_token="[PAD]")
    ours.enable_truncation(24)
    hf.enable_padding(pad_id=0, pad_token="[PAD]")
    hf.enable_truncation(24)
    try:
        got = ours.encode_batch_numpy(texts, return_offsets_mapping=True)
        want = hf.encode_batch(texts)
        assert got["input_ids"].tolist() == [e.ids for e in want]
        assert got["offset_mapping"].tolist() == [[list(o) for o in e.offsets] for e in want]
    finally:
        ours.no_padding(), ours.no_truncation(), hf.no_padding(), hf.no_truncation()


PIECES = st.sampled_from(["[new]", "[NEW]", "Ünï", "uni", "中x", "中", "x", "<raw>", "Hello", "hello", "wor", "world",
                          " ", "  ", "\u3000", "é", "e\u0301", "İ", "ß", "a", "!", "[unk]", "\x00", "日本", "½", "\u0301", "\u200d"])


@settings(max_examples=120, deadline=None)
@given(parts=st.lists(PIECES, max_size=8))
def test_hypothesis(parts):
    ours, hf = _pair("uncased")
    t = "".join(parts)
    assert _fields(ours.encode(t)) == _fields(hf.encode(t)), t


@pytest.mark.parametrize("name", list(VARIANTS))
def test_match_takes_the_spaces_around_a_cjk_character(name):
    """An lstrip / rstrip token takes the space BertNormalizer puts after (or before) a CJK character: the
    rest of that character's normalized form is the character and a space, which encodes as the character
    does; HF gives the match the character's start."""
    ours, hf = _pair(name)
    for t in ["中wor", "中 wor", "x中wor中", "wor中wor", "中  wor 中", "a中\u3000wor", "中中x中", "中x中x", "中wor中x中"]:
        assert _fields(ours.encode(t)) == _fields(hf.encode(t)), t


@pytest.mark.parametrize("name", list(VARIANTS))
def test_single_word_uses_unicode_word_characters(name):
    """single_word looks at Rust regex's Unicode \\w beside the match: a combining mark or a joiner is a word
    character, a vulgar fraction is not (Python's isalnum says the opposite of each)."""
    ours, hf = _pair(name)
    for t in ["e\u0301Hello", "Hello\u0301", "\u00bdHello", "Hello\u00bd", "x\u200dHello", "_Hello", "Hello_"]:
        assert _fields(ours.encode(t)) == _fields(hf.encode(t)), t


def test_refuses_a_match_inside_one_character():
    """Without strip_accents, lowercase maps "İ" to "i" + U+0307: a token "i" matches half of it, and the
    rest of that character cannot be encoded from the original text: refused by name, never different."""
    obj = _obj({"lowercase": True, "strip_accents": False},
               extra=[(1045, "i", {})])
    ours = fstok.Tokenizer.from_str(json.dumps(obj))
    assert ours.encode("big dip").ids == tokenizers.Tokenizer.from_str(json.dumps(obj)).encode("big dip").ids
    with pytest.raises(NotImplementedError, match="normalized form of one character"):
        ours.encode("İstanbul")


def test_numpy_rows_equal_encode_batch():
    ours, _ = _pair("cased")
    texts = TEXTS * 3
    ours.enable_padding(pad_id=0, pad_token="[PAD]")
    try:
        got = ours.encode_batch_numpy(texts)
        want = ours.encode_batch(texts)
        assert got["input_ids"].tolist() == [e.ids for e in want]
        assert np.array_equal(got["attention_mask"], np.array([e.attention_mask for e in want]))
    finally:
        ours.no_padding()
