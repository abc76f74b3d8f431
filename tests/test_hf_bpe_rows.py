"""A compiled byte-level BPE tokenizer.json (Whisper): `_BPECore.model_encode` numbers words and maps offsets by
one C call for a text without added-token text (`_BPECore._native_row`); every field equals HF's, on corpus
lines and texts holding special tokens (the Python path)."""
import os

import pytest
from conftest import CORPORA, VOCAB, needs_shared, read_corpus

import fstok
from fstok.hf_tokenizer import _BPECore

tokenizers = pytest.importorskip("tokenizers")
pytestmark = needs_shared

WHISPER = os.path.join(VOCAB, "models", "bytelevel-bpe", "whisper-large-v3", "tokenizer.json")
FIELDS = ("ids", "tokens", "offsets", "word_ids", "type_ids", "special_tokens_mask", "attention_mask")


def test_whisper_rows():
    tok, hf = fstok.Tokenizer.from_file(WHISPER), tokenizers.Tokenizer.from_file(WHISPER)
    core = tok._core
    assert isinstance(core, _BPECore)
    texts = []
    for c in CORPORA:
        texts += [x for x in read_corpus(c).splitlines() if x.strip()][::40][:25]
    texts += ["", " ", "  a  b ", "日本語😀 x", "<|endoftext|>hi", "a <|en|> b<|notimestamps|>", "\t\n x"]
    served = 0
    for t in texts:
        (ids, st), used = core.tok._run(t, core.allowed, 3)
        served += bool(ids) and core._native_row(t, ids, st) is not None
        a, b = tok.encode(t), hf.encode(t)
        assert [getattr(a, f) for f in FIELDS] == [getattr(b, f) for f in FIELDS], t
    assert served >= len(texts) - 10
