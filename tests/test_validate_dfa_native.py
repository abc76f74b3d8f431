"""Loading a regex DFA checks it by the C pass (fstok_dfa_check) instead of the numpy proof: on randomly damaged
tables the C pass accepts exactly what the Python checks (its oracle, which names the element) accept."""
from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

from fstok.artifact import ArtifactError
from fstok.pretokenize import compile_tables, validate_tables
from fstok.validate_dfa import _native_ok, check_tables

PATTERNS = [r"\p{L}+|\s+(?!\S)|\s+", r"'s|'t| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+", r"\w+|[0-9]{1,3}"]


def _python_ok(t) -> bool:
    try:
        check_tables(t, "t")
        return True
    except ArtifactError:
        return False


def _damaged(t, rng: random.Random):
    kind = rng.choice(["trans", "trans_state", "classes", "accept", "accept_gb", "start", "eoi", "boundary",
                       "giveback", "none"])
    trans, classes, accept = t.trans.copy(), t.classes.copy(), t.accept.copy()
    kw = {}
    if kind == "trans":
        trans[rng.randrange(trans.size)] = np.uint32(rng.randrange(1 << 20))
    elif kind == "trans_state":  # a valid state, maybe one that breaks the progress proof
        trans[rng.randrange(trans.size)] = np.uint32(rng.randrange(t.n_states) << t.shift)
    elif kind == "classes":
        classes[rng.randrange(256)] = rng.randrange(t.n_classes + 2)
    elif kind == "accept":
        accept[rng.randrange(accept.size)] = rng.randrange(8)
    elif kind == "accept_gb":
        accept[rng.randrange(accept.size)] = (rng.randrange(1, 4) << 4) | rng.randrange(1, 6)
    elif kind == "start":
        kw["start"] = rng.randrange(t.n_states) << t.shift
    elif kind == "eoi":
        kw["eoi"] = rng.randrange(t.n_classes + 1)
    elif kind == "boundary":
        kw["n_boundary"] = rng.randrange(t.n_states)
    elif kind == "giveback":
        kw["n_giveback"] = rng.randrange(t.n_boundary + 2)
    return dataclasses.replace(t, trans=trans, classes=classes, accept=accept, **kw)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_c_check_accepts_exactly_what_python_accepts(pattern):
    t = compile_tables(pattern, "oniguruma")
    assert _native_ok(t) and _python_ok(t)
    rng = random.Random(len(pattern))
    seen = {True: 0, False: 0}
    for _ in range(300):
        d = _damaged(t, rng)
        py = _python_ok(d)
        assert _native_ok(d) == py
        seen[py] += 1
        if not py:
            with pytest.raises(ArtifactError):
                validate_tables(d, "t")
    assert seen[True] and seen[False]  # both outcomes exercised


def test_bad_added_token_in_bpe_meta_is_named():
    """check_meta's one-pass check of the added tokens lets through exactly the well-typed ones: each damage
    is still an ArtifactError naming the token and field"""
    import fstok
    from fstok import artifact as A

    tok = fstok.get_encoding("r50k_base")
    art = A.parse_artifact(tok.to_bytes())
    good = [{"content": "<a>", "id": 5, "normalized": False}, {"content": "<b>", "id": 7, "normalized": True}]
    secs = {n: art.array(n) for n in art.sections if n != "meta"}

    def load(added):
        meta = dict(art.meta, added_tokens=added)
        return fstok.loads(A.write_artifact(None, art.kind, meta, secs, art.unicode_version, art.source_hash))

    assert [a.content for a in load(good)._added] == ["<a>", "<b>"]
    for field, bad in [("content", ""), ("content", 3), ("id", -1), ("id", 10**9), ("id", "5"), ("id", True),
                       ("normalized", 1), ("normalized", None)]:
        added = [good[0], dict(good[1], **{field: bad})]
        with pytest.raises(ArtifactError, match=rf"added_tokens\[1\]"):
            load(added)
    with pytest.raises(ArtifactError, match=r"added_tokens\[0\]"):
        load([{"content": "<a>", "id": 5}])  # a missing field
    with pytest.raises(ArtifactError, match=r"added_tokens\[0\]"):
        load(["<a>"])
