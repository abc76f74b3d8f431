"""Merge sequences: the optimized trainers (native C and pure Python) against the lecture's naive
reference, the documented tie-break rule, and HF's BpeTrainer (tie_break="hf")."""
import random

import pytest
from conftest import needs_shared, read_corpus

from fstok.train import as_dict, count_corpus, merge_loop, naive_merges, train_bpe, train_naive_texts
from fstok.train.core import _native

BACKENDS = ["python"] + (["native"] if _native() is not None else [])


def _merges(texts, vocab_size, pattern="r50k_base", specials=("<|endoftext|>",), backend="auto", tie_break="bytes"):
    tok = train_bpe(texts, vocab_size, pattern=pattern, special_tokens=specials, backend=backend, tie_break=tie_break)
    return tok.merges


# ----------------------------------------------------------------------------- tie-breaking

def test_tie_break_lexicographically_greatest_pair():
    # every pair occurs once: the greatest (bytes(a), bytes(b)) wins
    for backend in BACKENDS:
        assert _merges(["ab cd"], 258, specials=(), backend=backend)[0] == (b"c", b"d")
        # (b" ", b"c") vs (b"c", b"d") vs (b"a", b"b"): "c" > " "
        assert _merges(["ab zz"], 258, specials=(), backend=backend)[0] == (b"z", b"z")


def test_tie_break_compares_byte_strings_not_ids():
    # (b,a) merges first (count 3) into the new token b"ba" (id 256); then (b"ba", b"x") and
    # (b"c", b"y") tie at 2: the byte strings decide (b"c" > b"ba"), not the token ids.
    texts = ["bax bax ba cy cy"]
    for backend in BACKENDS:
        m = _merges(texts, 256 + 3, pattern=r"\w+|\s+|[^\w\s]+", specials=(), backend=backend)
        assert m == [(b"b", b"a"), (b"c", b"y"), (b"ba", b"x")]
        assert m == train_naive_texts(texts, 256 + 3, pattern=r"\w+|\s+|[^\w\s]+", special_tokens=())


def test_overlapping_pairs_merge_left_to_right():
    # "aaaaa" -> (a,a) merged left to right: aa aa a; counts weighted by frequency
    for backend in BACKENDS:
        m = _merges(["aaaaa aaaaa aaa"], 256 + 3, specials=(), backend=backend)
        assert m == train_naive_texts(["aaaaa aaaaa aaa"], 256 + 3, special_tokens=())
        assert m[0] == (b"a", b"a")


def test_special_tokens_are_not_merged_or_counted():
    texts = ["<|endoftext|>" * 50 + "ab"]
    for backend in BACKENDS:
        m = _merges(texts, 258, backend=backend)
        assert m == [(b"a", b"b")]


# ----------------------------------------------------------------------------- naive == optimized

def _random_corpus(rng: random.Random, n_docs: int) -> list[str]:
    alphabet = rng.choice(["ab", "abc", "ab c", "aab  \n", "xyz!?' 12", "éèa b", "中文 a"])
    docs = []
    for _ in range(n_docs):
        n = rng.randint(0, 60)
        docs.append("".join(rng.choice(alphabet) for _ in range(n)))
    return docs


@pytest.mark.parametrize("seed", range(40))
def test_random_small_corpora_all_merges(seed):
    rng = random.Random(seed)
    docs = _random_corpus(rng, rng.randint(1, 12))
    pattern = rng.choice(["r50k_base", "cl100k_base", "o200k_base", r"\S+|\s+", r"[^ ]+| "])
    big = 256 + 400  # more than can be merged: run to exhaustion
    ref = train_naive_texts(docs, big, pattern=pattern, special_tokens=())
    cnt = count_corpus(docs, pattern, ())
    for backend in BACKENDS:
        got, _ = merge_loop(cnt, big - 256, backend=backend)
        assert got == ref, (seed, backend, docs, pattern)


@needs_shared
@pytest.mark.parametrize(
    "corpus,pattern,size,merges",
    [
        ("english", "r50k_base", 60_000, 400),
        ("english", "o200k_base", 40_000, 300),
        ("multilingual", "cl100k_base", 60_000, 400),
        ("code", "cl100k_base", 40_000, 300),
        ("chinese_long", "o200k_base", 30_000, 300),
        ("stress", "r50k_base", 40_000, 300),
    ],
)
def test_shared_corpus_slices_match_naive(corpus, pattern, size, merges):
    text = read_corpus(corpus)[:size]
    specials = ("<|endoftext|>",)
    ref = train_naive_texts([text], 256 + 1 + merges, pattern=pattern, special_tokens=specials)
    counts = count_corpus([text], pattern, specials, pretokenizer="regex")
    assert as_dict(counts) == {k: v for k, v in naive_count(text, pattern, specials).items()}
    for backend in BACKENDS:
        got, mc = merge_loop(counts, merges, backend=backend)
        assert got == ref
        # the count of the best pair never increases: new pairs are bounded by the merged pair's count
        assert all(c >= 1 for c in mc) and mc == sorted(mc, reverse=True)
    # and the full public pipeline (DFA pre-tokenizer when available, native loop)
    assert train_bpe([text], 256 + 1 + merges, pattern=pattern).merges == ref


def naive_count(text, pattern, specials):
    from fstok.train.naive import count_texts_naive

    return count_texts_naive([text], pattern, specials)


def test_naive_merges_direct():
    wc = {b"hello": 3, b"help": 2, b"lo": 5}
    m = naive_merges(wc, 10)
    assert m[0] == (b"l", b"o")  # l,o: 3+5=8
    cnt = {k: v for k, v in wc.items()}
    for backend in BACKENDS:
        assert merge_loop(cnt, 10, backend=backend)[0] == m


def test_merge_counts_are_reported():
    tok = train_bpe(["ab ab ab cd cd"], 260, special_tokens=())
    assert tok.merges[0] == (b" ", b"a") or tok.merges[0] == (b"a", b"b")
    assert tok.merge_counts[0] == 3
    assert len(tok.merge_counts) == len(tok.merges)


def test_64bit_counts():
    # frequencies beyond 2**32 must not wrap
    big = 5_000_000_000
    wc = {b"ab": big, b"cd": big - 1, b"abcd": 1}
    for backend in BACKENDS:
        merges, counts = merge_loop(wc, 3, backend=backend)
        assert merges[0] == (b"a", b"b") and counts[0] == big + 1
        assert merges[1] == (b"c", b"d") and counts[1] == big


# ----------------------------------------------------------------------------- HF BpeTrainer

@needs_shared
@pytest.mark.parametrize("pattern", ["r50k_base", "cl100k_base", "o200k_base"])
def test_hf_tie_break_reproduces_hf_bpetrainer(pattern):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import Regex, models, pre_tokenizers, trainers

    from fstok.train.export import byte_level, hf_pattern
    from fstok.train.pretok import PATTERNS

    text = read_corpus("english")[:300_000] + read_corpus("multilingual")[:60_000]
    hf = tokenizers.Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(hf_pattern(PATTERNS[pattern])), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tr = trainers.BpeTrainer(
        vocab_size=3000, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    hf.train_from_iterator([text], tr)
    import json

    hf_merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in json.loads(hf.to_str())["model"]["merges"]]
    mine = train_bpe([text], 3000, pattern=pattern, tie_break="hf")
    assert [(byte_level(a), byte_level(b)) for a, b in mine.merges] == hf_merges
    # fstok's own rule differs only where counts tie
    ours = train_bpe([text], 3000, pattern=pattern)
    i = next(i for i, (x, y) in enumerate(zip(ours.merges, mine.merges)) if x != y)
    assert ours.merge_counts[i] == mine.merge_counts[i]
