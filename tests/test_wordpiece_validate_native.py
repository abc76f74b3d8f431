"""The one-pass C proof of a WordPiece artifact's tables (runtime/csrc/wp_validate.h) against its oracle, the numpy
checks of fstok/validate_wordpiece.py: on real tables both accept; each mutation that breaks one rule is refused by
both (the loader then reports the numpy check's message)."""
import os

import numpy as np
import pytest

import fstok
from fstok import artifact as A
from fstok import validate_wordpiece as V

from conftest import VOCAB

BERT = os.path.join(VOCAB, "bert-base-uncased", "vocab.txt")
pytestmark = pytest.mark.skipif(not os.path.exists(BERT), reason="shared vocabularies not present")


class _Shim:
    """An artifact whose arrays can be replaced (the checks read meta, sections, arrays and the path only)."""

    def __init__(self, art, over):
        self.meta, self.sections, self.path, self._art, self._over = art.meta, art.sections, art.path, art, over

    def array(self, name):
        return self._over.get(name, self._art.array(name))


@pytest.fixture(scope="module")
def art():
    return A.parse_artifact(fstok.compile(BERT, lowercase=True).to_bytes())


def _verdicts(art, over):
    verdict = []
    for native in (False, True):
        try:
            V.check(_Shim(art, over), "t", native=native)
            verdict.append(True)
        except A.ArtifactError:
            verdict.append(False)
    return tuple(verdict)


def test_real_tables_pass_both(art):
    assert _verdicts(art, {}) == (True, True)
    arrs, v = V.check(art, "t", native=False)
    assert V._native_ok(arrs, v, v["n_nodes"], v["n_dense"])


def _mutations(art):
    a = {k: art.array(k) for k in V._DTYPES}
    n, nd = int(art.meta["n_nodes"]), int(art.meta["n_dense"])
    V_ = len(a["vocab.offs"]) - 1
    words = a["wp.node"].view("<u4")
    hi = words[1::2]
    nc, row = hi & 0xFF, hi >> 16
    kid = int(np.nonzero((nc > 0) & (row == 0xFFFF))[0][0])
    fp = a["wp.failpops"].view("<u4")
    has_f = int(np.nonzero(fp[0::2] != V.NONE)[0][0])
    s2 = a["norm.stage2"]
    k4 = np.nonzero((s2 & 7) == 4)[0]

    def put(name, idx, val, view=None):
        arr = a[name].copy()
        (arr.view(view) if view else arr)[idx] = val
        return {name: arr}

    out = {
        "edges past the end": put("wp.node", 2 * kid, len(a["wp.edge_label"]), "<u4"),
        "dense row": put("wp.node", 2 * kid + 1, int(hi[kid]) & 0xFFFF | (nd << 16), "<u4"),
        "first child label": put("wp.edge_label", int(words[2 * kid]), (int(a["wp.edge_label"][int(words[2 * kid])]) + 1) % 256),
        "first child target": put("wp.edge_target", int(words[2 * kid]), kid + 2),
        "edge target": put("wp.edge_target", 0, n),
        "failure link range": put("wp.failpops", 2 * has_f, n, "<u4"),
        "failure link deeper": put("wp.depth", int(fp[2 * has_f]), int(a["wp.depth"][has_f])),
        "fail pops": put("wp.failpops", 2 * has_f + 1, (len(a["wp.pool"]) << 8) | 1, "<u4"),
        "pool id": put("wp.pool", 0, V_),
        "vocab.offs[0]": put("vocab.offs", 0, 1),
        "vocab.offs decrease": put("vocab.offs", 5, int(a["vocab.offs"][4]) - 1),
        "vocab.offs end": put("vocab.offs", V_, len(a["vocab.bytes"]) + 1),
        "stage1 block": put("norm.stage1", 7, len(s2) // 256),
        "stage2 kind": put("norm.stage2", 0, 5),
    }
    if nd:
        out["dense target"] = put("wp.dense", 0, n, "<u4")
        out["dense pops"] = put("wp.dense", 1, (len(a["wp.pool"]) << 8) | 1, "<u4")
    if len(k4):
        k = int(k4[0])
        out["stage2 pool offset"] = put("norm.stage2", k, (len(a["norm.pool"]) << 3) | 4)
        out["stage2 pool length"] = put("norm.stage2", k, ((len(a["norm.pool"]) - 1) << 3) | 4)
    if int(art.meta.get("n_suffix_word", 0)):
        out["suffix word"] = put("wp.suffix_word", 0, V_)
    return out


def test_each_broken_rule_is_refused_by_both(art):
    muts = _mutations(art)
    assert len(muts) >= 14
    for name, over in muts.items():
        assert _verdicts(art, over) == (False, False), name
