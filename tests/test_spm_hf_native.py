"""The native string path of SentencePiece-family tokenizer.json pipelines (fstok.runtime._spm
hf_encode): its ids equal `tokenizers` and the pure-Python string path (HFSentencePieceTokenizer._ids_fast,
the oracle) on the shared files and on variants of their pipelines (normalizer steps, pre-tokenizer
schemes, unknown handling), and a stage without a native form falls back to the Python path."""
import copy
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fstok
from conftest import VOCAB, needs_shared, read_corpus

tokenizers = pytest.importorskip("tokenizers")

MODELS = os.path.join(VOCAB, "models")
E5 = os.path.join(MODELS, "unigram/multilingual-e5-small/tokenizer.json")
PHI3 = os.path.join(MODELS, "spm-bpe/phi-3-mini/tokenizer.json")
TRICKY = [
    "", " ", "  ", "   a    b  ", "\t\n x", "Hello world", "\u3000全角ｈｅｌｌｏ", "e\u0301 Ａ\u0301 a\u0308\u0301",
    "\r\n\r\n", "\x00a\x00", "😀👍🏽👨‍👩‍👧 🇫🇷🇩🇪🇫", "<s>x</s> <pad><mask><unk>", "<|user|> hi <|end|>  x\n<|assistant|>",
    "▁ ▁▁x ▁", "ﬁ ① ㌀ ǅ", "\u0600a \u0915\u094d\u0937 \u1100\u1161\u11a8", "a" * 300, "\ufffd\ufeff\u200b",
    "1234 3.14", "xx xxx xxxxx aaa", "\U0001f600\u200d\U0001f600", "ȷ̈ ᄀᄀᄀ각 \u0e01\u0e33",
]


def _lines(n=40):
    out = []
    for name in ("multilingual", "stress", "code", "chinese_long", "english"):
        ls = read_corpus(name).split("\n")
        out += ls[:n] + ls[-5:]
    return out + TRICKY + [read_corpus("multilingual")[:30000]]


def _check(tok, hf, lines, label):
    assert tok._hf is not None, label
    for x in lines:
        want = hf.encode(x, add_special_tokens=False).ids
        assert tok.encode(x) == want, (label, x[:80])
        assert tok._ids_fast(x) == want, (label, x[:80])


@pytest.fixture(scope="module")
def phi3_obj():
    if not os.path.exists(PHI3):
        pytest.skip(f"{PHI3} not present")
    return json.load(open(PHI3, encoding="utf-8"))


def _compile(obj, tmp_path, name):
    p = tmp_path / f"{name}.json"
    p.write_text(json.dumps(obj), encoding="utf-8")
    return fstok.compile(str(p)), tokenizers.Tokenizer.from_file(str(p))


@needs_shared
@pytest.mark.parametrize("path", [E5, PHI3], ids=["e5", "phi-3"])
def test_shared_files_native_equal_tokenizers(path):
    if not os.path.exists(path):
        pytest.skip(f"{path} not present")
    tok, hf = fstok.compile(path), tokenizers.Tokenizer.from_file(path)
    _check(tok, hf, _lines(), os.path.basename(os.path.dirname(path)))
    # the compiled artifact loads with the native path
    tok2 = fstok.load_bytes(tok.to_bytes()) if hasattr(fstok, "load_bytes") else type(tok)._from_bytes(tok.to_bytes())
    assert tok2._hf is not None and tok2.encode(TRICKY[10]) == tok.encode(TRICKY[10])


NORMALIZERS = {
    "replace-runs": {"type": "Sequence", "normalizers": [
        {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
        {"type": "Replace", "pattern": {"Regex": "x{2}"}, "content": "Y"},
        {"type": "Replace", "pattern": {"Regex": "a+"}, "content": "b"},
        {"type": "Replace", "pattern": {"Regex": "\\.{3,}"}, "content": "…"},
        {"type": "Prepend", "prepend": "▁"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
    "literal-regex": {"type": "Sequence", "normalizers": [
        {"type": "Replace", "pattern": {"Regex": "ab"}, "content": "<>"},
        {"type": "Replace", "pattern": {"String": "\n"}, "content": ""},
        {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
}
PRETOKENIZERS = {
    "metaspace-first": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": True},
    "metaspace-never-nosplit": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never", "split": False},
    "whitespace-split": {"type": "WhitespaceSplit"},
}


@needs_shared
@pytest.mark.parametrize("norm", sorted(NORMALIZERS))
def test_bpe_normalizer_variants(phi3_obj, tmp_path, norm):
    obj = copy.deepcopy(phi3_obj)
    obj["normalizer"] = NORMALIZERS[norm]
    tok, hf = _compile(obj, tmp_path, norm)
    _check(tok, hf, _lines(15), norm)


@needs_shared
@pytest.mark.parametrize("pre", sorted(PRETOKENIZERS))
def test_bpe_pretokenizer_variants(phi3_obj, tmp_path, pre):
    obj = copy.deepcopy(phi3_obj)
    obj["normalizer"] = None
    obj["pre_tokenizer"] = PRETOKENIZERS[pre]
    tok, hf = _compile(obj, tmp_path, pre)
    _check(tok, hf, _lines(15), pre)


@needs_shared
@pytest.mark.parametrize("opts", [{"byte_fallback": False, "fuse_unk": True}, {"byte_fallback": False, "fuse_unk": False},
                                  {"ignore_merges": True}], ids=["unk-fused", "unk-apart", "ignore-merges"])
def test_bpe_model_options(phi3_obj, tmp_path, opts):
    obj = copy.deepcopy(phi3_obj)
    obj["model"].update(opts)
    tok, hf = _compile(obj, tmp_path, "opts")
    _check(tok, hf, _lines(15), str(opts))


@needs_shared
def test_bpe_merge_crossing_the_separator_is_not_cut(phi3_obj, tmp_path):
    # a merge that makes a token with "▁" after another character: the text is merged whole
    obj = copy.deepcopy(phi3_obj)
    v = obj["model"]["vocab"]
    m0 = obj["model"]["merges"]
    used = set()
    for mg in m0:
        a, b = mg.split(" ") if isinstance(mg, str) else mg
        used.update((a, b, a + b))
    # give the id of a token no merge touches to "e▁" (so the added tokens keep their ids)
    free = max(t for t in v if t not in used and not t.startswith("<"))
    v["e▁"] = v.pop(free)
    obj["model"]["merges"] = [("e ▁" if isinstance(m0[0], str) else ["e", "▁"])] + list(m0)
    tok, hf = _compile(obj, tmp_path, "cross")
    assert tok._art.meta["bpe_word_split"] == ""
    _check(tok, hf, ["the quick brown fox ate the rest", "e e  e"] + _lines(5), "cross")


def test_regex_without_native_form_falls_back(tmp_path):
    if not os.path.exists(PHI3):
        pytest.skip(f"{PHI3} not present")
    obj = json.load(open(PHI3, encoding="utf-8"))
    obj["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Replace", "pattern": {"Regex": "[ab]+"}, "content": "c"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}
    tok, hf = _compile(obj, tmp_path, "fallback")
    assert tok._hf is None
    for x in ["abba cab", "Hello world"]:
        assert tok.encode(x) == hf.encode(x, add_special_tokens=False).ids


def test_unk_token_outside_the_vocabulary_as_tokenizers(phi3_obj, tmp_path):
    # the compiled tables refuse such a file; the stage-by-stage pipeline takes it and does what tokenizers
    # does: byte fallback covers every character, and where the unk token would be needed both raise
    import tokenizers

    obj = copy.deepcopy(phi3_obj)
    obj["model"]["unk_token"] = "<not-in-vocab>"
    p = tmp_path / "tokenizer.json"
    p.write_text(json.dumps(obj), encoding="utf-8")
    tok = fstok.compile(str(p))
    hf = tokenizers.Tokenizer.from_file(str(p))
    for x in ["Hello world", "日本語 \u00e9\U0001F600 ok"]:
        assert tok.encode(x) == hf.encode(x, add_special_tokens=False).ids
    obj["model"]["byte_fallback"] = False
    p.write_text(json.dumps(obj), encoding="utf-8")
    tok = fstok.compile(str(p))
    hf = tokenizers.Tokenizer.from_file(str(p))
    x = "\U0001F600\U0001F600"  # no piece and no byte fallback: the unk token is needed
    with pytest.raises(Exception):
        hf.encode(x)
    with pytest.raises(ValueError, match="not in the vocabulary"):
        tok.encode(x)


def test_oracle_bpe_drops_unknown_characters_as_tokenizers_does():
    # no unk token: tokenizers drops an unknown character (merges then reach across it, and the later
    # offsets close the gap); a text of unknown characters only gives no token
    from tokenizers import models

    from fstok.reference.unigram import HFBPE

    vocab, merges = {"a": 0, "b": 1, "ab": 2}, [("a", "b")]
    ref = tokenizers.Tokenizer(models.BPE(vocab, merges))
    oracle = HFBPE(vocab, merges, None, False, False)
    for s in ["xyz", "axb", "ab", "bxa", ""]:
        e = ref.encode(s)
        assert [(t, a, b) for t, a, b in oracle.tokenize(s)] == [(t, a, b) for t, (a, b) in zip(e.ids, e.offsets)], s


@needs_shared
@pytest.mark.parametrize("path", [E5, PHI3], ids=["e5", "phi-3"])
def test_threads_share_the_piece_cache(path):
    # the piece cache is shared by threads that encode at once (the GIL is released) without a lock:
    # every result equals the one-thread result of a fresh tokenizer
    from concurrent.futures import ThreadPoolExecutor

    if not os.path.exists(path):
        pytest.skip(f"{path} not present")
    docs = [read_corpus(c)[i * 2000 : (i + 1) * 2000] for c in ("english", "multilingual", "code") for i in range(8)]
    want = [fstok.compile(path).encode(d) for d in docs]
    tok = fstok.compile(path)
    with ThreadPoolExecutor(4) as ex:
        got = list(ex.map(tok.encode, docs * 3))
    assert got == want * 3


def _free_id(v, merges):
    used = set()
    for mg in merges:
        a, b = mg.split(" ") if isinstance(mg, str) else mg
        used.update((a, b, a + b))
    return max(t for t in v if t not in used and not t.startswith("<"))


@needs_shared
def test_bpe_cut_between_characters_only_where_no_merge_crosses(phi3_obj, tmp_path):
    # a merge that makes a token across a character pair no other token holds ("ä" then "的"): the text is cut
    # between characters everywhere else (hf_cut_pairs), never there, and the ids stay tokenizers'
    obj = copy.deepcopy(phi3_obj)
    v, m0 = obj["model"]["vocab"], obj["model"]["merges"]
    plain, _ = _compile(copy.deepcopy(phi3_obj), tmp_path, "plain")
    cut = plain._art.array("hf_cut_pairs")
    bit = 0xA4 * 256 + 0xE7  # the last byte of "ä", the first of "的"
    assert not (cut[bit >> 3] >> (bit & 7)) & 1
    v["ä的"] = v.pop(_free_id(v, m0))
    obj["model"]["merges"] = [("ä 的" if isinstance(m0[0], str) else ["ä", "的"])] + list(m0)
    tok, hf = _compile(obj, tmp_path, "cross-chars")
    cut = tok._art.array("hf_cut_pairs")
    assert (cut[bit >> 3] >> (bit & 7)) & 1
    assert v["ä的"] in hf.encode("xä的y", add_special_tokens=False).ids
    _check(tok, hf, ["xä的y", "ä的ä的 ää的的", "的ä的ä", "ä 的 ä的"] + _lines(5), "cross-chars")


@needs_shared
def test_bpe_no_cuts_where_unknown_runs_fuse(phi3_obj, tmp_path):
    # without byte fallback an unknown run is one fused token: no cut between characters may split it
    obj = copy.deepcopy(phi3_obj)
    obj["model"].update({"byte_fallback": False, "fuse_unk": True})
    tok, hf = _compile(obj, tmp_path, "fused")
    assert not tok._art.has("hf_cut_pairs")
    _check(tok, hf, ["\u0378\u0379\u0378 x\u0378的\u0379", "ⰀⰁⰂ ⰀⰁ"], "fused")


_ALPHABET = list("ab eé的是▁ä,.!?1\n\t") + ["ä的", "  ", "\u0378", "😀", "Ⰰ", "ℌ", "▁▁"]


@needs_shared
@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(parts=st.lists(st.sampled_from(_ALPHABET), max_size=40))
def test_bpe_hypothesis_strings_equal_tokenizers(parts):
    # words of every length (the array and queue merges), ASCII first symbols (the dense table), cuts between
    # characters and unknown characters, each against tokenizers
    tok, hf = _phi3_pair()
    x = "".join(parts)
    assert tok.encode(x) == hf.encode(x, add_special_tokens=False).ids, x


_PAIR = []


def _phi3_pair():
    if not _PAIR:
        if not os.path.exists(PHI3):
            pytest.skip(f"{PHI3} not present")
        _PAIR.append((fstok.compile(PHI3), tokenizers.Tokenizer.from_file(PHI3)))
    return _PAIR[0]
