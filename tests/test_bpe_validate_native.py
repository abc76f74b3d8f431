"""The one-pass C proof of a BPE artifact's tables (runtime/csrc/bpe_validate.h) against its oracle, the numpy
checks of fstok/validate_bpe.py: on the real tables both accept; each mutation that breaks one rule is refused
by both (the loader then reports the numpy check's message)."""
import os

import numpy as np
import pytest

import fstok
from fstok import artifact as A
from fstok import validate_bpe as V

from conftest import VOCAB

ROBERTA = os.path.join(VOCAB, "models", "bytelevel-bpe", "roberta-base", "tokenizer.json")
pytestmark = pytest.mark.skipif(not os.path.exists(ROBERTA), reason="shared models not present")


class _Shim:
    """An artifact whose arrays can be replaced (the checks read sections, arrays and the path only)."""

    def __init__(self, art, over):
        self.sections, self.path, self.kind_name, self._art, self._over = art.sections, art.path, art.kind_name, art, over

    def array(self, name):
        return self._over.get(name, self._art.array(name))


@pytest.fixture(scope="module")
def base():
    tok = fstok.compile(ROBERTA)
    art = tok._tables._art
    meta = V.check_meta(art)
    t = V.check_tables(art, meta, native=False)
    return art, meta, t


def _verdicts(base, over=None, meta_over=None):
    art, meta, _ = base
    meta = dict(meta, **(meta_over or {}))
    shim = _Shim(art, over or {})
    try:
        V.check_tables(shim, meta, native=False)
        py_ok = True
    except A.ArtifactError:
        py_ok = False
    t = {n: shim.array(n) for n in V.SECTION_DTYPES}
    return py_ok, V._native_ok(t, meta, len(t["dec_bytes"]))


def test_real_tables_pass_both(base):
    assert _verdicts(base) == (True, True)


def _mutations(t, meta):
    n_int, n_ext, da = meta["n_int"], meta["n_ext"], meta["da_size"]
    info = t["int_info"].reshape(-1, 4)
    lens = info[:, 0].astype(np.int64)
    merged = np.nonzero((info[:, 1] != np.arange(n_int)) | (info[:, 2] != np.arange(n_int)))[0]
    k = int(merged[len(merged) // 2])
    longer = int(np.nonzero(lens > lens[k])[0][0])
    non_merge_ext = int(np.nonzero(t["dec_kind"] != 1)[0][0]) if (t["dec_kind"] != 1).any() else None
    full_pair = int(np.nonzero(t["pair_tab"] != V.EMPTY64)[0][0])
    span = t["span_tab"].reshape(-1, 2)
    full_span = int(np.nonzero((span[:, 1] & np.uint64(0xFFFFFFFF)) != np.uint64(0xFFFFFFFF))[0][0])
    trie = t["trie"].reshape(-1, 3)
    with_tok = int(np.nonzero(trie[:, 2] != 0xFFFFFFFF)[0][0])
    multi = int(np.nonzero(lens > 1)[0][0])

    def put(name, idx, val):
        a = t[name].copy()
        a[idx] = val
        return {name: a}

    out = {
        "dec_off[0]": put("dec_off", 0, 1),
        "dec_off decreases": put("dec_off", 5, int(t["dec_off"][4]) - 1 if t["dec_off"][4] else 0),
        "dec_off end": put("dec_off", n_ext, int(t["dec_off"][n_ext]) + 1),
        "dec_kind": put("dec_kind", 3, 4),
        "int_ext range": put("int_ext", k, n_ext),
        "int_len": put("int_info", 4 * k, int(lens[k]) + 1),
        "split range": put("int_info", 4 * k + 1, n_int),
        "split sum": put("int_info", 4 * k + 1, longer),
        "unmerged not one byte": put("int_info", [4 * k + 1, 4 * k + 2], k),
        "next_prefix range": put("int_info", 4 * k + 3, n_int),
        "next_prefix longer": put("int_info", 4 * k + 3, longer),
        "pair_tab id": put("pair_tab", full_pair, np.uint64(int(t["pair_tab"][full_pair]) | (np.uint64((1 << 21) - 1) << np.uint64(43)))),
        "pair_tab full": {"pair_tab": np.zeros_like(t["pair_tab"])},
        "pair_hot full": {"pair_hot": np.zeros_like(t["pair_hot"])},
        "byte_pair": put("byte_pair", 7, n_int),
        "span id": put("span_tab", 2 * full_span + 1, np.uint64((int(span[full_span, 1]) >> 32 << 32) | n_ext)),
        "span len": put("span_tab", 2 * full_span + 1, np.uint64(int(span[full_span, 1]) + (1 << 32))),
        "span_hot full": {"span_hot": np.zeros_like(t["span_hot"])},
        "trie parent": put("trie", 3 * with_tok + 1, da),
        "trie token": put("trie", 3 * with_tok + 2, n_int),
        "byte_tok range": put("byte_tok", 0, n_int),
        "byte_tok length": put("byte_tok", 0, multi),
        "span len long": put("span_tab", 2 * full_span + 1, np.uint64((int(span[full_span, 1]) & 0xFFFFFFFF) | (300 << 32))),
        "span_bloom size": {"span_bloom": t["span_bloom"][:48]},
        "span_bloom not a power of two": {"span_bloom": np.concatenate([t["span_bloom"], t["span_bloom"][:64]])},
        "seg_big flags": put("seg_big", 1234, 8),
    }
    if non_merge_ext is not None:
        out["int_ext kind"] = put("int_ext", k, non_merge_ext)
    if meta["backtrack_ok"]:
        out["backtrack order"] = put("int_info", 4 * k + 1, n_int - 1)
    return out


def test_each_broken_rule_is_refused_by_both(base):
    art, meta, t = base
    muts = _mutations(t, meta)
    assert len(muts) >= 20
    for name, over in muts.items():
        assert _verdicts(base, over) == (False, False), name
    # a meta field the tables must agree with
    assert _verdicts(base, meta_over={"max_span_len": int(np.diff(t["dec_off"].astype(np.int64)).max()) + 1}) == (False, False)
