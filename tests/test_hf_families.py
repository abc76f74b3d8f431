"""fstok.Tokenizer vs HF `tokenizers.Tokenizer` on every tokenizer.json of the shared vocabularies: every
Encoding field (ids, tokens, offsets, type_ids, attention/special masks, word and sequence ids, overflowing
windows), single and pair, under the file's own settings, none, truncation with stride (right and left) and
padding; encode_batch, the numpy batch and decode; and, for the families tests/test_hf_transformers.py does
not cover, transformers patched vs unpatched (__call__ forms, batch_decode, apply_chat_template, streaming
decode).  A sample of the corpus; the long run is `python tools/diff_hf.py [--max-lines N]`."""
from __future__ import annotations

import glob
import os
import sys

import pytest

from conftest import CORPORA, VOCAB, corpus_path, needs_shared

tokenizers = pytest.importorskip("tokenizers")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
import diff_hf  # noqa: E402

EDGE = ["", " ", "Hello  world!", "It's 1234567...", "a\u0301e\u0301\u0323 Ǖ ﬁ İ Σ ½ ①", "日本語 😀👍🏽",
        "\t\r\n x  ", "<s> </s> <|endoftext|> [CLS] [SEP] <mask>", "don't   STOP", "x" * 300]


def _files() -> list[str]:
    out = []
    for p in sorted(glob.glob(os.path.join(VOCAB, "**", "*.json"), recursive=True)):
        try:
            tokenizers.Tokenizer.from_file(p)
        except Exception:  # not a tokenizer.json HF loads (gpt2/vocab.json, tekken): nothing to compare with
            continue
        out.append(p)
    return out


def _lines() -> list[str]:
    out = list(EDGE)
    for name in CORPORA:
        with open(corpus_path(name), encoding="utf-8") as f:
            lines = [x for x in f.read().splitlines() if x.strip()]
        out += lines[:2] + lines[len(lines) // 2:len(lines) // 2 + 1]
    return out


@needs_shared
@pytest.mark.parametrize("path", _files() if os.path.isdir(VOCAB) else [], ids=lambda p: os.path.relpath(p, VOCAB))
def test_every_field_equals_hf(path):
    report: list[str] = []
    checks, bad = diff_hf.diff_file(path, _lines(), report.append,
                                    settings=["file", "none", "stride-right", "stride-left"])
    assert checks > 100
    assert bad == 0, "\n".join(report)


# the other truncation strategies (only_first, only_second: HF refuses a single text there) on one file of each
# face core kind: WordPiece, a stage-by-stage pipeline with trimmed offsets, SentencePiece-style BPE, byte-level BPE
STRATEGY_SAMPLE = ["models/wordpiece/all-MiniLM-L6-v2/tokenizer.json", "models/bytelevel-bpe/roberta-base/tokenizer.json",
                   "models/spm-bpe/phi-3-mini/tokenizer.json", "models/bytelevel-bpe/whisper-large-v3/tokenizer.json"]


@needs_shared
@pytest.mark.parametrize("rel", STRATEGY_SAMPLE)
def test_truncation_strategies_equal_hf(rel):
    report: list[str] = []
    checks, bad = diff_hf.diff_file(os.path.join(VOCAB, rel), _lines()[::2], report.append,
                                    settings=["only-first", "only-second"])
    assert checks > 20
    assert bad == 0, "\n".join(report)


# (Unigram through transformers is in the long run only: loading multilingual-e5 in transformers costs ~25 s)
# (a SentencePiece .model goes through transformers' own conversion: MaxText's Unigram model, via T5Tokenizer)
TF_SAMPLE = ["models/spm-bpe/phi-3-mini/tokenizer.json",
             "hf/anthropic_tokenizer.json", "models/charbpe/clip-vit-base-patch32/tokenizer.json",
             "models/bytelevel-bpe/whisper-large-v3/tokenizer.json",
             "models/unigram/maxtext-default-c4/tokenizer.default"]


@needs_shared
@pytest.mark.parametrize("rel", TF_SAMPLE)
def test_transformers_patched_equals_unpatched(rel):
    pytest.importorskip("transformers")
    report: list[str] = []
    checks, bad = diff_hf.diff_transformers(os.path.join(VOCAB, rel), _lines(), report.append, chunk=32)
    assert checks > 10
    assert bad == 0, "\n".join(report)
