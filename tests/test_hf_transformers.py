"""transformers with fstok.transformers.patch() vs unpatched: the __call__ forms give identical input_ids,
attention_mask, token_type_ids, offset_mapping (and overflow windows); batch_decode, apply_chat_template and
a token-by-token streaming decode give identical text; an uncompilable tokenizer falls back with a warning."""
from __future__ import annotations

import json
import os
import shutil
import warnings

import numpy as np
import pytest

transformers = pytest.importorskip("transformers")

import fstok.transformers as ftr  # noqa: E402

DATA = "/work/shared/data"
if not os.path.isdir(DATA):
    DATA = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data")
FILES = {
    "minilm": f"{DATA}/vocab/models/wordpiece/all-MiniLM-L6-v2/tokenizer.json",
    "llama3": f"{DATA}/vocab/hf-derived/llama3.tokenizer.json",
}
CHAT = ("{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n{{ m['content'] }}"
        "<|eot_id|>{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}")


def _lines():
    out = []
    for name in ("english.txt", "multilingual.txt", "stress.txt"):
        with open(f"{DATA}/corpus/{name}", encoding="utf-8") as f:
            out += [ln for ln in f.read().splitlines() if ln.strip()][:30]
    return out


LINES = _lines()


@pytest.fixture(scope="module", params=sorted(FILES))
def pair(request, tmp_path_factory):
    d = tmp_path_factory.mktemp(request.param)
    shutil.copy(FILES[request.param], d / "tokenizer.json")
    cfg = {"chat_template": CHAT} if request.param == "llama3" else {}
    if request.param == "llama3":
        cfg.update(bos_token="<|begin_of_text|>", eos_token="<|eot_id|>", pad_token="<|eot_id|>")
    (d / "tokenizer_config.json").write_text(json.dumps(cfg))
    plain = transformers.AutoTokenizer.from_pretrained(str(d))
    ftr.patch()
    try:
        patched = transformers.AutoTokenizer.from_pretrained(str(d))
    finally:
        ftr.unpatch()
    assert isinstance(patched._tokenizer, ftr.Backend) and not isinstance(plain._tokenizer, ftr.Backend)
    assert not ftr.is_patched()
    return plain, patched


CALLS = [
    dict(padding=True, truncation=True, max_length=48, return_tensors="np", return_offsets_mapping=True),
    dict(padding="max_length", truncation=True, max_length=24, return_offsets_mapping=True, stride=5,
         return_overflowing_tokens=True, return_special_tokens_mask=True),
    dict(padding="longest", pad_to_multiple_of=8, return_tensors="np", return_length=True),
    dict(truncation="only_second", max_length=40, padding=True, return_tensors="np"),
]


@pytest.mark.parametrize("kw", CALLS, ids=range(len(CALLS)))
def test_call_forms_identical(pair, kw):
    plain, patched = pair
    for tp in (None, LINES[::-1]):
        try:
            want = plain(LINES, text_pair=tp, **kw)
        except BaseException:
            with pytest.raises(ValueError):
                patched(LINES, text_pair=tp, **kw)
            continue
        got = patched(LINES, text_pair=tp, **kw)
        assert sorted(got.keys()) == sorted(want.keys())
        for k in want:
            assert np.array_equal(np.asarray(got[k], dtype=object) if not kw.get("return_tensors") else got[k],
                                  np.asarray(want[k], dtype=object) if not kw.get("return_tensors") else want[k]), k
    assert patched(LINES[0]) == plain(LINES[0])
    assert patched(LINES[1], LINES[2]).word_ids() == plain(LINES[1], LINES[2]).word_ids()


def test_decode_chat_and_streaming(pair):
    plain, patched = pair
    ids = plain(LINES)["input_ids"]
    for skip in (False, True):
        assert patched.batch_decode(ids, skip_special_tokens=skip) == plain.batch_decode(ids, skip_special_tokens=skip)
    if plain.chat_template:
        msgs = [{"role": "user", "content": LINES[0]}, {"role": "assistant", "content": LINES[3]}]
        assert patched.apply_chat_template(msgs, add_generation_prompt=True) == \
            plain.apply_chat_template(msgs, add_generation_prompt=True)
        assert patched.apply_chat_template(msgs, tokenize=False) == plain.apply_chat_template(msgs, tokenize=False)
    # streaming: decode of a growing prefix, as transformers' TextStreamer does
    seq = plain(LINES[40])["input_ids"]
    for k in range(1, len(seq) + 1):
        assert patched.decode(seq[:k], skip_special_tokens=True) == plain.decode(seq[:k], skip_special_tokens=True)


def test_uncompilable_falls_back_with_reason(tmp_path):
    obj = json.load(open(FILES["minilm"], encoding="utf-8"))
    obj["decoder"] = {"type": "Replace", "pattern": {"Regex": "(?<=a)b"}, "content": "c"}  # HF loads it, fstok not
    (tmp_path / "tokenizer.json").write_text(json.dumps(obj))
    ftr.patch()
    try:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            t = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    finally:
        ftr.unpatch()
    assert not isinstance(t._tokenizer, ftr.Backend)
    assert any("lookbehind" in str(x.message) and "HF tokenizers" in str(x.message) for x in w)


def test_runtime_changes_hand_over_to_hf(pair):
    _, patched = pair
    import copy

    t = copy.deepcopy(patched)
    assert isinstance(t._tokenizer, ftr.Backend)
    t.add_tokens(["qwertyuiopasdf"])
    assert "HF tokenizers" in repr(t._tokenizer)
    assert t("x qwertyuiopasdf y")["input_ids"] == t._tokenizer._hf.encode("x qwertyuiopasdf y").ids


NUMPY_CALLS = [
    dict(padding=True, truncation=True, max_length=48, return_offsets_mapping=True),
    dict(padding="max_length", truncation=True, max_length=32, return_special_tokens_mask=True, return_length=True),
    dict(padding=True, pad_to_multiple_of=8, truncation="only_first", max_length=64, padding_side="left"),
]


@pytest.mark.parametrize("kw", NUMPY_CALLS, ids=range(len(NUMPY_CALLS)))
def test_numpy_path_identical(pair, kw):
    """return_tensors="np" with padding comes straight from fstok's numpy batch (no Encoding per text): the
    same keys in the same order, dtypes, values, n_sequences, and the Encodings built on first access."""
    plain, patched = pair
    for tp in (None, LINES[::-1]):
        try:
            want = plain(LINES, text_pair=tp, return_tensors="np", **kw)
        except Exception as e:  # HF's truncation error: the patched tokenizer raises one too
            with pytest.raises(type(e) if isinstance(e, ValueError) else Exception):
                patched(LINES, text_pair=tp, return_tensors="np", **kw)
            continue
        got = patched(LINES, text_pair=tp, return_tensors="np", **kw)
        assert isinstance(got.encodings, ftr._LazyEncodings)  # the numpy path served it
        assert list(got.keys()) == list(want.keys())
        for k in want:
            assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape, k
            assert np.array_equal(got[k], want[k]), k
        assert got.n_sequences == want.n_sequences
        for i in (0, 7, len(LINES) - 1):
            assert got.word_ids(i) == want.word_ids(i)
            assert got.sequence_ids(i) == want.sequence_ids(i)
            assert got.tokens(i) == want.tokens(i)
    one = patched(LINES[5], LINES[6], padding="max_length", max_length=64, truncation=True, return_tensors="np")
    ref = plain(LINES[5], LINES[6], padding="max_length", max_length=64, truncation=True, return_tensors="np")
    assert all(np.array_equal(one[k], ref[k]) for k in ref) and one.char_to_token(0, 3) == ref.char_to_token(0, 3)


def test_numpy_path_falls_back_for_trimmed_offsets(tmp_path):
    """A byte-level post-processor that trims offsets: the Encoding path serves return_offsets_mapping, same
    result."""
    shutil.copy(f"{DATA}/vocab/models/bytelevel-bpe/roberta-base/tokenizer.json", tmp_path / "tokenizer.json")
    plain = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    ftr.patch()
    try:
        patched = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    finally:
        ftr.unpatch()
    plain.pad_token = patched.pad_token = "<pad>"
    kw = dict(padding=True, truncation=True, max_length=40, return_tensors="np", return_offsets_mapping=True)
    got, want = patched(LINES[:20], **kw), plain(LINES[:20], **kw)
    assert not isinstance(got.encodings, ftr._LazyEncodings)
    assert list(got.keys()) == list(want.keys()) and all(np.array_equal(got[k], want[k]) for k in want)
    kw.pop("return_offsets_mapping")
    got, want = patched(LINES[:20], **kw), plain(LINES[:20], **kw)
    assert isinstance(got.encodings, ftr._LazyEncodings)
    assert all(np.array_equal(got[k], want[k]) for k in want)


def test_unpatch_restores_transformers_exactly(tmp_path):
    """After unpatch() transformers' classes are the ones it had before patch(): no override left behind
    (a tokenizer made afterwards runs transformers' own code on every call shape)."""
    from transformers.tokenization_utils_tokenizers import TokenizersBackend

    before = dict(vars(TokenizersBackend))
    ftr.patch()
    assert dict(vars(TokenizersBackend)) != before
    ftr.unpatch()
    assert dict(vars(TokenizersBackend)) == before
    shutil.copy(FILES["minilm"], tmp_path / "tokenizer.json")
    t = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    assert not isinstance(t._tokenizer, ftr.Backend)
    assert type(t)._encode_plus is before["_encode_plus"]


def test_split_special_tokens_served_by_fstok(pair):
    """split_special_tokens=True (transformers sets `encode_special_tokens` on the backend): fstok's core
    encodes special-token text as ordinary text, identical to unpatched transformers, on both call paths."""
    plain, patched = pair
    sp = [t for t in plain.all_special_tokens if t] or ["[CLS]"]
    texts = [f"{sp[0]}{LINES[0]}{sp[-1]}", f"a {' '.join(sp)} b", LINES[1], "".join(sp)]
    served = not patched._tokenizer._use_hf()
    assert served, repr(patched._tokenizer)
    for split in (True, False, True):
        for kw in (dict(padding=True, return_tensors="np"), dict(return_offsets_mapping=True)):
            want = plain(texts, split_special_tokens=split, **kw)
            got = patched(texts, split_special_tokens=split, **kw)
            for k in want:
                g, w = got[k], want[k]
                assert (np.array_equal(g, w) if isinstance(w, np.ndarray) else g == w), (split, k)
            assert patched._tokenizer._ours.encode_special_tokens is split
            assert patched._tokenizer._use_hf() is not served  # fstok keeps serving in this mode
            if kw.get("return_tensors") and served:
                assert isinstance(got.encodings, ftr._LazyEncodings)
    assert plain(texts[3], split_special_tokens=True)["input_ids"] != plain(texts[3])["input_ids"]
    assert patched(texts[3])["input_ids"] == plain(texts[3])["input_ids"]
