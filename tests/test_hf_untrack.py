"""The field lists of HF-face Encodings are off the cyclic garbage collector (fstok.hf_encoding.untrack): a
program holding many Encodings does not pay a pass over every token it holds at each full collection, and the
Encodings behave as before (fields, padding, truncation, copies, collection)."""
from __future__ import annotations

import gc
import os

import pytest

from conftest import VOCAB, needs_shared

import fstok
from fstok.hf_encoding import Encoding, untrack

FILES = [os.path.join(VOCAB, "models", p, "tokenizer.json") for p in
         ("spm-bpe/phi-3-mini", "wordpiece/all-MiniLM-L6-v2", "bytelevel-bpe/roberta-base")]
FIELDS = ("_ids", "_type_ids", "_tokens", "_words", "_offsets", "_special", "_attention")


def _tracked(e: Encoding) -> list[str]:
    out = [f for f in FIELDS if gc.is_tracked(getattr(e, f))]
    for o in e._overflowing:
        out += [f"overflowing.{f}" for f in _tracked(o)]
    return out


def test_untrack_takes_lists_off_the_collector_and_keeps_them_usable():
    e = Encoding.from_tokens([5, 6, 7], ["a", "b", "c"], [(0, 1), (1, 2), (2, 3)], [0, 0, 1])
    e._overflowing = [Encoding.from_tokens([8], ["d"], [(3, 4)], [2])]
    assert _tracked(e)
    untrack([e])
    assert _tracked(e) == []
    e.pad(6, pad_id=0, pad_token="[PAD]")
    e.truncate(5)
    assert e.ids == [5, 6, 7, 0, 0] and e.attention_mask == [1, 1, 1, 0, 0]
    gc.collect()
    assert e.tokens == ["a", "b", "c", "[PAD]", "[PAD]"] and e.offsets[:3] == [(0, 1), (1, 2), (2, 3)]
    c = e.copy()
    assert c.ids == e.ids


@needs_shared
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.split(os.sep)[-2])
def test_encode_results_are_untracked(path):
    if not os.path.exists(path):
        pytest.skip(f"{path} not present")
    tok = fstok.Tokenizer.from_file(path)
    texts = ["Hello world, this is a test.", "日本語 ﬁ e\u0301", "x " * 40] * 4
    tok.enable_truncation(16, stride=4)
    for e in [tok.encode(texts[0]), tok.encode(texts[1], texts[2])] + tok.encode_batch(texts):
        assert _tracked(e) == [], path
    tok.no_truncation()
    tok.enable_padding(pad_id=0, pad_token=tok.id_to_token(0))
    for e in tok.encode_batch(texts) + tok.encode_batch(list(zip(texts, texts[1:]))):
        assert _tracked(e) == [], path
