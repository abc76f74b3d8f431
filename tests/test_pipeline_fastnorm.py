"""The C kernels of the fast normalizer and piece cutter (fstok.runtime._norm, fstok.runtime._dfa replace / cut)
against their Python oracles and HF's own components: Lowercase over every code point, Replace with contents of
every length, the cut triples against the numpy spans, and the facts a plan keeps in the artifact."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fstok.pipeline.fastnorm import fast_normalizer, fast_normalizer_plan

TEXT = st.text(st.sampled_from(list(" \t\n\r\x0b\x85\u3000\u2028abcAZ.İΣσßﬁéÉ\u0301ǅ日😀'<>|")), max_size=40)
ANY = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)


def _chunks():
    cps = [c for c in range(0x80, 0x110000) if not 0xD800 <= c <= 0xDFFF]
    for i in range(0, len(cps), 4096):
        yield "".join(map(chr, cps[i:i + 4096]))


def test_lowercase_equals_hf_on_every_code_point():
    normalizers = pytest.importorskip("tokenizers.normalizers")
    hf = normalizers.Lowercase()
    plan = fast_normalizer({"type": "Lowercase"})
    assert plan("ABC xyz") == "abc xyz"
    for chunk in _chunks():
        assert plan(chunk) == hf.normalize_str(chunk)


@pytest.mark.parametrize("content", ["", " ", "\u2581", "日本", "<x>"])
@settings(max_examples=50, deadline=None)
@given(s=st.one_of(TEXT, ANY))
def test_replace_regex_equals_hf(content, s):
    normalizers = pytest.importorskip("tokenizers.normalizers")
    tokenizers = pytest.importorskip("tokenizers")
    cfg = {"type": "Replace", "pattern": {"Regex": "\\s+|ß"}, "content": content}
    hf = normalizers.Replace(tokenizers.Regex("\\s+|ß"), content)
    assert fast_normalizer(cfg)(s) == hf.normalize_str(s)


def test_replace_leaves_a_text_without_matches_alone():
    plan = fast_normalizer_plan({"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "})
    assert plan("abc") == b"abc" and plan("") == b"" and plan("a\t\n b") == b"a b"


def _clip_cutter():
    from fstok.pipeline.native import Cutter, compile_stages, native_stages

    find, stages = native_stages({"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "'s|'t|[\\p{L}]+|[\\p{N}]|[^\\s\\p{L}\\p{N}]+"}, "behavior": "Removed",
         "invert": True}, {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True}]})
    return Cutter.build(find, compile_stages(stages))


@settings(max_examples=150, deadline=None)
@given(s=st.one_of(TEXT, ANY))
def test_cut_triples_equal_the_spans(s):
    """one C call (find, then the split levels on each match) == the split pipeline filtered by the find matches"""
    c = _clip_cutter()
    data = s.encode("utf-8")
    tri = np.frombuffer(c.triples(data), dtype=np.uint32).reshape(-1, 3)
    sp = c.spans(data)
    assert tri[:, :2].astype(np.int64).tolist() == sp.tolist()
    assert (tri[:, 2] == 0xFFFFFFFF).all()


def test_cut_without_find_and_without_split():
    from fstok.pipeline.native import Cutter
    from fstok.loaders.bpe_source import PreTokStage

    only_split = Cutter.build(None, [PreTokStage("\\d+", True, "oniguruma")])
    got = np.frombuffer(only_split.triples(b"ab12cd"), dtype=np.uint32).reshape(-1, 3)[:, :2].tolist()
    assert got == [[0, 2], [2, 4], [4, 6]]
    only_find = Cutter.build(PreTokStage("\\d+", False, "oniguruma"), [])
    got = np.frombuffer(only_find.triples(b"ab12cd3"), dtype=np.uint32).reshape(-1, 3)[:, :2].tolist()
    assert got == [[2, 4], [6, 7]]


CLIP_NORM = {"type": "Sequence", "normalizers": [
    {"type": "NFC"}, {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "}, {"type": "Lowercase"},
    {"type": "StripAccents"}, {"type": "Prepend", "prepend": "\u2581"}, {"type": "NFKD"}]}


class _Art:
    """The sections of a plan as an artifact gives them (array by name)."""

    path = None
    kind_name = "pipeline"

    def __init__(self, sections):
        self.s = sections

    def array(self, name):
        return self.s[name]

    def raw(self, name):
        return bytes(self.s[name])


@settings(max_examples=60, deadline=None)
@given(s=st.one_of(TEXT, ANY))
def test_plan_from_its_sections_equals_the_computed_plan(s):
    from fstok.pipeline.fastnorm import NormPlan

    plan = fast_normalizer_plan(CLIP_NORM)
    back = NormPlan.from_sections(CLIP_NORM, _Art(plan.sections()))
    assert back(s) == plan(s)


def test_bad_lowercase_section_is_refused():
    from fstok.pipeline.fastnorm import NormPlan

    cfg = {"type": "Lowercase"}
    sec = fast_normalizer_plan(cfg).sections()
    keys = sec["norm.0.keys"].copy()
    keys[[3, 4]] = keys[[4, 3]]
    with pytest.raises(ValueError, match="keys"):
        NormPlan.from_sections(cfg, _Art(dict(sec, **{"norm.0.keys": keys})))
    with pytest.raises(ValueError, match="missing"):
        NormPlan.from_sections(cfg, _Art({}))


def test_map_refuses_malformed_tables():
    from fstok.runtime import _norm

    bm = np.zeros(0x110000 // 8, dtype=np.uint8)
    asc = bytes(range(128))
    keys = np.array([0x100, 0x0FF], dtype=np.uint32)
    with pytest.raises(ValueError):
        _norm.map(b"x", bm, keys, np.array([0, 1, 2], dtype=np.uint32), b"ab", asc)
    with pytest.raises(ValueError):
        _norm.map(b"x", bm, keys[:1], np.array([0, 5], dtype=np.uint32), b"ab", asc)  # offset past the blob
    with pytest.raises(ValueError):
        _norm.map(b"x", bm[:-1], keys[:1], np.array([0, 1], dtype=np.uint32), b"ab", asc)


def test_clip_artifact_keeps_the_normalizer_facts(tmp_path):
    """a pipeline artifact holds the plan's sections, and loading it builds the same plan without computing
    facts (the tokenizer.json section stays unparsed)"""
    import fstok
    from test_pipeline_native import _suffix_trio

    fast = _suffix_trio("clip-like")[0]
    p = tmp_path / "clip-like.fst"
    fast.save(p)
    back = fstok.load(str(p))
    assert back._tables is not None and back._norm_fast is not None
    for s in ["Hello   THE\tab 12", "naïve CAFÉ İ", ""]:
        assert back.encode(s) == fast.encode(s)
    assert "normalizer" not in back.__dict__  # the stages were not built
    assert back.encode("x<|end|>y") == fast.encode("x<|end|>y")  # an added token: the stages
