"""UnicodeScripts, BertPreTokenizer, FixedLength and Metaspace (fstok.pipeline.pretokenizers) against HF
`tokenizers`' own pre-tokenizers built from the same JSON: pieces and offsets on hypothesis strings, the script
table on samples of every code point, and whole tokenizer.json files that use them."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fstok.pipeline import UnsupportedComponent
from fstok.pipeline import pretokenizers as P
from fstok.pipeline.normalized import Piece
from fstok.pipeline.tokenizer import PipelineTokenizer

tokenizers = pytest.importorskip("tokenizers")

MIXED = st.text(st.sampled_from(list(" \t\n.,!?-_0123456789aAzéΣσαβ日本語どこでグーー。ﾝ한국😀\u0301\u00a0\u3000"
                                      "\u0627\u05d0\u0915\u093f▁<>")), max_size=24)
ANY = st.text(st.characters(blacklist_categories=("Cs",)), max_size=16)


def _hf(cfg: dict):
    base = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
            "pre_tokenizer": cfg, "post_processor": None, "decoder": None,
            "model": {"type": "WordLevel", "vocab": {"<unk>": 0}, "unk_token": "<unk>"}}
    return tokenizers.Tokenizer.from_str(json.dumps(base)).pre_tokenizer


CONFIGS = [
    {"type": "UnicodeScripts"}, {"type": "BertPreTokenizer"},
    {"type": "FixedLength", "length": 1}, {"type": "FixedLength", "length": 3}, {"type": "FixedLength"},
    {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, {"type": "UnicodeScripts"}]},
    {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
    {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True},
    {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "never", "split": False},
    {"type": "Metaspace", "replacement": "_", "prepend_scheme": "first", "split": False},
    {"type": "Sequence", "pretokenizers": [{"type": "Punctuation", "behavior": "Isolated"},
                                           {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
                                            "split": True}]},
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: json.dumps(c)[:60])
@settings(max_examples=80, deadline=None)
@given(s=st.one_of(MIXED, ANY, st.sampled_from(["", " ", "  a", "どこで生れ。Yes", "Apples are りんご 林檎", " ▁x"])))
def test_pretokenizer_matches_hf(cfg, s):
    ours = P.from_config(cfg)
    got = [(p.text, p.span()) for p in ours.split([Piece.original(s)])]
    assert got == [(t, tuple(o)) for t, o in _hf(cfg).pre_tokenize_str(s)]


@settings(max_examples=30, deadline=None)
@given(cps=st.lists(st.integers(0, 0x10FFFF).filter(lambda c: not 0xD800 <= c <= 0xDFFF), min_size=2, max_size=40))
def test_script_table_matches_hf(cps):
    """fstok/data/hf_scripts.npz (tools/gen_hf_scripts.py) against the installed HF, any code points."""
    s = "".join(map(chr, cps))
    got = [(p.text, p.span()) for p in P.UnicodeScripts().split([Piece.original(s)])]
    assert got == [(t, tuple(o)) for t, o in tokenizers.pre_tokenizers.UnicodeScripts().pre_tokenize_str(s)]


def test_whole_file_with_new_pretokenizers():
    vocab = {c: i for i, c in enumerate(["<unk>", "a", "b", "ab", "\u2581", "\u2581a", "日", "本", "日本", "!", "1"])}
    for pre in CONFIGS:
        obj = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
               "pre_tokenizer": pre, "post_processor": None, "decoder": None,
               "model": {"type": "BPE", "vocab": vocab, "merges": ["a b", "日 本", "\u2581 a"], "unk_token": "<unk>"}}
        tok = PipelineTokenizer(obj, "x.json")
        hf = tokenizers.Tokenizer.from_str(json.dumps(obj))
        for s in ["ab ab!", "日本 ab1 本日", "", "  a b  ", "▁ab"]:
            e = hf.encode(s, add_special_tokens=False)
            assert tok.encode_with_offsets(s) == (e.ids, [tuple(o) for o in e.offsets]), (pre, s)


@pytest.mark.parametrize("cfg,needle", [
    ({"type": "FixedLength", "length": 0}, "FixedLength length 0"),
    ({"type": "Nope"}, "pre-tokenizer 'Nope'"),
    ({"type": "Metaspace", "replacement": "ab", "prepend_scheme": "always", "split": True}, "replacement"),
    ({"type": "Metaspace", "replacement": "_", "prepend_scheme": "sometimes", "split": True}, "prepend_scheme"),
])
def test_refused_with_name_and_file(cfg, needle):
    with pytest.raises(UnsupportedComponent) as ei:
        P.from_config(cfg, "some/tokenizer.json")
    assert needle in str(ei.value) and "some/tokenizer.json" in str(ei.value)
