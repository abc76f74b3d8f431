"""Unicode tables: pinned per engine, checked against the installed engines, and the cases where the
`regex` module (Unicode 17.0) and the real engines (Unicode 16.0) disagree -- the engine wins."""
import importlib.util
import os

import pytest
import regex

from fstok.compile.unicode_props import MAX_CP, VALID, tables, unicode_version
from fstok.pretokenize import LLAMA3_PAT, O200K_PAT, get_pattern

from conftest import ROOT, needs_shared


def _tool(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "tools", f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


gen = _tool("gen_unicode_props")
D = _tool("diff_pretokenize")
ALL = [c for c in range(MAX_CP + 1) if not 0xD800 <= c <= 0xDFFF]


@pytest.mark.parametrize("dialect", ["rust-regex", "oniguruma"])
def test_tables_are_pinned_and_complete(dialect):
    u = tables(dialect)
    assert u.version == unicode_version(dialect) == "16.0.0"
    assert u.engine  # records which installed engine produced it
    # General_Category is a partition of all code points
    total = 0
    for g in ("Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po",
              "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn"):
        total += len(u.gc[g])
    assert total == MAX_CP + 1
    assert len(u.gc["L"]) == 141028  # Unicode 16.0 letters (17.0 has 145672)


@pytest.mark.parametrize("prop", [r"\p{L}", r"\p{Lu}", r"\p{Ll}", r"\p{Lt}", r"\p{Lm}", r"\p{Lo}", r"\p{M}", r"\p{N}",
                                  r"\p{P}", r"\p{S}", r"\s", r"\d", r"\w"])
def test_rust_regex_tables_match_tiktoken_on_every_code_point(prop):
    pr = gen.Probe("rust-regex")
    u = tables("rust-regex")
    ours = _ours(u, prop)
    assert pr.matched(prop, ALL) == ours


@pytest.mark.parametrize("prop", [r"\p{L}", r"\p{N}", r"\p{M}", r"\s"])
def test_oniguruma_tables_match_hf_tokenizers_on_every_code_point(prop):
    pr = gen.Probe("oniguruma")
    u = tables("oniguruma")
    assert pr.matched(prop, ALL) == _ours(u, prop)


def _ours(u, prop):
    if prop.startswith(r"\p{"):
        s = u.property(prop[3:-1])
    else:
        s = u.shorthand(prop[1])
    return set(s & VALID)


def test_case_folding_orbits_come_from_the_engines():
    for d in ("rust-regex", "oniguruma"):
        u = tables(d)
        assert u.fold_orbit(ord("s")) == (0x53, 0x73, 0x17F)
        assert u.fold_orbit(ord("k")) == (0x4B, 0x6B, 0x212A)
        assert u.fold_orbit(ord("1")) == (ord("1"),)
    assert tables("rust-regex").multi_folds == []
    assert (0xDF, "ss") in tables("oniguruma").multi_folds


def test_the_regex_module_has_newer_unicode_data():
    # the reason for the exception lists in the differential tests: 4804 code points
    bad = D.disagreement("rust-regex")
    assert 0x323B0 in bad and 0x0295 in bad and 0x11DE0 in bad
    assert 4000 < len(bad) < 6000
    assert regex.match(r"\p{L}", "\U000323b0") and not tables("rust-regex").gc["L"].__contains__(0x323B0)


# Each documented case: the regex module (Unicode 17.0) splits differently from the engine the
# tokenizer was made for (Unicode 16.0); fstok follows the engine.
ENGINE_WINS = [
    # U+323B0 CJK Ext. J ideograph: a letter in 17.0, unassigned (Cn) in 16.0
    ("o200k_base", "a\U000323b0b", ["a", "\U000323b0b"], ["a\U000323b0b"]),
    ("cl100k_base", "a\U000323b0b", ["a", "\U000323b0b"], ["a\U000323b0b"]),
    ("llama3", "a\U000323b0b", ["a", "\U000323b0b"], ["a\U000323b0b"]),
    # U+0295 LATIN LETTER PHARYNGEAL VOICED FRICATIVE: Ll in 16.0, Lo in 17.0 (o200k's case classes)
    ("o200k_base", "\u0295Ab", ["\u0295", "Ab"], ["\u0295Ab"]),
    # U+11DE0: a decimal digit in 17.0, unassigned in 16.0
    ("o200k_base", "x\U00011de0y", ["x", "\U00011de0y"], ["x", "\U00011de0", "y"]),
    ("r50k_base", "x\U00011de0y", ["x", "\U00011de0", "y"], ["x", "\U00011de0", "y"]),  # same split either way
]


@pytest.mark.parametrize("name,text,engine,regex_module", ENGINE_WINS)
def test_engine_wins_over_the_regex_module_tiktoken(name, text, engine, regex_module):
    cp = get_pattern(name)
    pat = cp.levels[0].pattern
    assert [m.group() for m in regex.finditer(pat, text)] == regex_module
    # tiktoken's own (Rust) splitting, read back through a vocabulary of the candidate pieces
    assert D.tiktoken_pieces(pat, text, engine + regex_module) == engine
    assert cp.pieces(text) == engine


@pytest.mark.parametrize("text,engine", [
    ("a\U000323b0b", ["a", "\U000323b0b"]),
    ("x\U00011de0y", ["x", "\U00011de0y"]),
])
def test_engine_wins_over_the_regex_module_hf(text, engine):
    from tokenizers import Regex, pre_tokenizers

    pt = pre_tokenizers.Split(Regex(LLAMA3_PAT), behavior="isolated")
    assert [p for p, _ in pt.pre_tokenize_str(text)] == engine
    assert get_pattern("hf-llama3").pieces(text) == engine
    assert [m.group() for m in regex.finditer(LLAMA3_PAT, text)] != engine


@needs_shared
def test_tiktoken_encoding_agrees_on_disagreeing_code_points():
    # every code point the regex module classifies differently, embedded in contexts: tiktoken's real
    # o200k vocabulary encodes the text natively exactly as along fstok's spans
    bad = sorted(D.disagreement("rust-regex"))
    text = D.codepoint_text(bad, contexts=["a{c}b", "{c}A", " {c}1", "\u0295{c}Ab"])
    cp = get_pattern("o200k_base")
    assert D.tiktoken_agrees("o200k_base", text, cp.spans(text))
    assert O200K_PAT == cp.levels[0].pattern
