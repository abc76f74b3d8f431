"""The model stage of a tokenizer.json pipeline in C (fstok.pipeline.model_tables: WordPiece, WordLevel, Unigram
and non-byte-level BPE over pieces cut in C, a trailing Metaspace in the model stage) against the Python stages (its
oracle, `compiled=False`) and HF `tokenizers`, on small files built from each model's definition; the
BertNormalizer fast form against its stage; the nested model artifact."""
from __future__ import annotations

import functools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fstok import artifact as _art
from fstok._load import loads
from fstok.pipeline import fastnorm
from fstok.pipeline import normalizers as nz
from fstok.pipeline.normalized import Piece
from fstok.pipeline.tokenizer import PipelineTokenizer

tokenizers = pytest.importorskip("tokenizers")

ALPHA = st.text(st.sampled_from(list(" \t\n'.,!?-_0123456789aAbBeEhHlLoOtTzZéÉòü²½日本😀\u0301\u00a0٣\x00\u200b▁")),
                max_size=30)
LINES = ["", " ", "Hello  world!", "the 123 hello, théé", "日本語 😀 x", "\t\r\n x  ", "a\u0301e\u0301 ﬁ İ Σ",
         "▁leading ▁ mark", "hellohello worldworld 4567"]

WORDS = ["the", "hello", "world", "he", "ll", "lo", "wor", "ld", "o", "h", "e", "t", "a", "b", "l", "r", "w", "d"]
BERT = {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True, "strip_accents": None,
        "lowercase": True}
META = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}


def _seq(*items):
    return {"type": "Sequence", "pretokenizers": list(items)}


def _file(model: dict, normalizer=None, pre=None) -> dict:
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": normalizer,
            "pre_tokenizer": pre, "post_processor": None, "decoder": None, "model": model}


def _wordpiece() -> dict:
    vocab = {"[UNK]": 0}
    for w in WORDS + [str(d) for d in range(10)] + list(".,!?'-日本語😀é"):
        vocab.setdefault(w, len(vocab))
        vocab.setdefault("##" + w, len(vocab))
    return {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 12, "vocab": vocab}


def _unigram(byte_fallback: bool) -> dict:
    pieces = [["<unk>", 0.0]] + [[f"<0x{b:02X}>", -20.0] for b in range(256)] * byte_fallback
    for k, w in enumerate(WORDS + ["▁" + w for w in WORDS] + ["▁", "1", "2", "3", "12", "é", "."]):
        pieces.append([w, -1.0 - 0.37 * len(w) - 0.01 * k])
    return {"type": "Unigram", "unk_id": 0, "vocab": pieces, "byte_fallback": byte_fallback}


def _bpe() -> dict:
    vocab = {"<unk>": 0}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    merges = []
    for c in "▁abdehlortw0123456789.,é":
        vocab.setdefault(c, len(vocab))
    for a, b in [("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o"), ("▁", "t"), ("▁t", "he"), ("w", "o"),
                 ("wo", "r"), ("l", "d"), ("wor", "ld"), ("▁", "hello"), ("1", "2")]:
        vocab.setdefault(a + b, len(vocab))
        merges.append(f"{a} {b}")
    return {"type": "BPE", "vocab": vocab, "merges": merges, "unk_token": "<unk>", "fuse_unk": True,
            "byte_fallback": True, "dropout": None, "continuing_subword_prefix": None, "end_of_word_suffix": None,
            "ignore_merges": False}


CASES = {
    "wp whitespace": _file(_wordpiece(), None, {"type": "Whitespace"}),
    "wp bert+wssplit+digits": _file(_wordpiece(), BERT, _seq({"type": "WhitespaceSplit"},
                                                             {"type": "Digits", "individual_digits": True})),
    "wp nfd-lower-strip+punct-removed": _file(_wordpiece(), {"type": "Sequence", "normalizers": [
        {"type": "NFD"}, {"type": "Lowercase"}, {"type": "StripAccents"}]},
        _seq({"type": "WhitespaceSplit"}, {"type": "Punctuation", "behavior": "Removed"})),
    "wl bert+whitespace": _file({"type": "WordLevel", "unk_token": "[UNK]", "vocab": {
        t: i for i, t in enumerate(["[UNK]"] + WORDS + list(".,!?'-日本語😀é") + ["12", "123", "hello,"])}},
        BERT, {"type": "Whitespace"}),
    "uni digits+metaspace": _file(_unigram(False), None, _seq({"type": "Digits", "individual_digits": True}, META)),
    "uni bf split+metaspace never": _file(_unigram(True), {"type": "Lowercase"}, _seq(
        {"type": "Split", "pattern": {"Regex": "\\s+|[.,]"}, "behavior": "MergedWithNext", "invert": False},
        dict(META, prepend_scheme="never", split=False))),
    "uni nfc+metaspace first": _file(_unigram(True), {"type": "NFC"}, dict(META, prepend_scheme="first")),
    "uni bert+metaspace": _file(_unigram(False), BERT, META),
    "bpe bf digits+metaspace": _file(_bpe(), None, _seq({"type": "Digits", "individual_digits": False}, META)),
    "bpe bf metaspace first nfkc": _file(_bpe(), {"type": "NFKC"}, dict(META, prepend_scheme="first", split=False)),
}


@functools.lru_cache(maxsize=None)
def _toks(name: str, tmp_root: str):
    import os

    path = os.path.join(tmp_root, name.replace(" ", "_").replace("+", "_") + ".json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(CASES[name], f, ensure_ascii=False)
    fast = PipelineTokenizer.from_file(path)
    oracle = PipelineTokenizer.from_file(path, compiled=False)
    return fast, oracle, tokenizers.Tokenizer.from_file(path)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return str(tmp_path_factory.mktemp("model_native"))


@pytest.mark.parametrize("name", sorted(CASES))
def test_model_runs_in_c(name, root):
    fast, _, _ = _toks(name, root)
    assert fast._model_native is not None and fast._tables is None


@pytest.mark.parametrize("name", sorted(CASES))
def test_lines_match_oracle_and_hf(name, root):
    fast, oracle, hf = _toks(name, root)
    for s in LINES:
        want = hf.encode(s, add_special_tokens=False).ids
        assert oracle.encode(s) == want, s
        assert fast.encode(s) == want, s


@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=60, deadline=None)
@given(s=ALPHA)
def test_hypothesis_matches_hf(name, root, s):
    fast, _, hf = _toks(name, root)
    assert fast.encode(s) == hf.encode(s, add_special_tokens=False).ids


@pytest.mark.parametrize("name", ["wp bert+wssplit+digits", "uni nfc+metaspace first", "bpe bf digits+metaspace"])
def test_artifact_roundtrip(name, root):
    fast, _, hf = _toks(name, root)
    back = loads(fast.to_bytes())
    assert back._model_native is not None
    for s in LINES:
        assert back.encode(s) == hf.encode(s, add_special_tokens=False).ids


def test_nested_model_is_validated(root):
    fast, _, _ = _toks("wp whitespace", root)
    art = _art.parse_artifact(fast.to_bytes())
    meta = dict(art.meta, model_native={"kind": "spm", "first_ok": False})  # a WordPiece artifact read as spm
    blob = _art.write_artifact(None, _art.KIND_PIPELINE, meta, {k: art.raw(k) for k in art.sections if k != "meta"},
                               art.unicode_version, b"x" * 32)
    with pytest.raises(_art.ArtifactError):
        loads(blob)


@settings(max_examples=300, deadline=None)
@given(s=st.text(st.characters(blacklist_categories=("Cs",)), max_size=16) | ALPHA,
       opts=st.tuples(st.booleans(), st.booleans(), st.sampled_from([None, True, False]), st.booleans()))
def test_bert_normalizer_fast_form(s, opts):
    cfg = dict(BERT, clean_text=opts[0], handle_chinese_chars=opts[1], strip_accents=opts[2], lowercase=opts[3])
    got = fastnorm.fast_normalizer_plan(cfg).text(s)
    if got is not None:
        assert got == nz.from_config(cfg, "t").normalize(Piece.original(s)).text
