"""fstok.literals.LiteralSet, the leftmost-longest search of added tokens: against a Python `re` alternation
of the literals (longest first, the oracle) on hypothesis sets and texts, and a tokenizer.json with
thousands of added tokens (prefixes of one another, special or not, lstrip / rstrip / single_word,
normalized or raw) through fstok.Tokenizer against HF tokenizers."""
from __future__ import annotations

import json
import os
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import CORPORA, VOCAB, needs_shared, read_corpus

from fstok.literals import LiteralSet


def _oracle(literals, s):
    lits = sorted({x for x in literals if x}, key=lambda x: (-len(x), x))
    if not lits:
        return []
    return [m.span() for m in re.finditer("|".join(re.escape(x) for x in lits), s)]


ALPHABET = "ab]^-\\[.*<>|é\u0301𝔘\x00 "


@given(st.lists(st.text(ALPHABET, max_size=5), max_size=12), st.text(ALPHABET, max_size=60))
@settings(max_examples=400, deadline=None)
def test_matches_equal_the_alternation(literals, text):
    ls = LiteralSet(literals)
    got = list(ls.finditer(text))
    assert got == _oracle(literals, text)
    assert ls.search(text) == (got[0] if got else None)
    assert bool(ls) == any(literals)


@given(st.lists(st.text("ab", min_size=1, max_size=4), min_size=1, max_size=8), st.text("ab", max_size=30),
       st.integers(0, 30))
@settings(max_examples=200, deadline=None)
def test_search_from_a_position(literals, text, pos):
    pos = min(pos, len(text))
    assert list(LiteralSet(literals).finditer(text, pos)) == [(a + pos, b + pos) for a, b in _oracle(literals, text[pos:])]


def test_longest_wins_and_matches_do_not_overlap():
    ls = LiteralSet(["<a", "<ab", "<abc>", "b", ""])
    assert list(ls.finditer("<abc> <ab <abx b")) == [(0, 5), (6, 9), (10, 13), (15, 16)]
    assert list(ls.finditer("<<ab")) == [(1, 4)]
    assert list(LiteralSet([]).finditer("abc")) == [] and not LiteralSet([""])


ROBERTA = os.path.join(VOCAB, "models", "bytelevel-bpe", "roberta-base", "tokenizer.json")
MINILM = os.path.join(VOCAB, "models", "wordpiece", "all-MiniLM-L6-v2", "tokenizer.json")
E5 = os.path.join(VOCAB, "models", "unigram", "multilingual-e5-small", "tokenizer.json")


def _many_added(path, n):
    """The file with n added tokens: families that are prefixes of one another (<x1>, <x1>1, ...),
    special and not, raw and normalized, a few with lstrip / rstrip / single_word.  The ids written in the
    file start 7 past the vocabulary: tokenizers ignores them and numbers the tokens itself."""
    with open(path, encoding="utf-8") as f:
        obj = json.load(f)
    nxt = len(obj["model"]["vocab"]) + 7
    for i in range(n):
        content = f"<x{i // 10}>" + "1" * (i % 10) if i % 3 else f"tok{i}"
        obj["added_tokens"].append({"id": nxt + i, "content": content, "single_word": i % 7 == 1,
                                    "lstrip": i % 11 == 2, "rstrip": i % 13 == 3, "normalized": i % 2 == 0,
                                    "special": i % 5 == 0})
    return obj


@needs_shared
@pytest.mark.parametrize("path", [ROBERTA, MINILM, E5], ids=["roberta", "minilm", "e5"])
def test_thousands_of_added_tokens_equal_hf(path):
    tokenizers = pytest.importorskip("tokenizers")
    import fstok

    s = json.dumps(_many_added(path, 3000))
    ours, ref = fstok.Tokenizer.from_str(s), tokenizers.Tokenizer.from_str(s)
    lines = read_corpus(CORPORA[0]).splitlines()[:40]
    texts = [f"{t[:40]} <x12>111{t[40:80]}tok3 tok30x <x299>1111111111<x5> <x3>1 Tok6{t[80:120]}<x7>" for t in lines]
    texts += ["<x1><x1>1<x1>11", " tok0  tok3x", "<<x29>>", "a tok27 b", ""]
    for t in texts:
        a, b = ours.encode(t), ref.encode(t)
        assert (a.ids, a.offsets, a.tokens) == (b.ids, b.offsets, b.tokens), t
    got, want = ours.encode_batch(texts), ref.encode_batch(texts)
    assert [(e.ids, e.offsets) for e in got] == [(e.ids, e.offsets) for e in want]
