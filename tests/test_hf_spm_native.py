"""The HF face over SentencePiece-style BPE tokenizer.json files runs its merges in C: every Encoding field
equals HF `tokenizers` on real lines (non-ASCII, byte fallback, added tokens), single and pair, with
truncation and padding; the pure-Python BPE (fstok.reference.unigram.HFBPE) runs only where a token's span
is not fixed by its id, and the native piece model equals it.  Variants of the real file change one
component each (pre-tokenizer, byte fallback, normalized added tokens) so that each route is compared."""
from __future__ import annotations

import json
import os
import random
import sys

import pytest

from conftest import CORPORA, VOCAB, corpus_path, needs_shared

tokenizers = pytest.importorskip("tokenizers")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
import diff_hf  # noqa: E402

import fstok  # noqa: E402
from fstok.reference import unigram as _ref  # noqa: E402

PHI3 = os.path.join(VOCAB, "models", "spm-bpe", "phi-3-mini", "tokenizer.json")

EDGE = ["", " ", "  two  spaces ", "Hello world!", "日本語のテキスト 😀👍🏽 𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "a\u0301e\u0301 Ǖ ﬁ İ Σ ½ ①",
        "<s>hi</s> <|endoftext|><|user|>x<|end|> <unk>", "\t\r\n x  \u3000y", "ꙮ ᚠᛇᚻ ⵣ 𓀀 \U0010fffd", "x" * 200]


def _lines(per_file: int = 3) -> list[str]:
    out = list(EDGE)
    for name in CORPORA:
        with open(corpus_path(name), encoding="utf-8") as f:
            lines = [x for x in f.read().splitlines() if x.strip()]
        step = max(1, len(lines) // per_file)
        out += [x[:600] for x in lines[::step][:per_file]]
    return out


def _variant(tmp_path, name: str, change) -> str:
    with open(PHI3, encoding="utf-8") as f:
        obj = json.load(f)
    change(obj)
    p = tmp_path / name / "tokenizer.json"
    p.parent.mkdir()
    p.write_text(json.dumps(obj, ensure_ascii=False), encoding="utf-8")
    return str(p)


class _Count:
    """Counts calls of the Python BPE model (the oracle) while active."""

    def __init__(self, monkeypatch):
        self.n = 0
        orig = _ref.HFBPE.tokenize

        def counted(model, w):
            self.n += 1
            return orig(model, w)

        monkeypatch.setattr(_ref.HFBPE, "tokenize", counted)


@needs_shared
def test_phi3_every_field_native(monkeypatch):
    calls = _Count(monkeypatch)
    report: list[str] = []
    checks, bad = diff_hf.diff_file(PHI3, _lines(), report.append)
    assert checks > 100
    assert bad == 0, "\n".join(report)
    # byte fallback and non-ASCII included, no line needed the Python model (the file has no unknown piece)
    assert calls.n == 0


@needs_shared
def test_phi3_byte_fallback_offsets():
    ours = fstok.Tokenizer.from_file(PHI3)
    hf = tokenizers.Tokenizer.from_file(PHI3)
    text = "ꙮ𓀀 x 😀 日本"
    a, b = ours.encode(text), hf.encode(text)
    assert any(t.startswith("<0x") for t in b.tokens)  # the line exercises byte fallback
    assert (a.ids, a.tokens, a.offsets, a.word_ids) == (b.ids, b.tokens, b.offsets, b.word_ids)


@needs_shared
def test_native_piece_model_equals_oracle():
    core = fstok.compile(PHI3)
    rng = random.Random(7)
    alphabet = "abcdeéñ▁ 日本語😀ꙮ\u0301" + "".join(chr(rng.randrange(0x20, 0x2FFFF)) for _ in range(200))
    alphabet = "".join(c for c in alphabet if not 0xD800 <= ord(c) < 0xE000)
    pieces = ["▁" + "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 12))) for _ in range(1500)]
    pieces += ["▁" + "".join(rng.choice(alphabet) for _ in range(rng.randrange(30, 90))) for _ in range(200)]
    for w in pieces:
        b = w.encode("utf-8")
        ref = core._bpe.tokenize(w)
        assert core._bpe_piece(w, b) == ref, w
        # character spans, short and long pieces: a token's characters are those holding its first and last byte
        starts = [len(b[:k].decode("utf-8", "ignore")) for k in range(len(b) + 1)]
        lead = [i for i in range(len(b)) if b[i] & 0xC0 != 0x80] + [len(b)]
        want = [(t, starts[max(x for x in lead if x <= s)], lead.index(min(x for x in lead if x >= e)))
                for t, s, e in ref]
        got = core._bpe_piece_chars(w, b)
        assert got is not None and got == want, w


@needs_shared
@pytest.mark.parametrize("kind", ["metaspace_first", "metaspace_split", "normalized_added", "no_byte_fallback"])
def test_variants_equal_hf(tmp_path, kind):
    def metaspace(split):
        def change(o):
            o["normalizer"] = None
            o["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
                                  "split": split}
            o["decoder"] = {"type": "Sequence", "decoders": [
                {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
                {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
        return change

    def normalized_added(o):
        for a in o["added_tokens"]:
            if not a["special"]:
                a["normalized"] = True

    def no_byte_fallback(o):
        o["model"]["byte_fallback"] = False

    change = {"metaspace_first": metaspace(False), "metaspace_split": metaspace(True),
              "normalized_added": normalized_added, "no_byte_fallback": no_byte_fallback}[kind]
    path = _variant(tmp_path, kind, change)
    report: list[str] = []
    checks, bad = diff_hf.diff_file(path, _lines(2), report.append)
    assert checks > 50
    assert bad == 0, "\n".join(report)


def test_merge_of_byte_tokens_takes_the_oracle(tmp_path):
    """A merge whose parts are byte-fallback tokens makes a token whose text is not what it covers: its
    span is not fixed by its id, and the Python model gives it (HF's offsets cover the character)."""
    vocab = {"<unk>": 0}
    for c in range(256):
        vocab[f"<0x{c:02X}>"] = len(vocab)
    for t in ["▁", "a", "b", "ab", "▁ab", "<0xC3><0xA9>", "<0xC3><0xA9>a"]:
        vocab[t] = len(vocab)
    merges = ["a b", "▁ ab", "<0xC3> <0xA9>", "<0xC3><0xA9> a"]
    obj = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [
        {"id": 0, "content": "<unk>", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
         "special": True}],
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                                          {"type": "Replace", "pattern": {"String": " "},
                                                           "content": "\u2581"}]},
        "pre_tokenizer": None, "post_processor": None,
        "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"},
                                                      "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "vocab": vocab,
                  "merges": merges}}
    p = tmp_path / "tokenizer.json"
    p.write_text(json.dumps(obj, ensure_ascii=False), encoding="utf-8")
    ours, hf = fstok.Tokenizer.from_file(str(p)), tokenizers.Tokenizer.from_file(str(p))
    for text in ["ab éa ab", "éab", "aéa b", "é", "xé"]:
        a, b = ours.encode(text), hf.encode(text)
        assert (a.ids, a.tokens, a.offsets, a.word_ids) == (b.ids, b.tokens, b.offsets, b.word_ids), text
        assert ours.decode(a.ids) == hf.decode(b.ids)


PHI3_CHAT = ("{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n' + message['content'] + "
             "'<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}"
             "{% elif message['role'] == 'assistant' %}{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}"
             "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}")


@needs_shared
def test_transformers_llama_class_patched_equals_unpatched(tmp_path):
    """Phi-3's tokenizer.json under transformers' Llama tokenizer class with add_bos_token / add_eos_token (the
    class rewrites the post-processor at load): patched and unpatched give the same arrays for a padded,
    truncated pair batch with offsets, the same batch_decode and the same chat template ids."""
    import shutil
    import warnings

    import numpy as np

    transformers = pytest.importorskip("transformers")
    import fstok.transformers as ftr

    shutil.copy(PHI3, tmp_path / "tokenizer.json")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "LlamaTokenizer", "add_bos_token": True, "add_eos_token": True, "chat_template": PHI3_CHAT,
        "bos_token": "<s>", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>", "unk_token": "<unk>",
        "padding_side": "left"}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
        ftr.patch()
        try:
            patched = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
        finally:
            ftr.unpatch()
    assert isinstance(patched._tokenizer, ftr.Backend)
    lines = _lines(2)
    kw = dict(padding=True, truncation=True, max_length=40, return_tensors="np", return_offsets_mapping=True)
    a, b = plain(lines, text_pair=lines[::-1], **kw), patched(lines, text_pair=lines[::-1], **kw)
    assert list(a.keys()) == list(b.keys())
    for k in a.keys():
        assert np.array_equal(a[k], b[k]), k
    ids = plain(lines)["input_ids"]
    for skip in (True, False):
        assert plain.batch_decode(ids, skip_special_tokens=skip) == patched.batch_decode(ids, skip_special_tokens=skip)
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi ꙮ there"},
            {"role": "assistant", "content": "Hello!"}]
    for gen in (True, False):
        assert (plain.apply_chat_template(msgs, add_generation_prompt=gen)
                == patched.apply_chat_template(msgs, add_generation_prompt=gen))
