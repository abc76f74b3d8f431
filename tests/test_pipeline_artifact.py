"""Artifacts of tokenizer.json pipelines and tekken: save / load / pickle give the same ids, offsets and decode as
the compiled tokenizer (and so as HF / mistral-common), and a damaged or crafted file is refused at load."""
from __future__ import annotations

import json
import os
import pickle

import pytest

import fstok
from fstok import artifact as A
from fstok.pipeline.tekken import TekkenTokenizer
from fstok.pipeline.tokenizer import PipelineTokenizer

from pipeline_helpers import CLIP, FALCON, ROBERTA, TEKKEN, compiled, corpus_sample

pytestmark = pytest.mark.skipif(not os.path.exists(ROBERTA), reason="shared vocabularies not present")


def _same(a, b, texts):
    for s in texts:
        for ast in (False, True):
            assert a.encode(s, add_special_tokens=ast) == b.encode(s, add_special_tokens=ast), s[:60]
        ids = a.encode(s, add_special_tokens=True)
        for sk in (True, False):
            assert a.decode(ids, sk) == b.decode(ids, sk), s[:60]


@pytest.mark.parametrize("path", [ROBERTA, FALCON, CLIP], ids=["roberta", "falcon", "clip"])
def test_pipeline_roundtrip(path, tmp_path):
    tok = compiled(path)
    assert isinstance(tok, PipelineTokenizer)
    p = tmp_path / "t.fst"
    tok.save(p)
    back = fstok.load(p)
    assert isinstance(back, PipelineTokenizer) and back.n_vocab == tok.n_vocab
    assert (back._tables is None) == (tok._tables is None)
    texts = corpus_sample(8)
    _same(tok, back, texts)
    for s in texts[:30]:
        for ast in (False, True):
            assert back.encode_with_offsets(s, add_special_tokens=ast) == tok.encode_with_offsets(s, add_special_tokens=ast)
    again = pickle.loads(pickle.dumps(back))
    _same(tok, again, texts[:10])
    assert fstok.loads(back.to_bytes()).encode("Hello world") == tok.encode("Hello world")


def test_loaded_tables_encode_without_building_the_stages(tmp_path):
    """A loaded pipeline whose tables cover the file encodes in C; the Python stages are built on first need."""
    tok = compiled(ROBERTA)
    back = fstok.loads(tok.to_bytes())
    assert back.encode("Hello <s>world</s>", add_special_tokens=True) == tok.encode("Hello <s>world</s>", add_special_tokens=True)
    assert "model" not in back.__dict__
    assert back.encode("a <mask> b") == tok.encode("a <mask> b")  # lstrip token: the stages
    assert "model" in back.__dict__


def test_tekken_roundtrip(tmp_path):
    tok = compiled(TEKKEN)
    assert isinstance(tok, TekkenTokenizer)
    p = tmp_path / "tekken.fst"
    tok.save(p)
    back = fstok.load(p)
    assert isinstance(back, TekkenTokenizer) and back.n_vocab == tok.n_vocab
    texts = corpus_sample(8)
    _same(tok, back, texts)
    assert pickle.loads(pickle.dumps(back)).encode("Hello") == tok.encode("Hello")


def _rewrite(data: bytes, meta_over=None, sections_over=None, kind=None) -> bytes:
    art = A.parse_artifact(data)
    meta = dict(art.meta)
    meta.update(meta_over or {})
    secs = {n: art.raw(n) for n in art.sections if n != "meta"}
    secs.update(sections_over or {})
    secs = {n: v for n, v in secs.items() if v is not None}
    return A.write_artifact(None, kind or art.kind, meta, secs, art.unicode_version, art.source_hash)


@pytest.mark.parametrize("meta_over,sections_over,needle", [
    ({"pipeline_meta_version": 99}, None, "meta version"),
    ({"n_vocab": -1}, None, "n_vocab"),
    ({"guards": [""]}, None, "guards"),
    ({"pp_ids": [[0], "x"]}, None, "pp_ids"),
    ({"has_tables": "yes"}, None, "has_tables"),
    (None, {"tokenizer.json": None}, "no 'tokenizer.json'"),
    (None, {"tables": None}, "no 'tables'"),
    (None, {"tables": b"FSTOKART" + b"\0" * 200}, "tables"),
    ({"n_vocab": 3}, None, "n_vocab"),
    ({"standin_lo": -3}, None, "standin_lo"),
    ({"mode": "fast"}, None, "mode"),
    ({"cut": {"find": 1}}, None, "cut"),
    ({"raw_guards": [""]}, None, "raw_guards"),
])
def test_pipeline_crafted_files_are_refused(meta_over, sections_over, needle):
    data = compiled(ROBERTA).to_bytes()
    bad = _rewrite(data, meta_over, sections_over)
    with pytest.raises(A.ArtifactError, match=needle):
        fstok.loads(bad)


@pytest.mark.parametrize("section,needle", [(b"{not json", "not valid JSON"), (b"[1]", "no 'model'")])
def test_pipeline_bad_json_is_refused_when_the_stages_are_built(section, needle):
    """The tokenizer.json section (under the checksums) is parsed when the Python stages are first needed: the
    compiled tables encode without it; decode, vocabulary and offsets build the stages and refuse it then."""
    data = compiled(ROBERTA).to_bytes()
    tok = fstok.loads(_rewrite(data, None, {"tokenizer.json": section}))
    assert tok.encode("Hello world") == compiled(ROBERTA).encode("Hello world")
    with pytest.raises(A.ArtifactError, match=needle):
        tok.decode([1, 2])
    # a pipeline the tables do not encode parses it at load
    no_tables = _rewrite(data, {"has_tables": False}, {"tokenizer.json": section, "tables": None})
    with pytest.raises(A.ArtifactError, match=needle):
        fstok.loads(no_tables)


def test_nested_tables_are_validated():
    """The outer checksum covers the nested BPE artifact (a flipped byte inside it is refused); a crafted one,
    checksums resealed, is refused by the BPE loader's structural checks (an out-of-range trie parent)."""
    data = compiled(ROBERTA).to_bytes()
    art = A.parse_artifact(data)
    s = art.sections["tables"]
    flipped = bytearray(data)
    flipped[s.offset + s.nbytes // 2] ^= 0x40
    with pytest.raises(A.ArtifactError, match="checksum"):
        fstok.loads(bytes(flipped))
    inner = A.parse_artifact(art.raw("tables"))
    t = inner.sections["trie"]
    bad = bytearray(art.raw("tables"))
    bad[t.offset + 4: t.offset + 8] = (0xFFFFFFF0).to_bytes(4, "little")  # entry 0's parent
    with pytest.raises(A.ArtifactError, match="trie"):
        fstok.loads(_rewrite(data, None, {"tables": A.reseal(bad)}))
    # a tekken artifact under the pipeline kind, and a pipeline's tables relabelled as something else
    with pytest.raises(A.ArtifactError):
        fstok.loads(_rewrite(data, None, None, kind=A.KIND_TEKKEN))


@pytest.mark.parametrize("meta_over", [{"n_special": 5}, {"specials": ["a", "a"]}, {"bos_id": 10**6},
                                       {"tekken_meta_version": 0}, {"name": 3}])
def test_tekken_crafted_meta_is_refused(meta_over):
    data = compiled(TEKKEN).to_bytes()
    with pytest.raises(A.ArtifactError):
        fstok.loads(_rewrite(data, meta_over))


def test_stages_only_artifact_holds_the_json(tmp_path):
    """A file the tables do not cover (a WordLevel model) is stored as its tokenizer.json and runs the stages."""
    obj = {"version": "1.0", "added_tokens": [], "normalizer": {"type": "Lowercase"},
           "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None, "decoder": None,
           "model": {"type": "WordLevel", "vocab": {"a": 0, "b": 1, "[UNK]": 2}, "unk_token": "[UNK]"}}
    p = tmp_path / "tokenizer.json"
    p.write_text(json.dumps(obj))
    tok = fstok.compile(p)
    back = fstok.loads(tok.to_bytes())
    assert back._tables is None
    for s in ["A b c", "", "b!a"]:
        assert back.encode_with_offsets(s) == tok.encode_with_offsets(s)
