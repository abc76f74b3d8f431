"""BPE compiler: a `BPESource` -> the flat tables of a BPE artifact (kind "bpe").

Tables (all little-endian flat arrays, see `fstok/runtime/csrc/bpe.h` for how C reads them):

  dec_bytes, dec_off, dec_kind   external id -> bytes (token byte arena + offsets), kind
                                 (0 unused id, 1 mergeable, 2 special/added token, 3 decode-only)
  int_ext                        internal id -> external id.  Internal ids are the BPE-reachable
                                 tokens sorted by merge rank, so "rank" and "merged internal id"
                                 are the same number.
  int_info                       4 words per internal token (one cache line for all of them):
                                 byte length, canonical merge left, right (leaf: itself), and
                                 next_prefix (longest reachable proper prefix, or 0xFFFFFFFF)
  pair_tab                       (left, right) -> merged internal id (= rank): one u64 per slot,
                                 left << 43 | right << 22 | merged; open addressing on the exact
                                 42-bit key (no false positives, no collisions left), load <= 1/2
  pair_bloom                     bitset over hashed pair keys: a clear bit proves a pair absent
                                 (small enough for L2; most lookups in the encoders are misses)
  pair_hot                       the pairs of the HOT_PAIRS lowest-ranked merges again, probed first
  byte_pair                      the same for two single-byte tokens, as a dense 256x256 table
  span_tab                       whole-span hash: bytes -> external id (single-token fast path);
                                 2 words per slot: the first 8 bytes inline, id | length << 32
  span_hot                       the same for the HOT_TOKENS lowest-ranked tokens, probed first
  trie                           double-array trie of the internal tokens (longest-prefix match):
                                 (base, check, token) per node
  byte_tok                       byte -> internal id
  span_bloom                     blocked bloom filter over the bytes of every token up to max_span_len:
                                 a clear bit proves a span is in neither span table
  seg_big, seg_tri               segment tables: per byte bigram, inside / starts / ends some internal
                                 token; a bitset of the byte trigrams inside one (dead boundaries, bpe.h)

Canonical merges: BPE (both tiktoken's rank semantics and HF's merge-list semantics) only ever
forms a token t from the last merge of BPE run on t's own bytes ("every intermediate part encodes
to itself"), so keeping one pair per token and dropping tokens that do not encode to themselves
gives exactly the same encodings (the latter stay reachable through the whole-span lookup when the
source semantics allow it).  The compiler checks at the end that every reachable token encodes to
itself with each runtime encoder.
"""
from __future__ import annotations

import json
from typing import Any

import numpy as np

from ..loaders.bpe_source import BPESource
from ..validate_bpe import BPE_META_VERSION as META_VERSION

# Encoder choice for a pre-token of n bytes (measured on the shared corpora, see tools/bench_bpe.py):
# n <= HASH_MAX: whole-span hash lookup first; not a token and n <= SHORT_MAX (SHORT_MAX_MB when the
# span ends in a non-ASCII byte, i.e. multi-byte scripts): the O(n^2) sweep; otherwise the linear
# backtracking encoder (or the heap encoder for vocabularies where backtracking is not valid).
DEFAULT_SHORT_MAX = 16
DEFAULT_SHORT_MAX_MB = 4
DEFAULT_HASH_MAX = 24
HOT_TOKENS = 16384  # tokens in the small first-probe span table (512 KiB)
HOT_PAIRS = 32768  # merges (by rank) in the small first-probe pair table (<= 512 KiB)



def _native():
    from ..runtime import _bpe

    return _bpe


def reference_splits(tokens: dict[bytes, int], merges: list[tuple[bytes, bytes]] | None):
    """Pure-Python canonical splits (the oracle for `_bpe.build_splits`).

    Returns {token id: (left id, right id, rank)} for reachable merged tokens, and the list of
    unreachable token ids."""
    rules = None
    if merges is not None:
        rules = {}
        for k, (a, b) in enumerate(merges):
            rules[(tokens[a], tokens[b])] = k
    pair: dict[tuple[int, int], tuple[int, int]] = {}
    res: dict[int, tuple[int, int, int]] = {}
    unreachable: list[int] = []
    for tb in sorted(tokens, key=len):
        t = tokens[tb]
        if len(tb) == 1:
            continue
        ids = [tokens[tb[i : i + 1]] for i in range(len(tb))]
        while len(ids) > 2:
            best, bi = None, -1
            for i in range(len(ids) - 1):
                r = pair.get((ids[i], ids[i + 1]))
                if r is not None and (best is None or r[0] < best[0]):
                    best, bi = r, i
            if best is None:
                break
            ids[bi : bi + 2] = [best[1]]
        if len(ids) != 2:
            unreachable.append(t)
            continue
        if rules is None:
            rk = t
        else:
            rk = rules.get((ids[0], ids[1]))
            if rk is None:
                unreachable.append(t)
                continue
        pair[(ids[0], ids[1])] = (rk, t)
        res[t] = (ids[0], ids[1], rk)
    return res, unreachable


def _arena(items: list[bytes]) -> tuple[bytes, np.ndarray]:
    off = np.zeros(len(items) + 1, dtype=np.uint32)
    if items:
        off[1:] = np.cumsum([len(b) for b in items], dtype=np.uint64)
    return b"".join(items), off


def compile_source(src: BPESource, short_max: int = DEFAULT_SHORT_MAX, short_max_mb: int = DEFAULT_SHORT_MAX_MB,
                   hash_max: int = DEFAULT_HASH_MAX, hot_tokens: int = HOT_TOKENS,
                   hot_pairs: int = HOT_PAIRS) -> tuple[dict[str, Any], dict[str, Any], str]:
    """Compile a BPE source into (meta, sections, unicode version) for `write_artifact`.

    The pre-tokenizer regex is compiled by the regex DFA compiler and embedded under "dfa."."""
    nat = _native()
    src.check()
    # ---- mergeable tokens, in id order
    items = sorted(src.tokens.items(), key=lambda kv: kv[1])
    tok_bytes = [b for b, _ in items]
    tok_ids = np.array([i for _, i in items], dtype=np.int64)
    arena, off = _arena(tok_bytes)
    if len(arena) >= 2**32:
        raise ValueError(f"{src.name}: token bytes exceed 4 GiB")
    if src.merges is None:
        left, right, mrank = nat.build_splits(arena, off.tobytes(), tok_ids.tobytes(), None)
    else:
        index = {b: k for k, b in enumerate(tok_bytes)}
        rules = np.array([(index[a], index[b], k) for k, (a, b) in enumerate(src.merges)], dtype=np.int64).reshape(-1, 3)
        left, right, mrank = nat.build_splits(arena, off.tobytes(), None, rules.tobytes())
    left = np.frombuffer(left, dtype=np.int32)
    right = np.frombuffer(right, dtype=np.int32)
    mrank = np.frombuffer(mrank, dtype=np.int64)
    lens = np.diff(off).astype(np.int64)
    reachable = mrank != -2
    # ---- internal ids: reachable tokens in merge-rank order
    if src.merges is None:
        key = tok_ids.copy()
    else:
        key = mrank.copy()
        single = lens == 1
        key[single] = np.frombuffer(b"".join(tok_bytes[k] for k in np.nonzero(single)[0]), dtype=np.uint8).astype(np.int64) - 256
    ridx = np.nonzero(reachable)[0]
    order = ridx[np.argsort(key[ridx], kind="stable")]
    n_int = len(order)
    to_int = np.full(len(items), -1, dtype=np.int64)
    to_int[order] = np.arange(n_int)
    int_ext = tok_ids[order].astype(np.uint32)
    int_len = lens[order].astype(np.uint32)
    sl = left[order].astype(np.int64)
    sr = right[order].astype(np.int64)
    merged = sl >= 0
    split_l = np.where(merged, to_int[np.maximum(sl, 0)], np.arange(n_int)).astype(np.uint32)
    split_r = np.where(merged, to_int[np.maximum(sr, 0)], np.arange(n_int)).astype(np.uint32)
    ar_int = np.arange(n_int, dtype=np.uint32)
    backtrack_ok = bool(np.all((split_l[merged] < ar_int[merged]) & (split_r[merged] < ar_int[merged])))
    if n_int >= (1 << 21) - 1:
        raise ValueError(f"{src.name}: {n_int} BPE tokens; at most 2^21 - 2 are supported")
    n_pairs = int(merged.sum())
    bloom_bits = 12
    while (1 << bloom_bits) < 8 * n_pairs and bloom_bits < 22:  # <= 512 KiB, ~5% false positives for o200k
        bloom_bits += 1
    pair_tab, pair_bits, pair_bloom = nat.build_pair_table(
        split_l[merged].tobytes(), split_r[merged].tobytes(), ar_int[merged].tobytes(), bloom_bits
    )
    hot = merged & (ar_int < hot_pairs)
    pair_hot, _, _ = nat.build_pair_table(split_l[hot].tobytes(), split_r[hot].tobytes(), ar_int[hot].tobytes(), 6)
    int_arena, int_off = _arena([tok_bytes[k] for k in order])
    trie, next_prefix = nat.build_trie(int_arena, int_off.tobytes())
    byte_tok = np.zeros(256, dtype=np.uint32)
    for k in order[int_len == 1] if n_int else []:
        byte_tok[tok_bytes[k][0]] = to_int[k]
    # merged id of two single-byte tokens, indexed by (byte1 << 8 | byte2)
    byte_pair = np.full(65536, 0xFFFFFFFF, dtype=np.uint32)
    int_byte = np.zeros(n_int, dtype=np.int64)
    int_byte[byte_tok] = np.arange(256)
    bb = merged & (int_len[split_l] == 1) & (int_len[split_r] == 1)
    byte_pair[(int_byte[split_l[bb]] << 8) | int_byte[split_r[bb]]] = ar_int[bb]
    # ---- external id space: decode table
    dec: dict[int, bytes] = {int(i): b for b, i in items}
    kind: dict[int, int] = {int(i): 1 for _, i in items}
    for s, i in src.special_tokens.items():
        if i not in dec:
            dec[i] = s.encode("utf-8")
            kind[i] = 2
    for a in src.added_tokens:
        if a.id not in dec:
            dec[a.id] = a.content.encode("utf-8")
            kind[a.id] = 2
    for i, b in src.extra_decode.items():
        if i not in dec:
            dec[i] = b
            kind[i] = 3
    n_ext = max(dec) + 1
    dec_list = [dec.get(i, b"") for i in range(n_ext)]
    dec_bytes, dec_off = _arena(dec_list)
    dec_kind = np.zeros(n_ext, dtype=np.uint8)
    for i, k in kind.items():
        dec_kind[i] = k
    # ---- whole-span lookup set
    if src.merges is None or src.ignore_merges:
        span_ids = tok_ids.astype(np.uint32)
        span_lens = lens
    else:
        span_ids = int_ext
        span_lens = int_len.astype(np.int64)
    span_tab = nat.build_span_table(dec_bytes, dec_off.tobytes(), span_ids.tobytes())
    # the most frequent tokens (lowest merge ranks) again in a small table probed first: the hot entries
    # of the big table are spread over many cache lines, here they share few
    hot_ids = int_ext[: min(n_int, hot_tokens)]
    span_hot = nat.build_span_table(dec_bytes, dec_off.tobytes(), np.ascontiguousarray(hot_ids, dtype=np.uint32).tobytes())
    max_span_len = int(span_lens.max()) if len(span_lens) else 0
    span_bloom, seg_big, seg_tri = nat.build_filters(dec_bytes, dec_off.tobytes(), int_ext.tobytes(), max_span_len)

    sections = {
        "dec_bytes": np.frombuffer(dec_bytes, dtype=np.uint8),
        "dec_off": dec_off,
        "dec_kind": dec_kind,
        "int_ext": int_ext,
        "int_info": np.stack(
            [int_len, split_l, split_r, np.frombuffer(next_prefix, dtype=np.uint32)], axis=1
        ).astype(np.uint32).reshape(-1),
        "pair_tab": np.frombuffer(pair_tab, dtype=np.uint64),
        "byte_pair": byte_pair,
        "pair_bloom": np.frombuffer(pair_bloom, dtype=np.uint64),
        "pair_hot": np.frombuffer(pair_hot, dtype=np.uint64),
        "span_tab": np.frombuffer(span_tab, dtype=np.uint64),
        "span_hot": np.frombuffer(span_hot, dtype=np.uint64),
        "trie": np.frombuffer(trie, dtype=np.uint32),
        "byte_tok": byte_tok,
        "span_bloom": np.frombuffer(span_bloom, dtype=np.uint64),
        "seg_big": np.frombuffer(seg_big, dtype=np.uint8),
        "seg_tri": np.frombuffer(seg_tri, dtype=np.uint32),
    }
    unreachable = [int(tok_ids[k]) for k in np.nonzero(~reachable)[0]]
    cp, pt_mode = compile_pretokenizer(src)
    unicode_version = "regex-module"
    if pt_mode in ("find", "split"):
        from ..pretokenize import dfa_sections

        sections.update(dfa_sections(cp, "dfa."))
        unicode_version = cp.unicode_version()
    meta = {
        "bpe_meta_version": META_VERSION,
        "name": src.name,
        "semantics": src.semantics,
        "merge_mode": "ranks" if src.merges is None else "merges",
        "ignore_merges": bool(src.ignore_merges),
        "stages": [st.to_json() for st in src.stages],
        "pretok_mode": pt_mode,
        "special_tokens": dict(src.special_tokens),
        "added_tokens": [{"content": a.content, "id": a.id, "normalized": a.normalized} for a in src.added_tokens],
        "normalizer": src.normalizer,
        "add_prefix_space": bool(src.add_prefix_space),
        "n_ext": int(n_ext),
        "n_int": int(n_int),
        "n_mergeable": len(items),
        "max_token_value": int(max([int(tok_ids.max())] + list(src.special_tokens.values()) + [a.id for a in src.added_tokens])),
        "pair_bits": int(pair_bits),
        "da_size": int(len(sections["trie"]) // 3),
        "max_span_len": max_span_len,
        "backtrack_ok": backtrack_ok,
        "short_max": int(short_max),
        "short_max_mb": int(short_max_mb),
        "hash_max": int(hash_max),
        "n_unreachable": len(unreachable),
        "trie_has_spans": bool(len(unreachable) == 0 or not (src.merges is None or src.ignore_merges)),
        "unreachable_sample": unreachable[:16],
        "explicit_n_vocab": src.explicit_n_vocab,
        "post_processor": src.post_processor,
    }
    return meta, sections, unicode_version


def compile_pretokenizer(src: BPESource):
    """The stages as a compiled regex DFA (a `CompiledPattern`) and its mode; a ValueError naming the
    source when a pattern is outside what the DFA compiler supports."""
    from ..pretokenize import NAMED_PATTERNS, CompiledPattern
    from ..validate_pattern import check_coverage, check_name

    where = ", ".join(src.source_files) or src.name
    find = len(src.stages) == 1 and not src.stages[0].keep_gaps
    if find:
        check_name(src.stages[0].pattern, NAMED_PATTERNS)
    try:
        if not src.stages:
            return CompiledPattern.__new__(CompiledPattern), "whole"
        if find:
            st = src.stages[0]
            cp, mode = CompiledPattern.compile(st.pattern, st.dialect, "find"), "find"
        elif all(st.keep_gaps for st in src.stages):
            from .regex_fuse import fuse_class_runs

            # consecutive levels that cut out runs of disjoint character classes: one level (one DFA walk)
            levels = fuse_class_runs([(st.pattern, st.dialect) for st in src.stages])
            cp, mode = CompiledPattern.pipeline(levels, src.name), "split"
        else:
            raise ValueError("mixed find/split stages")
    except (ValueError, NotImplementedError, RecursionError) as e:
        # no fallback to a backtracking engine: its time on crafted text is unbounded (ReDoS)
        pats = "; ".join(repr(st.pattern)[:200] for st in src.stages)
        raise ValueError(f"{where}: the pre-tokenizer pattern {pats} cannot be compiled to fstok's linear-time DFA "
                         f"({e}); fstok does not run patterns on a backtracking engine") from None
    if find:  # find mode drops the text no match covers: a pattern that misses ordinary text would lose it
        check_coverage(cp, src.stages[0].pattern, where)
    return cp, mode


def source_identity(src: BPESource) -> list[bytes]:
    """What the source hash covers: the files and every option that changes the tables."""
    parts: list[bytes] = []
    for p in src.source_files:
        with open(p, "rb") as f:
            parts.append(f.read())
    if not src.source_files:
        items = sorted(src.tokens.items(), key=lambda kv: kv[1])
        parts.append(b"".join(len(b).to_bytes(4, "little") + b + i.to_bytes(4, "little") for b, i in items))
        if src.merges is not None:
            parts.append(b"".join(len(a).to_bytes(4, "little") + a + len(b).to_bytes(4, "little") + b for a, b in src.merges))
    opts = {
        "name": src.name,
        "stages": [s.to_json() for s in src.stages],
        "special": src.special_tokens,
        "added": [(a.content, a.id, a.normalized) for a in src.added_tokens],
        "normalizer": src.normalizer,
        "add_prefix_space": src.add_prefix_space,
        "ignore_merges": src.ignore_merges,
        "semantics": src.semantics,
        "post_processor": src.post_processor,
    }
    parts.append(json.dumps(opts, sort_keys=True).encode())
    return parts
