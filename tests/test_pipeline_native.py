"""The compiled pre-tokenizer pipeline (fstok.pipeline.native, one pass in C) against the Python stages (its
oracle) and HF `tokenizers`, on small byte-level BPE tokenizer.json files built from each stage's definition;
the byte-character reading of a regex (fstok.compile.regex_bytelevel) against the same regex run over the
byte-character image of the text."""
from __future__ import annotations

import functools
import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fstok.loaders.bpe_source import BYTE_TO_CHAR
from fstok.pipeline.tokenizer import PipelineTokenizer

tokenizers = pytest.importorskip("tokenizers")

ALPHA = st.text(st.sampled_from(list(" \t\n'.,!?-_0123456789aAzZéÉòü²³½日本😀\u0301\u00a0٣<>|$+")), max_size=24)
ANY = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


def _vocab_and_merges() -> tuple[dict, list]:
    vocab = {BYTE_TO_CHAR[b]: b for b in range(256)}
    merges = []
    for a, b in [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("1", "2"), ("12", "3"), ("Ã", "©"), ("a", "a"), ("Ġ", "Ġ"),
                 (".", "."), ("Â", "²"), ("Ã", "²")]:
        vocab.setdefault(a + b, len(vocab))
        merges.append(f"{a} {b}")
    return vocab, merges


def _bl(**kw) -> dict:
    return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True, **kw}


PIPELINES = {
    "falcon": {"type": "Sequence", "pretokenizers": [
        {"type": "Punctuation", "behavior": "Contiguous"}, _bl(), {"type": "Digits", "individual_digits": False},
        {"type": "Split", "pattern": {"Regex": "[0-9][0-9][0-9]"}, "behavior": "Isolated", "invert": False}]},
    "punct-prev": {"type": "Sequence", "pretokenizers": [{"type": "Punctuation", "behavior": "MergedWithPrevious"}, _bl()]},
    "punct-next-after": {"type": "Sequence", "pretokenizers": [_bl(use_regex=False),
                                                               {"type": "Punctuation", "behavior": "MergedWithNext"}]},
    "digits-single": {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True}, _bl()]},
    "split-after": {"type": "Sequence", "pretokenizers": [
        _bl(use_regex=False), {"type": "Split", "pattern": {"Regex": "Ġ+(?!\\w)|\\d+|Ã."}, "behavior": "Isolated",
                               "invert": True}]},
    "split-string-after": {"type": "Sequence", "pretokenizers": [
        _bl(), {"type": "Split", "pattern": {"String": "Ġ"}, "behavior": "Isolated", "invert": False}]},
    "never-matching-after": {"type": "Sequence", "pretokenizers": [
        _bl(), {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Isolated", "invert": False}]},
}


def _obj(pre: dict, vocab_drop: tuple = ()) -> dict:
    vocab, merges = _vocab_and_merges()
    for b in vocab_drop:
        del vocab[BYTE_TO_CHAR[b]]
    return {"version": "1.0", "truncation": None, "padding": None, "normalizer": None, "pre_tokenizer": pre,
            "post_processor": None, "decoder": _bl(),
            "added_tokens": [{"id": 999, "content": "<x>", "special": True, "normalized": False, "lstrip": False,
                              "rstrip": False, "single_word": False}],
            "model": {"type": "BPE", "vocab": vocab, "merges": merges}}


@functools.lru_cache(maxsize=None)
def _trio(name: str, drop: tuple = ()):
    obj = _obj(PIPELINES[name], drop)
    fast = PipelineTokenizer(obj, f"{name}.json")
    slow = PipelineTokenizer(obj, f"{name}.json", compiled=False)
    hf = tokenizers.Tokenizer.from_str(json.dumps(obj))
    return fast, slow, hf


@pytest.mark.parametrize("name", sorted(PIPELINES))
@settings(max_examples=60, deadline=None)
@given(s=st.one_of(ALPHA, ANY))
def test_native_pipeline_matches_stages_and_hf(name, s):
    fast, slow, hf = _trio(name)
    assert fast._inner is not None, name
    for t in (s, f"{s}<x>{s[::-1]}"):
        assert fast._native_ok(t)
        got = fast.encode_with_offsets(t)
        assert got == slow.encode_with_offsets(t), t
        e = hf.encode(t, add_special_tokens=False)
        assert got == (e.ids, [tuple(o) for o in e.offsets]), t
        assert fast.encode(t) == e.ids


@settings(max_examples=60, deadline=None)
@given(s=st.one_of(ALPHA, ANY, st.sampled_from(["a\x03b", "x\U00080000y", "é\x04", "\x05"])))
def test_missing_bytes_take_the_stages(s):
    """A vocabulary without some single bytes (GPT-NeoX style): HF drops the byte before merging; the tables
    emit a stand-in token exactly for such a byte, and that text is encoded again by the stages."""
    fast, slow, hf = _trio("falcon", (0x03, 0x04, 0x05, 0xF2))
    assert fast._inner is not None and fast._standin_lo is not None
    raw = fast._inner.encode(s, disallowed_special=())
    has = any(c in s for c in "\x03\x04\x05") or any(0x80000 <= ord(c) < 0xC0000 for c in s)
    assert any(i >= fast._standin_lo for i in raw) == has
    e = hf.encode(s, add_special_tokens=False)
    assert fast.encode(s) == e.ids
    assert fast.encode_with_offsets(s) == (e.ids, [tuple(o) for o in e.offsets]) == slow.encode_with_offsets(s)


def test_refused_stages_fall_back_to_python():
    """Stages that remove text are cut before the tables run (tests/test_pipeline_split_behaviors.py); a prefix
    space after other stages has no compiled form: the file runs its stages (still exact)."""
    for pre, tables in [({"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, _bl()]}, True),
                        ({"type": "Sequence", "pretokenizers": [{"type": "Punctuation", "behavior": "Removed"}, _bl()]}, True),
                        ({"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": False}, _bl(add_prefix_space=True)]},
                         False)]:
        tok = PipelineTokenizer(_obj(pre), "x.json")
        hf = tokenizers.Tokenizer.from_str(json.dumps(_obj(pre)))
        assert tok._inner is None and (tok._tables is not None) == tables
        for s in ["a b. c", " x!!y 12 ", ""]:
            assert tok.encode(s) == hf.encode(s, add_special_tokens=False).ids


def reference_bytelevel_spans(pattern: str, dialect: str, data: bytes) -> list[tuple[int, int]]:
    """Oracle: the pattern's own (code point) DFA over the byte-character image of `data` (one character per
    byte, so its character spans are raw byte spans)."""
    from fstok.pretokenize import CompiledPattern

    img = "".join(BYTE_TO_CHAR[x] for x in data)
    return [tuple(s) for s in CompiledPattern.compile(pattern, dialect, "find").reference_spans(img)]


def test_byte_table_is_gpt2s():
    from fstok.compile.regex_bytelevel import gpt2_byte_chars

    assert gpt2_byte_chars() == [BYTE_TO_CHAR[b] for b in range(256)]


PATTERNS = ["[0-9][0-9][0-9]", "[0-9²³¹¼½¾]+", "(?:Ġ|Ċ)+(?!ĉ)|ĉ", "Ġ+(?!\\w)|\\d+", "Ġ\\w+|[^\\w]+", "ÃĤ|Ã|ĠĠ+",
            "'s|'t| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_bytelevel_dfa_matches_the_byte_character_image(pattern):
    from fstok.pretokenize import CompiledPattern

    t = CompiledPattern.compile(pattern, "oniguruma+bytelevel", "find").levels[0]
    rng = random.Random(7)
    alpha = list("ab 0123 \n\t'") + ["é", "ò", "ü", "²", "日", "😀", "\u0100", "Ã", "Ġ", "\x85"]
    for _ in range(400):
        d = "".join(rng.choice(alpha) for _ in range(rng.randint(0, 12))).encode()
        got, pos = [], 0
        while pos < len(d):  # finditer over raw bytes (matches may start inside a character)
            e = t.match(d, pos)
            if e > pos:
                got.append((pos, e))
                pos = e
            else:
                pos += 1
        assert got == reference_bytelevel_spans(pattern, "oniguruma", d), d


def test_never_matching_bytelevel_pattern_is_reported():
    from fstok.compile.regex_bytelevel import NeverMatches
    from fstok.pretokenize import CompiledPattern

    with pytest.raises(NeverMatches):
        CompiledPattern.compile("\\s+", "oniguruma+bytelevel", "find")


# ------------------------------------------------------------------ normalizers and end_of_word_suffix
FAST_NORMALIZERS = [
    {"type": "NFC"}, {"type": "NFKC"}, {"type": "NFD"}, {"type": "Lowercase"}, {"type": "StripAccents"},
    {"type": "Strip", "strip_left": True, "strip_right": False}, {"type": "Prepend", "prepend": "\u2581"},
    {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "},
    {"type": "Replace", "pattern": {"String": "ab"}, "content": "X"},
    {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Replace", "pattern": {"Regex": "\\s+"},
                                                            "content": " "}, {"type": "Lowercase"}]},
]


@pytest.mark.parametrize("cfg", FAST_NORMALIZERS, ids=lambda c: json.dumps(c)[:50])
@settings(max_examples=60, deadline=None)
@given(s=st.one_of(ALPHA, ANY, st.sampled_from(["ΣΑΣ σ", "e\u0301", "ﬁ İ", " \u3000x\x1c "])))
def test_fast_normalizer_equals_the_stage_normalizer(cfg, s):
    from fstok.pipeline import normalizers as N
    from fstok.pipeline.fastnorm import fast_normalizer

    got = fast_normalizer(cfg)(s)
    if got is not None:  # None: the stage normalizer runs instead
        assert got == N.from_config(cfg).normalize_str(s)


def _suffix_obj(pre: dict, normalizer=None) -> dict:
    suf = "</w>"
    vocab = {}
    for b in range(256):
        vocab[BYTE_TO_CHAR[b]] = len(vocab)
        vocab[BYTE_TO_CHAR[b] + suf] = len(vocab)
    merges = []
    for a, b in [("h", "e"), ("l", "l"), ("he", "ll"), ("o", suf), ("hell", "o" + suf), ("Ġ", "t"), ("a", "b" + suf),
                 ("1", "2"), ("t", "h"), ("th", "e" + suf), ("Ã", "©" + suf), ("a", "a")]:
        if b == suf:
            continue
        vocab.setdefault(a + b, len(vocab))
        merges.append(f"{a} {b}")
    return {"version": "1.0", "truncation": None, "padding": None, "normalizer": normalizer, "pre_tokenizer": pre,
            "post_processor": None, "decoder": {"type": "BPEDecoder", "suffix": suf},
            "added_tokens": [{"id": len(vocab), "content": "<|end|>", "special": True, "normalized": False,
                              "lstrip": False, "rstrip": False, "single_word": False}],
            "model": {"type": "BPE", "vocab": vocab, "merges": merges, "end_of_word_suffix": suf,
                      "unk_token": BYTE_TO_CHAR[0]}}


SUFFIX_FILES = {
    "clip-like": ({"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "'s|'t|[\\p{L}]+|[\\p{N}]|[^\\s\\p{L}\\p{N}]+"}, "behavior": "Removed",
         "invert": True}, {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True}]},
        {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Replace", "pattern": {"Regex": "\\s+"},
                                                                "content": " "}, {"type": "Lowercase"}]}),
    "bytelevel-suffix": (_bl(), None),
    "find-then-split": ({"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "\\S+"}, "behavior": "Removed", "invert": True},
        _bl(), {"type": "Digits", "individual_digits": True}]}, None),
}


@functools.lru_cache(maxsize=None)
def _suffix_trio(name: str):
    pre, norm = SUFFIX_FILES[name]
    obj = _suffix_obj(pre, norm)
    return (PipelineTokenizer(obj, f"{name}.json"), PipelineTokenizer(obj, f"{name}.json", compiled=False),
            tokenizers.Tokenizer.from_str(json.dumps(obj)))


@pytest.mark.parametrize("name", sorted(SUFFIX_FILES))
@settings(max_examples=60, deadline=None)
@given(s=st.one_of(ALPHA, ANY, st.sampled_from(["hello the ab", "Hello   THE\tab 12", "x<|end|>y", "é É"])))
def test_suffix_and_normalizer_files(name, s):
    """end_of_word_suffix as a sentinel byte, a fast normalizer, a find stage before split stages: ids equal
    to the stages' and HF's; offsets (the stages) equal HF's."""
    fast, slow, hf = _suffix_trio(name)
    assert fast._tables is not None and fast._mode == "guarded" and fast._inner is None
    e = hf.encode(s, add_special_tokens=False)
    assert fast.encode(s) == e.ids == slow.encode(s)
    assert fast.encode_with_offsets(s) == (e.ids, [tuple(o) for o in e.offsets])


def test_suffix_file_roundtrips_through_its_artifact():
    import fstok

    fast = _suffix_trio("clip-like")[0]
    back = fstok.loads(fast.to_bytes())
    assert back._pieces is not None and back._suffix and back._norm_fast is not None
    for s in ["Hello   THE\tab 12", "naïve CAFÉ", "x<|end|>y", ""]:
        assert back.encode(s) == fast.encode(s)
