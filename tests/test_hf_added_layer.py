"""Tokens added to a loaded fstok.Tokenizer (`fstok.hf_added_layer`): matched in front of the compiled core
where they cannot overlap its own added tokens, compiled in otherwise; every Encoding field (single, pair,
batch) and decode against HF `tokenizers` after the same add_tokens / add_special_tokens calls, on corpus
lines and hypothesis strings holding the tokens."""
from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import CORPORA, VOCAB, needs_shared, read_corpus

tokenizers = pytest.importorskip("tokenizers")

import fstok  # noqa: E402
from fstok.hf_added_layer import AddedLayer, _overlaps  # noqa: E402

pytestmark = needs_shared

M = os.path.join(VOCAB, "models")
FILES = {
    "roberta": os.path.join(M, "bytelevel-bpe", "roberta-base", "tokenizer.json"),
    "minilm": os.path.join(M, "wordpiece", "all-MiniLM-L6-v2", "tokenizer.json"),
    "e5": os.path.join(M, "unigram", "multilingual-e5-small", "tokenizer.json"),
    "phi3": os.path.join(M, "spm-bpe", "phi-3-mini", "tokenizer.json"),
    "clip": os.path.join(M, "charbpe", "clip-vit-base-patch32", "tokenizer.json"),
}
NEW = ["foo", "<tool>", "ab cd", "é日"]
FIELDS = ("ids", "tokens", "offsets", "type_ids", "attention_mask", "special_tokens_mask", "word_ids",
          "sequence_ids")
_LOADED: dict = {}


def _added(name: str):
    """fstok and HF tokenizers after the same calls: specials (never normalized) and, where the file has no
    normalizer, plain tokens (normalized, which then matches the raw text too)."""
    if name not in _LOADED:
        pair = fstok.Tokenizer.from_file(FILES[name]), tokenizers.Tokenizer.from_file(FILES[name])
        plain = pair[0].normalizer is None
        for t in pair:
            t.add_special_tokens([tokenizers.AddedToken("<tool>", special=True), "é日"])
            t.add_tokens([tokenizers.AddedToken(x, normalized=plain) for x in ("foo", "ab cd")])
        _LOADED[name] = pair
    return _LOADED[name]


def _texts() -> list[str]:
    out = []
    for k, name in enumerate(CORPORA):
        lines = [x for x in read_corpus(name).splitlines() if x.strip()][:: 40][:6]
        for j, line in enumerate(lines):
            c = NEW[(j + k) % len(NEW)]
            out += [line, f"{line[:15]}{c}{line[15:30]} {c}{c}"]
    return out + ["", "foo", "xfooy", "<tool><tool>", "ab cdab cd", " é日 ", "ab c d", "<s>foo</s>", "[CLS] foo [SEP]",
                  "<|endoftext|>foo"]


def _same(name: str, texts: list[str]) -> None:
    tok, hf = _added(name)
    for t in texts:
        a, b = tok.encode(t), hf.encode(t)
        assert [getattr(a, f) for f in FIELDS] == [getattr(b, f) for f in FIELDS], (name, t)
    for a, b, t in zip(tok.encode_batch(texts), hf.encode_batch(texts), texts):
        assert [getattr(a, f) for f in FIELDS] == [getattr(b, f) for f in FIELDS], (name, t)
    pairs = [(texts[i], texts[-1 - i]) for i in range(len(texts))]
    for a, b, t in zip(tok.encode_batch(pairs), hf.encode_batch(pairs), pairs):
        assert [getattr(a, f) for f in FIELDS] == [getattr(b, f) for f in FIELDS], (name, t)
    ids = [e.ids for e in hf.encode_batch(texts)]
    for skip in (True, False):
        assert tok.decode_batch(ids, skip_special_tokens=skip) == hf.decode_batch(ids, skip_special_tokens=skip)


@pytest.mark.parametrize("name", list(FILES))
def test_added_tokens_like_hf(name):
    tok, hf = _added(name)
    assert tok.get_vocab() == hf.get_vocab()
    # specials never overlap these files' own added tokens: matched in front of the core, not compiled in
    assert isinstance(tok._core, AddedLayer), name
    _same(name, _texts())


@pytest.mark.parametrize("name", ["roberta", "minilm"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(st.one_of(st.sampled_from(NEW + ["fo", "o", " ", "<s>", "[SEP]", "<mask>"]),
                                st.text(max_size=6)), max_size=8))
def test_hypothesis(name, parts):
    _same(name, ["".join(parts)])


def test_overlapping_token_is_compiled_in():
    """A new token that overlaps one of the core's added tokens (here RoBERTa's "<s>") would be matched
    differently by a layer: it is compiled into a new core, and the results still equal HF's."""
    tok = fstok.Tokenizer.from_file(FILES["roberta"])
    hf = tokenizers.Tokenizer.from_file(FILES["roberta"])
    for t in (tok, hf):
        t.add_special_tokens(["s><x"])
    assert not isinstance(tok._core, AddedLayer)
    for text in ["<s><x", "a<s><x>b", "s><x <s>", "</s><x"]:
        a, b = tok.encode(text), hf.encode(text)
        assert [getattr(a, f) for f in FIELDS] == [getattr(b, f) for f in FIELDS], text


def test_overlaps():
    assert _overlaps("ab", "abc") and _overlaps("abc", "bcd") and _overlaps("cab", "xc") and _overlaps("a", "a")
    assert not _overlaps("ab", "cd") and not _overlaps("ab", "xy z")
