"""Tokenize a corpus into training shards, and read them back.

    from fstok.dataset import tokenize, open_shards
    tokenize(["data/*.jsonl.zst"], "o200k_base", "out/", append_eot=True, workers=8)
    ds = open_shards("out/")        # len(ds), ds[i] (numpy ids of document i), ds.tokens (flat)

Engines: local processes (``workers=N``), Dask (``engine="dask"``) and Ray (``engine="ray"``) write the same
bytes.  Helpers for pipelines that already use a framework: ``dask_tokenize_partition`` (Dask bag /
dataframe ``map_partitions``), ``RayTokenize`` (Ray Data ``map_batches``), ``hf_tokenize_function``
(HF ``datasets.map(batched=True)``).  User guide: docs/datasets.md.
"""
from __future__ import annotations

from .frameworks import RayTokenize, dask_tokenize_partition, hf_tokenize_function
from .readers import InputError
from .run import tokenize
from .shards import FlatTokens, ShardedDataset, open_shards

__all__ = ["tokenize", "open_shards", "ShardedDataset", "FlatTokens", "InputError", "dask_tokenize_partition",
           "RayTokenize", "hf_tokenize_function"]
