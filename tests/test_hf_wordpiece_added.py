"""A WordPiece tokenizer.json with added tokens outside its vocabulary (the id from the added_tokens entry),
special and non-special, with single_word / lstrip / rstrip: fstok.Tokenizer equals HF `tokenizers` in every
Encoding field, in encode_batch and the numpy batch, and in decode (diff_hf.diff_file), added tokens matched
after the BertNormalizer (normalized: true) included."""
from __future__ import annotations

import json
import os
import sys

import pytest

from conftest import VOCAB, needs_shared

tokenizers = pytest.importorskip("tokenizers")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
import diff_hf  # noqa: E402

import fstok  # noqa: E402

MINILM = os.path.join(VOCAB, "models", "wordpiece", "all-MiniLM-L6-v2", "tokenizer.json")

LINES = ["Hi <new_tok> there  Hello_World  x", "zork zorkx [CLS] a<new_tok>b [MASK]", "nothing special here", "",
         "<new_tok>", "Hello_World" * 3, "ünïcödé 日本語 <new_tok>tail", "  Hello_World", "xzork zork_ zork!",
         "The quick brown fox [SEP] jumps over the lazy dog." * 4]


def _entry(i, content, special, **flags):
    return {"id": i, "content": content, "single_word": flags.get("single_word", False),
            "lstrip": flags.get("lstrip", False), "rstrip": flags.get("rstrip", False), "normalized": False,
            "special": special}


def _file(tmp_path, extra) -> str:
    with open(MINILM, encoding="utf-8") as f:
        obj = json.load(f)
    obj["added_tokens"] += extra
    p = tmp_path / "tokenizer.json"
    p.write_text(json.dumps(obj, ensure_ascii=False), encoding="utf-8")
    return str(p)


@needs_shared
@pytest.mark.parametrize("kind", ["special", "non_special", "flags"])
def test_added_outside_vocab_equals_hf(tmp_path, kind):
    n = 30522  # the vocabulary's size: the new ids follow it
    extra = {
        "special": [_entry(n, "<new_tok>", True)],
        "non_special": [_entry(n, "<new_tok>", False), _entry(n + 1, "Hello_World", False)],
        "flags": [_entry(n, "<new_tok>", True, rstrip=True), _entry(n + 1, "Hello_World", False, lstrip=True,
                                                                    rstrip=True),
                  _entry(n + 2, "zork", False, single_word=True)],
    }[kind]
    path = _file(tmp_path, extra)
    report: list[str] = []
    lines = LINES * 2  # encode_batch's native path starts at 8 texts
    checks, bad = diff_hf.diff_file(path, lines, report.append)
    assert checks > 100
    assert bad == 0, "\n".join(report)
    ours, hf = fstok.Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(path)
    ours.no_padding()
    hf.no_padding()
    e = ours.encode("a <new_tok> b")
    assert n in e.ids and e.ids == hf.encode("a <new_tok> b").ids
    assert ours.token_to_id("<new_tok>") == hf.token_to_id("<new_tok>") == n
    assert ours.id_to_token(n) == hf.id_to_token(n) == "<new_tok>"
    assert ours.get_vocab_size() == hf.get_vocab_size()
    for skip in (True, False):
        assert ours.decode(e.ids, skip_special_tokens=skip) == hf.decode(e.ids, skip_special_tokens=skip)


@needs_shared
@pytest.mark.parametrize("special", [False, True])
def test_normalized_added_outside_vocab_equals_hf(tmp_path, special):
    """A token matched after the BertNormalizer (so "hello_world" and "HELLO_WORLD" are it too): every field,
    batch, numpy rows and decode equal HF's (fstok.hf_added_norm)."""
    entry = _entry(30522, "Hello_World", special)
    entry["normalized"] = True
    path = _file(tmp_path, [entry])
    report: list[str] = []
    lines = (LINES + ["hello_world HELLO_WORLD hello_worlds", "Ünï hello_world日本"]) * 2
    checks, bad = diff_hf.diff_file(path, lines, report.append)
    assert checks > 100
    assert bad == 0, "\n".join(report)
    hf = tokenizers.Tokenizer.from_file(path)
    assert 30522 in hf.encode("a HELLO_WORLD b").ids
    ours = fstok.Tokenizer.from_file(path)
    assert ours.encode("a HELLO_WORLD b").ids == hf.encode("a HELLO_WORLD b").ids


@needs_shared
def test_normalized_special_token_equals_hf(tmp_path):
    """A special token of the vocabulary that HF matches after the BertNormalizer (so "[mask]" is it too)."""
    with open(MINILM, encoding="utf-8") as f:
        obj = json.load(f)
    for a in obj["added_tokens"]:
        if a["content"] == "[MASK]":
            a["normalized"] = True
    p = tmp_path / "tokenizer.json"
    p.write_text(json.dumps(obj), encoding="utf-8")
    hf = tokenizers.Tokenizer.from_file(str(p))
    ours = fstok.Tokenizer.from_file(str(p))
    for t in ("a [mask] b", "a [MASK] b", "[Mask][mask]", "x[mask]y [SEP] [sep]"):
        e, h = ours.encode(t), hf.encode(t)
        assert (e.ids, e.tokens, e.offsets, e.word_ids) == (h.ids, h.tokens, h.offsets, h.word_ids), t
        assert ours.decode(e.ids, skip_special_tokens=True) == hf.decode(h.ids, skip_special_tokens=True)
