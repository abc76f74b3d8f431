"""Normalized added tokens under a byte-level BPE's Unicode normalizer (anthropic's NFKC tokenizer.json): HF
looks for each in the normalized text by its content passed through the normalizer ("Ｈｅｌｌｏ" matches
"Hello" and "Ｈｅｌｌｏ"), names a match by that normalized content and gives it the original characters it
came from.  fstok after add_tokens and on a file holding the tokens, against HF: every Encoding field, the
batch, the numpy batch and decode."""
from __future__ import annotations

import os

import pytest

from conftest import VOCAB, needs_shared

tokenizers = pytest.importorskip("tokenizers")

import fstok  # noqa: E402

pytestmark = needs_shared

ANTHROPIC = os.path.join(VOCAB, "hf", "anthropic_tokenizer.json")
NEW = ["<newtok>", "Ｈｅｌｌｏ", "ﬁx", "Ａ<b>", "e\u0301t\u00e9"]
TEXTS = ["a <newtok> b Hello <NEWTOK> Ｈｅｌｌｏ", "x<newtok>y fix ﬁx ﬁxfix", "1x A<b> Ａ<b>", "Hello",
         "ét\u00e9 \u00e9t\u00e9 xe\u0301te\u0301", "Ｈｅｌｌｏ，世界 fix！", "plain ascii text", ""]
FIELDS = ("ids", "tokens", "offsets", "word_ids", "type_ids", "special_tokens_mask", "attention_mask")


@pytest.fixture(scope="module")
def pair():
    hf = tokenizers.Tokenizer.from_file(ANTHROPIC)
    hf.add_tokens(NEW)
    ours = fstok.Tokenizer.from_file(ANTHROPIC)
    assert ours.add_tokens(NEW) == len(NEW)
    return hf, ours


def _same(hf, ours):
    for x in TEXTS:
        a, b = hf.encode(x), ours.encode(x)
        for f in FIELDS:
            assert getattr(a, f) == getattr(b, f), (x, f)
        for skip in (True, False):
            assert hf.decode(a.ids, skip_special_tokens=skip) == ours.decode(b.ids, skip_special_tokens=skip)
    got, want = ours.encode_batch(TEXTS * 3), hf.encode_batch(TEXTS * 3)
    for f in FIELDS:
        assert [getattr(e, f) for e in got] == [getattr(e, f) for e in want], f
    batch = ours.encode_batch_numpy(TEXTS[:4], return_offsets_mapping=False) if ours.padding else None
    if batch is not None:
        assert batch["input_ids"].tolist() == [e.ids for e in hf.encode_batch(TEXTS[:4])]


def test_added_with_add_tokens(pair):
    hf, ours = pair
    _same(hf, ours)
    for t in NEW:
        assert ours.token_to_id(t) == hf.token_to_id(t)
        assert ours.id_to_token(hf.token_to_id(t)) == hf.id_to_token(hf.token_to_id(t))


def test_file_holding_the_tokens(pair):
    hf, _ = pair
    _same(hf, fstok.Tokenizer.from_str(hf.to_str()))


def test_padded_numpy_batch(pair):
    hf, _ = pair
    ours = fstok.Tokenizer.from_str(hf.to_str())
    h2 = tokenizers.Tokenizer.from_str(hf.to_str())
    for t in (ours, h2):
        t.enable_padding(pad_id=0, pad_token="!")
    got = ours.encode_batch_numpy(TEXTS)
    want = h2.encode_batch(TEXTS)
    assert got["input_ids"].tolist() == [e.ids for e in want]
    assert got["attention_mask"].tolist() == [e.attention_mask for e in want]


def test_added_without_compiling():
    """add_tokens of normalized (and overlapping raw) tokens keeps the compiled tables: the BPE model object
    is the one loaded, only the matchers change."""
    hf = tokenizers.Tokenizer.from_file(ANTHROPIC)
    ours = fstok.Tokenizer.from_file(ANTHROPIC)
    model = ours._compiled._model
    for toks in (["Ｈｅｌｌｏ", "<newtok>"], [("raw<", False)], ["<newtok2>"]):
        hf.add_tokens([tokenizers.AddedToken(t[0], normalized=t[1]) if isinstance(t, tuple) else t for t in toks])
        ours.add_tokens([fstok.AddedToken(t[0], normalized=t[1]) if isinstance(t, tuple) else t for t in toks])
        assert ours._compiled._model is model
    texts = TEXTS + ["ｒａｗ＜ x", "ｒａｗ＜raw<ｒａｗ＜ Ｈｅｌｌｏ", "x ｒａｗ＜Hello <newtok2>raw<", "raw<newtok2>"]
    for x in texts:
        a, b = hf.encode(x), ours.encode(x)
        for f in FIELDS:
            assert getattr(a, f) == getattr(b, f), (x, f)
    got, want = ours.encode_batch(texts * 2), hf.encode_batch(texts * 2)
    for f in FIELDS:
        assert [getattr(e, f) for e in got] == [getattr(e, f) for e in want], f


def test_raw_token_spelled_by_normalized_text():
    """A raw (normalized=false) added token is matched in the raw text only: a stretch whose normalized
    form spells it is ordinary text, its words those of the pre-tokenizer (the file holding the token)."""
    hf = tokenizers.Tokenizer.from_file(ANTHROPIC)
    hf.add_tokens([tokenizers.AddedToken("raw<", normalized=False)])
    ours = fstok.Tokenizer.from_str(hf.to_str())
    for x in ["ｒａｗ＜ x", "raw< ｒａｗ＜", "ｒａｗ＜raw<"]:
        a, b = hf.encode(x), ours.encode(x)
        for f in FIELDS:
            assert getattr(a, f) == getattr(b, f), (x, f)


def test_special_tokens_with_normalized_true():
    """A special token with normalized=true is looked for in the normalized text, in a file and after
    add_special_tokens: `①<sp>` matches `1<sp>` under NFKC; decode skips it; encode_special_tokens=True
    encodes it as text."""
    import json

    with open(ANTHROPIC, encoding="utf-8") as f:
        obj = json.load(f)
    n = max(a["id"] for a in obj["added_tokens"]) + 1
    obj["added_tokens"] += [
        {"id": n + 65000, "content": "①<sp>", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": True, "special": True},
        {"id": n + 65001, "content": "<EOS>", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": True, "special": True}]
    s = json.dumps(obj)
    hf, ours = tokenizers.Tokenizer.from_str(s), fstok.Tokenizer.from_str(s)
    texts = ["a ①<sp> b", "a 1<sp> b", "x<EOS>y ＜ＥＯＳ＞ <EOT>", "<EOS>", "ＥＯＴ"]
    h2, o2 = tokenizers.Tokenizer.from_file(ANTHROPIC), fstok.Tokenizer.from_file(ANTHROPIC)
    h2.add_special_tokens([tokenizers.AddedToken("②x", normalized=True, special=True)])
    o2.add_special_tokens([fstok.AddedToken("②x", normalized=True, special=True)])
    for h, o, xs in ((hf, ours, texts), (h2, o2, ["a 2x ②x", "②x"])):
        for mode in (False, True):
            h.encode_special_tokens = o.encode_special_tokens = mode
            for x in xs:
                a, b = h.encode(x), o.encode(x)
                for f in FIELDS:
                    assert getattr(a, f) == getattr(b, f), (x, f, mode)
                for skip in (True, False):
                    assert h.decode(a.ids, skip_special_tokens=skip) == o.decode(b.ids, skip_special_tokens=skip)
            got, want = o.encode_batch(xs * 3), h.encode_batch(xs * 3)
            assert [e.ids for e in got] == [e.ids for e in want]
            assert [e.offsets for e in got] == [e.offsets for e in want]
