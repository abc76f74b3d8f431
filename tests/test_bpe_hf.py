"""tokenizer.json / GPT-2 byte-level BPE models == HF `tokenizers`, id for id (samples; tools/diff_bpe.py
runs the full corpora)."""
import functools
import random
import unicodedata

import pytest
from bpe_helpers import fstok_encoding, sample_lines
from conftest import CORPORA, VOCAB, needs_shared, read_corpus

from fstok.bpe import BPETokenizer

pytestmark = needs_shared

HF_MODELS = {
    "llama3": f"{VOCAB}/hf-derived/llama3.tokenizer.json",
    "deepseek": f"{VOCAB}/hf/deepseek_tokenizer.json",
    "anthropic": f"{VOCAB}/hf/anthropic_tokenizer.json",
}


@functools.lru_cache(maxsize=None)
def pair(model: str):
    from tokenizers import Tokenizer

    path = HF_MODELS[model]
    return BPETokenizer.compile_tokenizer_json(path, name=model), Tokenizer.from_file(path)


def _unicode14_only(text: str) -> bool:
    # Python 3.11's unicodedata (NFKC in fstok's Python normalizer step) is Unicode 14; HF's
    # normalizer tables are newer, so text with characters assigned later can normalize differently.
    return all(unicodedata.category(c) != "Cn" for c in text)


@pytest.mark.parametrize("corpus", CORPORA)
@pytest.mark.parametrize("model", list(HF_MODELS))
def test_hf_models_sample_lines(model, corpus):
    f, hf = pair(model)
    lines = sample_lines(corpus, 120, seed=7)
    for ln in lines:
        if model == "anthropic" and not _unicode14_only(ln):
            continue
        assert f.encode_ordinary(ln) == hf.encode(ln, add_special_tokens=False).ids, ln
    chunk = read_corpus(corpus)[100_000:130_000]
    if model != "anthropic" or _unicode14_only(chunk):
        assert f.encode_ordinary(chunk) == hf.encode(chunk, add_special_tokens=False).ids


def test_hf_batch_and_roundtrip():
    f, hf = pair("deepseek")
    lines = sample_lines("multilingual", 200, seed=3)
    assert f.encode_ordinary_batch(lines, num_threads=2) == [e.ids for e in hf.encode_batch(lines, add_special_tokens=False)]
    for ln in lines:
        assert f.decode(f.encode_ordinary(ln)) == ln


def test_deepseek_added_and_special_tokens():
    f, hf = pair("deepseek")
    texts = [
        "<think>reasoning</think> answer",
        "<｜User｜>Hi<｜Assistant｜>Hello<｜end▁of▁sentence｜>",
        "x<｜begin▁of▁sentence｜>y <|EOT|> z",
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{}",
        "<｜table｜><｜tr｜><｜td｜>1<｜/td｜><｜/tr｜><｜/table｜>｜DSML｜",
        "plain text with <dsml: and </dsml: markers",
    ]
    for t in texts:
        assert f.encode(t, allowed_special="all") == hf.encode(t, add_special_tokens=False).ids, t
    # non-special added tokens are always split out (HF); specials are ordinary text unless allowed
    hf.encode_special_tokens = True
    try:
        for t in texts:
            assert f.encode_ordinary(t) == hf.encode(t, add_special_tokens=False).ids, t
    finally:
        hf.encode_special_tokens = False
    with pytest.raises(ValueError):
        f.encode("<｜begin▁of▁sentence｜>")  # special-token text is disallowed by default (tiktoken semantics)


def test_anthropic_nfkc_and_specials():
    f, hf = pair("anthropic")
    for t in ["ｆｕｌｌｗｉｄｔｈ ﬁ ① ™ Ⅸ ｶﾀｶﾅ", "<EOT> x <META_START>y<META_END>", "e\u0301 \u00e9 \u212b"]:
        assert f.encode(t, allowed_special="all") == hf.encode(t, add_special_tokens=False).ids, t


def test_gpt2_vocab_json_matches_r50k_and_hf():
    from tokenizers import Tokenizer, models, pre_tokenizers

    f = BPETokenizer.compile_gpt2(f"{VOCAB}/gpt2/vocab.json")
    hf = Tokenizer(models.BPE.from_file(f"{VOCAB}/gpt2/vocab.json", f"{VOCAB}/gpt2/merges.txt"))
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    r50k = fstok_encoding("r50k_base")
    assert f.n_vocab == 50257 and f.encode("<|endoftext|>", allowed_special="all") == [50256]
    for corpus in CORPORA:
        for ln in sample_lines(corpus, 60, seed=11):
            want = r50k.encode_ordinary(ln)
            assert f.encode_ordinary(ln) == want
            assert hf.encode(ln).ids == want


def test_llama3_tiktoken_file_matches_hf_json():
    from fstok.pretokenize import LLAMA3_PAT

    f_json, hf = pair("llama3")
    f_tt = BPETokenizer.compile_tiktoken(f"{VOCAB}/llama3/tokenizer.model", pattern=LLAMA3_PAT, special_tokens={},
                                         name="llama3-tiktoken")
    rnd = random.Random(1)
    lines = [ln for c in CORPORA for ln in sample_lines(c, 40, seed=rnd.randint(0, 99))]
    for ln in lines:
        a = f_tt.encode_ordinary(ln)
        assert a == f_json.encode_ordinary(ln) == hf.encode(ln, add_special_tokens=False).ids


def test_unsupported_options_are_refused(tmp_path):
    import json

    base = json.load(open(HF_MODELS["anthropic"]))
    cases = {
        "normalizer": ({"normalizer": {"type": "Lowercase"}}, "normalizer"),
        "dropout": ({"model": dict(base["model"], dropout=0.1)}, "dropout"),
        "suffix": ({"model": dict(base["model"], end_of_word_suffix="</w>")}, "end_of_word_suffix"),
        "pretok": ({"pre_tokenizer": {"type": "Whitespace"}}, "pre-tokenizer"),
        "wordpiece": ({"model": {"type": "WordPiece", "vocab": {}}}, "BPE"),
    }
    for label, (patch, needle) in cases.items():
        obj = dict(base, **patch)
        p = tmp_path / f"{label}.json"
        p.write_text(json.dumps(obj))
        with pytest.raises(ValueError, match=needle):
            BPETokenizer.compile_tokenizer_json(str(p))
