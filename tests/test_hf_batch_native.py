"""`fstok.Tokenizer.encode_batch` runs the model step of the whole batch natively (`_Core.model_batch`: one
threaded C call for the ids, byte spans from token lengths, word ids from the compiled pre-tokenizer's C
spanner) and only builds the Encoding objects in Python.  Every field of every encoding equals HF's and the
per-text `encode`'s, for single texts, pairs, and with truncation (stride) and padding; texts the native batch
does not take as they are (added-token text, lone surrogates, text a normalizer changes) are mixed in."""
import os

import pytest

tokenizers = pytest.importorskip("tokenizers")

import fstok  # noqa: E402

from conftest import SHARED as DATA  # noqa: E402
FILES = {
    "minilm": f"{DATA}/vocab/models/wordpiece/all-MiniLM-L6-v2/tokenizer.json",
    "llama3": f"{DATA}/vocab/hf-derived/llama3.tokenizer.json",
    "deepseek": f"{DATA}/vocab/hf/deepseek_tokenizer.json",
}
FIELDS = ("ids", "type_ids", "tokens", "offsets", "word_ids", "special_tokens_mask", "attention_mask",
          "sequence_ids")


def _lines(n_per=60):
    out = []
    for name in ("english.txt", "multilingual.txt", "code.txt", "stress.txt"):
        with open(f"{DATA}/corpus/{name}", encoding="utf-8") as f:
            out += [ln for ln in f.read().splitlines()][:n_per]
    return out + ["", " ", "[CLS] hello [SEP] world", "<|begin_of_text|> a <|eot_id|>b", "naïve café 東京",
                  "e\u0301 ﬁ ①", "x\ud800y"]


def _same(a, b, what):
    assert len(a) == len(b), what
    for k, (x, y) in enumerate(zip(a, b)):
        for f in FIELDS:
            assert getattr(x, f) == getattr(y, f), (what, k, f)
        assert len(x.overflowing) == len(y.overflowing), (what, k)
        for xo, yo in zip(x.overflowing, y.overflowing):
            for f in FIELDS:
                assert getattr(xo, f) == getattr(yo, f), (what, k, "overflowing", f)


@pytest.mark.parametrize("name", sorted(FILES))
def test_native_batch_equals_hf_and_per_text(name):
    if not os.path.exists(FILES[name]):
        pytest.skip("shared data not present")
    hf, ours = tokenizers.Tokenizer.from_file(FILES[name]), fstok.Tokenizer.from_file(FILES[name])
    lines = [t for t in _lines() if "\ud800" not in t]  # HF cannot take a lone surrogate
    pairs = list(zip(lines[::2], lines[1::2]))
    _same(ours.encode_batch(lines), hf.encode_batch(lines), "single")
    _same(ours.encode_batch(lines), [ours.encode(t) for t in lines], "single vs encode")
    _same(ours.encode_batch(pairs), hf.encode_batch(pairs), "pair")
    for t in (hf, ours):
        t.enable_truncation(24, stride=5)
        t.enable_padding(pad_to_multiple_of=8)
    _same(ours.encode_batch(pairs), hf.encode_batch(pairs), "pair truncated, padded")
    _same(ours.encode_batch(lines, add_special_tokens=False), hf.encode_batch(lines, add_special_tokens=False),
          "no special tokens")


def test_lone_surrogate_in_a_batch_is_encoded_as_alone():
    ours = fstok.Tokenizer.from_file(FILES["llama3"])
    lines = _lines(10)
    got = ours.encode_batch(lines)
    assert [e.ids for e in got] == [ours.encode(t).ids for t in lines]


def test_batch_threads_follow_hf_settings(monkeypatch):
    from fstok.hf_batch import batch_threads

    monkeypatch.delenv("RAYON_NUM_THREADS", raising=False)
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    assert batch_threads() == 1
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "true")
    assert batch_threads() == len(os.sched_getaffinity(0))
    monkeypatch.setenv("RAYON_NUM_THREADS", "3")
    assert batch_threads() == 3
    monkeypatch.setenv("RAYON_NUM_THREADS", "junk")
    assert batch_threads() == len(os.sched_getaffinity(0))
    ours = fstok.Tokenizer.from_file(FILES["minilm"])
    lines = [t for t in _lines(10) if "\ud800" not in t]  # (WordPiece refuses a lone surrogate, as HF does)
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    one = [e.ids for e in ours.encode_batch(lines)]
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "true")
    assert [e.ids for e in ours.encode_batch(lines)] == one


def test_bpe_model_batch_rows_equal_model_encode():
    """_BPECore.model_batch reads the ids of the batch as one uint32 buffer (with starts) from C: its rows
    (ids, offsets, word ids) equal model_encode of each text, with texts the C path leaves out (lone
    surrogates: first, in the middle, last) and added-token text mixed in."""
    if not os.path.exists(FILES["llama3"]):
        pytest.skip("shared data not present")
    ours = fstok.Tokenizer.from_file(FILES["llama3"])
    core = ours._core
    lines = ["\ud800 first"] + _lines(12) + ["mid \udfff dle", "a <|eot_id|> b"] + _lines(3) + ["last \ud834"]
    got = core.model_batch(lines, 2)
    assert len(got) == len(lines)
    for t, row in zip(lines, got):
        want = core.model_encode(t)
        assert [list(x) for x in row[:3]] == [list(x) for x in want[:3]], t
