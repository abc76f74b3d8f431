"""fstok.postprocess / fstok.hf_encoding against HF `tokenizers`: the same model output, post-processed,
truncated (with stride, every strategy and direction) and padded, must give every Encoding field of HF.

The model output itself is HF's (the tokenizer.json with its post-processor, truncation and padding removed),
so these tests isolate the pipeline after the model: real post-processors from the shared model files and
synthetic ones for every processor type and option.
"""
from __future__ import annotations

import copy
import json
import os

import pytest

tokenizers = pytest.importorskip("tokenizers")

from fstok.hf_encoding import Encoding, TruncationError, pad_encodings  # noqa: E402
from fstok.postprocess import PostProcessor, finish, num_special_tokens_to_add  # noqa: E402

MODELS = "/work/shared/data/vocab/models"
if not os.path.isdir(MODELS):
    MODELS = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "vocab", "models")
REAL = {
    "roberta": "bytelevel-bpe/roberta-base/tokenizer.json",
    "whisper": "bytelevel-bpe/whisper-large-v3/tokenizer.json",
    "clip": "charbpe/clip-vit-base-patch32/tokenizer.json",
    "minilm": "wordpiece/all-MiniLM-L6-v2/tokenizer.json",
    "e5": "unigram/multilingual-e5-small/tokenizer.json",
}
FIELDS = ("ids", "type_ids", "tokens", "offsets", "word_ids", "special_tokens_mask", "attention_mask",
          "sequence_ids", "n_sequences")
TEXTS = [
    "Hello world!",
    "  Leading  and trailing spaces  ",
    "The quick brown fox jumps over the lazy dog, again and again.",
    "naïve café — 東京 123",
    "",
    " ",
    "a",
]
PAIRS = [(TEXTS[0], TEXTS[2]), (TEXTS[2], TEXTS[1]), (TEXTS[3], TEXTS[4]), (TEXTS[6], TEXTS[2]), (TEXTS[1], TEXTS[5])]


_OBJ: dict = {}


def _obj(name: str) -> dict:
    if name not in _OBJ:
        with open(os.path.join(MODELS, REAL[name]), encoding="utf-8") as f:
            _OBJ[name] = json.load(f)
    return copy.deepcopy(_OBJ[name])


_CACHE: dict = {}


def _hf_pair(obj: dict):
    """(full HF tokenizer, the same without post-processor/truncation/padding) for a tokenizer.json object."""
    key = (len(obj["model"].get("vocab", ())), json.dumps(obj.get("post_processor"), sort_keys=True))
    if key not in _CACHE:
        raw = copy.deepcopy(obj)
        raw["post_processor"] = None
        raw["truncation"] = None
        raw["padding"] = None
        full = tokenizers.Tokenizer.from_str(json.dumps(obj))
        _CACHE[key] = (full, tokenizers.Tokenizer.from_str(json.dumps(raw)))
    return _CACHE[key]


def _model_enc(raw, text: str, type_id: int) -> Encoding:
    e = raw.encode(text, add_special_tokens=False)
    return Encoding.from_tokens(e.ids, e.tokens, e.offsets, e.word_ids, type_id=type_id)


def _fields(e) -> dict:
    d = {f: getattr(e, f) for f in FIELDS}
    d["overflowing"] = [_fields(o) for o in e.overflowing]
    return d


def _check(obj: dict, texts, add_special_tokens=True, truncation=None, padding=None):
    full, raw = _hf_pair(obj)
    full.no_truncation()
    full.no_padding()
    if truncation is not None:
        full.enable_truncation(**truncation)
    if padding is not None:
        full.enable_padding(**padding)
    pp = PostProcessor.from_json(obj.get("post_processor"))
    for t in texts:
        a, b = (t, None) if isinstance(t, str) else t
        try:
            want = full.encode(a, b, add_special_tokens=add_special_tokens) if b is not None else \
                full.encode(a, add_special_tokens=add_special_tokens)
        except BaseException as e:  # HF panics (pyo3 PanicException) on a stride >= the truncated length
            if not ("stride" in str(e) or "Truncation" in str(e) or "too short" in str(e)):
                raise
            with pytest.raises(TruncationError):
                finish(pp, _model_enc(raw, a, 0), _model_enc(raw, b, 1) if b is not None else None,
                       add_special_tokens, {"stride": 0, "strategy": "longest_first", "direction": "right", **truncation},
                       padding)
            continue
        got = finish(pp, _model_enc(raw, a, 0), _model_enc(raw, b, 1) if b is not None else None,
                     add_special_tokens, truncation and {"stride": 0, "strategy": "longest_first", "direction": "right",
                                                         **truncation}, padding)
        assert _fields(got) == _fields(want), (t, truncation, padding, add_special_tokens)
        for n_pair in (False, True):
            assert num_special_tokens_to_add(pp, n_pair) == full.num_special_tokens_to_add(n_pair)


def _with_pp(base: str, pp) -> dict:
    obj = copy.deepcopy(_obj(base))
    obj["post_processor"] = pp
    obj["truncation"] = None
    obj["padding"] = None
    return obj


SYNTH = {
    "bert": ("minilm", {"type": "BertProcessing", "sep": ["[SEP]", 102], "cls": ["[CLS]", 101]}),
    "none_wp": ("minilm", None),
    "none_bl": ("roberta", None),
    "roberta_trim_prefix": ("roberta", {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0],
                                        "trim_offsets": True, "add_prefix_space": True}),
    "roberta_trim": ("roberta", {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0],
                                 "trim_offsets": True, "add_prefix_space": False}),
    "roberta_notrim": ("roberta", {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0],
                                   "trim_offsets": False, "add_prefix_space": True}),
    "bytelevel": ("roberta", {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}),
    "bytelevel_prefix": ("roberta", {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True}),
    "bytelevel_notrim": ("roberta", {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False}),
    "llama3_like": ("roberta", {"type": "Sequence", "processors": [
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        {"type": "TemplateProcessing",
         "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
         "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                  {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
         "special_tokens": {"<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]}}}]}),
    "seq_trim_then_template": ("roberta", {"type": "Sequence", "processors": [
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True},
        {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0], "trim_offsets": False,
         "add_prefix_space": False}]}),
    "template_multi": ("minilm", {"type": "TemplateProcessing",
                                  "single": [{"SpecialToken": {"id": "X", "type_id": 2}},
                                             {"Sequence": {"id": "A", "type_id": 3}},
                                             {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
                                  "pair": [{"Sequence": {"id": "B", "type_id": 0}},
                                           {"SpecialToken": {"id": "X", "type_id": 1}},
                                           {"Sequence": {"id": "A", "type_id": 2}}],
                                  "special_tokens": {"X": {"id": "X", "ids": [101, 7, 8], "tokens": ["[CLS]", "a", "b"]},
                                                     "[SEP]": {"id": "[SEP]", "ids": [102], "tokens": ["[SEP]"]}}}),
}

TRUNCS = [None,
          {"max_length": 7},
          {"max_length": 9, "stride": 2},
          {"max_length": 8, "stride": 3, "direction": "left"},
          {"max_length": 10, "strategy": "only_first", "stride": 1},
          {"max_length": 12, "strategy": "only_second"},
          {"max_length": 6, "stride": 1, "strategy": "longest_first", "direction": "left"}]
PADS = [None, {}, {"length": 20, "direction": "left", "pad_id": 3, "pad_type_id": 2, "pad_token": "<p>"},
        {"pad_to_multiple_of": 8}]


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_post_processors(name):
    obj = _obj(name)
    obj_clean = dict(obj, truncation=None, padding=None)
    for add in (True, False):
        _check(obj_clean, TEXTS + PAIRS, add_special_tokens=add)
    _check(obj_clean, TEXTS + PAIRS, truncation={"max_length": 10, "stride": 3}, padding={"length": 16})


@pytest.mark.parametrize("name", sorted(SYNTH))
def test_synthetic_post_processors(name):
    base, pp = SYNTH[name]
    obj = _with_pp(base, pp)
    full, _ = _hf_pair(obj)
    for k, trunc in enumerate(TRUNCS):
        for pad in (PADS[k % len(PADS)], PADS[(k + 1) % len(PADS)]):
            for add in (True, False):
                texts = TEXTS + PAIRS
                _check(obj, texts, add, trunc, pad)


def test_truncation_errors_match_hf():
    obj = _with_pp("minilm", {"type": "BertProcessing", "sep": ["[SEP]", 102], "cls": ["[CLS]", 101]})
    full, raw = _hf_pair(obj)
    pp = PostProcessor.from_json(obj["post_processor"])
    full.enable_truncation(5, strategy="only_second")
    with pytest.raises(Exception):
        full.encode("hello world how are you")
    with pytest.raises(TruncationError):
        finish(pp, _model_enc(raw, "hello world how are you", 0), None, True,
               {"max_length": 5, "stride": 0, "strategy": "only_second", "direction": "right"})
    full.enable_truncation(5, strategy="only_first")
    with pytest.raises(Exception):
        full.encode("a", "hello world how are you")
    with pytest.raises(TruncationError):
        finish(pp, _model_enc(raw, "a", 0), _model_enc(raw, "hello world how are you", 1), True,
               {"max_length": 5, "stride": 0, "strategy": "only_first", "direction": "right"})


def test_batch_padding_and_encoding_methods():
    obj = _obj("minilm")
    full, raw = _hf_pair(dict(obj, truncation=None, padding=None))
    full.no_truncation()
    full.enable_padding(pad_to_multiple_of=4)
    pp = PostProcessor.from_json(obj["post_processor"])
    want = full.encode_batch(TEXTS)
    got = [finish(pp, _model_enc(raw, t, 0)) for t in TEXTS]
    pad_encodings(got, None, 4)
    assert [_fields(g) for g in got] == [_fields(w) for w in want]
    # alignment queries on a pair with specials
    w = full.encode(TEXTS[2], TEXTS[3])
    g = finish(pp, _model_enc(raw, TEXTS[2], 0), _model_enc(raw, TEXTS[3], 1))
    for seq in (0, 1):
        for c in range(-1, 70):
            if c >= 0:
                assert g.char_to_token(c, seq) == w.char_to_token(c, seq)
                assert g.char_to_word(c, seq) == w.char_to_word(c, seq)
        for word in range(15):
            assert g.word_to_tokens(word, seq) == w.word_to_tokens(word, seq)
            assert g.word_to_chars(word, seq) == w.word_to_chars(word, seq)
    for t in range(len(w) + 2):
        assert g.token_to_sequence(t) == w.token_to_sequence(t)
        assert g.token_to_chars(t) == w.token_to_chars(t)
        assert g.token_to_word(t) == w.token_to_word(t)
    # Encoding.merge / pad / truncate as methods
    wm = tokenizers.Encoding.merge([full.encode("a b"), full.encode("c d e")], growing_offsets=True)
    pad4 = {"pad_to_multiple_of": 4}
    gm = Encoding.merge([finish(pp, _model_enc(raw, "a b", 0), padding=pad4),
                         finish(pp, _model_enc(raw, "c d e", 0), padding=pad4)], True)
    assert _fields(gm) == _fields(wm)
    wm.truncate(5, stride=2, direction="left")
    gm.truncate(5, stride=2, direction="left")
    assert _fields(gm) == _fields(wm)
    wm.pad(9, direction="left", pad_id=7, pad_token="x")
    gm.pad(9, direction="left", pad_id=7, pad_token="x")
    assert _fields(gm) == _fields(wm)


def test_unknown_processor_is_an_error():
    with pytest.raises(ValueError, match="not supported"):
        PostProcessor.from_json({"type": "Mystery"})
    with pytest.raises(ValueError, match="does not define|do not define"):
        PostProcessor.from_json({"type": "TemplateProcessing", "single": ["[CLS]", "$A"], "pair": ["$A", "$B"],
                                 "special_tokens": {}})


def test_template_string_form_matches_hf():
    from tokenizers.processors import TemplateProcessing as HFT

    hf = HFT(single="[CLS] $0 [SEP]", pair="[CLS] $A:0 [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 101), ("[SEP]", 102)])
    obj = json.loads(hf.__getstate__() if isinstance(hf.__getstate__(), (str, bytes)) else json.dumps(hf.__getstate__()))
    ours = PostProcessor.from_json(obj)
    direct = PostProcessor.from_json({"type": "TemplateProcessing", "single": "[CLS] $0 [SEP]",
                                      "pair": "[CLS] $A:0 [SEP] $B:1 [SEP]:1",
                                      "special_tokens": [("[CLS]", 101), ("[SEP]", 102)]})
    assert ours.to_json() == direct.to_json()
    assert ours.added_tokens(True) == hf.num_special_tokens_to_add(True) == 3
