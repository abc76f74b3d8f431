"""SentencePiece BPE models whose pieces exercise every path of the merge loop: unused pieces (formed, then
resegmented into the pair that formed them), characters that are no piece but start pieces, user-defined
pieces, equal scores (the leftmost pair wins) and -0 beside +0.  Each variant is a real model with its
pieces edited through sentencepiece's own protobuf, and fstok's ids equal sentencepiece's on it."""
import os
import random

import pytest

import fstok
from conftest import VOCAB, needs_shared, read_corpus

spm = pytest.importorskip("sentencepiece")
pb = pytest.importorskip("sentencepiece.sentencepiece_model_pb2")

LLAMA = os.path.join(VOCAB, "models", "spm-bpe", "llama-2", "tokenizer.model")
UNUSED, USER = 5, 4


def _variant(proto: bytes, kind: str) -> bytes:
    m = pb.ModelProto()
    m.ParseFromString(proto)
    rng = random.Random(kind)
    normal = [p for p in m.pieces if p.type == 1]
    if kind == "unused":
        # merged pieces of every length turned unused: the merge still forms them, the result splits back
        for p in rng.sample([p for p in normal if len(p.piece) > 1], 3000):
            p.type = UNUSED
    elif kind == "missing-chars":
        # single characters that are no longer pieces (renamed out of the way) but start many pieces
        for p in normal:
            if p.piece in ("e", "t", "a", "▁", "的", "é", "s"):
                p.piece = p.piece + "\u0378\u0379"
    elif kind == "user":
        for p in rng.sample([p for p in normal if len(p.piece) > 2], 200):
            p.type = USER
    elif kind == "ties":
        # equal scores in bands and -0 beside +0: the agenda orders by score bits, then leftmost
        for i, p in enumerate(m.pieces):
            if p.type == 1:
                p.score = float(-(i // 500)) if i % 3 else (-0.0 if i % 2 else 0.0)
    return m.SerializeToString()


def _inputs():
    out = []
    for name in ("english", "multilingual", "chinese_long", "code", "stress"):
        ls = [x for x in read_corpus(name).split("\n") if x.strip()]
        out += ls[:40]
    return out + ["the teeth seas", "eeeeeee ttttt aaaa", "▁▁ ▁ ▁e", "的的的 é é é", "<unk> s s s"]


@needs_shared
@pytest.mark.parametrize("kind", ["unused", "missing-chars", "user", "ties"])
def test_edited_models_equal_sentencepiece(kind, tmp_path):
    if not os.path.exists(LLAMA):
        pytest.skip("llama-2 model not present")
    blob = _variant(open(LLAMA, "rb").read(), kind)
    path = tmp_path / f"{kind}.model"
    path.write_bytes(blob)
    sp = spm.SentencePieceProcessor(model_proto=blob)
    tok = fstok.compile(str(path))
    lines = _inputs()
    for x in lines:
        assert tok.encode(x) == sp.encode(x), (kind, x)
    whole = read_corpus("multilingual")[:6000]
    assert tok.encode(whole) == sp.encode(whole)
