#!/usr/bin/env python3
"""Long differential run of fstok.dataset: shards vs per-document tok.encode on whole shared corpora.

    python tools/diff_dataset.py                    # every corpus, several models, whole-file and per-line
    python tools/diff_dataset.py --frameworks       # also a Ray Data map_batches and a Dask dataframe pipeline

Whole-file documents are read in small blocks and encoded in small pieces (block 4,093 bytes, pieces of
~3,000 characters), so thousands of cuts at proven boundaries are checked per corpus, with special tokens
sprinkled into the text and allowed.  Prints one line per case and exits non-zero on any mismatch.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402

import fstok  # noqa: E402
from fstok.dataset import encode as ds_encode  # noqa: E402
from fstok.dataset import open_shards, readers as ds_readers, tokenize  # noqa: E402


def _shared() -> str:
    for c in (os.environ.get("FSTOK_SHARED_DATA", ""), os.path.join(HERE, "..", "..", "shared", "data"),
              "/work/shared/data"):
        if c and os.path.isdir(os.path.join(c, "corpus")):
            return os.path.normpath(c)
    sys.exit("shared corpora not found (set FSTOK_SHARED_DATA)")


CORPORA = ["english", "multilingual", "code", "chinese_long", "stress"]


def check(ds, docs, tok, kw, eot=None) -> int:
    bad = 0
    if len(ds) != len(docs):
        print(f"    document count {len(ds)} != {len(docs)}")
        return 1
    for i, d in enumerate(docs):
        exp = tok.encode(d, **kw) + ([eot] if eot is not None else [])
        got = ds[i].tolist()
        if got != exp:
            bad += 1
            k = next((j for j, (a, b) in enumerate(zip(got, exp)) if a != b), min(len(got), len(exp)))
            print(f"    document {i}: first difference at id {k} ({len(got)} vs {len(exp)} ids)")
    return bad


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="o200k_base,cl100k_base,r50k_base,bert-base-uncased,bert-base-multilingual-cased")
    ap.add_argument("--frameworks", action="store_true")
    a = ap.parse_args()
    shared = _shared()
    ds_readers.BLOCK, ds_readers.LONG_DOC, ds_encode.PIECE_CHARS = 4093, 6000, 3000
    rng = random.Random(7)
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for model in a.models.split(","):
            tok = fstok.get_encoding(model)
            sp = "<|endoftext|>" if "<|endoftext|>" in tok.special_tokens else "[SEP]"
            for name in CORPORA:
                text = open(os.path.join(shared, "corpus", f"{name}.txt"), encoding="utf-8", newline="").read()
                words = text.split(" ")
                for i in rng.sample(range(len(words)), min(200, len(words))):
                    words[i] = words[i] + sp
                text = " ".join(words)
                d = os.path.join(tmp, f"{model}-{name}")
                os.makedirs(d)
                with open(os.path.join(d, "doc.txt"), "w", encoding="utf-8", newline="") as f:
                    f.write(text)
                kw = {"allowed_special": "all"}
                for split in ("whole", "lines"):
                    out = os.path.join(tmp, f"{model}-{name}-{split}")
                    tokenize(d, tok, out, split=split, shard_size="1MB", quiet=True, append_eot=split == "lines",
                             eot_token=sp if split == "lines" else None, **kw)
                    docs = [text] if split == "whole" else text.split("\n")
                    if split == "lines" and docs[-1] == "":
                        docs.pop()
                    eot = None if split == "whole" else int(tok.token_to_id(sp) if not isinstance(tok.special_tokens, dict)
                                                            else tok.special_tokens[sp])
                    bad = check(open_shards(out), docs, tok, kw, eot)
                    failures += bad
                    print(f"{model:30s} {name:13s} {split:6s} {len(docs):7d} docs  {'ok' if not bad else f'{bad} BAD'}",
                          flush=True)
        if a.frameworks:
            failures += frameworks(shared)
    sys.exit(1 if failures else 0)


def frameworks(shared: str) -> int:
    import dask.dataframe as dd
    import pandas as pd
    import ray
    import ray.data
    from distributed import Client, LocalCluster

    from fstok.dataset import RayTokenize, dask_tokenize_partition

    tok = fstok.get_encoding("o200k_base")
    text = open(os.path.join(shared, "corpus", "english.txt"), encoding="utf-8").read()
    docs = [p for p in text.split("\n") if p][:20000]
    exp = [tok.encode(t, disallowed_special=()) for t in docs]
    bad = 0
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c, Client(c):
        ddf = dd.from_pandas(pd.DataFrame({"text": docs}), npartitions=8)
        res = ddf.map_partitions(dask_tokenize_partition, "o200k_base", disallowed_special=(),
                                 meta={"text": object, "ids": object}).compute()
        ok = [np.asarray(g).tolist() for g in res["ids"]] == exp
        bad += not ok
        print(f"dask dataframe map_partitions: {len(docs)} docs {'ok' if ok else 'BAD'}", flush=True)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        rows = ray.data.from_items([{"i": i, "text": t} for i, t in enumerate(docs)]).map_batches(
            RayTokenize, fn_constructor_kwargs={"model": "o200k_base", "disallowed_special": ()}, concurrency=2,
            batch_format="numpy").take_all()
        got = {int(r["i"]): np.asarray(r["ids"]).tolist() for r in rows}
        ok = len(got) == len(docs) and all(got[i] == e for i, e in enumerate(exp))
        bad += not ok
        print(f"ray data map_batches: {len(docs)} docs {'ok' if ok else 'BAD'}", flush=True)
    finally:
        ray.shutdown()
    return bad


if __name__ == "__main__":
    main()
