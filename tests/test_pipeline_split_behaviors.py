"""Pre-tokenizers that remove or merge text (Split with every behavior and invert, Whitespace, WhitespaceSplit,
CharDelimiterSplit, BertPreTokenizer, Punctuation with a behavior) before a byte-level BPE: their pieces are cut
in one C call (fstok.runtime._dfa.cut_levels) and encoded by the compiled tables; ids equal HF `tokenizers`' and
the Python stages' (the oracle) on hypothesis strings, and the artifact keeps the behaviors."""
from __future__ import annotations

import functools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fstok.pipeline.tokenizer import PipelineTokenizer
from test_pipeline_native import ALPHA, ANY, _bl, _obj

tokenizers = pytest.importorskip("tokenizers")


def _split(rx: str, behavior: str, invert: bool = False, string: bool = False) -> dict:
    return {"type": "Split", "pattern": {"String" if string else "Regex": rx}, "behavior": behavior, "invert": invert}


def _seq(*items) -> dict:
    return {"type": "Sequence", "pretokenizers": list(items)}


PIPELINES = {
    **{f"split-{b.lower()}{'-inv' if inv else ''}": _seq(_split("\\s+|[.!?]+|\\d", b, inv), _bl())
       for b in ("Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous") for inv in (False, True)},
    "split-string-removed": _seq(_split("ab", "Removed", string=True), _bl()),
    "split-char-next": _seq(_split("-", "MergedWithNext", string=True), _bl()),
    "whitespace": _seq({"type": "Whitespace"}, _bl()),
    "whitespace-split": _seq({"type": "WhitespaceSplit"}, _bl()),
    "char-delimiter": _seq({"type": "CharDelimiterSplit", "delimiter": "."}, _bl()),
    "bert": _seq({"type": "BertPreTokenizer"}, _bl()),
    "punct-removed": _seq({"type": "Punctuation", "behavior": "Removed"}, _bl()),
    "removed-after-bytelevel": _seq(_bl(), _split("Ġ", "Removed")),
    "merged-after-bytelevel": _seq(_bl(use_regex=False), _split("Ġ+", "MergedWithNext"),
                                   {"type": "Digits", "individual_digits": True}),
    "removed-then-isolated": _seq(_split("[a-z]+|\\s+", "Removed", True), _split("aa", "Isolated"), _bl()),
}


@functools.lru_cache(maxsize=None)
def _trio(name: str):
    obj = _obj(PIPELINES[name])
    return (PipelineTokenizer(obj, f"{name}.json"), PipelineTokenizer(obj, f"{name}.json", compiled=False),
            tokenizers.Tokenizer.from_str(json.dumps(obj)))


@pytest.mark.parametrize("name", sorted(PIPELINES))
@settings(max_examples=60, deadline=None)
@given(s=st.one_of(ALPHA, ANY, st.sampled_from(["a-b--c- -d", "x.. y!?z 12 3", "the  aab abab", "Ġ ĠĠx"])))
def test_cut_levels_match_hf_and_the_stages(name, s):
    fast, slow, hf = _trio(name)
    assert fast._tables is not None and fast._pieces is not None, name
    e = hf.encode(s, add_special_tokens=False)
    assert fast.encode(s) == e.ids == slow.encode(s), s
    assert fast._native_ok(s)
    t = f"{s}<x>{s[::-1]}"  # an added token: the stages, still HF's
    assert fast.encode(t) == hf.encode(t, add_special_tokens=False).ids


def test_behaviors_survive_the_artifact():
    import fstok

    for name in ("split-mergedwithnext-inv", "bert", "whitespace"):
        fast = _trio(name)[0]
        back = fstok.loads(fast.to_bytes())
        assert back._pieces.behaviors == fast._pieces.behaviors
        for s in ["a-b--c- -d", "x.. y!?z 12 3", "héllo, wörld!"]:
            assert back.encode(s) == fast.encode(s)


def test_prefix_space_and_metaspace_still_take_the_stages():
    for pre in (_seq({"type": "Whitespace"}, _bl(add_prefix_space=True)),
                _seq({"type": "UnicodeScripts"}, _bl())):
        tok = PipelineTokenizer(_obj(pre), "x.json")
        assert tok._tables is None
        hf = tokenizers.Tokenizer.from_str(json.dumps(_obj(pre)))
        for s in ["a b. c", " x!!y 12 "]:
            assert tok.encode(s) == hf.encode(s, add_special_tokens=False).ids


def test_cut_levels_refuses_bad_codes():
    from fstok.pretokenize import CompiledPattern
    from fstok.runtime import _dfa

    sp = CompiledPattern.pipeline([("a", "oniguruma"), ("b", "oniguruma")]).spanner
    for codes in (b"\x00", b"\x00\x05", b"\x00\x10", b"\x00\x01\x00"):
        with pytest.raises(ValueError):
            _dfa.cut_levels(b"ab", sp, codes)


PREFIX = {
    "prefix": _bl(add_prefix_space=True),
    "prefix-then-digits": _seq(_bl(add_prefix_space=True), {"type": "Digits", "individual_digits": True}),
    "prefix-no-regex": _seq(_bl(add_prefix_space=True, use_regex=False)),
    "prefix-lowercase": (_bl(add_prefix_space=True), {"type": "Lowercase"}),
}


@functools.lru_cache(maxsize=None)
def _prefix_trio(name: str):
    pre = PREFIX[name]
    obj = _obj(pre[0]) if isinstance(pre, tuple) else _obj(pre)
    if isinstance(pre, tuple):
        obj["normalizer"] = pre[1]
    return (PipelineTokenizer(obj, f"{name}.json"), PipelineTokenizer(obj, f"{name}.json", compiled=False),
            tokenizers.Tokenizer.from_str(json.dumps(obj)))


@pytest.mark.parametrize("name", sorted(PREFIX))
@settings(max_examples=60, deadline=None)
@given(s=st.one_of(ALPHA, ANY, st.sampled_from(["", " ", "a", " a", "A<x>b", "<x>", "  x", "\tX 12"])))
def test_leading_prefix_space_in_c(name, s):
    """ByteLevel(add_prefix_space=true) first: " " before a (normalized) text that lacks one, then the tables;
    a text with an added token (a prefix before each piece between them) runs the stages"""
    fast, slow, hf = _prefix_trio(name)
    assert fast._tables is not None and fast._prefix_space and fast._mode == "guarded"
    e = hf.encode(s, add_special_tokens=False)
    assert fast.encode(s) == e.ids == slow.encode(s), s
    assert fast.encode_with_offsets(s) == (e.ids, [tuple(o) for o in e.offsets])


def test_prefix_space_survives_the_artifact():
    import fstok

    fast = _prefix_trio("prefix-then-digits")[0]
    back = fstok.loads(fast.to_bytes())
    assert back._prefix_space
    for s in ["hello 123", " x", "", "a<x>b"]:
        assert back.encode(s) == fast.encode(s)
