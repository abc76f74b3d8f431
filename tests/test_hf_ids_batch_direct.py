"""encode_batch_numpy's ids for direct pipelines (RoBERTa, Falcon: `_PipelineCore._ids_batch_native`, one
threaded C call of the tables): equal to each text's `_ids` and to HF's ids, also for the texts it redoes
(an lstrip added token, a byte the vocabulary lacks)."""
import os

import numpy as np
import pytest
from conftest import CORPORA, VOCAB, needs_shared, read_corpus

import fstok

tokenizers = pytest.importorskip("tokenizers")
pytestmark = needs_shared

FILES = {
    "roberta": os.path.join(VOCAB, "models", "bytelevel-bpe", "roberta-base", "tokenizer.json"),
    "falcon": os.path.join(VOCAB, "models", "bytelevel-bpe", "falcon-7b", "tokenizer.json"),
}


@pytest.mark.parametrize("name", sorted(FILES))
def test_ids_batch_native(name):
    tok, hf = fstok.Tokenizer.from_file(FILES[name]), tokenizers.Tokenizer.from_file(FILES[name])
    texts = []
    for c in CORPORA:
        texts += [x for x in read_corpus(c).splitlines() if x.strip()][::50][:20]
    texts += ["", " <mask> x", "a<mask>", "<|endoftext|>hi", "bytes \x00\x01\x1f\x7f\u0080\u00ff end", "\x7f"]
    core = tok._core
    got = core._ids_batch_native(texts, 2)
    assert got is not None, "the native batch path was not taken"
    flat, lens = got
    want = [hf.encode(t, add_special_tokens=False).ids for t in texts]
    assert lens.tolist() == [len(w) for w in want]
    assert flat.tolist() == [i for w in want for i in w]
    assert flat.dtype == np.uint32
    tok.enable_padding(pad_id=0, pad_token=tok.id_to_token(0))
    batch = tok.encode_batch_numpy(texts)
    encs = tok.encode_batch(texts)
    assert batch["input_ids"].tolist() == [e.ids for e in encs]
    assert batch["attention_mask"].tolist() == [e.attention_mask for e in encs]
