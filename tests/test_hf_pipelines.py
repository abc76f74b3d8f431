"""fstok.pipeline against HF `tokenizers` 0.23.3: each component on its own (hypothesis strings), the real
tokenizer.json files on a corpus sample, tekken against mistral-common, and the refusals.

The full differential run (every corpus line and whole file) is tools/diff_models_hf.py."""
from __future__ import annotations

import json
import os

import pytest

tokenizers = pytest.importorskip("tokenizers")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import fstok  # noqa: E402
from fstok.pipeline import UnsupportedComponent  # noqa: E402
from fstok.pipeline import decoders as D  # noqa: E402
from fstok.pipeline import normalizers as N  # noqa: E402
from fstok.pipeline import pretokenizers as P  # noqa: E402
from fstok.pipeline.normalized import Piece  # noqa: E402
from fstok.pipeline.tokenizer import PipelineTokenizer  # noqa: E402

VOCAB = "/work/shared/data/vocab"
MODELS = os.path.join(VOCAB, "models")
CORPUS = "/work/shared/data/corpus"
HAS_PP = True
try:
    import fstok.postprocess  # noqa: F401
except ImportError:
    HAS_PP = False

TRICKY = st.text(st.sampled_from(list(" \t\n\r'.,!?-_0123456789aAzZéÉßİΣσ日本😀\u0301\u0323\u0345\u00a0\u3000²½١ǅﬁ<>|")),
                 max_size=24)
ANY = st.text(st.characters(blacklist_categories=("Cs",)), max_size=16)
EDGE = ["", " ", "Hello  world!", "It's 1234567...", "a\u0301e\u0301\u0323 Ǖ ﬁ İ Σ", "日本語 😀👍🏽", "\t\r\n x  "]


def _hf_from_json(kind: str, cfg: dict):
    """An HF component built from the same JSON config (via a minimal tokenizer.json)."""
    base = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
            "pre_tokenizer": None, "post_processor": None, "decoder": None,
            "model": {"type": "WordLevel", "vocab": {"<unk>": 0}, "unk_token": "<unk>"}}
    base[kind] = cfg
    t = tokenizers.Tokenizer.from_str(json.dumps(base))
    return {"normalizer": t.normalizer, "pre_tokenizer": t.pre_tokenizer, "decoder": t.decoder}[kind]


NORMALIZERS = [
    {"type": "NFC"}, {"type": "NFD"}, {"type": "NFKC"}, {"type": "NFKD"}, {"type": "Lowercase"},
    {"type": "Strip", "strip_left": True, "strip_right": True}, {"type": "Strip", "strip_left": False, "strip_right": True},
    {"type": "StripAccents"}, {"type": "Replace", "pattern": {"Regex": r"\s+"}, "content": " "},
    {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
    {"type": "Replace", "pattern": {"String": "ab"}, "content": ""}, {"type": "Prepend", "prepend": "\u2581"},
    {"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "StripAccents"}, {"type": "Lowercase"}]},
]


@pytest.mark.parametrize("cfg", NORMALIZERS, ids=lambda c: json.dumps(c)[:50])
@settings(max_examples=60, deadline=None)
@given(s=st.one_of(TRICKY, ANY))
def test_normalizer_matches_hf(cfg, s):
    ours = N.from_config(cfg)
    assert ours.normalize_str(s) == _hf_from_json("normalizer", cfg).normalize_str(s)


PRETOKENIZERS = [
    {"type": "Punctuation", "behavior": "Contiguous"}, {"type": "Punctuation", "behavior": "Isolated"},
    {"type": "Digits", "individual_digits": False}, {"type": "Digits", "individual_digits": True},
    {"type": "Whitespace"}, {"type": "WhitespaceSplit"}, {"type": "CharDelimiterSplit", "delimiter": "-"},
    {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
] + [{"type": "Split", "pattern": {"Regex": r"\p{L}+|\d"}, "behavior": b, "invert": inv}
     for b in ("Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous") for inv in (False, True)] + [
    {"type": "Split", "pattern": {"String": "--"}, "behavior": "MergedWithNext", "invert": False},
    {"type": "Sequence", "pretokenizers": [{"type": "Punctuation", "behavior": "Contiguous"},
                                           {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
                                           {"type": "Digits", "individual_digits": False},
                                           {"type": "Split", "pattern": {"Regex": "[0-9][0-9][0-9]"},
                                            "behavior": "Isolated", "invert": False}]},
]


@pytest.mark.parametrize("cfg", PRETOKENIZERS, ids=lambda c: json.dumps(c)[:60])
@settings(max_examples=50, deadline=None)
@given(s=st.one_of(TRICKY, ANY, st.sampled_from(EDGE)))
def test_pretokenizer_matches_hf(cfg, s):
    ours = P.from_config(cfg)
    got = [(p.text, p.span()) for p in ours.split([Piece.original(s)])]
    assert got == [(t, tuple(o)) for t, o in _hf_from_json("pre_tokenizer", cfg).pre_tokenize_str(s)]


DECODERS = [
    {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
    {"type": "WordPiece", "prefix": "##", "cleanup": True}, {"type": "BPEDecoder", "suffix": "</w>"},
    {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 1},
    {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
    {"type": "CTC", "pad_token": "<pad>", "word_delimiter_token": "|", "cleanup": True},
    {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
    {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                                      {"type": "ByteFallback"}, {"type": "Fuse"},
                                      {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
]
TOKENS = st.lists(st.one_of(st.sampled_from(["<0x41>", "<0xE6>", "<0x97>", "<0xA5>", "<0xFF>", "##ab", "ab</w>", "Ġx",
                                             "\u2581a", "<pad>", "|", " .", "a", "âĢ", "Ċ", "ðŁĺ"]),
                            st.text(max_size=4)), max_size=8)


@pytest.mark.parametrize("cfg", DECODERS, ids=lambda c: json.dumps(c)[:50])
@settings(max_examples=80, deadline=None)
@given(toks=TOKENS)
def test_decoder_matches_hf(cfg, toks):
    if cfg["type"] == "Strip" and any(_strip_cuts_cross(t, cfg) for t in toks):
        return  # HF panics ("slice index starts at i but ends at j") where its two cuts cross
    assert D.from_config(cfg).decode(toks) == _hf_from_json("decoder", cfg).decode(toks)


def _strip_cuts_cross(t: str, cfg: dict) -> bool:
    """HF's Strip decoder cuts up to `start` leading and `stop` trailing `content` characters of each token
    separately; on a short token of content characters the cuts cross, or the trailing cut runs past the
    token's start, and HF panics."""
    c = cfg["content"]
    head = next((i for i, ch in enumerate(t[:cfg["start"]]) if ch != c), min(len(t), cfg["start"]))
    tail = len(t)
    for i in range(cfg["stop"]):
        k = len(t) - i - 1
        if k < 0:
            return True  # HF indexes before the token's first character
        if t[k] != c:
            break
        tail = k
    return head > tail


def test_strip_cut_guard_matches_hf_panics():
    """The guard above skips exactly the tokens on which HF panics."""
    cfg = {"type": "Strip", "content": " ", "start": 1, "stop": 1}
    hf = _hf_from_json("decoder", cfg)
    for t in ["", " ", "  ", "a", " a", "a ", " a ", "   "]:
        try:
            hf.decode([t])
            panics = False
        except BaseException:  # pyo3's PanicException derives from BaseException
            panics = True
        assert panics == _strip_cuts_cross(t, cfg), t


# ---------------------------------------------------------------- real files, a corpus sample
REAL = [
    ("bytelevel-bpe/falcon-7b/tokenizer.json", False),
    ("bytelevel-bpe/olmo-2/allenai_dolma2.json", False),
    ("bytelevel-bpe/roberta-base/tokenizer.json", True),
    ("bytelevel-bpe/whisper-large-v3/tokenizer.json", True),
    ("charbpe/clip-vit-base-patch32/tokenizer.json", True),
]


def _sample() -> list[str]:
    out = list(EDGE) + ["<s>x</s> <mask>  <mask>", "<|endoftext|>a <|startoftext|>b", "x" * 2000,
                        "<s>x</s> a</s><pad>é<unk>  </s>", "日本<s>\u00e9</s>"]
    for f in sorted(os.listdir(CORPUS)):
        with open(os.path.join(CORPUS, f), encoding="utf-8") as fh:
            lines = fh.read(200_000).splitlines()
        out += lines[:: max(1, len(lines) // 40)][:40]
    return out


@pytest.fixture(scope="module")
def sample():
    return _sample()


@pytest.mark.parametrize("rel,needs_pp", REAL, ids=[r.split("/")[1] for r, _ in REAL])
def test_real_file_matches_hf(rel, needs_pp, sample):
    path = os.path.join(MODELS, rel)
    if needs_pp and not HAS_PP:
        with pytest.raises(UnsupportedComponent, match="post_processor"):
            PipelineTokenizer.from_file(path)
        return
    tok = PipelineTokenizer.from_file(path)
    hf = tokenizers.Tokenizer.from_file(path)
    for s in sample:
        for ast in (False, True):
            e = hf.encode(s, add_special_tokens=ast)
            ids, offs = tok.encode_with_offsets(s, add_special_tokens=ast)
            assert ids == e.ids, (rel, ast, s[:80])
            assert [tuple(o) for o in offs] == [tuple(o) for o in e.offsets], (rel, ast, s[:80])
        for sk in (True, False):
            assert tok.decode(e.ids, sk) == hf.decode(e.ids, skip_special_tokens=sk), (rel, s[:80])


@pytest.mark.parametrize("rel", ["bytelevel-bpe/roberta-base/tokenizer.json"])
def test_compiled_segments_equal_python_stages(rel, sample):
    """The C tables between added tokens give what the Python stages give (ids, offsets)."""
    path = os.path.join(MODELS, rel)
    fast = PipelineTokenizer.from_file(path)
    slow = PipelineTokenizer.from_file(path, compiled=False)
    assert fast._inner is not None and slow._inner is None
    assert fast._native_ok("<s>x</s> a") and not fast._native_ok("a <mask>")
    for s in sample:
        for ast in (False, True):
            assert fast.encode_with_offsets(s, add_special_tokens=ast) == slow.encode_with_offsets(s, add_special_tokens=ast)
            assert fast.encode(s, add_special_tokens=ast) == slow.encode(s, add_special_tokens=ast)


def test_compile_routes_pipelines():
    tok = fstok.compile(os.path.join(MODELS, "bytelevel-bpe/falcon-7b/tokenizer.json"))
    assert isinstance(tok, PipelineTokenizer)
    assert tok.decode(tok.encode("Hello world")) == "Hello world"


def test_olmo_compiles_to_byte_level_tables(sample):
    """Split(Removed, invert=true) + ByteLevel(use_regex=false) is a regex find: the C byte-level BPE runs it."""
    from fstok.bpe import BPETokenizer

    path = os.path.join(MODELS, "bytelevel-bpe/olmo-2/allenai_dolma2.json")
    tok = fstok.compile(path)
    assert isinstance(tok, BPETokenizer)
    hf = tokenizers.Tokenizer.from_file(path)
    for s in sample:
        ids = hf.encode(s, add_special_tokens=False).ids
        assert tok.encode(s, allowed_special="all") == ids, s[:80]
        assert tok.decode(ids, skip_special_tokens=False) == hf.decode(ids, skip_special_tokens=False)
        assert tok.decode(ids) == hf.decode(ids)  # HF's default: special tokens skipped


def test_tekken_matches_mistral_common(sample):
    mc = pytest.importorskip("mistral_common.tokens.tokenizers.tekken")
    path = os.path.join(MODELS, "tekken/mistral-nemo/tekken_240718.json")
    tok = fstok.compile(path)
    ref = mc.Tekkenizer.from_file(path)
    for s in sample[:80]:
        want = ref.encode(s, bos=False, eos=False)
        assert tok.encode(s) == want, s[:80]
        assert tok.encode(s, add_special_tokens=True) == ref.encode(s, bos=True, eos=False)
        ids = [ref.bos_id] + want + [ref.eos_id]
        assert tok.decode(ids) == ref.decode(ids)


def _mini(**over) -> dict:
    obj = {"version": "1.0", "added_tokens": [], "normalizer": None, "pre_tokenizer": None, "post_processor": None,
           "decoder": None, "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}}
    obj.update(over)
    return obj


@pytest.mark.parametrize("over,needle", [
    ({"normalizer": {"type": "Precompiled", "precompiled_charsmap": ""}}, "normalizer 'Precompiled'"),
    ({"pre_tokenizer": {"type": "Whitespacey"}}, "pre-tokenizer 'Whitespacey'"),
    ({"decoder": {"type": "Nope"}}, "decoder 'Nope'"),
    ({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "a*"}, "behavior": "Isolated", "invert": False}},
     "empty string"),
    ({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "dropout": 0.1}}, "dropout"),
    ({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a c"]}}, "missing from the vocab"),
])
def test_refusals_name_component_and_file(tmp_path, over, needle):
    p = tmp_path / "tokenizer.json"
    p.write_text(json.dumps(_mini(**over)))
    with pytest.raises(UnsupportedComponent) as ei:
        PipelineTokenizer.from_file(p)
    assert needle in str(ei.value) and str(p) in str(ei.value)


def test_older_serializations(tmp_path):
    """A model without "type", merges as pairs; WordLevel."""
    p = tmp_path / "tokenizer.json"
    p.write_text(json.dumps(_mini(model={"vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a", "b"]]},
                                  pre_tokenizer={"type": "WhitespaceSplit"})))
    tok = PipelineTokenizer.from_file(p)
    hf = tokenizers.Tokenizer.from_file(str(p))
    for s in ["ab ab", "ba", "abab a"]:
        assert tok.encode(s) == hf.encode(s, add_special_tokens=False).ids
    p.write_text(json.dumps(_mini(model={"type": "WordLevel", "vocab": {"a": 0, "[UNK]": 1}, "unk_token": "[UNK]"},
                                  pre_tokenizer={"type": "Whitespace"})))
    tok = PipelineTokenizer.from_file(p)
    hf = tokenizers.Tokenizer.from_file(str(p))
    for s in ["a b a!", "", "  a  "]:
        e = hf.encode(s, add_special_tokens=False)
        assert tok.encode_with_offsets(s) == (e.ids, [tuple(o) for o in e.offsets])


@settings(max_examples=150, deadline=None)
@given(s=st.one_of(TRICKY, ANY))
def test_added_token_flags_match_hf(s):
    """special / normalized / lstrip / rstrip / single_word, leftmost-longest, before the normalizer."""
    added = [
        {"id": 3, "content": "<m>", "single_word": False, "lstrip": True, "rstrip": False, "normalized": False, "special": True},
        {"id": 4, "content": "<m>x", "single_word": False, "lstrip": False, "rstrip": True, "normalized": False, "special": False},
        {"id": 5, "content": "Ab", "single_word": True, "lstrip": False, "rstrip": False, "normalized": True, "special": False},
        {"id": 6, "content": "z", "single_word": False, "lstrip": True, "rstrip": True, "normalized": True, "special": True},
    ]
    obj = _mini(added_tokens=added, normalizer={"type": "Lowercase"}, pre_tokenizer={"type": "Whitespace"},
                model={"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "<unk>": 7}, "merges": ["a b"], "unk_token": "<unk>"},
                decoder={"type": "Fuse"})
    tok = PipelineTokenizer(obj, "mini.json")
    hf = tokenizers.Tokenizer.from_str(json.dumps(obj))
    for t in (s, f"x<m>x {s} <m>  Ab ab z", f" Ab{s}z <m>x  "):
        e = hf.encode(t, add_special_tokens=False)
        assert tok.encode_with_offsets(t) == (e.ids, [tuple(o) for o in e.offsets]), t
        for sk in (True, False):
            assert tok.decode(e.ids, sk) == hf.decode(e.ids, skip_special_tokens=sk)


NORM_OFFSETS = NORMALIZERS + [{"type": "ByteLevel"}]


@pytest.mark.parametrize("cfg", NORM_OFFSETS, ids=lambda c: json.dumps(c)[:50])
@settings(max_examples=60, deadline=None)
@given(s=st.one_of(TRICKY, ANY))
def test_normalizer_offsets_match_hf(cfg, s):
    """Each normalized character's original span, seen through a one-char-per-token pipeline."""
    obj = _mini(normalizer=cfg, pre_tokenizer={"type": "Split", "pattern": {"Regex": "."}, "behavior": "Isolated",
                                               "invert": False},
                model={"type": "WordLevel", "vocab": {"<unk>": 0}, "unk_token": "<unk>"})
    hf = tokenizers.Tokenizer.from_str(json.dumps(dict(obj, truncation=None, padding=None)))
    e = hf.encode(s, add_special_tokens=False)
    assert PipelineTokenizer(obj, "mini.json").encode_with_offsets(s)[1] == [tuple(o) for o in e.offsets]


@settings(max_examples=40, deadline=None)
@given(cps=st.lists(st.integers(0, 0x10FFFF).filter(lambda c: not 0xD800 <= c <= 0xDFFF), min_size=1, max_size=64))
def test_unicode_tables_match_hf(cps):
    """fstok/data/hf_pipeline_unicode.npz (marks, numeric) against the installed HF."""
    from fstok.pipeline import unicode as U

    strip = tokenizers.normalizers.StripAccents()
    digits = tokenizers.pre_tokenizers.Digits(individual_digits=True)
    for c in map(chr, cps):
        assert U.is_combining_mark(c) == (strip.normalize_str("a" + c + "a") == "aa"), hex(ord(c))
        assert U.is_numeric(c) == (len(digits.pre_tokenize_str("a" + c + "a")) == 3), hex(ord(c))
