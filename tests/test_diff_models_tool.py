"""The differential tool tools/diff_models.py on a small sample: it recognises every shared model file by
content (one reference library each), and each of its three differs runs clean on a file of its kind (a
broken tool, or a mismatch on these inputs, fails here before a long run).  The long run is
`python tools/diff_models.py [--files WORD ...] [--out DIR]`."""
from __future__ import annotations

import os
import sys

import pytest

from conftest import VOCAB, needs_shared

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
import diff_models  # noqa: E402

pytestmark = needs_shared


def test_every_file_recognised():
    got = {os.path.relpath(p, VOCAB): k for p, k in diff_models.model_files()}
    assert got["models/spm-bpe/gemma/tokenizer.gemma"] == "sentencepiece"
    assert got["models/unigram/maxtext-default-c4/tokenizer.default"] == "sentencepiece"
    assert got["models/tekken/mistral-nemo/tekken_240718.json"] == "tekken"
    assert got["models/wordpiece/all-MiniLM-L6-v2/tokenizer.json"] == "tokenizers"
    assert got["hf/deepseek_tokenizer.json"] == "tokenizers"
    assert "gpt2/vocab.json" not in got and "llama3/tokenizer.model" not in got  # no reference of their own here
    assert sum(k == "tokenizers" for k in got.values()) >= 11


def _items():
    out = [(f"edge#{i}", s) for i, s in enumerate(diff_models.EDGE)]
    out += [(f"U+{c:04X}", chr(c)) for c in (0x41, 0xE9, 0x2581, 0x1F600, 0x10FFFF)]
    out.append(("U+0041 in context", "a" + " ".join("Aé▁😀") + " a" + "Aé▁😀\r\n"))
    return out


# one file of each family: Unigram and SentencePiece BPE (.model), WordPiece, SentencePiece-style BPE and
# byte-level BPE with a post-processor (tokenizer.json), tekken
@pytest.mark.parametrize("rel", ["models/unigram/maxtext-default-c4/tokenizer.default",
                                 "models/spm-bpe/llama-2/tokenizer.model",
                                 "models/wordpiece/all-MiniLM-L6-v2/tokenizer.json",
                                 "models/spm-bpe/phi-3-mini/tokenizer.json",
                                 "models/bytelevel-bpe/whisper-large-v3/tokenizer.json",
                                 "models/tekken/mistral-nemo/tekken_240718.json"])
def test_differ_runs_clean(rel):
    path = os.path.join(VOCAB, rel)
    kind = diff_models.classify(path)
    r = diff_models.Report(path, kind)
    diff_models.DIFFERS[kind](path, _items(), r)
    assert r.n >= 3 * len(_items()) and r.n_bad == 0, r.first


def test_every_n_is_a_deterministic_subset(monkeypatch):
    monkeypatch.setattr(diff_models, "hypothesis_texts", lambda n: [])
    full = diff_models.inputs(True, 0)
    some = diff_models.inputs(True, 0, every=4)
    assert some == diff_models.inputs(True, 0, every=4)
    assert {s for _, s in some} <= {s for _, s in full}
    labels = [k for k, _ in some]

    def lines(labels):
        return [int(k.split(":")[1]) for k in labels if k.startswith("english.txt:") and not k.endswith("whole")]

    got = lines(labels)
    assert got and all((n - 1) % 4 == 0 for n in got) and len(got) <= len(lines(k for k, _ in full)) // 3
    assert "english.txt:whole" in labels
    alone = [k for k in labels if k.startswith("U+") and not k.endswith("context")]
    assert alone and all(int(k[2:], 16) // 16 % 4 == 0 for k in alone)


def test_inputs_split_by_kind(monkeypatch):
    monkeypatch.setattr(diff_models, "hypothesis_texts", lambda n: [f"h{k}" for k in range(n)])
    full = diff_models.inputs(True, 5)
    parts = [diff_models.inputs(True, 5, kinds=(k,)) for k in diff_models.INPUT_KINDS]
    assert all(parts)
    # together the kinds are every input
    assert {s for p in parts for _, s in p} == {s for _, s in full}
    cps = diff_models.inputs(True, 5, kinds=("codepoints",))
    assert all(k.startswith("U+") for k, _ in cps)
    files = diff_models.inputs(True, 5, kinds=("files",))
    assert sorted(k for k, _ in files) == sorted(k for k, _ in full if k.endswith(":whole"))
