"""The HF face's native rows for "guarded" pipeline tokenizers (a normalizer and/or an end_of_word_suffix:
CLIP), `fstok.hf_align`: every Encoding field against HF `tokenizers` and the rows against the stages in
Python (`_PipelineCore.python_encode`), on corpus lines and hypothesis strings, for CLIP and variants of it
with other normalizers (each step's alignment bookkeeping: NFx compositions, lowercase of another length,
Replace with longer / empty content, Strip, Prepend, StripAccents) and for byte-level files given a
normalizer (no suffix: the tables' own pieces, and the prefix space of ByteLevel(add_prefix_space=true)).
The C kernels (`fstok.runtime._hfalign`) against their numpy forms."""
from __future__ import annotations

import copy
import json
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import VOCAB, needs_shared, spread_sample

tokenizers = pytest.importorskip("tokenizers")

import fstok  # noqa: E402
from fstok.hf_align import GuardedRows, replaced_reference  # noqa: E402
from fstok.runtime import _hfalign  # noqa: E402

pytestmark = needs_shared

CLIP = os.path.join(VOCAB, "models", "charbpe", "clip-vit-base-patch32", "tokenizer.json")
ROBERTA = os.path.join(VOCAB, "models", "bytelevel-bpe", "roberta-base", "tokenizer.json")

CHARS = list(" \t\n\r\u00a0\u2000\u2003\u3000'.,!?-_0123456789aAzZeéÉßİıΣσςKΩÅ日本😀\u0301\u0323\u0307ǅﬁ²½<>|ẞǰ")
TRICKY = st.text(st.sampled_from(CHARS), max_size=30)
ANY = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
EDGE = ["", " ", "   ", "Hello   World  café, it's 42!", "a\u0301 e\u0301\u0323 Å K Ω", "İstanbul IŞIK ıi",
        "x\u2000y\u2003 z\u3000", "ǅungla ﬁne ²½", " \t lead and trail \n ", "日本語 😀👍🏽 x", "ΣΑΣ σας",
        "it's 'll 'd THEY'RE", "\u0301\u0301 start with marks"]


def _variant(base: str, normalizer, pre=None) -> str:
    with open(base, encoding="utf-8") as f:
        obj = json.load(f)
    obj = copy.deepcopy(obj)
    obj["normalizer"] = normalizer
    if pre is not None:
        obj["pre_tokenizer"] = pre
    return json.dumps(obj)


def _seq(*steps):
    return {"type": "Sequence", "normalizers": list(steps)}


WS = {"type": "Replace", "pattern": {"Regex": r"\s+"}, "content": " "}
VARIANTS = {
    "clip": None,
    "clip-nfkc-strip-lower": (CLIP, _seq({"type": "NFKC"}, {"type": "Strip", "strip_left": True, "strip_right": True},
                                         {"type": "Lowercase"})),
    "clip-nfd-accents-replace": (CLIP, _seq({"type": "NFD"}, {"type": "StripAccents"},
                                            {"type": "Replace", "pattern": {"String": "e"}, "content": "EEE"},
                                            {"type": "Replace", "pattern": {"Regex": " +"}, "content": ""})),
    "clip-prepend-lower": (CLIP, _seq({"type": "Prepend", "prepend": "x y"}, {"type": "Lowercase"}, WS)),
    "roberta-nfc-lower": (ROBERTA, _seq({"type": "NFC"}, {"type": "Lowercase"}, WS)),
    "roberta-prefix-space": (ROBERTA, {"type": "Lowercase"},
                             {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}),
}
_LOADED: dict = {}


def _load(name: str):
    if name not in _LOADED:
        v = VARIANTS[name]
        if v is None:
            pair = fstok.Tokenizer.from_file(CLIP), tokenizers.Tokenizer.from_file(CLIP)
        else:
            js = _variant(*v)
            pair = fstok.Tokenizer.from_str(js), tokenizers.Tokenizer.from_str(js)
        _LOADED[name] = pair
    return _LOADED[name]


FIELDS = ("ids", "tokens", "offsets", "type_ids", "attention_mask", "special_tokens_mask", "word_ids",
          "sequence_ids")


def _fields(e) -> tuple:
    return tuple(getattr(e, f) for f in FIELDS)


def _check(name: str, texts: list[str]) -> int:
    """Every Encoding field of encode and encode_batch equal HF's, and the rows the stages'; returns how
    many texts the native rows served."""
    tok, hf = _load(name)
    core = tok._core
    g = core._guarded()
    assert g is not None, f"{name}: not a guarded pipeline tokenizer"
    served = 0
    for t in texts:
        row = g.row(t)
        if row is not None:
            served += 1
            assert list(row[0]) == list(core.python_encode(t)[0]), t
            assert [tuple(o) for o in row[1]] == [tuple(o) for o in core.python_encode(t)[1]], t
            assert list(row[2]) == list(core.python_encode(t)[2]), t
        assert _fields(tok.encode(t)) == _fields(hf.encode(t)), (name, t)
    got = tok.encode_batch(texts)
    want = hf.encode_batch(texts)
    for t, a, b in zip(texts, got, want):
        assert _fields(a) == _fields(b), (name, t)
    pairs = [(texts[i], texts[-1 - i]) for i in range(len(texts))]
    for (a, b), x, y in zip(pairs, tok.encode_batch(pairs), hf.encode_batch(pairs)):
        assert _fields(x) == _fields(y), (name, a, b)
    return served


@pytest.mark.parametrize("name", list(VARIANTS))
def test_corpus_and_edges(name):
    texts = spread_sample() + EDGE
    served = _check(name, texts)
    # the native rows serve the texts (the stages only where a step cannot keep one character per byte)
    assert served >= 0.8 * len(texts), (name, served, len(texts))


@pytest.mark.parametrize("name", ["clip", "clip-nfkc-strip-lower", "clip-nfd-accents-replace", "roberta-prefix-space"])
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(t=st.one_of(TRICKY, ANY))
def test_hypothesis(name, t):
    _check(name, [t])


def test_clip_serves_compositions_and_length_changes():
    """Texts whose NFC composes or whose lowercase changes UTF-8 lengths take the stage form of that one step
    and stay native (the other steps, the pieces and the model in C)."""
    tok, _ = _load("clip")
    g = tok._core._guarded()
    for t in ["cafe\u0301 x", "İstanbul", "K Kelvin", "x\u2000y", "Ω"]:
        assert g.row(t) is not None, t
    assert g.row("a <|endoftext|> b") is None  # an added token: the stages


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=40), cuts=st.lists(st.integers(0, 40), max_size=12), nc=st.integers(0, 3))
def test_replace_kernel(data, cuts, nc):
    n = len(data)
    pts = sorted({min(c, n) for c in cuts})
    spans = [(a, b) for a, b in zip(pts[0::2], pts[1::2]) if b > a]
    o = np.arange(n, dtype=np.int32) * 3 + 1
    sp = np.array(spans, dtype=np.uint64).reshape(-1, 2)
    got = _hfalign.replace(o.tobytes(), n, sp.tobytes(), nc)
    want = replaced_reference(o.astype(np.int64), sp.astype(np.int64), nc) if spans else o
    assert np.frombuffer(got, dtype=np.int32).tolist() == np.asarray(want).tolist()
    if n:  # an empty span is refused
        assert _hfalign.replace(o.tobytes(), n, np.array([[0, 0]], dtype=np.uint64).tobytes(), 1) is None


@given(t=ANY)
def test_chars_kernel(t):
    b = t.encode("utf-8")
    want = [i for i, c in enumerate(t) for _ in c.encode("utf-8")]
    assert np.frombuffer(_hfalign.chars(b), dtype=np.int32).tolist() == want
    assert isinstance(GuardedRows, type)
