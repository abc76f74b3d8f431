"""The naive BPE trainer: the reference every faster trainer is checked against.

Every merge recounts every adjacent pair of every pre-token from scratch, picks the most frequent
pair -- ties broken by the lexicographically greatest pair of byte strings, i.e.
``max(counts.items(), key=lambda kv: (kv[1], kv[0]))`` with ``kv[0] == (bytes_a, bytes_b)`` --
and rewrites every pre-token, merging the pair left to right without overlap.  Like the optimized
trainers it works on the distinct pre-tokens weighted by their frequency ("check each
complete word" once); that changes no result, only the constant factor.

`train_naive_texts` is the whole reference pipeline on in-memory texts: special-token splitting and
pre-tokenization with the `regex` module (no streaming, no compiled DFA, no native code).
"""
from __future__ import annotations

from collections import Counter
from typing import Iterable, Mapping

from .pretok import resolve_pattern, special_splitter, split_regex


def naive_merges(word_counts: Mapping[bytes, int], num_merges: int) -> list[tuple[bytes, bytes]]:
    """Up to `num_merges` merges learned from {pre-token bytes: frequency}, recounting every merge."""
    words: dict[tuple[bytes, ...], int] = {}
    for w, f in word_counts.items():
        key = tuple(bytes([c]) for c in w)
        words[key] = words.get(key, 0) + f
    merges: list[tuple[bytes, bytes]] = []
    for _ in range(num_merges):
        counts: dict[tuple[bytes, bytes], int] = {}
        for w, f in words.items():
            for pair in zip(w, w[1:]):
                counts[pair] = counts.get(pair, 0) + f
        if not counts:
            break
        pair, _count = max(counts.items(), key=lambda kv: (kv[1], kv[0]))
        a, b = pair
        new = a + b
        merges.append(pair)
        rewritten: dict[tuple[bytes, ...], int] = {}
        for w, f in words.items():
            if len(w) > 1:
                out = []
                i = 0
                n = len(w)
                while i < n:
                    if i + 1 < n and w[i] == a and w[i + 1] == b:
                        out.append(new)
                        i += 2
                    else:
                        out.append(w[i])
                        i += 1
                w = tuple(out)
            rewritten[w] = rewritten.get(w, 0) + f
        words = rewritten
    return merges


def count_texts_naive(texts: Iterable[str], pattern: str, special_tokens=()) -> Counter:
    """{pre-token bytes: frequency} of whole texts: split at special tokens, then the regex oracle."""
    _, rx = resolve_pattern(pattern)
    split = special_splitter(special_tokens)
    counts: Counter = Counter()
    for text in texts:
        for piece in split(text):
            for tok in split_regex(rx, piece):
                counts[tok.encode("utf-8")] += 1
    return counts


def train_naive_texts(
    texts: Iterable[str], vocab_size: int, pattern: str = "r50k_base", special_tokens=("<|endoftext|>",)
) -> list[tuple[bytes, bytes]]:
    """The reference merge list for `texts` (vocab_size counts 256 bytes + specials + merges)."""
    specials = list(dict.fromkeys(special_tokens))
    n = vocab_size - 256 - len(specials)
    if n < 0:
        raise ValueError(f"vocab_size {vocab_size} is smaller than 256 bytes + {len(specials)} special tokens")
    return naive_merges(count_texts_naive(texts, pattern, specials), n)
