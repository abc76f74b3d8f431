"""Cold pieces of 17-24 bytes (words of scripts without spaces, long words) are merged in the lockstep lanes too
(pc_fill_cold, bpe_piece_cache.h) and stored as long entries of the piece cache: the ids equal the pure-Python
oracle's (rank BPE on each pre-token) and tiktoken's on texts of such pieces, on hypothesis strings, and the lanes
did encode pieces of that length (`_bpe.lanes_filled_long`).  The runs with the lanes off and with a three-line
piece cache are in test_bpe_cold_lanes.py."""
import functools
import random

import pytest
import regex
from bpe_helpers import fstok_encoding, tiktoken_encoding, tiktoken_path
from conftest import needs_shared, read_corpus
from hypothesis import given, settings
from hypothesis import strategies as hs

from fstok.loaders.tiktoken_file import read_tiktoken_ranks
from fstok.reference.bpe import merge_ranks
from fstok.runtime import _bpe

pytestmark = needs_shared

# Letters of several scripts: runs of 6-8 CJK / kana / hangul characters are 18-24 bytes, 9-12 Cyrillic or Arabic
# letters 18-24, long Latin words 17-24; digits and marks make boundaries inside and around them.
SCRIPTS = ["中文字日本語漢国人大学生時間問題", "ひらがなカタカナのをに", "한국어대학교학생시간", "жщзыкпривет",
           "عربيةكتابمدرسة", "abcdefghijklmnopqrstuvwxyz", "éüßñøå"]
ALPHABET = "".join(SCRIPTS) + " 0123'!\n"


def _oracle(name: str, text: str) -> list[int]:
    pat = regex.compile(tiktoken_encoding(name)._pat_str)
    out: list[int] = []
    for m in pat.finditer(text):
        out += _piece(name, m.group().encode())
    return out


@functools.lru_cache(maxsize=200_000)
def _piece(name: str, piece: bytes) -> list[int]:
    ranks = _ranks(name)
    return [ranks[piece]] if piece in ranks else merge_ranks(piece, ranks)


_RANKS: dict = {}


def _ranks(name: str):
    if name not in _RANKS:
        _RANKS[name] = read_tiktoken_ranks(tiktoken_path(name))
    return _RANKS[name]


def _long_words(rnd: random.Random, n: int) -> list[str]:
    """n words whose UTF-8 is 17-24 bytes, each from one script, some with a leading space"""
    out = []
    while len(out) < n:
        script = rnd.choice(SCRIPTS)
        w = "".join(rnd.choice(script) for _ in range(rnd.randint(5, 24)))
        if not 17 <= len(w.encode()) <= 24:
            continue
        out.append((" " if rnd.random() < 0.5 else "") + w)
    return out


@functools.lru_cache(maxsize=None)
def _primer(seed: int) -> str:
    """words the piece cache has not seen, enough of them (well over 1,024 pieces) that most pieces miss it: the
    lanes run while they do"""
    rnd = random.Random(seed)
    short = ["".join(rnd.choice(rnd.choice(SCRIPTS)) for _ in range(rnd.randint(2, 5))) for _ in range(1500)]
    return " ".join(short + _long_words(rnd, 600))


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_long_pieces_in_lanes_match_oracle(name):
    enc = fstok_encoding(name)
    text = _primer(7) + "\n" + "".join(_long_words(random.Random(8), 2000))
    enc.clear_cache()
    before = _bpe.lanes_filled_long()
    got = enc.encode_ordinary(text)
    assert _bpe.lanes_filled_long() - before > 200  # the long lanes ran on these pieces
    assert got == _oracle(name, text)
    assert got == tiktoken_encoding(name).encode_ordinary(text)
    # the second pass hits the long entries the lanes stored
    assert enc.encode_ordinary(text) == got


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_long_pieces_in_lanes_corpus(name):
    """documents of the multilingual and Chinese corpora, one call each, from a cleared cache"""
    enc, ref = fstok_encoding(name), tiktoken_encoding(name)
    before = _bpe.lanes_filled_long()
    for corpus in ("multilingual", "chinese_long"):
        t = read_corpus(corpus)[:40_000]
        enc.clear_cache()
        docs = [t[i:i + 4000] for i in range(0, len(t), 4000)]
        assert [enc.encode_ordinary(d) for d in docs] == [ref.encode_ordinary(d) for d in docs]
    assert _bpe.lanes_filled_long() > before


@settings(max_examples=40, deadline=None)
@given(hs.lists(hs.text(alphabet=ALPHABET, min_size=5, max_size=24), min_size=1, max_size=60))
def test_long_pieces_in_lanes_hypothesis(words):
    text = "".join(words)
    for name in ("cl100k_base", "o200k_base"):
        enc = fstok_encoding(name)
        enc.clear_cache()
        full = _primer(11) + text  # (the same primer each time: its pieces miss again after clear_cache)
        got = enc.encode_ordinary(full)
        assert got == _oracle(name, full)
