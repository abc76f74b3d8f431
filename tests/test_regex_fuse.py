"""Consecutive HF Split(Isolated) levels that cut out runs of disjoint character classes run as one level
(fstok.compile.regex_fuse): the same pieces as the levels one after another, on DeepSeek's pre-tokenizer and on
random class-run levels; the fast skip of a level that few ASCII bytes start (16 bytes at a time) finds the
same matches as the byte loop; DeepSeek's ids equal HF tokenizers'."""
import json
import random

import pytest
from conftest import VOCAB, needs_shared, read_corpus

from fstok.compile.regex_fuse import class_run, fuse_class_runs
from fstok.pretokenize import CompiledPattern

DEEPSEEK = f"{VOCAB}/hf/deepseek_tokenizer.json"
ONI = "oniguruma"


def _deepseek_levels():
    with open(DEEPSEEK, encoding="utf-8") as f:
        obj = json.load(f)
    return [(p["pattern"]["Regex"], ONI) for p in obj["pre_tokenizer"]["pretokenizers"] if p["type"] == "Split"]


def _tricky(rng: random.Random, n: int) -> list[str]:
    # digits of several scripts, CJK and kana (with the symbols and the unassigned code points of those blocks),
    # letters, marks, format characters, spaces and line breaks
    alphabet = list("09 a Z\n\r\t.,!'-") + ["\u0660", "\u00b2", "\u2162", "\u3007", "\u4e00", "\u9fa5", "\u3040",
                                            "\u3097", "\u309b", "\u30a0", "\u30fb", "\u30fc", "\u3099", "\u200d",
                                            "\ufeff", "\u0301", "é", "ß", "\U0001d7ce", "\ue000", "\u00a0", "中"]
    out = []
    for _ in range(n):
        k = rng.randrange(0, 80)
        out.append("".join(rng.choice(alphabet) for _ in range(k)))
    return out


def _check_same(levels, texts):
    fused = fuse_class_runs(levels)
    a = CompiledPattern.pipeline(levels)
    b = CompiledPattern.pipeline(fused)
    for t in texts:
        want = a.spans(t)
        assert b.spans(t) == want, (t, fused)
        assert b.reference_spans(t) == want, t
    return fused


@needs_shared
def test_deepseek_levels_fuse_to_two_with_the_same_pieces():
    levels = _deepseek_levels()
    assert len(levels) == 3
    fused = fuse_class_runs(levels)
    assert len(fused) == 2 and fused[1] == levels[2]
    rng = random.Random(5)
    lines = [ln for name in ("multilingual", "code", "chinese_long") for ln in read_corpus(name).split("\n")[:400]]
    _check_same(levels, lines + _tricky(rng, 1500))


def test_class_run_shapes():
    assert class_run(r"\p{N}{1,3}", ONI)[1:] == (1, 3)
    assert class_run(r"[a-z]+", ONI)[1:] == (1, None)
    assert class_run(r"\d", ONI)[1:] == (1, 1)
    for pat in (r"\p{N}{2,3}", r"[a-z]+?", r"\d+(?!x)", r"a|b+", r"\p{N}{1,3}+", r"ab", r"\s+$"):
        assert class_run(pat, ONI) is None, pat
    assert class_run(r"[a-z]+", ONI + "+bytelevel") is None


def test_overlapping_or_other_levels_are_kept():
    lv = [(r"\p{N}{1,3}", ONI), (r"\d+", ONI)]  # overlapping classes: two levels
    assert fuse_class_runs(lv) == lv
    lv = [(r"[a-c]+", ONI), (r"x+|y", ONI), (r"[0-9]", ONI)]  # not adjacent class runs
    assert fuse_class_runs(lv) == lv
    lv = [(r"[a-c]+", ONI), (r"[0-9]{1,2}", ONI), (r"\s+(?!\S)|\S+", ONI)]
    assert len(fuse_class_runs(lv)) == 2


@pytest.mark.parametrize("seed", range(6))
def test_random_class_runs_fuse_exactly(seed):
    rng = random.Random(seed)
    pool = ["[0-9]", r"\p{N}", "[a-f]", "[x-z]", r"[\x{4E00}-\x{9FA5}]", r"\p{Lu}", "[ ]", r"[\n\r]", "[.,!]",
            r"\p{Mn}", "[é]"]
    k = rng.randrange(2, 4)
    classes = rng.sample(pool, k)
    levels = [(c + rng.choice(["", "+", "{1,2}", "{1,3}", "++"]), ONI) for c in classes]
    if rng.random() < 0.5:
        levels.append((r"\s+(?!\S)|\s+|[^\s\p{N}]+|\p{N}", ONI))
    alphabet = "0123456789abcdefxyzABC \n\r.,!é\u0301中\u4e8c\u0661\u00b2-"
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 60))) for _ in range(400)]
    # runs across the 16-byte blocks of the fast skip
    texts += ["a" * n + "1" + "b" * m + "中" for n in range(0, 40, 3) for m in (0, 15, 16, 17)]
    _check_same(levels, texts)


def test_fast_skip_finds_every_match_around_blocks():
    cp = CompiledPattern.compile(r"[0-9]{1,3}|[\x{4E00}-\x{9FA5}]+", ONI, "find")
    for n in range(0, 50):
        for tail in ("7", "中文", "é1", "\u3040", "x"):
            t = "q" * n + tail + " r" * (n % 5) + "42"
            assert cp.spans(t) == cp.reference_spans(t), t


@needs_shared
def test_deepseek_ids_equal_hf():
    from tokenizers import Tokenizer

    import fstok

    tok = fstok.compile(DEEPSEEK)
    hf = Tokenizer.from_file(DEEPSEEK)
    rng = random.Random(11)
    texts = _tricky(rng, 400) + read_corpus("multilingual").split("\n")[:200] + [read_corpus("code")[:20000]]
    for t in texts:
        assert tok.encode(t, allowed_special="all") == hf.encode(t, add_special_tokens=False).ids, t
    assert tok.encode_batch(texts, allowed_special="all", num_threads=1) == \
        [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
