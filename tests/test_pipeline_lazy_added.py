"""A tokenizer.json pipeline encodes with its compiled tables without building the Python stages: the added
vocabulary and the token names come from the file's vocab object, with the ids the stages assign."""
import json
import os

import pytest
from conftest import VOCAB, needs_shared

import fstok
from fstok.pipeline.tokenizer import PipelineTokenizer

pytestmark = needs_shared

ROBERTA = os.path.join(VOCAB, "models", "bytelevel-bpe", "roberta-base", "tokenizer.json")


def _obj_with_added():
    with open(ROBERTA, encoding="utf-8") as f:
        obj = json.load(f)
    vocab = obj["model"]["vocab"]
    # "ab" is in the model vocab: HF gives it the model's id, not the one written here; "zz9" gets the next id
    obj["added_tokens"] = obj["added_tokens"] + [
        {"id": max(vocab.values()) + 7, "content": "ab", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": False},
        {"id": 3, "content": "zz9", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": True, "special": True}]
    return obj


def test_added_vocabulary_alone_equals_the_stages():
    obj = _obj_with_added()
    lazy = PipelineTokenizer(json.loads(json.dumps(obj)), "roberta+added", compiled=False)
    for k in ("model", "added", "special_tokens", "normalizer"):
        lazy.__dict__.pop(k, None)
    assert lazy._build_added()
    assert "model" not in lazy.__dict__
    full = PipelineTokenizer(json.loads(json.dumps(obj)), "roberta+added", compiled=False)
    assert [(t.id, t.content, t.special, t.normalized) for t in lazy.added.tokens] == \
        [(t.id, t.content, t.special, t.normalized) for t in full.added.tokens]
    assert lazy.special_tokens == full.special_tokens
    tok_of, want = lazy._token_strings(), full._token_strings()
    assert all(tok_of(i) == want(i) for i in range(full.n_vocab))


def test_face_encodes_without_building_the_stages():
    tokenizers = pytest.importorskip("tokenizers")
    obj = _obj_with_added()
    text = json.dumps(obj)
    tok, hf = fstok.Tokenizer.from_str(text), tokenizers.Tokenizer.from_str(text)
    texts = ["say hello world", "cab  abab zz9 hello", "ab", "", "caf\u00e9 \u4e2d\u6587 zz9zz9"] * 2
    got = [tok.encode(t) for t in texts] + tok.encode_batch(texts)
    assert "model" not in tok._compiled.__dict__  # the compiled tables ran every text
    for e, h in zip(got, [hf.encode(t) for t in texts] * 2):
        assert (e.ids, e.offsets, e.word_ids, e.tokens) == (h.ids, h.offsets, h.word_ids, h.tokens)
