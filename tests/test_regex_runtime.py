"""Public API of the pre-tokenizer: names, regex strings, HF configs, errors, linear time, threads."""
import json
import os
import threading
import time

import pytest
import regex

import fstok
from fstok.pretokenize import (CL100K_PAT, HF_BYTELEVEL_PAT, NAMED_PATTERNS, O200K_PAT, R50K_PAT, CompiledPattern,
                               get_pattern, hf_pre_tokenizer_levels, pretokenize)

from conftest import VOCAB, needs_shared


def test_pretokenize_names_and_patterns():
    text = "Hello world! It's 2024...  \n\n  done"
    for name, pat in [("r50k_base", R50K_PAT), ("p50k_base", R50K_PAT), ("cl100k_base", CL100K_PAT),
                      ("o200k_base", O200K_PAT)]:
        want = [m.span() for m in regex.finditer(pat, text)]
        assert fstok.pretokenize(name, text) == want
        assert pretokenize(pat, text) == want  # the same regex given as a string
    assert pretokenize(r"\d+", "a12b3") == [(1, 3), (4, 5)]
    assert pretokenize(r"\p{N}{1,3}+", "12345", dialect="oniguruma") == [(0, 5)]


def test_patterns_are_tiktokens(monkeypatch):
    import tiktoken_ext.openai_public as op

    monkeypatch.setattr(op, "load_tiktoken_bpe", lambda *a, **k: {})
    monkeypatch.setattr(op, "data_gym_to_mergeable_bpe_ranks", lambda *a, **k: {})
    for name in ("gpt2", "r50k_base", "p50k_base", "p50k_edit", "cl100k_base", "o200k_base", "o200k_harmony"):
        assert getattr(op, name)()["pat_str"] == NAMED_PATTERNS[name].levels[0][0], name
        assert NAMED_PATTERNS[name].levels[0][1] == "rust-regex"


def test_hf_bytelevel_regex_is_the_gpt2_pattern():
    from tokenizers import pre_tokenizers

    bl = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    text = "Hello  world's 123\n\n\tx  "
    got = get_pattern("hf-bytelevel").spans(text)
    assert got == [o for _, o in bl.pre_tokenize_str(text)]
    assert HF_BYTELEVEL_PAT.startswith("'s|'t|'re")


@needs_shared
@pytest.mark.parametrize("fname,n_levels", [("hf/deepseek_tokenizer.json", 3), ("hf/anthropic_tokenizer.json", 1),
                                             ("hf-derived/llama3.tokenizer.json", 1)])
def test_tokenizer_json_pre_tokenizers(fname, n_levels):
    from tokenizers import Tokenizer

    path = os.path.join(VOCAB, fname)
    cp = CompiledPattern.from_tokenizer_json(path)
    assert len(cp.levels) == n_levels and cp.mode == "split"
    pt = Tokenizer.from_file(path).pre_tokenizer
    text = "DeepSeek's 中文テスト 12345 x  \n\n  ¡Hola! 3.14159 ──> don't\t\tstop "
    assert cp.spans(text) == [o for _, o in pt.pre_tokenize_str(text)]


def test_hf_config_errors():
    with pytest.raises(ValueError, match="not supported"):
        hf_pre_tokenizer_levels({"type": "Whitespace"})
    with pytest.raises(ValueError, match="Isolated"):
        hf_pre_tokenizer_levels({"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Removed"})
    with pytest.raises(ValueError, match="add_prefix_space"):
        hf_pre_tokenizer_levels({"type": "ByteLevel", "add_prefix_space": True})
    assert hf_pre_tokenizer_levels({"type": "ByteLevel", "use_regex": False}) == []
    assert hf_pre_tokenizer_levels({"type": "Split", "pattern": {"String": "a.b"}, "behavior": "Isolated"})[0][0] == r"a\.b"
    with pytest.raises(ValueError, match="no regex"):
        CompiledPattern.from_hf_pre_tokenizer({"type": "ByteLevel", "use_regex": False})


def test_offsets_are_characters_not_bytes():
    text = "héllo wörld 日本語 \U0001F600x"
    sp = pretokenize("o200k_base", text)
    assert [text[a:b] for a, b in sp] == [m.group() for m in regex.finditer(O200K_PAT, text)]
    assert get_pattern("o200k_base").byte_spans(text)[-1].tolist() == [len(text[:-1].encode()), len(text.encode())]
    # bytes input gives byte offsets
    assert get_pattern("o200k_base").spans(text.encode("utf-8")) == [tuple(x) for x in
                                                                    get_pattern("o200k_base").byte_spans(text).tolist()]


def test_errors_are_clear():
    with pytest.raises(TypeError, match="str"):
        pretokenize("o200k_base", b"bytes")
    with pytest.raises(TypeError, match="str"):
        pretokenize("o200k_base", None)
    with pytest.raises(TypeError, match="encoding name or a regex"):
        pretokenize(42, "text")
    with pytest.raises(ValueError, match="lone surrogate.*index 3"):
        pretokenize("o200k_base", "abc\ud800def")
    with pytest.raises(ValueError, match="lone surrogate"):
        get_pattern("cl100k_base").reference_spans("\udfff")
    with pytest.raises(ValueError, match="dialect"):
        pretokenize(r"\w+", "x", dialect="perl")
    with pytest.raises(ValueError, match="position"):
        pretokenize(r"(?<=x)y", "xy")
    with pytest.raises(ValueError, match="unknown pattern name"):
        CompiledPattern.named("o300k")
    with pytest.raises(TypeError):
        get_pattern("o200k_base").byte_spans(3.5)


def test_empty_and_tiny_inputs():
    for name in ("r50k_base", "cl100k_base", "o200k_base", "hf-llama3"):
        assert pretokenize(name, "") == []
        assert pretokenize(name, " ") == [(0, 1)]
        assert pretokenize(name, "\n") == [(0, 1)]


def _best(fn, reps=3):
    b = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        b = min(b, time.perf_counter() - t)
    return b


@pytest.mark.parametrize("name", ["r50k_base", "cl100k_base", "o200k_base", "hf-llama3"])
def test_adversarial_inputs_are_linear(name):
    cp = get_pattern(name)
    sp = cp.spanner
    for unit in ["a", " ", "\n", "'", "1", "\u3000", " \t", "\r\n", "!", "\u0301", "'s", "a1"]:
        big = unit * ((1 << 20) // len(unit.encode()))
        small = big[: len(big) // 16]
        t_big = _best(lambda: sp.count(big))
        t_small = _best(lambda: sp.count(small))
        # linear: 16x the input may not cost more than ~16x (generous slack for a loaded machine)
        assert t_big < 40 * t_small + 0.05, (unit, t_big, t_small)
        if unit in ("a", " ", "'"):
            assert cp.spans(big) == [m.span() for m in regex.finditer(cp.levels[0].pattern, big)] or cp.mode == "split"


def test_long_whitespace_runs_and_lookahead_at_the_end():
    text = " " * 100_000 + "x" + " " * 100_000
    assert pretokenize("o200k_base", text) == [(0, 99_999), (99_999, 100_001), (100_001, 200_001)]
    assert pretokenize("r50k_base", text) == [m.span() for m in regex.finditer(R50K_PAT, text)]


def test_threads_share_one_compiled_pattern():
    cp = get_pattern("cl100k_base")
    text = "The quick brown fox's 12345 jumps   over\n\n the lazy dog. " * 2000
    want = cp.spans(text)
    errors = []

    def work():
        try:
            for _ in range(5):
                assert cp.spans(text) == want
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors


def test_named_patterns_compile_and_are_cached():
    a = get_pattern("o200k_base")
    assert get_pattern("o200k_base") is a
    assert repr(a).startswith("<CompiledPattern 'o200k_base'")
    for name in NAMED_PATTERNS:
        cp = get_pattern(name)
        assert cp.levels[0].unicode == "16.0.0"
    assert json.loads(a.sections()["dfa.source"])["levels"][0]["dialect"] == "rust-regex"
