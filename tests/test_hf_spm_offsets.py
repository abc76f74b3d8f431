"""The Encoding path of SentencePiece-family tokenizer.json files in one native call per batch
(HFSentencePieceTokenizer.hf_lists_batch, fstok.runtime._spm.hf_encode_offsets): normalizer, pre-tokenizer and
model in C with tokenizers' alignments.  Its ids, offsets, word ids and token strings equal the Python string
path (hf_lists, the reference, NString alignments) and `tokenizers` on real lines, on hypothesis strings
(combining marks, NFKC-expanding characters, CJK, emoji sequences, removed characters, added tokens) and on
variants of the shared files' pipelines; every Encoding field of the HF face equals `tokenizers`."""
from __future__ import annotations

import copy
import functools
import json
import os
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import VOCAB, needs_shared, read_corpus

tokenizers = pytest.importorskip("tokenizers")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
import diff_hf  # noqa: E402

import fstok  # noqa: E402
from fstok.hf_spm import HFSentencePieceTokenizer  # noqa: E402

MODELS = os.path.join(VOCAB, "models")
E5 = os.path.join(MODELS, "unigram/multilingual-e5-small/tokenizer.json")
PHI3 = os.path.join(MODELS, "spm-bpe/phi-3-mini/tokenizer.json")
PATHS = {"e5": E5, "phi-3": PHI3}

TRICKY = [
    "", " ", "  ", "   a    b  ", "\t\n x", "Hello world", "\u3000全角ｈｅｌｌｏ", "e\u0301 Ａ\u0301 a\u0308\u0301",
    "\r\n\r\n", "\x00a\x00", "😀👍🏽👨\u200d👩\u200d👧 🇫🇷🇩🇪🇫", "<s>x</s> <pad><mask><unk>",
    "<|user|> hi <|end|>  x\n<|assistant|>", "▁ ▁▁x ▁", "ﬁ ① ㌀ ǅ ﬃ ㍿ ½ ℌ", "\u0600a \u0915\u094d\u0937 \u1100\u1161\u11a8",
    "a" * 300, "\ufffd\ufeff\u200b", "\u200bx", "\u200b\u200b y", "1234 3.14", "xx xxx xxxxx aaa",
    "\U0001f600\u200d\U0001f600", "ȷ̈ ᄀᄀᄀ각 \u0e01\u0e33", "ꙮ𓀀 x 😀 日本", "日本語のテキスト", "Ǖ İ Σ ß ﬀ",
    "x\u0301\u0301\u0301\u0301\u0301\u0301", "  leading", "trailing  ", "\u00a0\u2009\u3000 x",
]
# the characters hypothesis draws from: marks, characters the charsmaps expand or remove, CJK, emoji parts,
# regional indicators, Hangul jamo, spaces of several kinds, controls, the Metaspace replacement
ALPHABET = ("ab xyZ\u3000\u00a0\t\n\r\u200b\u200d\ufeff\u0301\u0308\u0327\u094d\u0915\u0937ﬁﬃ①㍿½ǅℌＡｈ"
            "日本語中文字각\u1100\u1161\u11a8😀👍🏽👨👩🇫🇷\u2581▁.,!?0123456789\x00\x7f\u0600\u0e33"
            "ÅåΣσİ")
ADDED = ["<s>", "</s>", "<unk>", "<|end|>", "<|user|>", "<mask>"]


def _lines(n: int = 30) -> list[str]:
    out = []
    for name in ("multilingual", "stress", "code", "chinese_long", "english"):
        ls = [x for x in read_corpus(name).split("\n") if x.strip()]
        out += [x[:800] for x in ls[:n]] + [x[:800] for x in ls[-3:]]
    return out + TRICKY


class _Reference:
    """Counts the texts the reference path (hf_lists) takes while active."""

    def __init__(self, monkeypatch):
        self.n = 0
        orig = HFSentencePieceTokenizer.hf_lists

        def counted(tok, text):
            self.n += 1
            return orig(tok, text)

        monkeypatch.setattr(HFSentencePieceTokenizer, "hf_lists", counted)


def _check(core, hf, texts, label, ref=None):
    """The native batch equals the reference per text and tokenizers (before the post-processor)."""
    assert core._hf is not None, label
    before = ref.n if ref is not None else 0
    got = core.hf_lists_batch(texts)
    if ref is not None:
        assert ref.n == before, f"{label}: the reference path took {ref.n - before} texts"
    assert len(got) == len(texts)
    for t, g in zip(texts, got):
        want = core.hf_lists(t)
        assert tuple(g) == tuple(want), (label, t[:80])
        e = hf.encode(t, add_special_tokens=False)
        assert (g[0], g[1], g[2], g[3]) == (e.ids, e.offsets, e.word_ids, e.tokens), (label, t[:80])
        # the ids-only paths (native, and the Python string path) read the same start of the text
        assert core.encode(t) == e.ids and core._ids_fast(t) == e.ids, (label, t[:80])


@pytest.fixture(scope="module")
def files():
    out = {}
    for k, p in PATHS.items():
        if os.path.exists(p):
            out[k] = (fstok.Tokenizer.from_file(p), tokenizers.Tokenizer.from_file(p))
    return out


@needs_shared
@pytest.mark.parametrize("name", sorted(PATHS))
def test_shared_files_batch_equals_reference_and_tokenizers(files, name, monkeypatch):
    if name not in files:
        pytest.skip(f"{PATHS[name]} not present")
    face, hf = files[name]
    ref = _Reference(monkeypatch)
    _check(face._core.tok, hf, _lines(), name, ref)
    # one text at a time (encode) takes the same native call
    _check(face._core.tok, hf, TRICKY[:8], name, ref)
    core = face._core.tok
    for t in TRICKY:
        for add in (False, True):
            ids, offs = core._encode(t, True)  # the reference: the Python string path
            want = core._post(ids, offs) if add else (ids, offs)
            assert core.encode_with_offsets(t, add_special_tokens=add) == want, (name, t)
    # the numpy batch with offsets takes the batch call too
    import numpy as np

    face.enable_padding(pad_id=1, pad_token="<pad>")
    before = ref.n
    try:
        got = face.encode_batch_numpy(TRICKY, add_special_tokens=False, return_offsets_mapping=True)
    finally:
        face.no_padding()
    for k, t in enumerate(TRICKY):
        e = hf.encode(t, add_special_tokens=False)
        n = len(e.ids)
        assert got["input_ids"][k][:n].tolist() == e.ids
        assert [tuple(x) for x in got["offset_mapping"][k][:n].tolist()] == e.offsets
    assert ref.n == before


@needs_shared
@pytest.mark.parametrize("name", sorted(PATHS))
def test_face_every_field_equals_tokenizers(files, name, monkeypatch):
    """encode and encode_batch (single and pair, with the file's post-processor): every Encoding field."""
    if name not in files:
        pytest.skip(f"{PATHS[name]} not present")
    face, hf = files[name]
    ref = _Reference(monkeypatch)
    texts = _lines(8)
    for add in (True, False):
        got = face.encode_batch(texts, add_special_tokens=add)
        want = hf.encode_batch(texts, add_special_tokens=add)
        for t, a, b in zip(texts, got, want):
            assert diff_hf.fields(a) == diff_hf.fields(b), (name, add, t[:80])
        pairs = list(zip(texts[::2], texts[1::2]))
        got = face.encode_batch(pairs, add_special_tokens=add)
        want = hf.encode_batch(pairs, add_special_tokens=add)
        for t, a, b in zip(pairs, got, want):
            assert diff_hf.fields(a) == diff_hf.fields(b), (name, add, t[0][:40], t[1][:40])
    for t in TRICKY:
        assert diff_hf.fields(face.encode(t)) == diff_hf.fields(hf.encode(t)), (name, t[:80])
        for a, b in [(face.encode(t).char_to_token(0), hf.encode(t).char_to_token(0))]:
            assert a == b, (name, t[:80])
    assert ref.n == 0


@needs_shared
@pytest.mark.parametrize("name", sorted(PATHS))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(data=st.data())
def test_hypothesis_strings(files, name, data):
    if name not in files:
        pytest.skip(f"{PATHS[name]} not present")
    face, hf = files[name]
    parts = st.one_of(st.text(alphabet=ALPHABET, max_size=12), st.sampled_from(ADDED),
                      st.text(st.characters(blacklist_categories=("Cs",)), max_size=6))
    texts = data.draw(st.lists(st.lists(parts, max_size=6).map("".join), min_size=1, max_size=6))
    _check(face._core.tok, hf, texts, name)


@functools.lru_cache(maxsize=None)
def _base(path: str, n_pieces: int | None) -> dict:
    """The file's tokenizer.json object; with n_pieces, a Unigram vocabulary cut to its first n_pieces (ids
    unchanged; added tokens past them dropped): a variant compiles in a fraction of the time, and more text
    falls to the unknown piece."""
    with open(path, encoding="utf-8") as f:
        obj = json.load(f)
    if n_pieces is not None:
        obj["model"]["vocab"] = obj["model"]["vocab"][:n_pieces]
        obj["added_tokens"] = [a for a in obj["added_tokens"] if a["id"] < n_pieces]
    return obj


def _variant(path: str, tmp_path, label: str, change, n_pieces: int | None = None):
    obj = copy.deepcopy(_base(path, n_pieces))
    change(obj)
    p = tmp_path / f"{label}.json"
    p.write_text(json.dumps(obj, ensure_ascii=False), encoding="utf-8")
    return fstok.compile(str(p)), tokenizers.Tokenizer.from_file(str(p))


def _set(key, value):
    def change(o):
        o[key] = value
    return change


VARIANT_LINES = ["ab", "abc d", "ab<s>ab", "<s>abc", "  x  y  ", "  ", "xx xxx a aa ...  ....", "\u200bx  y", "ab abab\nab", "e\u0301  ﬁ", " 日本 語 ",
                 "Hello  world  ..."]
PHI3_VARIANTS = {
    # Replace steps (literal, removing, runs c{k,} and c{k}, c+) before the Metaspace replacement: each
    # content takes the alignment of the last character it replaces
    "replace-runs": _set("normalizer", {"type": "Sequence", "normalizers": [
        {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
        {"type": "Replace", "pattern": {"Regex": "x{2}"}, "content": "Y"},
        {"type": "Replace", "pattern": {"Regex": "a+"}, "content": "b"},
        {"type": "Replace", "pattern": {"Regex": "\\.{3,}"}, "content": "…"},
        {"type": "Prepend", "prepend": "▁"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}),
    "literal-removed": _set("normalizer", {"type": "Sequence", "normalizers": [
        {"type": "Replace", "pattern": {"Regex": "ab"}, "content": "<>"},
        {"type": "Replace", "pattern": {"String": "\n"}, "content": ""},
        {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}),
    # Metaspace's "first" scheme reads the original start of the normalized text: a Replace at the start
    # moves it
    "metaspace-first": lambda o: o.update(normalizer={"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
                                          pre_tokenizer={"type": "Metaspace", "replacement": "▁",
                                                         "prepend_scheme": "first", "split": True}),
    "metaspace-first-replaced-start": lambda o: o.update(
        normalizer={"type": "Replace", "pattern": {"String": "ab"}, "content": "X"},
        pre_tokenizer={"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": True}),
    "metaspace-never-nosplit": lambda o: o.update(normalizer=None, pre_tokenizer={
        "type": "Metaspace", "replacement": "▁", "prepend_scheme": "never", "split": False}),
    "whitespace-split": lambda o: o.update(normalizer=None, pre_tokenizer={"type": "WhitespaceSplit"}),
    "unk-fused": lambda o: o["model"].update(byte_fallback=False, fuse_unk=True),
    "unk-apart": lambda o: o["model"].update(byte_fallback=False, fuse_unk=False),
    "ignore-merges": lambda o: o["model"].update(ignore_merges=True),
}


@needs_shared
@pytest.mark.parametrize("kind", sorted(PHI3_VARIANTS))
def test_phi3_variants(tmp_path, kind, monkeypatch):
    if not os.path.exists(PHI3):
        pytest.skip(f"{PHI3} not present")
    core, hf = _variant(PHI3, tmp_path, kind, PHI3_VARIANTS[kind])
    ref = _Reference(monkeypatch)
    _check(core, hf, VARIANT_LINES + _lines(4), kind, ref)


E5_VARIANTS = {
    "metaspace-first": lambda o: o["pre_tokenizer"].update(prepend_scheme="first"),
    "whitespace-split": _set("pre_tokenizer", {"type": "WhitespaceSplit"}),
    "prepend-no-pre": lambda o: o.update(pre_tokenizer=None, normalizer={"type": "Sequence", "normalizers": (
        o["normalizer"]["normalizers"] + [{"type": "Prepend", "prepend": "▁"},
                                          {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}])}),
}


@needs_shared
@pytest.mark.parametrize("kind", sorted(E5_VARIANTS))
def test_e5_variants(tmp_path, kind, monkeypatch):
    """The Precompiled charsmap with another pre-tokenizer after it (Unknown pieces keep their text)."""
    if not os.path.exists(E5):
        pytest.skip(f"{E5} not present")
    core, hf = _variant(E5, tmp_path, kind, E5_VARIANTS[kind], 20000)
    ref = _Reference(monkeypatch)
    _check(core, hf, VARIANT_LINES + _lines(3), kind, ref)


@needs_shared
def test_unigram_unknown_pieces_keep_their_text(files):
    if "e5" not in files:
        pytest.skip(f"{E5} not present")
    face, hf = files["e5"]
    # characters the vocabulary lacks: a fused unknown piece, its token string the normalized text it covers
    text = "x \U0001d11e\U0001d11e y \U00013000 z"
    a, b = face.encode(text), hf.encode(text)
    assert "<unk>" in b.tokens or any(t not in face.get_vocab() for t in b.tokens)
    assert diff_hf.fields(a) == diff_hf.fields(b)


@needs_shared
def test_text_the_native_path_leaves_out_takes_the_reference(files, monkeypatch):
    """Lone surrogates cannot be UTF-8: the reference path takes the text (and raises as it does)."""
    if "phi-3" not in files:
        pytest.skip(f"{PHI3} not present")
    face, _ = files["phi-3"]
    core = face._core.tok
    ref = _Reference(monkeypatch)
    with pytest.raises(UnicodeEncodeError):
        core.hf_lists_batch(["fine", "bad \ud800 text"])
    assert ref.n == 1
