"""Dead boundaries (lib_bpe.c encode_segmented, bpe.h bpe_seg_cross): a boundary between two bytes of a pre-token
that no internal token can span is never crossed by a merge, so BPE of the pre-token is BPE of its segments, and a
pre-token with a dead boundary is not one token (its whole-span lookup is skipped).

The rule, per boundary b (between s[b-1] and s[b]): a spanning token contains the bigram s[b-1]s[b]; it starts at
b-1 (the bigram starts some token) or contains s[b-2..b]; it ends at b (the bigram ends some token) or contains
s[b-1..b+1].  The C tables are built from the model at load time (bigram flags, a bloom filter of trigrams: false
positives only make fewer boundaries dead).  Here:
* the rule itself in Python, from the rank files, against the oracle: BPE(piece) == concat(BPE(segment));
* the runtime (encode_piece mode 0 = the runtime's own choice, the path that segments) against the pure-Python
  oracle (`merge_ranks`) and the heap encoder, on random strings of the adversarial pools (ASCII punctuation and
  letters, Latin-1/extended, CJK, Cyrillic, random bytes, digits), of lengths around the special cases (segments of
  1-3 bytes, the 64-boundary scan, short_max / hash_max, the 128-byte window);
* whole texts (pieces through the piece cache and the memo, several passes, batches) against tiktoken.
"""
import functools
import random

import pytest
from bpe_helpers import fstok_encoding, tiktoken_encoding, tiktoken_path
from conftest import needs_shared

from fstok.reference.bpe import merge_ranks
from fstok.loaders.tiktoken_file import read_tiktoken_ranks

pytestmark = needs_shared

HEAP = 3
NAMES = ["r50k_base", "p50k_base", "cl100k_base", "o200k_base"]


def _pool(rnd: random.Random) -> list[str]:
    """the benchmark's pool of random non-space characters (tools/bench_bpe.py _adversarial)"""
    return ([chr(c) for c in range(0x21, 0x7F)] + [chr(rnd.randint(0xA1, 0x2FF)) for _ in range(200)]
            + [chr(rnd.randint(0x4E00, 0x9FFF)) for _ in range(200)] + [chr(rnd.randint(0x400, 0x4FF)) for _ in range(100)])


def _strings(seed: int, count: int) -> list[bytes]:
    """hypothesis-style random pieces: mixed pools, words glued to junk (live and dead boundaries side by side),
    random bytes, lengths around the special cases"""
    rnd = random.Random(seed)
    pool = _pool(rnd)
    words = ["the", "ing", "tion", "中文", "字符", "привет", "ñandú", "12345", "0000", "  ", "!!", "...", "é"]
    alphabets = ["".join(pool), "aé中ж!", "".join(chr(c) for c in range(0x21, 0x7F)), "0123456789",
                 "".join(chr(c) for c in range(0xA1, 0x180)), "".join(chr(rnd.randint(0x4E00, 0x9FFF)) for _ in range(30))]
    out = []
    for _ in range(count):
        n = rnd.choice([1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 23, 24, 25, 40, 63, 64, 65, 66, 100, 127, 128, 129, 200, 400])
        kind = rnd.random()
        if kind < 0.15:
            b = bytes(rnd.randint(0, 255) for _ in range(n))
        elif kind < 0.45:
            parts = []
            while sum(map(len, parts)) < n:
                parts.append(rnd.choice(words) if rnd.random() < 0.4 else rnd.choice(pool))
            b = "".join(parts).encode()[:n]
        else:
            a = rnd.choice(alphabets)
            b = "".join(rnd.choice(a) for _ in range(n)).encode()[:n]
        out.append(b)
    return out


@functools.lru_cache(maxsize=None)
def _ranks(name: str) -> dict:
    return read_tiktoken_ranks(tiktoken_path(name))


@functools.lru_cache(maxsize=None)
def _grams(name: str):
    big, start, end, tri = set(), set(), set(), set()
    for t in _ranks(name):
        if len(t) >= 2:
            start.add(t[:2])
            end.add(t[-2:])
        big.update(t[i:i + 2] for i in range(len(t) - 1))
        tri.update(t[i:i + 3] for i in range(len(t) - 2))
    return big, start, end, tri


def _dead(name: str, s: bytes) -> list[int]:
    big, start, end, tri = _grams(name)
    out = []
    for b in range(1, len(s)):
        bg = s[b - 1:b + 1]
        cross = bg in big and (bg in start or (b >= 2 and s[b - 2:b + 1] in tri)) and \
            (bg in end or (b + 1 < len(s) and s[b - 1:b + 2] in tri))
        if not cross:
            out.append(b)
    return out


@pytest.mark.parametrize("name", ["r50k_base", "o200k_base"])
def test_dead_boundary_rule(name):
    """the rule, in Python: no merge of the oracle crosses a dead boundary (BPE is the concatenation of the
    segments' BPE), and the adversarial text has many dead boundaries"""
    ranks = _ranks(name)
    dead_total = bounds = 0
    for s in _strings(11, 250):
        if len(s) > 130:
            continue
        cuts = _dead(name, s)
        dead_total += len(cuts)
        bounds += max(len(s) - 1, 0)
        edges = [0] + cuts + [len(s)]
        want = merge_ranks(s, ranks)
        assert want == [t for a, b in zip(edges, edges[1:]) for t in merge_ranks(s[a:b], ranks)], s
    assert dead_total > bounds // 4


@pytest.mark.parametrize("name", NAMES)
def test_segmented_pieces_match_reference(name):
    tok = fstok_encoding(name)
    ranks = _ranks(name)
    for s in _strings(len(name), 500):
        want = [ranks[s]] if s in ranks else merge_ranks(s, ranks)
        assert tok._model.encode_piece(s, 0) == want, s
        if s not in ranks and len(s) > 1:
            assert tok._model.encode_piece(s, HEAP) == want, s


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_long_spans_with_dead_boundaries(name):
    """long pieces (letter runs of random CJK / Latin, several windows) against the heap encoder, with a few dead
    boundaries far apart and long live runs between them"""
    tok = fstok_encoding(name)
    rnd = random.Random(5)
    pool = _pool(rnd)
    for _ in range(30):
        live = "".join(rnd.choice("abcdefghijklmnop") for _ in range(rnd.randint(50, 300)))
        s = (live + "".join(rnd.choice(pool) for _ in range(rnd.randint(1, 8))) + live[::-1]).encode()
        assert tok._model.encode_piece(s, 0) == tok._model.encode_piece(s, HEAP), s


@pytest.mark.parametrize("name", NAMES)
def test_whole_texts_match_tiktoken(name):
    """the benchmark's kind of text: pieces through the piece cache, the memo (several passes: hits, skips), and
    batches; mixed with natural text"""
    tok, ref = fstok_encoding(name), tiktoken_encoding(name)
    rnd = random.Random(9)
    pool = _pool(rnd)
    rand = "".join(rnd.choice(pool) for _ in range(40_000))
    mixed = " ".join(s.decode("utf-8", "replace") for s in _strings(3, 300))
    for text in (rand, mixed):
        want = ref.encode_ordinary(text)
        for _ in range(3):
            assert tok.encode_ordinary(text) == want
        tok.clear_cache()
        assert tok.encode_ordinary(text) == want
    texts = [rand[i:i + 500] for i in range(0, 20_000, 500)]
    assert tok.encode_ordinary_batch(texts, num_threads=2) == [ref.encode_ordinary(t) for t in texts]
