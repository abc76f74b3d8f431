"""fstok against HF `tokenizers` 0.23.3 on tokenizer.json options the shared files do not use: each shared
file's pipeline with a small model HF's trainer learns on corpus lines (tools/diff_variants.py `--tiny`),
its JSON edited to one option, checked by tools/diff_models.py's checks (ids, offsets, decode; both faces,
with and without special tokens) on edge strings, corpus lines and hypothesis strings.

The full list of variants on the shared files themselves is `python tools/diff_variants.py`."""
from __future__ import annotations

import json
import os
import sys

import pytest

from conftest import needs_shared

tokenizers = pytest.importorskip("tokenizers")
pytest.importorskip("hypothesis")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
import diff_variants as DV  # noqa: E402

import fstok  # noqa: E402

pytestmark = needs_shared

SAMPLE = ["phi3 added normalized", "roberta decoder none", "minilm added lstrip single_word", "minilm added non-special",
          "phi3 metaspace first split=False", "whisper split MergedWithNext invert=True",
          "minilm wordlevel whitespace", "clip fuse_unk", "phi3 added words", "phi3 no unk no byte_fallback", "roberta bytelevel aps=True trim=False regex=False",
          # the combinations the compiled WordPiece / SentencePiece-style tables leave to the stage-by-stage
          # pipeline: WordPiece after other pre-tokenizers, BertNormalizer elsewhere, Unigram after Digits /
          # Split with the Precompiled normalizer, NFKC / Strip before SentencePiece-style BPE, a BertProcessing
          # with ids of its own
          "minilm bertnorm whitespace added words", "minilm wordlevel bert", "e5 precompiled+digits",
          "e5 split MergedWithPrevious invert=True", "phi3 NFKC strip split digits", "minilm bert processing",
          "clip unk dropped multibyte"]


@pytest.fixture(scope="module")
def items():
    return DV.sample_inputs(6000, 60)


@pytest.fixture(scope="module")
def tmpdir_mod(tmp_path_factory):
    return str(tmp_path_factory.mktemp("variants"))


@pytest.mark.parametrize("name", SAMPLE)
def test_variant_matches_hf(name, items, tmpdir_mod):
    (v,) = [v for v in DV.variants() if v[0] == name]
    status, r, msg = DV.run_variant(*v, items, tmpdir_mod, tiny=True)
    assert status in ("ok", "refused"), (status, msg, r.first if r else None)
    assert status == "ok", msg  # these variants are all implemented, by both faces
    assert "compile refuses" not in msg


def _write(d, tmpdir, name):
    p = os.path.join(tmpdir, name + ".json")
    with open(p, "w", encoding="utf-8") as f:
        json.dump(d, f, ensure_ascii=False)
    return p


def test_spm_style_decodes_normalized_special_tokens_like_hf(tmpdir_mod):
    # HF decodes a normalized added token by its normalized form ("▁<s>" under a Prepend normalizer) and
    # skips it as special only when that form is a special token's content: "<s>" stays in the text
    d = DV.tiny_base("phi3")
    for a in d["added_tokens"]:
        a["normalized"] = True
    p = _write(d, tmpdir_mod, "phi3_norm_added")
    hf = tokenizers.Tokenizer.from_file(p)
    tok = fstok.compile(p)
    for s in ["<s>x</s> <unk>", "a <s>", "<unk><s>", "</s>"]:
        ids = hf.encode(s, add_special_tokens=False).ids
        assert tok.encode(s) == ids
        for skip in (True, False):
            assert tok.decode(ids, skip_special_tokens=skip) == hf.decode(ids, skip_special_tokens=skip), (s, skip)


def test_face_decodes_added_token_by_hf_id(tmpdir_mod):
    # an added token whose content is not in the vocabulary, with the id of another piece in the file: HF
    # gives it a new id; decode must name that id's normalized form, and not skip it as special
    d = DV.tiny_base("roberta")
    d["normalizer"] = {"type": "Lowercase"}
    for a in d["added_tokens"]:
        if a["content"] == "<unk>":
            a["content"] = "<UNK>"
    p = _write(d, tmpdir_mod, "roberta_upper_added")
    hf = tokenizers.Tokenizer.from_file(p)
    face = fstok.Tokenizer.from_file(p)
    for s in ["a <UNK> <unk>", "<UNK>"]:
        ids = hf.encode(s, add_special_tokens=False).ids
        assert face.encode(s, add_special_tokens=False).ids == ids
        for skip in (True, False):
            assert face.decode(ids, skip_special_tokens=skip) == hf.decode(ids, skip_special_tokens=skip), (s, skip)


def test_unigram_without_unk_id_raises_as_hf(tmpdir_mod):
    # a Unigram model without unk_id: HF raises on a text with a character the vocabulary lacks; fstok
    # raises too (never a silently different result) and otherwise gives HF's ids
    d = DV.tiny_base("e5")
    d["model"]["unk_id"] = None
    p = _write(d, tmpdir_mod, "e5_no_unk")
    hf = tokenizers.Tokenizer.from_file(p)
    tok = fstok.compile(p)
    face = fstok.Tokenizer.from_file(p)
    for s in ["hello world", "the 日本語 😀 text", "\u01c5", "a\u0301"]:
        try:
            want = hf.encode(s, add_special_tokens=False).ids
        except Exception:
            with pytest.raises(Exception, match="unk"):
                tok.encode(s)
            with pytest.raises(Exception, match="unk"):
                face.encode(s, add_special_tokens=False)
            continue
        assert tok.encode(s) == want
        assert face.encode(s, add_special_tokens=False).ids == want


def test_bpe_offsets_after_a_dropped_multibyte_character(tmp_path):
    # no unk token: a character the vocabulary lacks is dropped, and HF's next symbols start where the last
    # added one ended, in bytes: after a dropped 3-byte character the next two tokens both fall inside it
    from tokenizers import models

    hf = tokenizers.Tokenizer(models.BPE(vocab={"a": 0, "b": 1, "c": 2, "ab": 3}, merges=[("a", "b")]))
    p = str(tmp_path / "drop.json")
    hf.save(p)
    for make in (fstok.compile, lambda q: fstok.Tokenizer.from_file(q)):
        tok = make(p)
        for s in ["日abc", "éab c", "a日b", "日日c", "abc"]:
            e = hf.encode(s)
            if isinstance(tok, fstok.Tokenizer):
                got = tok.encode(s)
                assert (got.ids, got.offsets) == (e.ids, e.offsets), s
            else:
                assert tok.encode_with_offsets(s) == (e.ids, e.offsets), s


@pytest.mark.parametrize("name", ["bpe gemma-like", "unigram nmt_nfkc_cf", "unigram user_defined_symbols"])
def test_sentencepiece_model_variant_matches_sentencepiece(name, items, tmp_path):
    # .model files the sentencepiece trainer writes with the option (tools/diff_spm_variants.py runs them all)
    pytest.importorskip("sentencepiece")
    import diff_spm_variants as DS

    (v,) = [v for v in DS.variants() if v[0] == name]
    status, r, msg = DS.run_variant(*v, items, str(tmp_path))
    assert status == "ok", (status, msg, r.first if r else None)
    assert r.n > 1000
