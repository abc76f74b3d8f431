"""Exactness against the reference engines: the fast sample of tools/diff_pretokenize.py.

The full runs (every line of every corpus for every pre-tokenizer, every code point in 11
contexts, cell strings up to length 5) are `python tools/diff_pretokenize.py`.  Here: whole corpus
files (o200k; the first 1.5 MB for the others), every 40th-80th line, every code point in a compact
context (and a sample alone), and every
string of length <= 4 over the pattern's Unicode-cell representatives (length <= 2 with one
representative per UTF-8 length of each cell)."""
import importlib.util
import os

import pytest

from conftest import ROOT, needs_shared

spec = importlib.util.spec_from_file_location("diff_pretokenize", os.path.join(ROOT, "tools", "diff_pretokenize.py"))
D = importlib.util.module_from_spec(spec)
spec.loader.exec_module(D)

TIKTOKEN = ["r50k_base", "cl100k_base", "o200k_base"]  # p50k_base has r50k's pattern
HF = ["hf:llama3", "hf:deepseek", "hf:anthropic"]
OTHER = ["llama3", "qwen2", "hf-qwen2"]
_subjects = {}


def subject(name):
    if name not in _subjects:
        _subjects[name] = D.Subject(name)
    return _subjects[name]


def quiet(*a, **k):
    pass


@needs_shared
@pytest.mark.parametrize("name,every,whole_limit", [("o200k_base", 40, None), ("cl100k_base", 80, 1_500_000),
                                                    ("r50k_base", 80, 1_500_000)])
def test_corpus_whole_files_and_lines_tiktoken(name, every, whole_limit):
    D.check_corpus(subject(name), every=every, whole_limit=whole_limit, log=quiet)


@needs_shared
@pytest.mark.parametrize("name", HF)
def test_corpus_hf_tokenizer_json(name):
    # regex-module reference on whole files and every 25th line; HF tokenizers itself on the
    # multilingual and stress files and on the lines the regex module cannot judge
    D.check_corpus(subject(name), every=60, whole_limit=1_000_000, engine_whole=False, log=quiet)
    D.check_corpus(subject(name), every=10 ** 9, whole_limit=600_000, engine_whole=True,
                   corpora=["multilingual", "stress"], log=quiet)


@needs_shared
@pytest.mark.parametrize("name", OTHER)
def test_corpus_other_named_patterns(name):
    D.check_corpus(subject(name), every=50, whole_limit=300_000, engine_whole=False,
                   corpora=["english", "multilingual", "code", "stress"], log=quiet)


@pytest.mark.parametrize("name,step,alone_step,engine_step", [
    ("o200k_base", 1, 1, 1), ("cl100k_base", 1, 17, 1), ("r50k_base", 2, 17, 1),
    ("hf:llama3", 3, 17, 41), ("hf:deepseek", 3, 17, 41), ("hf:anthropic", 3, 17, 41),
])
def test_every_code_point(name, step, alone_step, engine_step):
    """U+0000..U+10FFFF (no surrogates; every `step`-th one) between a letter, a digit, a space and a
    newline, and alone.  tools/diff_pretokenize.py runs all of them, for every pre-tokenizer."""
    D.check_codepoints(subject(name), step=step, contexts=D.COMPACT, alone_step=alone_step, engine_step=engine_step,
                       chunk=50_000, log=quiet)


@pytest.mark.parametrize("name", TIKTOKEN + ["llama3", "qwen2"] + HF)
def test_exhaustive_cell_strings(name):
    n = D.check_cells(subject(name), 4, per_length_upto=2, log=quiet)
    assert n > 10_000
