"""SentencePiece Unigram by words: a word's cached path is taken only where float rounding from the score the
text before it reaches cannot change it.  Each variant is the real Unigram model with its scores or pieces
edited through sentencepiece's own protobuf so that ties, near-ties, rebases of the path score and unknown
characters are common; fstok's ids equal sentencepiece's on it, line by line and on long texts."""
import os
import random

import pytest

import fstok
from conftest import VOCAB, needs_shared, read_corpus

spm = pytest.importorskip("sentencepiece")
pb = pytest.importorskip("sentencepiece.sentencepiece_model_pb2")

UNIGRAM = os.path.join(VOCAB, "models", "unigram", "maxtext-default-c4", "tokenizer.default")
NORMAL, USER = 1, 4


def _variant(proto: bytes, kind: str) -> bytes:
    m = pb.ModelProto()
    m.ParseFromString(proto)
    rng = random.Random(kind)
    normal = [p for p in m.pieces if p.type == NORMAL]
    if kind == "ties":
        # scores in a few bands: many segmentations of a word score exactly alike
        for i, p in enumerate(normal):
            p.score = float(-(1 + i % 4))
    elif kind == "near-ties":
        # scores of large size a rounding apart: paths from a large text score decide otherwise than from 0
        for i, p in enumerate(normal):
            p.score = -4000.0 - 250.0 * (i % 7) + rng.choice((0.0, 0.0009765625, 0.001953125))
    elif kind == "rebase":
        # scores so large that the path score leaves +-1e5 within a few words
        for p in normal:
            p.score = p.score * 3000.0
    elif kind == "user":
        for p in rng.sample([p for p in normal if len(p.piece) > 2], 300):
            p.type = USER
    elif kind == "unknown-chars":
        # characters that are no piece (renamed out of the way): words of unknown pieces
        for p in normal:
            if len(p.piece) == 1 and p.piece in "aeoxz的é":
                p.piece = p.piece + "\u0378"
    elif kind == "space-inside":
        # a piece holding the escaped space after its first character: words are not independent
        normal[100].piece = "s\u2581the"
        normal[100].score = 0.0
    return m.SerializeToString()


def _inputs():
    out = []
    for name in ("english", "multilingual", "chinese_long", "code", "stress"):
        ls = [x for x in read_corpus(name).split("\n") if x.strip()]
        out += ls[:: max(1, len(ls) // 40)][:40]
    return out + ["the the the there their", "a  b   c", "xxxx zzzz ééé 的的的", "s the s  the"]


@needs_shared
@pytest.mark.parametrize("kind", ["ties", "near-ties", "rebase", "user", "unknown-chars", "space-inside"])
def test_edited_unigram_models_equal_sentencepiece(kind, tmp_path):
    if not os.path.exists(UNIGRAM):
        pytest.skip("maxtext Unigram model not present")
    blob = _variant(open(UNIGRAM, "rb").read(), kind)
    path = tmp_path / f"{kind}.model"
    path.write_bytes(blob)
    sp = spm.SentencePieceProcessor(model_proto=blob)
    tok = fstok.compile(str(path))
    for x in _inputs():
        assert tok.encode(x) == sp.encode(x), (kind, x)
    for name in ("english", "multilingual"):
        whole = read_corpus(name)[:40000]
        # twice: the second pass takes the words the first one cached
        assert tok.encode(whole) == sp.encode(whole), (kind, name)
        assert tok.encode(whole) == sp.encode(whole), (kind, name)


@needs_shared
def test_ascii_before_combining_marks_normalizes_as_sentencepiece():
    # ASCII letters start charsmap keys (a letter and a combining mark compose under NFKC): the normalizer
    # keeps such a letter as it is only when the byte after it continues no key
    if not os.path.exists(UNIGRAM):
        pytest.skip("maxtext Unigram model not present")
    tok = fstok.compile(UNIGRAM)
    sp = spm.SentencePieceProcessor(model_file=UNIGRAM)
    alpha = [chr(c) for c in range(32, 127)] + ["\u0301", "\u0300", "\u0327", "\u0308", "\u030a", "\u0338",
                                                "\u3099", "\t", "\n", "\u00a0", "\uff41", "\u2460", "  "]
    rng = random.Random(7)
    for _ in range(3000):
        x = "".join(rng.choice(alpha) for _ in range(rng.randint(1, 24)))
        assert tok.encode(x) == sp.encode(x), x


@needs_shared
def test_threads_share_the_unigram_word_cache():
    # threads that encode at once (the GIL is released) read and fill one word cache: every result equals
    # sentencepiece's
    from concurrent.futures import ThreadPoolExecutor

    if not os.path.exists(UNIGRAM):
        pytest.skip("maxtext Unigram model not present")
    docs = [read_corpus(c)[i * 3000 : (i + 1) * 3000] for c in ("english", "multilingual", "code") for i in range(8)]
    want = spm.SentencePieceProcessor(model_file=UNIGRAM).encode(docs)
    tok = fstok.compile(UNIGRAM)
    with ThreadPoolExecutor(4) as ex:
        got = list(ex.map(tok.encode, docs * 3))
    assert got == want * 3
