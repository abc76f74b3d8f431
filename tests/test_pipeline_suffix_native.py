"""encode_spans(..., suffix): C follows each piece with the end-of-word sentinel byte (CLIP's `</w>`) before the
piece cache; the same ids as encoding a buffer that holds every piece followed by the sentinel (how the
suffixed pieces are defined), for pieces of every length class (cached short and long pieces, pieces longer
than the scratch buffer), literals between them, and a repeat (cache hits)."""
import os
import random

import numpy as np
import pytest

from pipeline_helpers import CLIP, compiled

pytestmark = pytest.mark.skipif(not os.path.exists(CLIP), reason="shared models not present")


def _tri(spans):
    t = np.array([[a, b, lit] for a, b, lit in spans], dtype=np.uint32).reshape(-1, 3)
    return t.tobytes()


def _reference(model, data, spans, sentinel):
    """The pieces laid out one after another, each followed by the sentinel (the definition)."""
    buf, out = bytearray(), []
    for a, b, lit in spans:
        if lit != 0xFFFFFFFF:
            out.append((len(buf), len(buf), lit))
            continue
        s = len(buf)
        buf += data[a:b] + bytes([sentinel])
        out.append((s, len(buf), 0xFFFFFFFF))
    return model.encode_spans(bytes(buf), _tri(out), 0)


def test_suffixed_spans_match_the_sentinel_buffer():
    tok = compiled(CLIP)
    assert tok._suffix and tok._pieces is not None
    model, sentinel = tok._tables._model, tok.SENTINEL
    rng = random.Random(7)
    words = ["a", "the", "tokenizer", "é", "日本語", "x" * 20, "y" * 23, "z" * 24, "w" * 30, "v" * 200,
             "supercalifragilisticexpialidocious", "1", "!!", "naïve"]
    text, spans = bytearray(), []
    for _ in range(600):
        if rng.random() < 0.05:
            spans.append((len(text), len(text), rng.randrange(100)))  # a literal id
            continue
        w = rng.choice(words).encode("utf-8")
        spans.append((len(text), len(text) + len(w), 0xFFFFFFFF))
        text += w + b" "
    data = bytes(text)
    want = _reference(model, data, spans, sentinel)
    assert model.encode_spans(data, _tri(spans), 0, sentinel) == want
    assert model.encode_spans(data, _tri(spans), 0, sentinel) == want  # now from the piece cache
    assert np.frombuffer(model.encode_spans(data, _tri(spans), 1, sentinel), dtype=np.uint32).tolist() == want
    assert model.encode_spans(data, _tri(spans), 2, sentinel) == len(want)
    model.set_memo(False)  # without the piece cache: the suffixed pieces encoded directly; the reference by
    try:                   # the plain span loop
        assert model.encode_spans(data, _tri(spans), 0, sentinel) == want
        assert _reference(model, data, spans, sentinel) == want
    finally:
        model.set_memo(True)
    with pytest.raises(ValueError, match="suffix"):
        model.encode_spans(data, _tri(spans), 3, sentinel)
    with pytest.raises(ValueError, match="suffix"):
        model.encode_spans(data, _tri(spans), 0, 256)
