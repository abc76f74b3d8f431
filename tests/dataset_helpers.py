"""Shared inputs and the per-document oracle for tests/test_dataset_*.py."""
import gzip
import json
import os

import numpy as np

from conftest import read_corpus


def slice_lines(name: str, start: int, nbytes: int) -> str:
    """Whole lines of a shared corpus from about character ``start``, about ``nbytes`` characters."""
    t = read_corpus(name)
    a = t.rfind("\n", 0, start) + 1 if start else 0
    b = t.find("\n", a + nbytes)
    return t[a:] if b < 0 else t[a:b + 1]


def make_corpus_dir(d, variant: int = 0) -> dict:
    """A small mixed folder: text (lines), JSON Lines, .gz and .zst JSON Lines.  Returns {name: docs}."""
    import zstandard

    os.makedirs(d, exist_ok=True)
    out = {}
    eng = slice_lines("english", 1000 + 7919 * variant, 60_000)
    ml = slice_lines("multilingual", 0, 40_000)
    code = slice_lines("code", 5000, 50_000)
    zh = slice_lines("chinese_long", 3000, 30_000)
    with open(os.path.join(d, "a_english.txt"), "w", encoding="utf-8", newline="") as f:
        f.write(eng)
    out["a_english.txt"] = eng
    recs = [{"id": i, "text": p} for i, p in enumerate((ml + "\n" + code).split("\n\n")) if p]
    with open(os.path.join(d, "b_mixed.jsonl"), "w", encoding="utf-8", newline="") as f:
        for r in recs:
            f.write(json.dumps(r, ensure_ascii=bool(r["id"] % 2)) + "\n")
    out["b_mixed.jsonl"] = [r["text"] for r in recs]
    zrecs = [{"text": p} for p in zh.split("\n") if p]
    data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in zrecs).encode("utf-8")
    with open(os.path.join(d, "c_zh.jsonl.gz"), "wb") as f:
        f.write(gzip.compress(data))
    with open(os.path.join(d, "d_zh.jsonl.zst"), "wb") as f:
        f.write(zstandard.ZstdCompressor().compress(data))
    out["c_zh.jsonl.gz"] = out["d_zh.jsonl.zst"] = [r["text"] for r in zrecs]
    return out


def docs_of_dir(d: str, split: str = "lines") -> list:
    """The documents a reader of the folder sees, in order (files sorted by name), computed plainly."""
    docs = []
    for name in sorted(os.listdir(d)):
        p = os.path.join(d, name)
        if name.endswith(".txt"):
            with open(p, encoding="utf-8", newline="") as f:
                t = f.read()
            if split == "whole":
                docs.append(t)
            else:
                parts = t.split("\n")
                if parts and parts[-1] == "":
                    parts.pop()
                docs += parts
        elif ".jsonl" in name:
            raw = open(p, "rb").read()
            if name.endswith(".gz"):
                raw = gzip.decompress(raw)
            elif name.endswith(".zst"):
                import zstandard

                raw = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
            docs += [json.loads(line)["text"] for line in raw.decode("utf-8").split("\n") if line.strip()]
    return docs


def expected_ids(tok, docs, eot=None, **kw):
    out = []
    for d in docs:
        ids = list(tok.encode(d, **kw))
        if eot is not None:
            ids.append(eot)
        out.append(ids)
    return out


def assert_docs(ds, expected):
    assert len(ds) == len(expected)
    for i, e in enumerate(expected):
        got = ds[i]
        assert got.tolist() == e, f"document {i}: {len(got)} ids vs {len(e)}"
    flat = np.concatenate([np.asarray(e, dtype=np.int64) for e in expected]) if expected else np.zeros(0)
    assert len(ds.tokens) == len(flat)
    assert np.array_equal(np.asarray(ds.tokens).astype(np.int64), flat)


def shard_bytes(out: str) -> dict:
    """{file name: bytes} of every shard data / index file and the manifest (not done records)."""
    res = {}
    for f in sorted(os.listdir(out)):
        if f.startswith("shard_") and not f.endswith(".done.json") or f == "manifest.json":
            with open(os.path.join(out, f), "rb") as fh:
                res[f] = fh.read()
    return res
