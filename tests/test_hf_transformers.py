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
    obj["decoder"] = {"type": "CTC", "pad_token": "<pad>", "word_delimiter_token": "|", "cleanup": True}
    (tmp_path / "tokenizer.json").write_text(json.dumps(obj))
    ftr.patch()
    try:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            t = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    finally:
        ftr.unpatch()
    assert not isinstance(t._tokenizer, ftr.Backend)
    assert any("CTC" in str(x.message) and "HF tokenizers" in str(x.message) for x in w)


def test_runtime_changes_hand_over_to_hf(pair):
    _, patched = pair
    import copy

    t = copy.deepcopy(patched)
    assert isinstance(t._tokenizer, ftr.Backend)
    t.add_tokens(["qwertyuiopasdf"])
    assert "HF tokenizers" in repr(t._tokenizer)
    assert t("x qwertyuiopasdf y")["input_ids"] == t._tokenizer._hf.encode("x qwertyuiopasdf y").ids
