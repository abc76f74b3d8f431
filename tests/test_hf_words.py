"""Word ids (and ids, offsets, tokens) of the HF face's native byte-level paths against the pure-Python
pipeline, which runs the normalizer, added-token matching, pre-tokenizer and model stage by stage
(`fstok.pipeline.tokenizer.PipelineTokenizer(compiled=False)`, itself checked against HF in
tests/test_hf_pipelines.py), on a corpus sample and hypothesis strings, for every byte-level tokenizer.json
of the shared vocabularies; and the native word numbering of `_PipelineCore` against its Python form."""
from __future__ import annotations

import glob
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import CORPORA, VOCAB, needs_shared, read_corpus

import fstok
from fstok.hf_tokenizer import _BPECore, _PipelineCore
from fstok.pipeline.tokenizer import PipelineTokenizer

pytestmark = needs_shared

FILES = sorted(glob.glob(os.path.join(VOCAB, "models", "*", "*", "*.json")) + glob.glob(os.path.join(VOCAB, "hf", "*.json")))


def _byte_level(path: str) -> bool:
    with open(path, encoding="utf-8") as f:
        obj = json.load(f)
    m = obj.get("model") or {}
    return m.get("type") == "BPE" and not m.get("byte_fallback") and obj.get("truncation") is None


BYTE_LEVEL = [f for f in FILES if _byte_level(f)]
_LOADED: dict = {}


def _pair(path: str):
    if path not in _LOADED:
        _LOADED[path] = (fstok.Tokenizer.from_file(path), PipelineTokenizer.from_file(path, compiled=False))
    return _LOADED[path]


def _sample() -> list[str]:
    out = []
    for name in CORPORA:
        lines = [x for x in read_corpus(name).splitlines() if x.strip()]
        out += lines[:: max(1, len(lines) // 12)][:12]
    return out + ["", " ", "  a  ", "a\u0301\u0301 b", "x\n\n y", "1234567 89", "don't   stop", "日本語 😀👍🏽 x"]


def _with_added(tok: fstok.Tokenizer, texts: list[str]) -> list[str]:
    """Texts holding each added token's content, alone, inside words and next to spaces."""
    added = [a["content"] for a in tok._obj.get("added_tokens") or []][:6]
    out = []
    for k, c in enumerate(added):
        t = texts[k % len(texts)]
        out += [c, f"a{c}b", f" {c} x", f"{t[:20]}{c}{t[20:40]}{c}", f"{c}{c} 12"]
    return out


def _oracle(ref: PipelineTokenizer, text: str) -> tuple:
    ids, toks, offs, words = ref._stage_tokens(text)
    return list(ids), [tuple(o) for o in offs], list(words), list(toks)


def _norm(r) -> tuple:
    return (list(r[0]), [tuple(o) for o in r[1]], list(r[2])) + ((list(r[3]),) if len(r) > 3 else ())


def _check(tok: fstok.Tokenizer, ref: PipelineTokenizer, texts: list[str]) -> int:
    """Compares model_encode and model_batch of the face's core with the oracle; returns how many texts the
    native word numbering served."""
    core = tok._core
    served = 0
    rows = core.model_batch(texts, 2)
    for text, row in zip(texts, rows):
        want = _oracle(ref, text)
        got = _norm(core.model_encode(text))
        assert got[:3] == want[:3], (text, got, want)
        if len(got) > 3:
            assert got[3] == want[3], text
        assert _norm(row)[:3] == want[:3], ("batch", text)
        if isinstance(core, _PipelineCore):
            nat = core._native_encode(text)
            if nat is not None:
                served += 1
                assert _norm(nat) == _norm(core.python_encode(text)), text
        elif isinstance(core, _BPECore):
            served += 1
    return served


@pytest.mark.parametrize("path", BYTE_LEVEL, ids=lambda p: os.path.relpath(p, VOCAB))
def test_words_corpus(path):
    tok, ref = _pair(path)
    texts = _sample()
    texts += _with_added(tok, texts)
    served = _check(tok, ref, texts)
    core = tok._core
    if isinstance(core, _BPECore) or (isinstance(core, _PipelineCore) and core._direct()):
        # the native numbering serves (nearly) every line: a path that always fell back would pass vacuously
        assert served >= len(texts) * 0.8, (served, len(texts))


TRICKY = st.text(st.sampled_from(list(" \t\n'.,!?-_0123456789aAzZé日😀\u0301<>/sIÄ")), max_size=30)


@pytest.mark.parametrize("path", BYTE_LEVEL, ids=lambda p: os.path.relpath(p, VOCAB))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_words_hypothesis(path, data):
    tok, ref = _pair(path)
    added = [a["content"] for a in tok._obj.get("added_tokens") or []][:8] or ["x"]
    parts = data.draw(st.lists(st.one_of(TRICKY, st.sampled_from(added)), max_size=5))
    text = "".join(parts)
    _check(tok, ref, [text] * 1 + [text + " " + p for p in parts[:1]])


def test_words_added_token_spelled_by_the_model():
    """An added token whose content is a byte-level vocabulary string ("Ġhello": the model spells it for
    " hello"): a model token with that id is not an added-token match, the literal text "Ġhello" is."""
    path = os.path.join(VOCAB, "models", "bytelevel-bpe", "roberta-base", "tokenizer.json")
    with open(path, encoding="utf-8") as f:
        obj = json.load(f)
    vocab = obj["model"]["vocab"]
    obj["added_tokens"] = obj["added_tokens"] + [
        {"id": vocab["\u0120hello"], "content": "\u0120hello", "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": True, "special": False},
        {"id": max(vocab.values()) + 1, "content": "ab", "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": False, "special": False}]
    tok = fstok.Tokenizer.from_str(json.dumps(obj))
    ref = PipelineTokenizer(json.loads(json.dumps(obj)), "roberta+added", compiled=False)
    texts = ["say hello world", "say \u0120hello world", "x\u0120hellohello hello", "cab  abab hello", "ab"] * 2
    assert isinstance(tok._core, _PipelineCore) and tok._core._direct()
    assert _check(tok, ref, texts) == len(texts)
    hf = pytest.importorskip("tokenizers").Tokenizer.from_str(json.dumps(obj))
    for t in texts:
        e, h = tok.encode(t), hf.encode(t)
        assert (e.ids, e.offsets, e.word_ids, e.tokens) == (h.ids, h.offsets, h.word_ids, h.tokens), t


@pytest.mark.parametrize("add_prefix_space", [True, False])
def test_trim_offsets_arrays_match_per_token_trimming(add_prefix_space):
    """The batch's vectorized byte-level offset trimming equals the post-processor's per-token trimming
    (`fstok.postprocess._trim_offsets`, HF's rule), rows of a whole corpus sample at once, each row's first
    token and tokens at offset 0 included."""
    import numpy as np

    from fstok.hf_encoding import Encoding
    from fstok.hf_words import trim_offsets
    from fstok.postprocess import _trim_offsets

    path = os.path.join(VOCAB, "models", "bytelevel-bpe", "roberta-base", "tokenizer.json")
    tok, _ = _pair(path)
    texts = [t for t in _sample() if t] + [" a", "  b  ", "\u3000x \u3000", " ", "a  "] * 3
    rows = tok._core.model_batch(texts, 1, trim=add_prefix_space)
    assert sum(len(r) == 5 for r in rows) >= len(rows) - 3  # (nearly) every row here took the batch path
    plan = tok._core._words_plan()
    for text, r in zip(texts, rows):
        if len(r) < 5:
            continue
        e = Encoding.from_tokens(r[0], r[3], r[1], r[2])
        _trim_offsets(e, add_prefix_space)
        assert e.offsets == r[4], text
        ids = np.asarray(r[0], dtype=np.int64)
        cs = np.asarray([a for a, _ in r[1]], dtype=np.int64)
        ce = np.asarray([b for _, b in r[1]], dtype=np.int64)
        first = np.zeros(len(ids), dtype=bool)
        first[:1] = True
        a, b = trim_offsets(ids, cs, ce, first, *plan.space_counts(), add_prefix_space)
        assert list(zip(a.tolist(), b.tolist())) == e.offsets, text


def test_trim_spec():
    from fstok.postprocess import PostProcessor, trim_spec

    rob = {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0], "trim_offsets": True,
           "add_prefix_space": False}
    bl = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    tpl = {"type": "TemplateProcessing", "single": ["$A"], "pair": ["$A", "$B"], "special_tokens": {}}
    assert trim_spec(PostProcessor.from_json(rob)) is False
    assert trim_spec(PostProcessor.from_json(dict(rob, trim_offsets=False))) is None
    assert trim_spec(PostProcessor.from_json({"type": "Sequence", "processors": [bl, tpl]})) is True
    # a trimming after a processor that adds tokens, or two trimmings: not one trimming of the sequences
    assert trim_spec(PostProcessor.from_json({"type": "Sequence", "processors": [tpl, bl]})) == "many"
    assert trim_spec(PostProcessor.from_json({"type": "Sequence", "processors": [bl, bl]})) == "many"


@pytest.mark.parametrize("pp", [
    {"type": "RobertaProcessing", "sep": ["<|endoftext|>", 50257], "cls": ["<|startoftranscript|>", 50258],
     "trim_offsets": True, "add_prefix_space": True},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
    {"type": "Sequence", "processors": [{"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
                                         {"type": "TemplateProcessing",
                                          "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}},
                                                     {"Sequence": {"id": "A", "type_id": 0}}],
                                          "pair": [{"Sequence": {"id": "A", "type_id": 0}},
                                                   {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}},
                                                   {"Sequence": {"id": "B", "type_id": 1}}],
                                          "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [50257],
                                                                                "tokens": ["<|endoftext|>"]}}}]},
], ids=["roberta", "bytelevel", "sequence"])
def test_batch_trimming_equals_hf(pp):
    """A byte-level file of the compiled BPE core (Whisper's) under processors that trim offsets: the batch
    path's trimmed offsets (arrays, the template) equal HF's encode_batch, single and pair."""
    tokenizers = pytest.importorskip("tokenizers")
    path = os.path.join(VOCAB, "models", "bytelevel-bpe", "whisper-large-v3", "tokenizer.json")
    with open(path, encoding="utf-8") as f:
        obj = json.load(f)
    obj["post_processor"] = pp
    s = json.dumps(obj)
    ours, hf = fstok.Tokenizer.from_str(s), tokenizers.Tokenizer.from_str(s)
    texts = _sample() + ["  leading", "trailing  ", " ", "a  b", "<|endoftext|> x <|endoftext|>"]
    pairs = list(zip(texts, texts[3:] + texts[:3]))

    def f(e):
        return (e.ids, e.tokens, e.offsets, e.word_ids, e.type_ids, e.special_tokens_mask, e.sequence_ids)

    assert isinstance(ours._core, _BPECore)
    assert [f(e) for e in ours.encode_batch(texts)] == [f(e) for e in hf.encode_batch(texts)]
    assert [f(e) for e in ours.encode_batch(pairs)] == [f(e) for e in hf.encode_batch(pairs)]



def _fields(e):
    return (e.ids, e.tokens, e.offsets, e.word_ids, e.type_ids, e.special_tokens_mask, e.attention_mask,
            e.sequence_ids, e.n_sequences, [_fields(o) for o in e.overflowing])


# (max_length, stride, strategy, direction): kept small, since a pair whose two texts overflow gives the cross
# product of their windows (twice, nested); stride 1, the left direction and the two only_* strategies included;
# the last one leaves pairs fewer tokens than the stride (HF panics, fstok raises)
_TRUNCATIONS = [(16, 3, "longest_first", "right"), (14, 1, "longest_first", "left"), (17, 4, "only_second", "right"),
                (15, 2, "only_first", "left"), (9, 5, "longest_first", "right")]
_WHISPER = os.path.join(VOCAB, "models", "bytelevel-bpe", "whisper-large-v3", "tokenizer.json")
_OVERFLOW_FILES = {
    "roberta-base": (os.path.join(VOCAB, "models", "bytelevel-bpe", "roberta-base", "tokenizer.json"), None),
    "whisper+bert": (_WHISPER, {"type": "BertProcessing", "sep": ["<|endoftext|>", 50257],
                                "cls": ["<|startoftranscript|>", 50258]}),
    # no processor: HF's default merge gives a window a sequence range only where it is its text's first
    "whisper+none": (_WHISPER, "none"),
    **{"whisper+" + k: (_WHISPER, pp) for k, pp in zip(
        ("roberta-prefix", "bytelevel", "sequence"), test_batch_trimming_equals_hf.pytestmark[0].args[1])},
}


def _overflow_texts(hf) -> tuple[list[str], list[str]]:
    """Texts of at most 24 tokens (so that pairs of windows stay few): corpus lines cut short, spaces at either
    end and inside, spaces only; and short texts (at most 3 tokens), which only_* truncation of pairs needs."""
    out = [t for t in _sample()[::4] if t.strip()]
    out += ["  leading  spaces and more words here  ", " a" * 14, "x  " * 9, " " * 20, "\u3000x \u3000y\u3000 "]
    cut = []
    for t in out:
        offs = hf.encode(t, add_special_tokens=False).offsets
        cut.append(t[:offs[23][1]] if len(offs) > 24 else t)
    return cut, ["short", "", " a b", "  ", "x"]


def _check_windows(ours, hf, texts: list[str], shorts: list[str], padding: bool, strict: bool = True) -> None:
    """encode_batch and encode of `ours` against HF's, every field and the nested overflowing windows, single
    and pair, for each truncation of _TRUNCATIONS (a ValueError where HF raises; `strict`: HF raises only for
    only_second without pairs and for the last truncation with pairs)."""
    for max_length, stride, strategy, direction in _TRUNCATIONS:
        kw = dict(max_length=max_length, stride=stride, strategy=strategy, direction=direction)
        if strategy == "only_first":
            pairs = [(t, shorts[i % len(shorts)]) for i, t in enumerate(texts)]
        elif strategy == "only_second":
            pairs = [(shorts[i % len(shorts)], t) for i, t in enumerate(texts)]
        else:
            pairs = list(zip(texts + shorts, texts[3:] + texts[:3] + texts[:len(shorts)]))
        for t in (ours, hf):
            t.enable_truncation(**kw)
            if padding:
                t.enable_padding(pad_id=0, pad_token="!", pad_to_multiple_of=8)
        try:
            for items in (texts + shorts, pairs):
                try:
                    want = [_fields(e) for e in hf.encode_batch(items)]
                except BaseException as ex:  # HF raises (or panics: a BaseException): fstok raises a ValueError
                    if isinstance(ex, (KeyboardInterrupt, SystemExit)):
                        raise
                    assert not strict or (strategy == "only_second") != (items is pairs and max_length == 9), (kw, ex)
                    with pytest.raises(ValueError, match="stride|Truncation"):
                        ours.encode_batch(items)
                    continue
                assert [_fields(e) for e in ours.encode_batch(items)] == want, kw
                if not padding:
                    assert [_fields(ours.encode(*x) if isinstance(x, tuple) else ours.encode(x))
                            for x in items] == want, kw
        finally:
            for t in (ours, hf):
                t.no_truncation()
                t.no_padding()


def _overflow_pair(name: str):
    key = ("overflow", name)
    if key not in _LOADED:
        tokenizers = pytest.importorskip("tokenizers")
        path, pp = _OVERFLOW_FILES[name]
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
        if pp is not None:
            obj["post_processor"] = None if pp == "none" else pp
        s = json.dumps(obj)
        _LOADED[key] = (fstok.Tokenizer.from_str(s), tokenizers.Tokenizer.from_str(s))
    return _LOADED[key]


@pytest.mark.parametrize("name", sorted(_OVERFLOW_FILES))
def test_overflow_windows_equal_hf(name, monkeypatch):
    """Truncation with a stride in encode_batch: the windows laid into the processor's template at once, their
    offsets trimmed from the row's array-trimmed offsets (`fstok.hf_batch.overflowing`), equal HF's encode_batch:
    every field, the nested overflowing windows too, single and pair, each truncation strategy and direction,
    with and without padding, under processors that trim offsets (with and without add_prefix_space), one
    that does not, and none."""
    import fstok.hf_batch

    ours, hf = _overflow_pair(name)
    served = []
    real = fstok.hf_batch.overflowing

    def spy(*a, **k):
        e = real(*a, **k)
        served.append(e is not None)
        return e

    monkeypatch.setattr(fstok.hf_batch, "overflowing", spy)
    texts, shorts = _overflow_texts(hf)
    _check_windows(ours, hf, texts, shorts, padding=False)
    _check_windows(ours, hf, texts[::2], shorts, padding=True)
    # the windows path served (nearly) every overflowing text: a path that always fell back would pass vacuously
    assert served and sum(served) >= 0.9 * len(served), (sum(served), len(served))


@settings(max_examples=10, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from(list(" \u3000\tab.é😀")) | st.characters(exclude_categories=("Cs",)),
                        max_size=20), min_size=6, max_size=8))
def test_overflow_windows_hypothesis(texts):
    ours, hf = _overflow_pair("roberta-base")
    _check_windows(ours, hf, texts[2:], texts[:2], padding=False, strict=False)
