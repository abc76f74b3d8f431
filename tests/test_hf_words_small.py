"""Short texts are numbered in plain Python (`WordPlan.row_small`), and texts without added tokens in one C
call (`WordPlan.row_native`): every field equals the numpy row (`WordPlan.row_numpy`, their reference) and
HF tokenizers, on corpus lines, added tokens (HF's ids, not the file's, where a content is also a model
token), non-ASCII text."""
import json
import os
import random

import pytest
from conftest import VOCAB, needs_shared, read_corpus

import fstok
import fstok.hf_words as W
from fstok.hf_tokenizer import _PipelineCore

pytestmark = needs_shared

FILES = {
    "roberta": os.path.join(VOCAB, "models", "bytelevel-bpe", "roberta-base", "tokenizer.json"),
    "falcon": os.path.join(VOCAB, "models", "bytelevel-bpe", "falcon-7b", "tokenizer.json"),
    "llama3": os.path.join(VOCAB, "hf-derived", "llama3.tokenizer.json"),
}


def _texts():
    rng = random.Random(7)
    out = []
    for c in ("english", "multilingual", "code"):
        lines = [x for x in read_corpus(c).splitlines() if x]
        out += rng.sample(lines, 60)
    alphabet = "ab \u00e9\u4e2d\U0001f600 \n\t<s></s>>>TITLE<<\u0120x"
    out += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40))) for _ in range(150)]
    return out + ["", " ", "<s>", "a<s>b</s>", "  hello  world  "]


@pytest.mark.parametrize("native", [False, True], ids=["python", "native"])
@pytest.mark.parametrize("name", sorted(FILES))
def test_small_rows_equal_numpy_rows_and_hf(name, native, monkeypatch):
    tokenizers = pytest.importorskip("tokenizers")
    with open(FILES[name], encoding="utf-8") as f:
        raw = f.read()
    obj = json.loads(raw)
    # an added token the model also spells, and one it does not
    obj["added_tokens"] = obj["added_tokens"] + [
        {"id": 0, "content": "ab", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": False},
        {"id": 0, "content": "\u4e2d\U0001f600", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}]
    text = json.dumps(obj)
    tok, hf = fstok.Tokenizer.from_str(text), tokenizers.Tokenizer.from_str(text)
    calls = []
    if native:
        nat = W.WordPlan.row_native
        monkeypatch.setattr(W.WordPlan, "row_native",
                            lambda self, *a: (lambda r: (r is not None and calls.append(1)) or r)(nat(self, *a)))
    else:
        small = W.WordPlan.row_small
        monkeypatch.setattr(W.WordPlan, "row_native", lambda self, *a: None)
        monkeypatch.setattr(W.WordPlan, "row_small", lambda self, *a: calls.append(1) or small(self, *a))
    texts = _texts()
    for t in texts:
        monkeypatch.setattr(W, "SMALL_ROW", 64)
        e = tok.encode(t)
        monkeypatch.setattr(W, "SMALL_ROW", -1)
        g = tok.encode(t)
        h = hf.encode(t)
        want = (h.ids, h.offsets, h.word_ids, h.tokens)
        assert (e.ids, e.offsets, e.word_ids, e.tokens) == want, t
        assert (g.ids, g.offsets, g.word_ids, g.tokens) == want, t
    if isinstance(tok._core, _PipelineCore):  # (a BPE core numbers its words without a WordPlan)
        assert len(calls) > len(texts) // 2  # the plain-Python (or C) rows served the texts
