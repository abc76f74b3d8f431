"""The walking tables a SentencePiece-family artifact stores (ft_* sections: the breadth-first trie records,
full rows, pair table, character table, ASCII ids, small pair table; the only form of its pieces trie) are
checked natively before any walk reads them.  On randomly damaged tables the native check accepts exactly
what its pure-Python oracle (fstok.validate_spm_walk) accepts, names the same section and fault, and encoding
through damaged tables it accepts never crashes and yields ids of the vocabulary.  Artifacts of an older
table layout are refused with an error that asks for a new compile, and the compile cache rebuilds them."""
from __future__ import annotations

import os
import random

import numpy as np
import pytest

import fstok
from conftest import VOCAB, needs_shared, read_corpus
from fstok import artifact as A
from fstok import hf_spm, spm
from fstok.spm_layout import FT_SECTIONS, TABLES, walk_sections
from fstok.validate_spm_walk import DENSE, NODE, NONE, check, wants_pairs

MODELS = os.path.join(VOCAB, "models")
FILES = {
    "llama-2": "spm-bpe/llama-2/tokenizer.model",  # .model BPE: pair table and small pair table
    "maxtext-unigram": "unigram/maxtext-default-c4/tokenizer.default",  # .model Unigram
    "phi-3": "spm-bpe/phi-3-mini/tokenizer.json",  # tokenizer.json BPE (merge list, no pair table)
}
TEXTS = ["Hello world, this is a test.", "  a  b\tc ", "naïve café — 東京 😀 ﬁ", "▁▁x▁y <0x41> <unk>", "a" * 70,
         "def f(x):\n    return x**2  # 3.14159"]


def _texts():
    return TEXTS + [read_corpus("multilingual")[:1500], read_corpus("code")[:800]]


@pytest.fixture(scope="module", params=sorted(FILES))
def model(request):
    path = os.path.join(MODELS, FILES[request.param])
    if not os.path.exists(path):
        pytest.skip(f"{path} not present")
    tok = fstok.compile(path)
    art = A.parse_artifact(tok.to_bytes(), where=path)
    tables = walk_sections(art, path)
    assert tables is not None, "the compiler stores the walking tables"
    return request.param, art, tables


def _oracle(art, tables):
    m = art.meta
    n = int(m["n_pieces"])
    is64 = art.has("score64") and not art.has("score32")
    return check(tables, n, wants_pairs(int(m["flags"]), is64, n))


def _load(art, tables, monkeypatch):
    """The tokenizer of `art` with `tables` in place of its stored walking tables: None and the error, or it."""
    mod = hf_spm if art.meta.get("source") == "hf" else spm
    monkeypatch.setattr(mod, "walk_sections", lambda a, where: tables)
    try:
        return spm.SentencePieceTokenizer.from_artifact(art), None
    except A.ArtifactError as e:
        return None, str(e)


def _damaged(tables, rng: random.Random, n_pieces: int):
    t = [None if x is None else np.array(x, copy=True) for x in tables]
    nodes_b, rows, pairs_b, chars, ascii_, small = t
    nodes = nodes_b.view(NODE)
    n = len(nodes) - 1
    kind = rng.choice(["id", "kids", "nk", "type", "lab", "row", "pair_key", "pair_c", "pair_run", "pair_size",
                       "chars", "chars_run", "chars_size", "ascii", "small", "small_size", "drop", "nodes_size",
                       "ragged", "pairs_on_unigram", "none"])
    # nodes with a piece or with children, where a fault is read
    q = rng.randrange(min(n, 4000)) if rng.random() < 0.7 else rng.randrange(n)
    pick = lambda *vs: rng.choice(vs)  # noqa: E731
    if kind == "id":
        nodes["id"][q] = pick(-2, -1, n_pieces - 1, n_pieces, rng.randrange(-5, n_pieces + 5), 1 << 30)
    elif kind == "kids":
        n_rows = 0 if rows is None else len(rows) // 256
        nodes["kids"][q] = pick(0, q, q + 1, n - 1, n, n - int(nodes["nk"][q]), DENSE | max(n_rows - 1, 0),
                                DENSE | n_rows, rng.randrange(1 << 32), max(q - 1, 0))
    elif kind == "nk":
        nodes["nk"][q] = pick(0, 1, 13, 14, 15, 16, 200, rng.randrange(256))
    elif kind == "type":
        nodes["type"][q] = rng.randrange(8)
        if rng.random() < 0.5:
            nodes["id"][q] = -1
    elif kind == "lab":
        nodes["lab"][q, rng.randrange(14)] = rng.randrange(256)
    elif kind == "row" and rows is not None and len(rows):
        rows[rng.randrange(len(rows))] = pick(NONE, 0, 1, n - 1, n, rng.randrange(1 << 32), rng.randrange(n))
    elif kind.startswith("pair") and kind != "pairs_on_unigram" and pairs_b is not None:
        pairs = pairs_b.view("<u8")
        i = rng.randrange(len(pairs))
        if kind == "pair_key":
            pairs[i] = pick(0, 1, rng.randrange(1 << 64))
        elif kind == "pair_c":
            c = pick(n_pieces - 1, n_pieces, rng.randrange(1 << 21))
            pairs[i] = (int(pairs[i]) & ((1 << 42) - 1) | 1) | c << 42 | (int(pairs[i]) & (1 << 63))
        elif kind == "pair_run":
            k = pick(200, 511, 512, 513, 2000)
            idx = (i + np.arange(k)) % len(pairs)
            pairs[idx] = np.where(pairs[idx] == 0, np.uint64(1 << 41), pairs[idx])
        else:
            t[2] = pairs_b[: rng.choice([len(pairs_b) // 2 + 8, len(pairs_b) - 8, len(pairs_b) - 3, 0])]
    elif kind == "chars":
        i = rng.randrange(len(chars))
        chars[i] = pick(0, np.uint64(rng.randrange(1 << 64)), np.uint64(n_pieces + 1) << np.uint64(35) | np.uint64(1),
                        np.uint64(n_pieces) << np.uint64(35) | np.uint64(1 << 32 | 0x41))
    elif kind == "chars_run":
        k = pick(100, 512, 513, len(chars))
        i = rng.randrange(len(chars))
        idx = (i + np.arange(min(k, len(chars)))) % len(chars)
        chars[idx] = np.where(chars[idx] == 0, np.uint64(7) << np.uint64(32), chars[idx])
    elif kind == "chars_size":
        t[3] = chars[: pick(len(chars) // 2 + 1, len(chars) - 1, 0)]
    elif kind == "ascii":
        ascii_[rng.randrange(128)] = pick(-3, -2, -1, n_pieces - 1, n_pieces, rng.randrange(-(1 << 31), 1 << 31))
        if rng.random() < 0.2:
            t[4] = ascii_[:127]
    elif kind == "small" and small is not None:
        small[rng.randrange(len(small))] = pick(np.uint64(1) << np.uint64(21), np.uint64(n_pieces),
                                                np.uint64(n_pieces + 1), np.uint64(1) << np.uint64(54) | np.uint64(5),
                                                np.uint64(rng.randrange(1 << 64)), np.uint64(0))
    elif kind == "small_size" and small is not None:
        t[5] = small[:-1]
    elif kind == "drop":
        k = rng.randrange(6)
        t[k] = None
    elif kind == "nodes_size":
        t[0] = nodes_b[: len(nodes_b) - pick(32, 64)] if rng.random() < 0.5 else np.concatenate([nodes_b, nodes_b[:32]])
    elif kind == "ragged":
        k = rng.randrange(6)
        if t[k] is not None and len(t[k]):
            t[k] = t[k].view(np.uint8)[:-1]
    elif kind == "pairs_on_unigram" and pairs_b is None:
        t[2] = np.zeros(8 * 1024, dtype=np.uint8)
    return tuple(t)


@needs_shared
def test_native_check_accepts_exactly_what_the_oracle_accepts(model, monkeypatch):
    name, art, tables = model
    n = int(art.meta["n_pieces"])
    assert _oracle(art, tables) is None
    good, err = _load(art, tables, monkeypatch)
    assert err is None
    want = {x: good.encode(x) for x in _texts()}
    rng = random.Random(name)
    seen = {True: 0, False: 0}
    for _ in range(160):
        d = _damaged(tables, rng, n)
        py = _oracle(art, d)
        tok, err = _load(art, d, monkeypatch)
        assert (err is None) == (py is None), (py, err)
        seen[py is None] += 1
        if err is not None:
            sec, _, what = py.partition(": ")
            assert f"section {sec!r}: {what}" in err
            continue
        for x in want:  # accepted: encodes without crashing, ids of the vocabulary
            ids = tok.encode(x)
            assert all(0 <= i < n for i in ids)
    assert seen[True] and seen[False]  # both outcomes exercised


@needs_shared
def test_artifact_of_an_older_layout_is_refused(model, tmp_path):
    """An artifact of the layout before the walking trie was the only trie (byte trie sections p_*, no
    layout in meta), or of another named layout: a clear error naming the layout, never a crash."""
    _, art, _ = model
    secs = {k: art.array(k) for k in art.sections if k != "meta" and k not in FT_SECTIONS}
    from fstok.compile.spm_tables import build_trie

    for k, v in zip(("p_first", "p_label", "p_target", "p_value", "p_value2"), build_trie([b"a"], [0]) + [np.zeros(2, np.int32)]):
        secs[k] = v
    meta = {k: v for k, v in art.meta.items() if k != "tables"}
    A.write_artifact(tmp_path / "old.fst", A.KIND_SPM, meta, secs, "n/a", art.source_hash)
    with pytest.raises(A.ArtifactError, match=r"old\.fst: meta\.tables: the SentencePiece tables are of layout an older one.*compile the source again"):
        fstok.load(tmp_path / "old.fst")
    A.write_artifact(tmp_path / "other.fst", A.KIND_SPM, {**art.meta, "tables": "spm-tables-99"},
                     {k: art.array(k) for k in art.sections if k != "meta"}, "n/a", art.source_hash)
    with pytest.raises(A.ArtifactError, match=f"layout 'spm-tables-99'; this fstok reads {TABLES!r}"):
        fstok.load(tmp_path / "other.fst")


@needs_shared
def test_compile_cache_rebuilds_an_older_artifact(model, tmp_path, monkeypatch):
    """A cache entry of an older layout (under the key a source maps to) is compiled again, not an error."""
    name, art, _ = model
    monkeypatch.setenv("FSTOK_CACHE_DIR", str(tmp_path))
    path = os.path.join(MODELS, FILES[name])
    tok = fstok.compile(path)
    entry = tok._art.path
    assert entry and entry.startswith(str(tmp_path))
    secs = {k: tok._art.array(k) for k in tok._art.sections if k != "meta" and k not in FT_SECTIONS}
    meta = {k: v for k, v in tok._art.meta.items() if k != "tables"}
    want = {x: tok.encode(x) for x in TEXTS}
    del tok
    A.write_artifact(entry, A.KIND_SPM, meta, secs, "n/a", art.source_hash)
    again = fstok.compile(path)
    assert again._art.meta["tables"] == TABLES
    assert {x: again.encode(x) for x in TEXTS} == want


@needs_shared
def test_merge_table_check_accepts_exactly_what_the_oracle_accepts(monkeypatch):
    """A tokenizer.json BPE stores its merge table (section hf_merges), read in place after a native check;
    on damaged tables the check and its oracle (validate_spm_walk.check_merges) agree, and a table they
    accept encodes without crashing into ids of the vocabulary."""
    from fstok.validate_spm_walk import MERGE, check_merges

    path = os.path.join(MODELS, FILES["phi-3"])
    if not os.path.exists(path):
        pytest.skip(f"{path} not present")
    art = A.parse_artifact(fstok.compile(path).to_bytes(), where=path)
    n = int(art.meta["n_pieces"])
    good = np.array(art.array("hf_merges"), copy=True)
    assert check_merges(good, n) is None
    want = {x: spm.SentencePieceTokenizer.from_artifact(art).encode(x) for x in _texts()}
    rng = random.Random(7)
    seen = {True: 0, False: 0}
    for _ in range(60):
        d = np.array(good, copy=True)
        t = d.view(MERGE)
        kind = rng.choice(["id", "key", "rank", "run", "size", "ragged", "empty", "none"])
        i = rng.randrange(len(t))
        if kind == "id":
            t["new_id"][i] = rng.choice([-2, -1, 0, n - 1, n, 1 << 30])
        elif kind == "key":
            t["key"][i] = rng.randrange(1 << 64)
        elif kind == "rank":
            t["rank"][i] = rng.randrange(1 << 32)
        elif kind == "run":
            k = rng.choice([100, 512, 513, 600])
            idx = (i + np.arange(k)) % len(t)
            t["new_id"][idx] = np.where(t["new_id"][idx] < 0, 0, t["new_id"][idx])
        elif kind == "size":
            d = d[: rng.choice([len(d) // 2 + 16, len(d) - 16])]
        elif kind == "ragged":
            d = d[:-1]
        elif kind == "empty":
            d = d[:0]
        secs = {k: art.array(k) for k in art.sections if k != "meta"}
        secs["hf_merges"] = d
        blob = A.write_artifact(None, A.KIND_SPM, art.meta, secs, "n/a", art.source_hash)
        py = check_merges(d, n)
        try:
            tok, err = spm.SentencePieceTokenizer.from_artifact(A.parse_artifact(blob, where="x")), None
        except A.ArtifactError as e:
            tok, err = None, str(e)
        assert (err is None) == (py is None), (kind, py, err)
        seen[py is None] += 1
        if err is not None:
            assert f"section 'hf_merges': {py.partition(': ')[2]}" in err
            continue
        for x in want:
            assert all(0 <= i < n for i in tok.encode(x))
    assert seen[True] and seen[False]
