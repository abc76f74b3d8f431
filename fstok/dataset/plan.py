"""Cut the inputs into shards: deterministic, from file names, sizes, contents and the shard size only.

A shard is a list of segments read in order.  Files are taken sorted by name and packed into shards of
about ``shard_bytes`` bytes on disk.  A file larger than what is left of the current shard is cut:

* uncompressed text (one document per line or per delimiter) and JSON Lines: at the document start
  nearest after the target byte (found by reading a small window; for a delimiter that can overlap
  itself, such as "\\n\\n", by scanning from the previous cut so the split is the one a reader from the
  start of the file makes);
* Parquet: between row groups;
* a compressed file or a whole-file document is never cut (its documents go to one shard).

The same inputs and options always give the same shards, whatever engine or worker count runs them,
so the output is identical byte for byte.
"""
from __future__ import annotations

import mmap
import os
from dataclasses import asdict, dataclass, field
from typing import Optional

from .readers import JSONL, PARQUET, TEXT, codec_of, format_of


@dataclass
class Segment:
    path: str
    fmt: str                 # text | jsonl | parquet
    codec: Optional[str]     # None | gz | zst
    lo: int = 0              # byte offset (text, jsonl) or first row group (parquet)
    hi: Optional[int] = None  # end byte / end row group; None: to the end of the file
    nbytes: int = 0          # bytes of the file on disk this segment covers (progress, sizing)

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class ShardPlan:
    index: int
    segments: list = field(default_factory=list)

    @property
    def nbytes(self) -> int:
        return sum(s.nbytes for s in self.segments)


def _bordered(d: bytes) -> bool:
    """True when two occurrences of ``d`` can overlap (a proper prefix equals a suffix)."""
    return any(d[:k] == d[-k:] for k in range(1, len(d)))


def _align(path: str, prev: int, target: int, size: int, delim: bytes) -> int:
    """The first document start >= target (or ``size``): the byte after an occurrence of ``delim``.
    ``prev`` is a known document start before ``target``."""
    if target >= size:
        return size
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        L = len(delim)
        if not _bordered(delim):
            # occurrences cannot overlap, so every occurrence is one the reader sees
            j = m.find(delim, max(prev, target - L))
            while j >= 0 and j + L < target:
                j = m.find(delim, j + 1)
            return size if j < 0 else min(size, j + L)
        # occurrences can overlap: follow the reader's leftmost, non-overlapping scan from prev
        j = m.find(delim, prev)
        while j >= 0 and j + L < target:
            j = m.find(delim, j + L)
        return size if j < 0 else min(size, j + L)


def _parquet_groups(path: str) -> list[int]:
    import pyarrow.parquet as pq

    md = pq.ParquetFile(path).metadata
    out = []
    for i in range(md.num_row_groups):
        rg = md.row_group(i)
        out.append(sum(rg.column(c).total_compressed_size for c in range(rg.num_columns)))
    return out


def plan_shards(files: list[str], shard_bytes: int, *, input_format: Optional[str] = None,
                split: str = "whole", delimiter: bytes = b"\n") -> list[ShardPlan]:
    """Shards for ``files`` (already sorted).  split: "whole" (a text file is one document), "lines" or
    "delimiter" (documents separated by ``delimiter``); JSON Lines and Parquet ignore it."""
    if shard_bytes < 1:
        raise ValueError(f"shard size must be positive, got {shard_bytes}")
    shards: list[ShardPlan] = [ShardPlan(0)]
    left = shard_bytes

    def close() -> None:
        nonlocal left
        if shards[-1].segments:
            shards.append(ShardPlan(len(shards)))
        left = shard_bytes

    for path in files:
        fmt = format_of(path, input_format)
        codec = codec_of(path)
        size = os.path.getsize(path)
        if fmt == PARQUET:
            if codec:
                raise ValueError(f"{path}: a compressed Parquet file (Parquet compresses its own pages)")
            groups = _parquet_groups(path)
            g = 0
            while g < len(groups):
                start, used = g, 0
                while g < len(groups) and (used == 0 or used + groups[g] <= left):
                    used += groups[g]
                    g += 1
                shards[-1].segments.append(Segment(path, fmt, None, start, g, used))
                left -= used
                if left <= 0 or g < len(groups):
                    close()
            continue
        splittable = codec is None and (fmt == JSONL or (fmt == TEXT and split != "whole"))
        delim = b"\n" if fmt == JSONL or split == "lines" else delimiter
        if not splittable:
            shards[-1].segments.append(Segment(path, fmt, codec, 0, None, size))
            left -= size
            if left <= 0:
                close()
            continue
        pos = 0
        while size - pos > left:
            cut = _align(path, pos, pos + left, size, delim)
            if cut > pos:
                shards[-1].segments.append(Segment(path, fmt, None, pos, cut, cut - pos))
            pos = cut
            close()
        if pos < size:
            shards[-1].segments.append(Segment(path, fmt, None, pos, size, size - pos))
            left -= size - pos
            if left <= 0:
                close()
    if not shards[-1].segments:
        shards.pop()
    return shards
