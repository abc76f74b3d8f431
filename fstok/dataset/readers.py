"""Streaming readers: input files -> documents, with bounded memory and located errors.

A *segment* is the part of one input file that one shard reads: a byte range ``[lo, hi)`` of an
uncompressed text / JSON Lines file (aligned to document starts by the planner), a range of row groups
of a Parquet file, or a whole compressed file.  ``iter_segment`` turns a segment into *events*:

    ("doc", text, loc)      one whole document
    ("part", text, loc)     a piece of a long document (more pieces follow; the last one is a "doc")
    ("bad", reason, loc)    a document that cannot be read (invalid UTF-8, bad JSON, missing field, ...)

``loc`` is a ``Loc`` (file, byte offset, line or row).  Progress is reported through ``progress(nbytes)``
with the raw bytes read from disk (compressed bytes for .gz / .zst; ``progress(n)`` with a count for
Parquet), which the shard worker hashes and counts.
"""
from __future__ import annotations

import glob
import json
import os
import zlib
from dataclasses import dataclass
from typing import Callable, Iterator, Optional

BLOCK = 1 << 22          # raw read size (4 MiB)
LONG_DOC = 1 << 23       # a document longer than this (bytes) is passed on in pieces ("part" events)

TEXT, JSONL, PARQUET = "text", "jsonl", "parquet"
_JSONL_EXT = (".jsonl", ".ndjson", ".json")


class InputError(ValueError):
    """An input that cannot be read, with its file and line (or row)."""


@dataclass(frozen=True)
class Loc:
    path: str
    offset: int                   # byte offset in the (decompressed) file of the document start
    line: Optional[int] = None    # 1-based line of the document start, when known cheaply
    row: Optional[int] = None     # Parquet: 0-based row in the file

    def describe(self) -> str:
        if self.row is not None:
            return f"{self.path}: row {self.row}"
        line = self.line if self.line is not None else _line_of(self.path, self.offset)
        return f"{self.path}: line {line}" if line is not None else f"{self.path}: byte {self.offset}"


def _line_of(path: str, offset: int) -> Optional[int]:
    """1-based line number of a byte offset of an uncompressed file (counted only for an error message)."""
    try:
        n = 1
        with open(path, "rb") as f:
            left = offset
            while left > 0:
                b = f.read(min(BLOCK, left))
                if not b:
                    break
                n += b.count(b"\n")
                left -= len(b)
        return n
    except OSError:
        return None


# ---------------------------------------------------------------------------------------------- inputs
def codec_of(path: str) -> Optional[str]:
    p = path.lower()
    if p.endswith(".gz"):
        return "gz"
    if p.endswith(".zst") or p.endswith(".zstd"):
        return "zst"
    return None


def format_of(path: str, declared: Optional[str] = None) -> str:
    if declared:
        if declared not in (TEXT, JSONL, PARQUET):
            raise ValueError(f"input format must be text, jsonl or parquet, got {declared!r}")
        return declared
    p = path.lower()
    for ext in (".gz", ".zst", ".zstd"):
        if p.endswith(ext):
            p = p[: -len(ext)]
    if p.endswith(".parquet") or p.endswith(".pq"):
        return PARQUET
    if p.endswith(_JSONL_EXT):
        return JSONL
    return TEXT


def expand_inputs(inputs) -> list[str]:
    """Files named by ``inputs`` (paths, globs, directories: every file below them), absolute, sorted by
    name, without duplicates.  A pattern or path that matches nothing is an error."""
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    out: set[str] = set()
    for item in inputs:
        s = os.fspath(item)
        if os.path.isdir(s):
            found = [os.path.join(d, f) for d, _, fs in os.walk(s) for f in fs if not f.startswith(".")]
        elif os.path.exists(s):
            found = [s]
        else:
            found = [p for p in glob.glob(s, recursive=True) if os.path.isfile(p)]
            if not found:
                raise FileNotFoundError(f"no input matches {s!r}")
        if not found:
            raise FileNotFoundError(f"{s}: directory holds no files")
        out.update(os.path.abspath(p) for p in found)
    if not out:
        raise ValueError("no inputs given")
    return sorted(out)


# ---------------------------------------------------------------------------------------------- raw blocks
def _raw_blocks(path: str, codec: Optional[str], lo: int, hi: Optional[int],
                progress: Optional[Callable[[int], None]]) -> Iterator[bytes]:
    """Decompressed blocks of ``path`` (bytes [lo, hi) for an uncompressed file).  A .gz / .zst that
    ends inside a compressed stream raises InputError (the caller adds the line)."""
    with open(path, "rb", buffering=0) as f:
        if codec is None:
            f.seek(lo)
            left = None if hi is None else hi - lo
            while left is None or left > 0:
                b = f.read(BLOCK if left is None else min(BLOCK, left))
                if not b:
                    break
                if left is not None:
                    left -= len(b)
                if progress:
                    progress(b)
                yield b
            return
        if codec == "gz":
            yield from _members(f, lambda: zlib.decompressobj(wbits=47), zlib.error, "gzip stream", "member",
                                progress)   # gzip or zlib header; members follow each other
        elif codec == "zst":
            import zstandard

            dctx = zstandard.ZstdDecompressor()
            yield from _members(f, dctx.decompressobj, zstandard.ZstdError, "zstd stream", "frame", progress)
        else:  # pragma: no cover
            raise ValueError(f"unknown codec {codec!r}")


def _members(f, new_decompressor, error, what: str, unit: str,
             progress: Optional[Callable[[int], None]]) -> Iterator[bytes]:
    """Decompressed blocks of a file of concatenated compressed members (gzip members, zstd frames): a new
    decompressor starts on the unused data after each member; a file ending inside one raises InputError."""
    d = new_decompressor()
    started = False
    while True:
        raw = f.read(BLOCK)
        if progress and raw:
            progress(raw)
        if not raw:
            if started and not d.eof:
                raise InputError(f"truncated {what} (the file ends inside a {unit})")
            return
        while raw:
            started = True
            try:
                out = d.decompress(raw)
            except error as e:
                raise InputError(f"corrupt {what} ({e})") from None
            if out:
                yield out
            if d.eof:
                raw = d.unused_data
                d = new_decompressor()
                started = False
            else:
                raw = b""


# ---------------------------------------------------------------------------------------------- text / jsonl
def _decode(b: bytes, loc: Loc):
    try:
        return b.decode("utf-8"), None
    except UnicodeDecodeError as e:
        line = None
        if loc.line is not None:
            line = loc.line + b.count(b"\n", 0, e.start)
        where = Loc(loc.path, loc.offset + e.start, line, loc.row)
        return None, (f"invalid UTF-8 at byte {loc.offset + e.start} ({e.reason})", where)


def iter_delimited(path: str, codec: Optional[str], lo: int, hi: Optional[int], delim: bytes, *,
                   jsonl_field: Optional[str] = None, keep_delim: bool = False,
                   progress=None) -> Iterator[tuple]:
    """Documents of a file separated by ``delim`` (b"\\n" for lines and JSON Lines), from byte ``lo`` (a
    document start) to ``hi``.  For JSON Lines, blank lines are not documents."""
    line = 1 if lo == 0 else None
    pos = lo
    buf = b""
    L = len(delim)
    count_lines = line is not None
    blocks = _raw_blocks(path, codec, lo, hi, progress)
    long_dec = None   # incremental decoder while a long document is being passed on in parts
    long_loc = None
    eof = False
    while not eof:
        try:
            b = next(blocks)
        except StopIteration:
            eof = True
            b = b""
        except InputError as e:
            # what was decompressed so far is complete documents plus one cut-off document
            loc = Loc(path, pos, line)
            raise InputError(f"{loc.describe()}: {e}") from None
        data = buf + b if buf else b
        start = 0
        while True:
            j = data.find(delim, start)
            if j < 0:
                break
            end = j + L if keep_delim else j
            piece = data[start:end]
            loc = long_loc or Loc(path, pos, line)
            if long_dec is not None:
                yield from _finish_long(long_dec, piece, loc, jsonl_field)
                long_dec = long_loc = None
            else:
                yield from _one(piece, loc, jsonl_field)
            consumed = j + L - start
            if count_lines:
                line += data.count(b"\n", start, j + L)
            pos += consumed
            start = j + L
        rest = data[start:]
        if eof:
            if rest or long_dec is not None:
                loc = long_loc or Loc(path, pos, line)
                if long_dec is not None:
                    yield from _finish_long(long_dec, rest, loc, jsonl_field)
                else:
                    yield from _one(rest, loc, jsonl_field)
            return
        if len(rest) > LONG_DOC and jsonl_field is None:
            # a long document: pass it on in parts (bounded memory); keep the last bytes that could
            # start a delimiter
            import codecs

            if long_dec is None:
                long_dec = codecs.getincrementaldecoder("utf-8")("strict")
                long_loc = Loc(path, pos, line)
            keep = L - 1
            head, rest = rest[: len(rest) - keep], rest[len(rest) - keep:]
            try:
                s = long_dec.decode(head)
            except UnicodeDecodeError as e:
                yield ("bad", f"invalid UTF-8 in a long document ({e.reason})", long_loc)
                # skip to the end of this document
                long_dec = _Skipping()
                s = ""
            if s:
                yield ("part", s, long_loc)
            if count_lines:
                line += head.count(b"\n")
            pos += len(head)
        buf = rest


class _Skipping:
    """Stands in for the decoder of a long document already reported bad: eats the rest of it."""

    def decode(self, b, final=False):
        return ""


def _finish_long(dec, tail: bytes, loc: Loc, jsonl_field):
    if isinstance(dec, _Skipping):
        return
    try:
        s = dec.decode(tail, final=True)
    except UnicodeDecodeError as e:
        yield ("bad", f"invalid UTF-8 in a long document ({e.reason})", loc)
        return
    yield ("doc", s, loc)


def _one(piece: bytes, loc: Loc, jsonl_field: Optional[str]):
    if jsonl_field is None:
        s, err = _decode(piece, loc)
        if err:
            yield ("bad", err[0], err[1])
        else:
            yield ("doc", s, loc)
        return
    if not piece.strip():
        return
    try:
        try:
            obj = _fast_loads(piece)
        except ValueError:  # orjson is stricter (NaN, huge ints, lone surrogates): json decides
            obj = json.loads(piece)
    except UnicodeDecodeError as e:
        yield ("bad", f"invalid UTF-8 in a JSON line ({e.reason})", loc)
        return
    except ValueError as e:
        yield ("bad", f"invalid JSON ({e})", loc)
        return
    if not isinstance(obj, dict):
        yield ("bad", f"JSON line is a {type(obj).__name__}, not an object", loc)
        return
    v = obj.get(jsonl_field, _MISSING)
    if v is _MISSING:
        yield ("bad", f"no field {jsonl_field!r} (fields: {', '.join(list(obj)[:8])})", loc)
    elif not isinstance(v, str):
        yield ("bad", f"field {jsonl_field!r} is {type(v).__name__}, not a string", loc)
    else:
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            yield ("bad", f"field {jsonl_field!r} holds a lone surrogate (a \\ud8xx escape)", loc)
            return
        yield ("doc", v, loc)


_MISSING = object()

try:  # 3-4x faster parsing when installed; the same objects for what json accepts
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover
    _fast_loads = json.loads


def iter_whole(path: str, codec: Optional[str], progress=None) -> Iterator[tuple]:
    """One document: the whole file (passed on in parts when it is long)."""
    import codecs

    dec = codecs.getincrementaldecoder("utf-8")("strict")
    loc = Loc(path, 0, 1)
    pending: list[str] = []
    size = 0
    pos = 0
    line = 1
    try:
        for b in _raw_blocks(path, codec, 0, None, progress):
            try:
                s = dec.decode(b)
            except UnicodeDecodeError as e:
                where = Loc(path, pos + e.start, line + b.count(b"\n", 0, e.start))
                yield ("bad", f"invalid UTF-8 at byte {pos + e.start} ({e.reason})", where)
                return
            pos += len(b)
            line += b.count(b"\n")
            pending.append(s)
            size += len(b)
            if size > LONG_DOC:
                yield ("part", "".join(pending), loc)
                pending, size = [], 0
        s = dec.decode(b"", final=True)
    except UnicodeDecodeError as e:
        yield ("bad", f"invalid UTF-8 at the end of the file ({e.reason})", Loc(path, pos, line))
        return
    except InputError as e:
        raise InputError(f"{Loc(path, pos, line).describe()}: {e}") from None
    pending.append(s)
    yield ("doc", "".join(pending), loc)


# ---------------------------------------------------------------------------------------------- parquet
def iter_parquet(path: str, rg_lo: int, rg_hi: int, column: str, progress=None) -> Iterator[tuple]:
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path)
    if column not in pf.schema_arrow.names:
        raise InputError(f"{path}: no column {column!r} (columns: {', '.join(pf.schema_arrow.names[:12])})")
    md = pf.metadata
    row = sum(md.row_group(i).num_rows for i in range(rg_lo))
    for rg in range(rg_lo, rg_hi):
        t = pf.read_row_group(rg, columns=[column])
        col = t.column(0)
        for chunk in col.chunks:
            for v in chunk.to_pylist():
                loc = Loc(path, 0, None, row)
                row += 1
                if isinstance(v, str):
                    yield ("doc", v, loc)
                elif isinstance(v, bytes):
                    s, err = _decode(v, loc)
                    yield ("bad", err[0], loc) if err else ("doc", s, loc)
                elif v is None:
                    yield ("bad", f"column {column!r} is null", loc)
                else:
                    yield ("bad", f"column {column!r} holds {type(v).__name__}, not a string", loc)
        del t, col
        if progress:
            rgm = md.row_group(rg)
            progress(sum(rgm.column(i).total_compressed_size for i in range(rgm.num_columns)))
