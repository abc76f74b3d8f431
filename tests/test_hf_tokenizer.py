"""fstok.Tokenizer (the HF face) against HF `tokenizers.Tokenizer` on real tokenizer.json files: every Encoding
field (overflowing windows included) for single texts and pairs, with truncation (stride, strategies,
directions) and padding; the numpy batch; decode; vocabulary; serialization; call shapes that must fail."""
from __future__ import annotations

import json
import os
import pickle

import numpy as np
import pytest

tokenizers = pytest.importorskip("tokenizers")

import fstok  # noqa: E402

DATA = "/work/shared/data"
if not os.path.isdir(DATA):
    DATA = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data")
FILES = {
    "minilm": f"{DATA}/vocab/models/wordpiece/all-MiniLM-L6-v2/tokenizer.json",
    "whisper": f"{DATA}/vocab/models/bytelevel-bpe/whisper-large-v3/tokenizer.json",
    "llama3": f"{DATA}/vocab/hf-derived/llama3.tokenizer.json",
}
FIELDS = ("ids", "type_ids", "tokens", "offsets", "word_ids", "special_tokens_mask", "attention_mask",
          "sequence_ids", "n_sequences")


def _lines(n_per=25):
    out = []
    for name in ("english.txt", "multilingual.txt", "code.txt", "stress.txt"):
        with open(f"{DATA}/corpus/{name}", encoding="utf-8") as f:
            out += [ln for ln in f.read().splitlines() if ln.strip()][:n_per]
    return out + ["", " ", "[CLS] hello [SEP] world", "<|endoftext|> a <|endoftext|>", "naïve café 東京"]


LINES = _lines()
_TOKS: dict = {}


def _pair(name):
    if name not in _TOKS:
        _TOKS[name] = (fstok.Tokenizer.from_file(FILES[name]), tokenizers.Tokenizer.from_file(FILES[name]))
    return _TOKS[name]


_SETTINGS_TOKS: dict = {}


def _settings_pair(name):
    """One pair per file for the tests that change truncation and padding (loading llama3's twice costs
    seconds), handed out with the file's own settings back in place, as from_file gives them."""
    if name not in _SETTINGS_TOKS:
        ours, hf = fstok.Tokenizer.from_file(FILES[name]), tokenizers.Tokenizer.from_file(FILES[name])
        _SETTINGS_TOKS[name] = (ours, hf, hf.truncation, hf.padding)
    ours, hf, trunc, pad = _SETTINGS_TOKS[name]
    for t in (ours, hf):
        if trunc is None:
            t.no_truncation()
        else:
            t.enable_truncation(**trunc)
        if pad is None:
            t.no_padding()
        else:
            t.enable_padding(**pad)
    assert ours.truncation == trunc and ours.padding == pad
    return ours, hf


def _fields(e):
    d = {f: getattr(e, f) for f in FIELDS}
    d["overflowing"] = [_fields(o) for o in e.overflowing]
    return d


SETTINGS = [
    ("file", None, None),
    ("none", "off", "off"),
    ("stride", {"max_length": 20, "stride": 6}, {}),
    ("left", {"max_length": 17, "stride": 3, "direction": "left", "strategy": "longest_first"},
     {"direction": "left", "pad_id": 5, "pad_token": "<pad>", "pad_to_multiple_of": 8}),
    ("only_second", {"max_length": 30, "strategy": "only_second", "stride": 2}, {"length": 40}),
]


def _apply(tok, trunc, pad):
    if trunc == "off":
        tok.no_truncation()
    elif trunc is not None:
        tok.enable_truncation(**trunc)
    if pad == "off":
        tok.no_padding()
    elif pad is not None:
        tok.enable_padding(**pad)


@pytest.mark.parametrize("name", sorted(FILES))
@pytest.mark.parametrize("setting", SETTINGS, ids=[s[0] for s in SETTINGS])
def test_encode_single_and_pair_every_field(name, setting):
    _, trunc, pad = setting
    ours, hf = _settings_pair(name)
    for t in (ours, hf):
        _apply(t, trunc, pad)
    assert ours.truncation == hf.truncation and ours.padding == hf.padding
    for i, line in enumerate(LINES):
        other = LINES[(i * 7 + 3) % len(LINES)]
        for args in ((line,), (line, other)):
            try:
                want = hf.encode(*args)
            except BaseException as e:  # only_second without a pair, a stride over the length: both refuse
                with pytest.raises(ValueError, match="(?i)truncat|second|stride"):
                    ours.encode(*args)
                assert "Truncation" in str(e) or "stride" in str(e)
                continue
            assert _fields(ours.encode(*args)) == _fields(want), args
        try:
            want = _fields(hf.encode(line, add_special_tokens=False))
        except BaseException:
            with pytest.raises(ValueError, match="(?i)truncation|stride"):
                ours.encode(line, add_special_tokens=False)
            continue
        assert _fields(ours.encode(line, add_special_tokens=False)) == want
    batch = LINES[:40]
    pairs = [(a, b) for a, b in zip(LINES[:20], LINES[20:40])]
    for inputs in (batch, pairs):
        try:
            want = [_fields(e) for e in hf.encode_batch(inputs)]
        except BaseException:
            with pytest.raises(ValueError):
                ours.encode_batch(inputs)
            continue
        assert [_fields(e) for e in ours.encode_batch(inputs)] == want


@pytest.mark.parametrize("name", sorted(FILES))
def test_numpy_batch_equals_encode_batch(name):
    o, hf = _settings_pair(name)
    for trunc, pad in (({"max_length": 24}, {}), ({"max_length": 19, "direction": "left"}, {"direction": "left", "pad_to_multiple_of": 8}),
                       ({"max_length": 33, "strategy": "only_first"}, {"length": 64, "pad_id": 9, "pad_type_id": 1})):
        _apply(o, trunc, pad)
        _apply(hf, trunc, pad)
        for pair in (None, LINES[5:45][::-1]):
            texts = LINES[5:45]
            try:
                want = hf.encode_batch(texts if pair is None else list(zip(texts, pair)))
            except BaseException:  # HF raises, or panics on a stride over the truncated length
                with pytest.raises(ValueError):
                    o.encode_batch(texts if pair is None else list(zip(texts, pair)))
                continue
                continue
            got = o.encode_batch_numpy(texts, pair)
            assert got["input_ids"].tolist() == [e.ids for e in want]
            assert got["attention_mask"].tolist() == [e.attention_mask for e in want]
            assert got["token_type_ids"].tolist() == [e.type_ids for e in want]
            for nt in (1, 2):
                again = o.encode_batch_numpy(texts, pair, num_threads=nt)
                assert all(np.array_equal(again[k], got[k]) for k in got)


@pytest.mark.parametrize("name", sorted(FILES))
def test_decode_and_vocab(name):
    ours, hf = _pair(name)
    seqs = [hf.encode(ln).ids for ln in LINES] + [[0, 1, 2, 3], list(range(100, 140))]
    for skip in (True, False):
        assert ours.decode_batch(seqs, skip_special_tokens=skip) == hf.decode_batch(seqs, skip_special_tokens=skip)
    assert ours.get_vocab() == hf.get_vocab()
    assert ours.get_vocab(with_added_tokens=False) == hf.get_vocab(with_added_tokens=False)
    assert ours.get_vocab_size() == hf.get_vocab_size()
    assert ours.get_vocab_size(False) == hf.get_vocab_size(False)
    for t in list(hf.get_vocab())[:50] + ["no-such-token-xyz"]:
        assert ours.token_to_id(t) == hf.token_to_id(t)
    for i in list(range(20)) + [hf.get_vocab_size() - 1, hf.get_vocab_size() + 5]:
        assert ours.id_to_token(i) == hf.id_to_token(i)
    for p in (False, True):
        assert ours.num_special_tokens_to_add(p) == hf.num_special_tokens_to_add(p)


def test_settings_from_file_save_and_pickle(tmp_path):
    ours, hf = _pair("minilm")
    hf = tokenizers.Tokenizer.from_file(FILES["minilm"])
    assert ours.truncation == hf.truncation == {"max_length": 128, "stride": 0, "strategy": "longest_first",
                                                "direction": "right"}
    assert ours.padding == hf.padding
    ours2 = fstok.Tokenizer.from_file(FILES["minilm"])
    ours2.enable_truncation(16, stride=4)
    ours2.enable_padding(length=20)
    p = tmp_path / "t.json"
    ours2.save(str(p))
    back = tokenizers.Tokenizer.from_file(str(p))  # HF reads what we save
    assert back.truncation == ours2.truncation and back.padding == ours2.padding
    assert fstok.Tokenizer.from_str(ours2.to_str()).encode(LINES[0]).ids == back.encode(LINES[0]).ids
    clone = pickle.loads(pickle.dumps(ours2))
    assert clone.encode(LINES[1], LINES[2]).ids == ours2.encode(LINES[1], LINES[2]).ids


def test_from_pretrained_local_dir_and_hub_cache(tmp_path, monkeypatch):
    d = tmp_path / "model"
    d.mkdir()
    (d / "tokenizer.json").write_bytes(open(FILES["minilm"], "rb").read())
    assert fstok.Tokenizer.from_pretrained(str(d)).encode("hi there").ids == _pair("minilm")[1].encode("hi there").ids
    hub = tmp_path / "hub" / "models--org--mini"
    (hub / "snapshots" / "abc123").mkdir(parents=True)
    (hub / "refs").mkdir()
    (hub / "refs" / "main").write_text("abc123")
    (hub / "snapshots" / "abc123" / "tokenizer.json").write_bytes(open(FILES["minilm"], "rb").read())
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert fstok.Tokenizer.from_pretrained("org/mini").encode("hi").ids == _pair("minilm")[1].encode("hi").ids
    with pytest.raises(FileNotFoundError, match="does not download"):
        fstok.Tokenizer.from_pretrained("org/absent")


def test_call_shapes_that_fstok_refuses():
    ours, _ = _pair("minilm")
    with pytest.raises(TypeError, match="is_pretokenized"):
        ours.encode("a", "b", "c")  # a third positional lands in is_pretokenized: refused, not ignored
    with pytest.raises(TypeError):
        ours.encode(["pre", "tokenized"])  # a list without is_pretokenized=True
    with pytest.raises(TypeError):
        ours.encode_batch("not a list")
    with pytest.raises(TypeError):
        ours.encode_batch_numpy([("a", "b")])
    with pytest.raises(ValueError, match="strategy"):
        ours.enable_truncation(10, strategy="shortest")
    with pytest.raises(ValueError, match="stride"):
        ours.enable_truncation(5, stride=4)
    tok = fstok.get_encoding("bert-base-uncased")
    with pytest.raises(TypeError):
        tok.encode("question", "context")  # tiktoken-style API: the pair would land in add_special_tokens


def test_pretokenized_input_matches_hf():
    ours, hf = _pair("minilm")
    words = ["Hello", "wörld", "東京", "unaffable", "!"]
    a, b = ours.encode(words, ["x", "y"], is_pretokenized=True), hf.encode(words, ["x", "y"], is_pretokenized=True)
    assert _fields(a) == _fields(b)
    ours_w, hf_w = _pair("whisper")
    assert _fields(ours_w.encode(words, is_pretokenized=True)) == _fields(hf_w.encode(words, is_pretokenized=True))


def test_unsupported_tokenizer_is_named():
    obj = json.load(open(FILES["minilm"], encoding="utf-8"))
    obj["decoder"] = {"type": "Nonexistent"}
    with pytest.raises(NotImplementedError, match="Nonexistent"):
        fstok.Tokenizer.from_str(json.dumps(obj))


def test_boundary_errors_name_the_call():
    """What fstok.Tokenizer cannot honour raises (naming it) where a plain attribute or int() would have
    silently given a different result."""
    ours, hf = _pair("minilm")
    for name in ("normalizer", "pre_tokenizer", "model", "decoder"):
        with pytest.raises(TypeError, match=name):
            setattr(ours, name, None)
        assert getattr(ours, name) == json.load(open(FILES["minilm"], encoding="utf-8"))[name]
    with pytest.raises(TypeError, match="integers"):
        ours.decode([101, 1.5])  # HF: TypeError; int() would truncate
    with pytest.raises(OverflowError):
        ours.decode([-1])  # HF: OverflowError; a skip would drop it silently
    with pytest.raises(TypeError, match="post_processor"):
        ours.post_processor = 3
    with pytest.raises(TypeError):
        ours.add_tokens("single string")  # HF wants a list


def test_post_processor_can_be_replaced_as_in_hf():
    from tokenizers.processors import TemplateProcessing

    ours, hf = fstok.Tokenizer.from_file(FILES["minilm"]), tokenizers.Tokenizer.from_file(FILES["minilm"])
    tp = TemplateProcessing(single="[SEP] $0 [CLS]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                            special_tokens=[("[CLS]", 101), ("[SEP]", 102)])
    ours.post_processor, hf.post_processor = tp, tp
    for args in (("hi there",), ("hi there", "pair")):
        assert _fields(ours.encode(*args)) == _fields(hf.encode(*args))
    assert ours.num_special_tokens_to_add(True) == hf.num_special_tokens_to_add(True) == 3
    assert json.loads(ours.to_str())["post_processor"] == json.loads(hf.to_str())["post_processor"]
