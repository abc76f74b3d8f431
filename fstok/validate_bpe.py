"""Validation of a BPE artifact before the C runtime (`runtime/csrc/mod_bpe.c`, `lib_bpe.c`) reads it.

`check_meta` types every meta field the loader reads (so that a missing or retyped field is an
`ArtifactError` naming it, not a KeyError or a TypeError later); `check_tables` proves every index
the C code follows without a bounds check: internal and external ids, split and prefix links, pair
and span table entries, decode offsets, trie targets, and that every size agrees with the meta
fields.  The embedded pre-tokenizer DFA is checked by `fstok.pretokenize.validate_tables`.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .validate import Meta, check_mask, error, section_array

NONE32 = 0xFFFFFFFF
EMPTY64 = np.uint64(0xFFFFFFFFFFFFFFFF)
MAX_INTERNAL = (1 << 21) - 2  # ids packed in 21 bits in the pair tables
PRETOK_MODES = ("find", "split", "whole", "regex")
NORMALIZERS = (None, "NFKC", "NFC")

SECTION_DTYPES = {
    "dec_bytes": "|u1", "dec_off": "<u4", "dec_kind": "|u1", "int_ext": "<u4", "int_info": "<u4",
    "pair_tab": "<u8", "byte_pair": "<u4", "pair_bloom": "<u8", "pair_hot": "<u8", "span_tab": "<u8",
    "span_hot": "<u8", "trie": "<u4", "byte_tok": "<u4", "span_bloom": "<u8", "seg_big": "|u1", "seg_tri": "<u4",
}
BPE_META_VERSION = 2  # 2: the span bloom filter and the segment tables are stored (built by the compiler)
SEG_TRI_WORDS = (1 << 19) // 32  # runtime/csrc/bpe.h BPE_SEG_TRI_BITS
SEG_FLAGS = 7  # BPE_SEG_IN | BPE_SEG_START | BPE_SEG_END


def where_of(art) -> str:
    return art.path or f"<{art.kind_name} artifact>"


def check_meta(art) -> dict[str, Any]:
    """The meta fields the BPE loader reads, each typed and in range (ArtifactError naming the field)."""
    where = where_of(art)
    m = Meta(art.meta, where)
    if art.meta.get("bpe_meta_version") != BPE_META_VERSION:
        raise m.fail("bpe_meta_version", f"{art.meta.get('bpe_meta_version')!r} is not supported (this fstok reads "
                     f"{BPE_META_VERSION}): recompile the tokenizer")
    v: dict[str, Any] = {}
    v["name"] = m.str("name")
    v["semantics"] = m.str("semantics", choices=("tiktoken", "hf"))
    v["n_int"] = m.int("n_int", 1, MAX_INTERNAL)
    v["n_ext"] = n_ext = m.int("n_ext", 1, 2**31 - 1)
    v["da_size"] = m.int("da_size", 1, 2**31 - 1)
    v["pair_bits"] = m.int("pair_bits", 4, 40)
    v["max_span_len"] = m.int("max_span_len", 0, 2**31 - 1)
    v["short_max"] = m.int("short_max", 0, 4096)
    v["hash_max"] = m.int("hash_max", 0, 2**31 - 1, default=v["short_max"] + 8)
    v["short_max_mb"] = m.int("short_max_mb", 0, 4096, default=v["short_max"])
    v["backtrack_ok"] = m.bool("backtrack_ok")
    v["trie_has_spans"] = m.bool("trie_has_spans")
    v["add_prefix_space"] = m.bool("add_prefix_space", default=False)
    v["max_token_value"] = m.int("max_token_value", 0, n_ext - 1)
    v["normalizer"] = m.opt_str("normalizer", default=None, choices=NORMALIZERS[1:])
    v["pretok_mode"] = m.str("pretok_mode", default="regex", choices=PRETOK_MODES)
    if v["pretok_mode"] == "regex":
        raise m.fail("pretok_mode", "'regex': this artifact splits text with a backtracking regex engine, whose time "
                     "on crafted text is unbounded; fstok runs only its linear-time DFA: recompile the tokenizer")
    specials = m.dict("special_tokens")
    for s, i in specials.items():
        if not s:
            raise error(where, "meta.special_tokens", "a special token is the empty string")
        if type(i) is not int or not 0 <= i < n_ext:
            raise error(where, f"meta.special_tokens[{s!r}]", f"id {i!r} is outside the vocabulary [0, {n_ext})"[:300])
    v["special_tokens"] = specials
    added = m.list("added_tokens")
    # one tight pass first (Whisper has 1,609 added tokens); the field-by-field checks only name a bad one
    ok = all(type(a) is dict and type(c := a.get("content")) is str and c and type(i := a.get("id")) is int
             and 0 <= i < n_ext and type(a.get("normalized")) is bool for a in added)
    for k, a in enumerate(() if ok else added):
        am = m.sub(f"added_tokens[{k}]", a)
        content = am.str("content")
        if not content:
            raise am.fail("content", "an added token is the empty string")
        am.int("id", 0, n_ext - 1)
        am.bool("normalized")
    v["added_tokens"] = added
    stages = m.list("stages")
    for k, st in enumerate(stages):
        sm = m.sub(f"stages[{k}]", st)
        sm.str("pattern")
        sm.bool("keep_gaps")
        sm.str("dialect", default="rust-regex")
    v["stages"] = stages
    v["post_processor"] = None
    pp = art.meta.get("post_processor")
    if pp is not None:
        from .postprocess import PostProcessor

        try:
            v["post_processor"] = PostProcessor.from_json(pp)
        except (ValueError, TypeError, KeyError, AttributeError, IndexError) as e:
            raise m.fail("post_processor", f"not a post-processor fstok reads ({e})"[:300]) from None
    return v


def _native_ok(t: dict[str, np.ndarray], meta: dict[str, Any], nbytes: int) -> bool:
    """The rules of check_tables in one C pass (runtime/csrc/bpe_validate.h): True when all hold."""
    try:
        from .runtime import _bpe
    except ImportError:
        return False
    tables_ok = getattr(_bpe, "tables_ok", None)
    if tables_ok is None:
        return False
    return bool(tables_ok(meta["n_int"], meta["n_ext"], meta["da_size"], meta["max_span_len"], meta["backtrack_ok"],
                          nbytes, t["dec_off"], t["dec_kind"], t["int_ext"], t["int_info"], t["pair_tab"],
                          t["pair_hot"], t["pair_bloom"], t["byte_pair"], t["span_tab"], t["span_hot"], t["trie"],
                          t["byte_tok"], t["span_bloom"], t["seg_big"], t["seg_tri"]))


def table_arrays(art, meta: dict[str, Any]) -> dict[str, np.ndarray]:
    """The arrays of the tables, each present with its dtype and (where the meta fields fix it) its size; their
    contents are proven by `check_tables`, or by the runtime itself: `fstok.runtime._bpe.Model` runs the C pass
    (runtime/csrc/bpe_validate.h) over the tables where it reads them, and `BPETokenizer` calls `check_tables`
    to name the element when that fails."""
    where = where_of(art)
    n_int, n_ext, da_size = meta["n_int"], meta["n_ext"], meta["da_size"]
    sizes = {"int_ext": n_int, "int_info": 4 * n_int, "dec_off": n_ext + 1, "dec_kind": n_ext, "trie": 3 * da_size,
             "byte_tok": 256, "byte_pair": 65536, "pair_tab": 1 << meta["pair_bits"], "seg_big": 65536,
             "seg_tri": SEG_TRI_WORDS}
    t = {name: section_array(art, where, name, dt, sizes.get(name)) for name, dt in SECTION_DTYPES.items()}
    info = t["int_info"].reshape(-1, 4)
    return dict(t, int_len=info[:, 0], split_l=info[:, 1], split_r=info[:, 2], next_prefix=info[:, 3])


def check_tables(art, meta: dict[str, Any], native: bool = True) -> dict[str, np.ndarray]:
    """Every array C indexes, proven in range; returns the arrays (and the int_info columns)."""
    where = where_of(art)
    n_int, n_ext, da_size = meta["n_int"], meta["n_ext"], meta["da_size"]
    max_span = meta["max_span_len"]
    t = table_arrays(art, meta)
    if native and _native_ok(t, meta, len(t["dec_bytes"])):
        return t  # every rule below holds (one pass in C); the numpy checks name a failure

    def pow2(name: str, n: int, lo: int) -> None:
        if n < lo or n & (n - 1):
            raise error(where, name, f"holds {n} slots; a power of two >= {lo} is required")

    dec_off = t["dec_off"]
    nbytes = len(t["dec_bytes"])
    if dec_off[0] != 0:
        raise error(where, "dec_off[0]", f"is {int(dec_off[0])}, expected 0")
    d = np.diff(dec_off.astype(np.int64))
    check_mask(where, "dec_off", d < 0, lambda i: "decode offsets decrease here", index=np.arange(1, len(dec_off)))
    if int(dec_off[-1]) != nbytes:
        raise error(where, f"dec_off[{n_ext}]", f"is {int(dec_off[-1])}, but dec_bytes holds {nbytes} bytes")
    check_mask(where, "dec_kind", t["dec_kind"] > 3, lambda i: f"kind {int(t['dec_kind'][i])} is not 0..3")
    info = t["int_info"].reshape(-1, 4)
    t = dict(t, int_len=info[:, 0], split_l=info[:, 1], split_r=info[:, 2], next_prefix=info[:, 3])
    ext = t["int_ext"]
    check_mask(where, "int_ext", ext >= n_ext, lambda i: f"external id {int(ext[i])} >= n_ext {n_ext}")
    check_mask(where, "int_ext", t["dec_kind"][ext] != 1,
               lambda i: f"token {int(ext[i])} is not a mergeable token (dec_kind {int(t['dec_kind'][ext[i]])})")
    lens = (dec_off[ext.astype(np.int64) + 1].astype(np.int64) - dec_off[ext])
    check_mask(where, "int_info", (lens != t["int_len"]) | (lens == 0),
               lambda i: f"length {int(t['int_len'][i])} of internal token {i} disagrees with its decode bytes "
                         f"({int(lens[i])})", index=np.arange(n_int) * 4)
    ar = np.arange(n_int, dtype=np.uint32)
    for col, name in ((1, "split_l"), (2, "split_r")):
        check_mask(where, "int_info", t[name] >= n_int, lambda k, name=name: f"{name} {int(t[name][k])} >= n_int {n_int}",
                   index=np.arange(n_int) * 4 + col)
    sl, sr = t["split_l"], t["split_r"]
    merged = (sl != ar) | (sr != ar)
    badsplit = np.zeros(n_int, dtype=bool)
    badsplit[merged] = lens[merged] != lens[sl[merged]] + lens[sr[merged]]
    badsplit |= ~merged & (lens != 1)
    check_mask(where, "int_info", badsplit, lambda i: f"split of internal token {i} does not add up to its length",
               index=np.arange(n_int) * 4 + 1)
    if meta["backtrack_ok"]:
        mono = np.zeros(n_int, dtype=bool)
        mono[merged] = (sl[merged] >= ar[merged]) | (sr[merged] >= ar[merged])
        check_mask(where, "int_info", mono, lambda i: f"internal token {i} splits into a later token, "
                   "but meta.backtrack_ok says ranks are monotone", index=np.arange(n_int) * 4 + 1)
    npf = t["next_prefix"]
    has = npf != NONE32
    badp = has & ((npf >= n_int) | (lens[np.where(has & (npf < n_int), npf, 0)] >= lens))
    check_mask(where, "int_info", badp, lambda i: f"next_prefix {int(npf[i])} of internal token {i} is not a "
               "shorter token", index=np.arange(n_int) * 4 + 3)
    m21, m22 = np.uint64((1 << 21) - 1), np.uint64((1 << 22) - 1)
    for name in ("pair_tab", "pair_hot"):
        pt = t[name]
        if name == "pair_hot":
            pow2(name, len(pt), 16)
        full = pt != EMPTY64
        if full.all():
            raise error(where, name, "has no empty slot (a lookup of an absent pair would never end)")
        badp = full & (((pt >> np.uint64(43)) >= n_int) | (((pt >> np.uint64(22)) & m21) >= n_int) | ((pt & m22) >= n_int))
        check_mask(where, name, badp, lambda i, pt=pt: f"entry {int(pt[i]):#x} holds a token id >= n_int {n_int}")
    pow2("pair_bloom", len(t["pair_bloom"]), 1)
    pow2("span_bloom", len(t["span_bloom"]), 64)
    sb = t["seg_big"]
    check_mask(where, "seg_big", (sb & ~np.uint8(SEG_FLAGS)) != 0, lambda i: f"flags {int(sb[i])} are not 0..{SEG_FLAGS}")
    bp = t["byte_pair"]
    check_mask(where, "byte_pair", (bp != NONE32) & (bp >= n_int), lambda i: f"token {int(bp[i])} >= n_int {n_int}")
    max_len = int(d.max()) if len(d) else 0
    if max_span > max_len:
        raise error(where, "meta.max_span_len", f"{max_span} is longer than the longest token ({max_len} bytes)")
    for name in ("span_hot", "span_tab"):
        raw = t[name]
        if len(raw) % 2:
            raise error(where, name, "has an odd number of words (entries are pairs)")
        pow2(name, len(raw) // 2, 2)
        ent = raw.reshape(-1, 2)
        sid = (ent[:, 1] & np.uint64(NONE32)).astype(np.int64)
        full = sid != NONE32
        if full.all():
            raise error(where, name, "has no empty slot (a lookup of an absent span would never end)")
        check_mask(where, name, full & (sid >= n_ext), lambda i: f"token id {int(sid[i])} >= n_ext {n_ext}",
                   index=np.arange(len(sid)) * 2 + 1)
        sids = np.where(full & (sid < n_ext), sid, 0)
        slen = (ent[:, 1] >> np.uint64(32)).astype(np.int64)
        want = dec_off[sids + 1].astype(np.int64) - dec_off[sids]
        check_mask(where, name, full & ((slen != want) | (slen > max_span)),
                   lambda i: f"length {int(slen[i])} of token {int(sid[i])} disagrees with its decode bytes "
                             f"or exceeds meta.max_span_len {max_span}", index=np.arange(len(sid)) * 2 + 1)
    tr = t["trie"].reshape(-1, 3)
    chk, dtok = tr[:, 1], tr[:, 2]
    check_mask(where, "trie", (chk != NONE32) & (chk >= da_size), lambda i: f"parent {int(chk[i])} >= da_size {da_size}",
               index=np.arange(da_size) * 3 + 1)
    check_mask(where, "trie", (dtok != NONE32) & (dtok >= n_int), lambda i: f"token {int(dtok[i])} >= n_int {n_int}",
               index=np.arange(da_size) * 3 + 2)
    bt = t["byte_tok"]
    check_mask(where, "byte_tok", bt >= n_int, lambda i: f"token {int(bt[i])} >= n_int {n_int}")
    check_mask(where, "byte_tok", lens[bt] != 1, lambda i: f"token {int(bt[i])} of byte {i} is not one byte long")
    return t
