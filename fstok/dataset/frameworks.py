"""Tokenize inside the data frameworks people already use: Dask, Ray Data, HF ``datasets``.

Each helper takes the model as a *name or path* (``"o200k_base"``, ``"out/tokenizer.fst"``) and loads it
once per worker process (an artifact path is mmap-loaded: its pages are shared by the processes of a
machine), so a task ships a short string, not the tokenizer.  A tokenizer object works too (it pickles
as its artifact bytes).  Ids equal ``tok.encode(text, allowed_special=..., disallowed_special=...)``.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from .encode import DocEncoder, special_kwargs

_CACHE: dict = {}


def _encoder(model, allowed_special, disallowed_special, append_eot, eot_token) -> DocEncoder:
    key = (model if isinstance(model, str) else id(model), repr(allowed_special), repr(disallowed_special),
           append_eot, eot_token)
    enc = _CACHE.get(key)
    if enc is None:
        from .run import _eot_id, _resolve_tokenizer

        tok = _resolve_tokenizer(model)
        enc = DocEncoder(tok, special_kwargs(tok, allowed_special, disallowed_special),
                         _eot_id(tok, append_eot, eot_token))
        _CACHE[key] = enc
    return enc


def _encode_all(enc: DocEncoder, texts) -> list:
    return [enc.encode(t) for t in texts]


def dask_tokenize_partition(partition, model, column: str = "text", out_column: str = "ids", *,
                            allowed_special=None, disallowed_special=None, append_eot: bool = False,
                            eot_token: Optional[str] = None):
    """For ``map_partitions``: a Dask bag partition (a list of str) -> a list of uint32 arrays; a Dask
    dataframe partition (pandas) -> the partition with an ``out_column`` of uint32 arrays.

        bag.map_partitions(dask_tokenize_partition, "o200k_base")
        ddf.map_partitions(dask_tokenize_partition, "o200k_base", meta={**ddf.dtypes.to_dict(), "ids": object})
    """
    enc = _encoder(model, allowed_special, disallowed_special, append_eot, eot_token)
    if hasattr(partition, "columns"):  # pandas DataFrame
        out = partition.copy()
        out[out_column] = _encode_all(enc, partition[column].tolist())
        return out
    return _encode_all(enc, list(partition))


class RayTokenize:
    """A Ray Data ``map_batches`` callable class (one tokenizer per actor):

        ds.map_batches(RayTokenize, fn_constructor_kwargs={"model": "o200k_base"}, concurrency=4,
                       batch_format="numpy")

    adds ``out_column`` (an object array of uint32 id arrays) to each batch; ``batch_format`` "numpy"
    (dict of arrays) or "pandas"."""

    def __init__(self, model, column: str = "text", out_column: str = "ids", *, allowed_special=None,
                 disallowed_special=None, append_eot: bool = False, eot_token: Optional[str] = None):
        self.enc = _encoder(model, allowed_special, disallowed_special, append_eot, eot_token)
        self.column, self.out_column = column, out_column

    def __call__(self, batch):
        texts = batch[self.column]
        ids = _encode_all(self.enc, texts.tolist() if hasattr(texts, "tolist") else list(texts))
        if hasattr(batch, "columns"):  # pandas
            batch = batch.copy()
            batch[self.out_column] = ids
            return batch
        arr = np.empty(len(ids), dtype=object)
        arr[:] = ids
        out = dict(batch)
        out[self.out_column] = arr
        return out


class hf_tokenize_function:  # noqa: N801 - used like a function
    """For HF ``datasets``: ``ds.map(hf_tokenize_function("o200k_base"), batched=True, num_proc=N)`` adds
    ``input_ids`` (lists of ints).  The object holds only the model name / path and options, so
    ``datasets`` fingerprints (caches) it by them and each process loads the tokenizer once."""

    def __init__(self, model, column: str = "text", out_column: str = "input_ids", *, allowed_special=None,
                 disallowed_special=None, append_eot: bool = False, eot_token: Optional[str] = None):
        self.model, self.column, self.out_column = model, column, out_column
        self.opts = (allowed_special, disallowed_special, append_eot, eot_token)

    def __call__(self, batch: dict) -> dict:
        enc = _encoder(self.model, *self.opts)
        return {self.out_column: [a.tolist() for a in _encode_all(enc, batch[self.column])]}

    def __repr__(self) -> str:
        return f"hf_tokenize_function({self.model!r}, column={self.column!r})"


__all__ = ["dask_tokenize_partition", "RayTokenize", "hf_tokenize_function"]
