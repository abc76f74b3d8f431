"""Validation of a WordPiece artifact before the C runtime (`runtime/csrc/mod_wordpiece.c`) reads it.

Types every meta field the loader reads and proves every index the C code follows: edge ranges and
targets, the implicit first child of a sparse state, dense rows and their targets, failure links
(in range, and strictly decreasing depth: no failure chain can loop), failure pops inside the pop
pool, pool ids inside the vocabulary, the normalization tables, the vocabulary offsets and the
unk / cls / sep / suffix-indicator ids.  Arithmetic on packed fields is done in 64 bits so that a
crafted value cannot wrap around a bound.  Each failure names the section (or meta field) and the
element.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .validate import Meta, check_mask, error, section_array

NONE = 0xFFFFFFFF
NORM1_LEN = 0x110000 >> 8
_DTYPES = {"wp.node": "<u8", "wp.edge_label": "|u1", "wp.edge_target": "<u4", "wp.failpops": "<u8", "wp.pool": "<u4",
           "wp.depth": "<u2", "wp.dense": "<u8", "wp.suffix_word": "<u4", "norm.stage1": "<u2", "norm.stage2": "<u4",
           "norm.pool": "<u4", "vocab.bytes": "|u1", "vocab.offs": "<u4"}


def check(art, name: str, native: bool = True) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """(arrays incl. the split views wp.fail / wp.pops / wp.dense_target / wp.dense_pops, checked meta values)."""
    where = art.path or name or "<wordpiece artifact>"
    m = Meta(art.meta, where)
    v: dict[str, Any] = {}
    v["name"] = m.str("name", default="")
    om = m.sub("options", m.dict("options"))
    n = v["n_nodes"] = m.int("n_nodes", 1, 2**32 - 2)
    nd = v["n_dense"] = m.int("n_dense", 0, n)
    v["root"] = m.int("root", 0, n - 1)
    v["suffix_root"] = m.int("suffix_root", 0, n - 1)
    v["unk_token"] = om.str("unk_token")
    v["prefix"] = om.str("continuing_subword_prefix")
    for key in ("unk_token", "continuing_subword_prefix"):
        try:
            om.d[key].encode("utf-8")
        except UnicodeEncodeError:
            raise om.fail(key, "contains a lone surrogate (not UTF-8)") from None
    v["max_chars"] = om.int("max_input_chars_per_word", 0, 2**32 - 1)
    v["strip"] = om.bool("strip")
    specials = m.list("special_tokens", default=[])
    for k, s in enumerate(specials):
        if not isinstance(s, str) or not s or s != s.encode("utf-8", "replace").decode("utf-8"):
            raise error(where, f"meta.special_tokens[{k}]", f"must be a non-empty UTF-8 string, got {s!r}"[:200])
    v["special_tokens"] = specials
    m.str("decoder_prefix", default="##")
    m.bool("decoder_cleanup", default=True)
    arrs = {k: section_array(art, where, k, dt) for k, dt in _DTYPES.items()}
    voffs, vbytes = arrs["vocab.offs"], arrs["vocab.bytes"]
    V = len(voffs) - 1
    if V < 1:
        raise error(where, "vocab.offs", "the vocabulary is empty")
    for k in ("cls_id", "sep_id"):
        v[k] = m.opt_int(k, 0, V - 1, default=None)
    v["unk_id"] = m.int("unk_id", 0, V - 1)
    v["n_suffix_word"] = m.int("n_suffix_word", 0, len(arrs["wp.suffix_word"]), default=0)
    for both, lo, hi in (("wp.failpops", "wp.fail", "wp.pops"), ("wp.dense", "wp.dense_target", "wp.dense_pops")):
        words = arrs[both].view("<u4")
        arrs[lo], arrs[hi] = words[0::2], words[1::2]
    if native and _native_ok(arrs, v, n, nd):
        _check_unk(where, arrs, v)
        return arrs, v  # every table rule below holds (one pass in C); the numpy checks name a failure
    node, el, et = arrs["wp.node"], arrs["wp.edge_label"], arrs["wp.edge_target"]
    for k, size in (("wp.node", n), ("wp.failpops", n), ("wp.depth", n), ("wp.dense", nd * 256)):
        if len(arrs[k]) != size:
            raise error(where, k, f"has {len(arrs[k])} entries, expected {size} (meta.n_nodes {n}, meta.n_dense {nd})")
    if len(et) != len(el):
        raise error(where, "wp.edge_target", f"has {len(et)} entries but wp.edge_label has {len(el)}")
    words = node.view("<u4")
    es = words[0::2].astype(np.int64)
    hi = words[1::2]
    nc, first, row = (hi & 0xFF).astype(np.int64), (hi >> 8) & 0xFF, hi >> 16
    check_mask(where, "wp.node", es + nc > len(el),
               lambda i: f"edges {int(es[i])}..{int(es[i] + nc[i])} of state {i} run past the {len(el)} edges")
    check_mask(where, "wp.node", (row != 0xFFFF) & (row >= nd), lambda i: f"dense row {int(row[i])} of state {i} >= meta.n_dense {nd}")
    kids = np.nonzero((nc > 0) & (row == 0xFFFF))[0]
    if len(kids):
        check_mask(where, "wp.node", kids + 1 >= n, "the last state cannot have an implicit first child", index=kids)
        e0 = es[kids]
        check_mask(where, "wp.node", (el[e0] != first[kids]) | (et[e0] != kids + 1),
                   lambda k: f"the first-child record of state {int(kids[k])} disagrees with its first edge", index=kids)
    check_mask(where, "wp.edge_target", et >= n, lambda i: f"target {int(et[i])} >= meta.n_nodes {n}")
    f = arrs["wp.fail"]
    check_mask(where, "wp.failpops", (f != NONE) & (f >= n), lambda i: f"failure link {int(f[i])} of state {i} >= {n}",
               index=np.arange(n) * 2)
    dtg = arrs["wp.dense_target"]
    check_mask(where, "wp.dense", (dtg != NONE) & (dtg >= n), lambda i: f"target {int(dtg[i])} >= meta.n_nodes {n}",
               index=np.arange(len(dtg)) * 2)
    pool = arrs["wp.pool"]
    for k, sec in (("wp.pops", "wp.failpops"), ("wp.dense_pops", "wp.dense")):
        p = arrs[k].astype(np.int64)
        check_mask(where, sec, (p >> 8) + (p & 0xFF) > len(pool),
                   lambda i, p=p: f"pops {int(p[i] >> 8)}..+{int(p[i] & 0xFF)} run past the {len(pool)}-entry "
                                  "pop pool", index=np.arange(len(p)) * 2 + 1)
    check_mask(where, "wp.pool", pool >= V, lambda i: f"token id {int(pool[i])} >= vocabulary size {V}")
    dep = arrs["wp.depth"]
    has = np.nonzero(f != NONE)[0]
    if len(has):
        check_mask(where, "wp.failpops", dep[f[has]] >= dep[has],
                   lambda k: f"failure link of state {int(has[k])} does not lead to a shallower state (a failure chain could "
                             "loop)", index=has * 2)
    if voffs[0] != 0:
        raise error(where, "vocab.offs[0]", f"is {int(voffs[0])}, expected 0")
    check_mask(where, "vocab.offs", voffs[1:] < voffs[:-1], "vocabulary offsets decrease here", index=np.arange(1, len(voffs)))
    if int(voffs[-1]) > len(vbytes):
        raise error(where, f"vocab.offs[{V}]", f"{int(voffs[-1])} is past the {len(vbytes)} bytes of vocab.bytes")
    s1, s2, npool = arrs["norm.stage1"], arrs["norm.stage2"], arrs["norm.pool"]
    if len(s1) != NORM1_LEN:
        raise error(where, "norm.stage1", f"has {len(s1)} entries, expected {NORM1_LEN}")
    if len(s2) % 256:
        raise error(where, "norm.stage2", f"has {len(s2)} entries, not whole 256-entry blocks")
    check_mask(where, "norm.stage1", s1.astype(np.int64) * 256 >= len(s2),
               lambda i: f"block {int(s1[i])} is past the {len(s2) // 256} blocks of norm.stage2")
    kinds = s2 & 7
    check_mask(where, "norm.stage2", kinds > 4, lambda i: f"kind {int(kinds[i])} is not 0..4")
    sel = np.nonzero(kinds == 4)[0]
    if len(sel):
        mp = (s2[sel] >> 3).astype(np.int64)
        check_mask(where, "norm.stage2", mp >= len(npool), lambda k: f"pool offset {int(mp[k])} >= {len(npool)}",
                   index=sel)
        ln = (npool[mp] & 0xFFFF).astype(np.int64)
        check_mask(where, "norm.stage2", mp + ln >= len(npool),
                   lambda k: f"pool entry at {int(mp[k])} runs past the {len(npool)}-entry norm.pool", index=sel)
    sw = arrs["wp.suffix_word"]
    nsw = v["n_suffix_word"]
    if nsw:
        check_mask(where, "wp.suffix_word", sw[:nsw] >= V, lambda i: f"token id {int(sw[i])} >= vocabulary size {V}")
    _check_unk(where, arrs, v)
    return arrs, v


def _check_unk(where: str, arrs: dict[str, np.ndarray], v: dict[str, Any]) -> None:
    voffs, vbytes, u = arrs["vocab.offs"], arrs["vocab.bytes"], v["unk_id"]
    if bytes(vbytes[voffs[u]:voffs[u + 1]]) != v["unk_token"].encode("utf-8"):
        raise error(where, "meta.unk_id", f"token {u} of the vocabulary is not the unk token {v['unk_token']!r}")


def _native_ok(arrs: dict[str, np.ndarray], v: dict[str, Any], n: int, nd: int) -> bool:
    """The table rules of `check` in one C pass (runtime/csrc/wp_validate.h): True when all hold."""
    try:
        from .runtime import _wordpiece
    except ImportError:
        return False
    tables_ok = getattr(_wordpiece, "tables_ok", None)
    if tables_ok is None:
        return False
    return bool(tables_ok(arrs["wp.node"], arrs["wp.edge_label"], arrs["wp.edge_target"], arrs["wp.failpops"],
                          arrs["wp.depth"], arrs["wp.pool"], arrs["wp.dense"], arrs["vocab.offs"],
                          len(arrs["vocab.bytes"]), arrs["norm.stage1"], arrs["norm.stage2"], arrs["norm.pool"],
                          arrs["wp.suffix_word"][:v["n_suffix_word"]], n, nd))
