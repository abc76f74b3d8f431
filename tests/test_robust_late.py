"""Two unbounded or silent paths closed late: training's regex backend runs under a time budget, and
fstok.pretokenize refuses a name it does not know instead of reading it as a literal regex."""
import time

import pytest

import fstok
from fstok.train import pretok


def test_training_regex_backend_is_bounded(monkeypatch):
    # a lookbehind keeps the pattern away from the DFA compiler, so training would run the regex module,
    # and (?:a|aa)+ backtracks exponentially on a run of a's
    monkeypatch.setattr(pretok, "REGEX_BUDGET_S", 0.3)
    t = time.perf_counter()
    with pytest.raises(ValueError, match="catastrophic backtracking"):
        fstok.train_bpe(["a" * 60 + "\n"], vocab_size=300, pattern=r"(?:a|aa)+(?<=a)b|[\s\S]")
    assert time.perf_counter() - t < 30


def test_training_regex_backend_still_trains_on_ordinary_patterns(monkeypatch):
    monkeypatch.setattr(pretok, "REGEX_BUDGET_S", 0.3)
    # the regex backend (the training oracle) under the budget trains as before on an ordinary pattern
    tok = fstok.train_bpe(["hello hello world\n"] * 20, vocab_size=260, pattern="r50k_base", pretokenizer="regex")
    assert tok.decode(tok.encode("hello world")) == "hello world"


def test_pretokenize_refuses_unknown_names():
    with pytest.raises(ValueError, match="unknown encoding name 'gpt4'"):
        fstok.pretokenize("gpt4", "hello world")
    assert fstok.pretokenize("(?:gpt4)", "a gpt4 b") == [(2, 6)]
    assert fstok.pretokenize("cl100k_base", "hello world") == [(0, 5), (5, 11)]


def test_atomic_group_around_one_repetition_is_its_possessive_form():
    # HF's tokenizer.json spells tiktoken's possessive \p{N}{1,3}+ as the atomic group (?>\p{N}{1,3})
    from fstok.pretokenize import CompiledPattern

    a = CompiledPattern.compile(r"(?>\p{N}{1,3})|\p{L}+|\s+|[^\s\p{L}\p{N}]+", "oniguruma")
    b = CompiledPattern.compile(r"\p{N}{1,3}+|\p{L}+|\s+|[^\s\p{L}\p{N}]+", "rust-regex")
    text = "abc 1234567 x9 ٣٤٥٦ 12"
    assert a.spans(text) == b.spans(text)
    with pytest.raises(ValueError, match="atomic"):
        CompiledPattern.compile(r"(?>ab|a)c", "oniguruma")


def test_id_bound_reads_decode_only_ids_the_right_way_round():
    # decode-only entries are {id: bytes}; the bound check once read them as {token: id} and refused DeepSeek
    from fstok.loaders.bpe_source import BPESource, PreTokStage

    ranks = {bytes([b]): b for b in range(256)}
    src = BPESource(name="t", tokens=ranks, stages=[PreTokStage(r"\S+|\s+", False)], extra_decode={300: b"<x>"})
    src.check()
    bad = BPESource(name="t", tokens=ranks, stages=[PreTokStage(r"\S+|\s+", False)], extra_decode={10**9: b"<x>"})
    with pytest.raises(ValueError, match="outside"):
        bad.check()
