"""Shard files: writing them (temp file + atomic rename) and reading them back as numpy memmaps.

Layouts (``format=``):

* ``bin`` -- ``shard_NNNNN.bin``: the token ids of the shard's documents one after the other, flat
  little-endian ``uint16`` (vocabularies up to 65,536 ids) or ``uint32``, no header: what nanoGPT-style
  loaders read with ``np.memmap(path, dtype=np.uint16)``.  ``shard_NNNNN.idx``: the Megatron-LM
  ``MMapIndexedDataset`` index, so ``IndexedDataset("out/shard_NNNNN")`` reads the pair as is:
  ``b"MMIDIDX\\x00\\x00"``, version ``<Q`` 1, dtype code ``<B`` (8 = uint16; 4 = int32, the same bytes as
  uint32 for ids < 2**31), sequence count ``<Q`` n, document count ``<Q`` n + 1, then sequence lengths
  ``int32[n]``, byte offsets ``int64[n]`` and document indices ``int64[n + 1]`` (0, 1, ..., n: one
  sequence per document).
* ``npy`` -- ``shard_NNNNN.npy`` (a 1-D ``.npy`` array of the same ids, 128-byte header) + the same ``.idx``.
* ``parquet`` -- ``shard_NNNNN.parquet``: one row per document, column ``ids`` of type ``list<int32>``.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
import uuid
from typing import Optional

import numpy as np

MEGATRON_MAGIC = b"MMIDIDX\x00\x00"
_CODES = {"uint16": 8, "uint32": 4}
_NPY_HEADER = 128
FORMATS = ("bin", "npy", "parquet")
MANIFEST = "manifest.json"


def token_dtype(n_vocab: int) -> str:
    return "uint16" if n_vocab <= 1 << 16 else "uint32"


def shard_name(index: int) -> str:
    return f"shard_{index:05d}"


def data_ext(fmt: str) -> str:
    return {"bin": ".bin", "npy": ".npy", "parquet": ".parquet"}[fmt]


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        while True:
            b = f.read(1 << 22)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def _npy_header(dtype: str, n: int) -> bytes:
    d = {"descr": np.dtype(dtype).newbyteorder("<").str, "fortran_order": False, "shape": (n,)}
    body = repr(d).encode("latin1")
    pad = _NPY_HEADER - 10 - len(body) - 1
    if pad < 0:  # pragma: no cover - needs > 10**60 tokens
        raise ValueError("npy header too long")
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", _NPY_HEADER - 10) + body + b" " * pad + b"\n"


def write_megatron_index(path: str, lengths: np.ndarray, dtype: str) -> None:
    n = len(lengths)
    if n and int(lengths.max()) >= 1 << 31:
        raise ValueError("a document of 2**31 tokens or more does not fit the Megatron index (int32 lengths)")
    item = np.dtype(dtype).itemsize
    ptr = np.zeros(n, dtype="<i8")
    if n > 1:
        np.cumsum(lengths[:-1].astype(np.int64) * item, out=ptr[1:])
    with open(path, "wb") as f:
        f.write(MEGATRON_MAGIC)
        f.write(struct.pack("<Q", 1))
        f.write(struct.pack("<B", _CODES[dtype]))
        f.write(struct.pack("<Q", n))
        f.write(struct.pack("<Q", n + 1))
        f.write(lengths.astype("<i4").tobytes())
        f.write(ptr.tobytes())
        f.write(np.arange(n + 1, dtype="<i8").tobytes())


def read_megatron_index(path: str):
    """(dtype name, lengths int32 memmap, pointers int64 memmap) of a Megatron .idx file."""
    with open(path, "rb") as f:
        head = f.read(34)
    if head[:9] != MEGATRON_MAGIC:
        raise ValueError(f"{path}: not a Megatron MMapIndexedDataset index (bad magic)")
    version, = struct.unpack("<Q", head[9:17])
    code, = struct.unpack("<B", head[17:18])
    n, ndoc = struct.unpack("<QQ", head[18:34])
    if version != 1:
        raise ValueError(f"{path}: index version {version}, expected 1")
    rev = {v: k for k, v in _CODES.items()}
    if code not in rev:
        raise ValueError(f"{path}: token dtype code {code} (expected 8 uint16 or 4 int32/uint32)")
    if n == 0:
        z = np.zeros(0, dtype=np.int32)
        return rev[code], z, z.astype(np.int64)
    lengths = np.memmap(path, dtype="<i4", mode="r", offset=34, shape=(n,))
    ptrs = np.memmap(path, dtype="<i8", mode="r", offset=34 + 4 * n, shape=(n,))
    return rev[code], lengths, ptrs


class ShardWriter:
    """Writes one shard to temp files in ``out_dir``; ``commit()`` renames them into place."""

    def __init__(self, out_dir: str, index: int, fmt: str, dtype: str):
        if fmt not in FORMATS:
            raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
        self.out_dir, self.index, self.fmt, self.dtype = out_dir, index, fmt, dtype
        self.name = shard_name(index)
        tag = f".tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.final = {data_ext(fmt): os.path.join(out_dir, self.name + data_ext(fmt))}
        if fmt != "parquet":
            self.final[".idx"] = os.path.join(out_dir, self.name + ".idx")
        self.tmp = {k: os.path.join(out_dir, "." + os.path.basename(v) + tag) for k, v in self.final.items()}
        self.lengths = []          # per document, in chunks of int64 arrays
        self._len_buf: list[int] = []
        self.tokens = 0
        self.documents = 0
        if fmt == "parquet":
            import pyarrow as pa

            self._pa = pa
            self._schema = pa.schema([("ids", pa.list_(pa.int32()))])
            self._rows: list[np.ndarray] = []
            self._row_tokens = 0
            self._pq = None
        else:
            self._f = open(self.tmp[data_ext(fmt)], "wb")
            if fmt == "npy":
                self._f.write(b"\0" * _NPY_HEADER)
        self._np_dtype = np.dtype(dtype).newbyteorder("<")

    def add(self, ids: np.ndarray) -> None:
        self.documents += 1
        self.tokens += len(ids)
        self._len_buf.append(len(ids))
        if len(self._len_buf) >= 65536:
            self.lengths.append(np.array(self._len_buf, dtype=np.int64))
            self._len_buf = []
        if self.fmt == "parquet":
            self._rows.append(ids)
            self._row_tokens += len(ids)
            if self._row_tokens >= 1 << 20 or len(self._rows) >= 1 << 16:
                self._flush_rows()
            return
        if ids.dtype != self._np_dtype:
            ids = ids.astype(self._np_dtype)
        self._f.write(ids.data)

    def _flush_rows(self) -> None:
        if not self._rows:
            return
        pa = self._pa
        if self._pq is None:
            import pyarrow.parquet as pq

            self._pq = pq.ParquetWriter(self.tmp[".parquet"], self._schema, compression="zstd")
        offs = np.zeros(len(self._rows) + 1, dtype=np.int32)
        np.cumsum([len(r) for r in self._rows], out=offs[1:])
        vals = np.concatenate(self._rows).astype(np.int32) if self._row_tokens else np.zeros(0, np.int32)
        arr = pa.ListArray.from_arrays(pa.array(offs), pa.array(vals))
        self._pq.write_table(pa.table({"ids": arr}, schema=self._schema))
        self._rows, self._row_tokens = [], 0

    def lengths_array(self) -> np.ndarray:
        parts = self.lengths + [np.array(self._len_buf, dtype=np.int64)]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def commit(self) -> dict:
        """Close, rename into place, and describe the files: {suffix: {name, bytes, sha256}}."""
        if self.fmt == "parquet":
            self._flush_rows()
            if self._pq is None:
                import pyarrow.parquet as pq

                self._pq = pq.ParquetWriter(self.tmp[".parquet"], self._schema, compression="zstd")
            self._pq.close()
        else:
            if self.fmt == "npy":
                self._f.seek(0)
                self._f.write(_npy_header(self.dtype, self.tokens))
            self._f.flush()
            os.fsync(self._f.fileno())
            self._f.close()
            write_megatron_index(self.tmp[".idx"], self.lengths_array(), self.dtype)
        info = {}
        for k, tmp in self.tmp.items():
            info[k] = {"name": os.path.basename(self.final[k]), "bytes": os.path.getsize(tmp),
                       "sha256": file_sha256(tmp)}
            os.replace(tmp, self.final[k])
        return info

    def abort(self) -> None:
        try:
            if self.fmt == "parquet":
                if self._pq is not None:
                    self._pq.close()
            else:
                self._f.close()
        except Exception:
            pass
        for tmp in self.tmp.values():
            try:
                os.unlink(tmp)
            except OSError:
                pass


def atomic_write_json(path: str, obj) -> None:
    tmp = f"{path}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------------------- reading
class FlatTokens:
    """All token ids of a sharded dataset as one flat sequence (a numpy memmap per shard underneath).

    ``len(t)``, ``t[i]``, ``t[a:b]`` (a numpy array; a slice within one shard is a memmap view),
    ``np.asarray(t)`` (copies when there are several shards).  One shard: use ``t.shards[0]``."""

    def __init__(self, arrays: list):
        self.shards = arrays
        self.starts = np.zeros(len(arrays) + 1, dtype=np.int64)
        if arrays:
            np.cumsum([len(a) for a in arrays], out=self.starts[1:])
        self.dtype = arrays[0].dtype if arrays else np.dtype(np.uint32)

    def __len__(self) -> int:
        return int(self.starts[-1])

    def __getitem__(self, k):
        n = len(self)
        if isinstance(k, slice):
            a, b, step = k.indices(n)
            if step != 1:
                return np.asarray(self[a:b])[::step]
            if b <= a:
                return np.zeros(0, dtype=self.dtype)
            s = int(np.searchsorted(self.starts, a, side="right")) - 1
            e = int(np.searchsorted(self.starts, b, side="left")) - 1
            if s == e:
                return self.shards[s][a - self.starts[s]:b - self.starts[s]]
            parts = [self.shards[s][a - self.starts[s]:]]
            parts += [self.shards[j][:] for j in range(s + 1, e)]
            parts.append(self.shards[e][:b - self.starts[e]])
            return np.concatenate(parts)
        i = int(k)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"token index {k} out of range ({n} tokens)")
        s = int(np.searchsorted(self.starts, i, side="right")) - 1
        return self.shards[s][i - self.starts[s]]

    def __array__(self, dtype=None, copy=None):
        a = self.shards[0][:] if len(self.shards) == 1 else (
            np.concatenate(self.shards) if self.shards else np.zeros(0, self.dtype))
        return a.astype(dtype) if dtype is not None else a

    def __repr__(self) -> str:
        return f"<FlatTokens {len(self):,} tokens in {len(self.shards)} shard(s), dtype {self.dtype}>"


class ShardedDataset:
    """The documents of a ``tokenize`` output directory, in input order.

    ``len(ds)``: documents; ``ds[i]``: the ids of document i (numpy, a memmap view for bin / npy);
    ``ds.tokens``: every id as one flat sequence (``FlatTokens``); ``ds.manifest``: the manifest dict;
    ``ds.doc_offsets``: int64 start of every document in ``ds.tokens`` (plus the end)."""

    def __init__(self, out_dir: str):
        self.dir = os.fspath(out_dir)
        mpath = os.path.join(self.dir, MANIFEST)
        if not os.path.exists(mpath):
            raise FileNotFoundError(f"{mpath}: no manifest (not a finished fstok tokenize output)")
        with open(mpath, encoding="utf-8") as f:
            self.manifest = json.load(f)
        if self.manifest.get("format") != "fstok-shards":
            raise ValueError(f"{mpath}: not an fstok shards manifest")
        self.layout = self.manifest["layout"]
        self.dtype = np.dtype(self.manifest["dtype"]).newbyteorder("<")
        arrays, lengths = [], []
        for sh in self.manifest["shards"]:
            files = sh["files"]
            if self.layout == "parquet":
                ids, lens = self._read_parquet(os.path.join(self.dir, files[".parquet"]["name"]))
            else:
                data = os.path.join(self.dir, files[data_ext(self.layout)]["name"])
                _, lens, _ = read_megatron_index(os.path.join(self.dir, files[".idx"]["name"]))
                off = _NPY_HEADER if self.layout == "npy" else 0
                n = sh["tokens"]
                ids = (np.memmap(data, dtype=self.dtype, mode="r", offset=off, shape=(n,)) if n
                       else np.zeros(0, self.dtype))
                if os.path.getsize(data) != off + n * self.dtype.itemsize:
                    raise ValueError(f"{data}: size does not match the manifest ({n} tokens)")
            arrays.append(ids)
            lengths.append(np.asarray(lens, dtype=np.int64))
        self.tokens = FlatTokens(arrays)
        lens = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
        self.doc_offsets = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(lens, out=self.doc_offsets[1:])

    def _read_parquet(self, path: str):
        import pyarrow.parquet as pq

        col = pq.read_table(path, columns=["ids"], memory_map=True).column("ids").combine_chunks()
        offs = col.offsets.to_numpy()
        vals = col.values.to_numpy(zero_copy_only=False)
        vals = vals[offs[0]:offs[-1]].astype(self.dtype)
        return vals, np.diff(offs)

    def __len__(self) -> int:
        return len(self.doc_offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        n = len(self)
        i = int(i)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"document index {i} out of range ({n} documents)")
        return self.tokens[int(self.doc_offsets[i]):int(self.doc_offsets[i + 1])]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __repr__(self) -> str:
        return f"<ShardedDataset {self.dir!r}: {len(self):,} documents, {len(self.tokens):,} tokens, {self.layout}>"


def open_shards(out_dir: str) -> ShardedDataset:
    """The documents written by ``fstok.dataset.tokenize(..., out=out_dir)``, in input order."""
    return ShardedDataset(out_dir)
