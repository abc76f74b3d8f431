"""The fstok artifact format: the single source of the binary layout.

Every compiled tokenizer (WordPiece, regex DFA, BPE, ...) is one file:

    offset 0    header (128 bytes, little-endian)
                  magic            8s   b"FSTOKART"
                  format_version   u32
                  kind             u32  (KIND_* below)
                  header_size      u32  (128)
                  n_sections       u32
                  file_size        u64  (total bytes, checked before anything else)
                  payload_crc32    u32  (zlib.crc32 of bytes [128, file_size))
                  header_crc32     u32  (crc32 of the header with this field zeroed)
                  unicode_version  16s  (ASCII, NUL padded: the Unicode tables the
                                         artifact was compiled against)
                  source_hash      32s  (sha256 of the sources and options)
                  reserved         40s
    offset 128  section table: n_sections entries of 64 bytes
                  name    32s (ASCII, NUL padded)
                  dtype   8s  (numpy dtype string, e.g. "<u4", "|u1")
                  offset  u64 (from start of file, multiple of ALIGN)
                  nbytes  u64
                  count   u64 (number of elements)
    then        section payloads, each aligned to ALIGN bytes.

The section named "meta" holds UTF-8 JSON with small settings.  Arrays are
flat little-endian so numpy (np.frombuffer) and C read them straight from an
mmap with no parsing.  `read_artifact` validates magic, version, sizes,
alignment and both checksums before any offset is trusted; structural checks
of the arrays themselves (targets in range, ...) belong to each kind's loader.
"""
from __future__ import annotations

import hashlib
import json
import mmap
import os
import struct
import threading
import zlib
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

try:  # zlib's CRC-32 folded with carry-less multiplies (several times faster on the payload of every load)
    from .runtime._crc import crc32 as _crc32
except ImportError:
    _crc32 = zlib.crc32

MAGIC = b"FSTOKART"
FORMAT_VERSION = 1
HEADER_SIZE = 128
SECTION_ENTRY_SIZE = 64
ALIGN = 64

KIND_WORDPIECE = 1
KIND_REGEX_DFA = 2
KIND_BPE = 3
KIND_SPM = 7  # SentencePiece-family models (fstok.spm)
KIND_PIPELINE = 8  # tokenizer.json pipelines (fstok.pipeline.tokenizer)
KIND_TEKKEN = 9  # Mistral tekken (fstok.pipeline.tekken)
KIND_NAMES = {KIND_WORDPIECE: "wordpiece", KIND_REGEX_DFA: "regex_dfa", KIND_BPE: "bpe", KIND_SPM: "spm",
              KIND_PIPELINE: "pipeline", KIND_TEKKEN: "tekken"}

_HEADER = struct.Struct("<8sIIIIQII16s32s40s")
_ENTRY = struct.Struct("<32s8sQQQ")
assert _HEADER.size == HEADER_SIZE and _ENTRY.size == SECTION_ENTRY_SIZE

_ALLOWED_DTYPES = {"|u1", "|i1", "<u2", "<i2", "<u4", "<i4", "<u8", "<i8"}


class ArtifactError(ValueError):
    """A file is not a valid fstok artifact (truncated, corrupted, wrong version...)."""


def source_hash(*parts: bytes | str) -> bytes:
    """sha256 over length-prefixed parts: the identity of what an artifact was built from."""
    h = hashlib.sha256()
    for p in parts:
        b = p.encode("utf-8") if isinstance(p, str) else bytes(p)
        h.update(struct.pack("<Q", len(b)))
        h.update(b)
    return h.digest()


def _as_section(value: Any) -> tuple[str, bytes, int]:
    if isinstance(value, (bytes, bytearray, memoryview)):
        b = bytes(value)
        return "|u1", b, len(b)
    arr = np.ascontiguousarray(value)
    dt = arr.dtype.newbyteorder("<") if arr.dtype.byteorder not in ("|", "<", "=") else arr.dtype
    arr = arr.astype(dt.newbyteorder("<") if dt.itemsize > 1 else dt, copy=False)
    code = arr.dtype.str
    if code not in _ALLOWED_DTYPES:
        raise TypeError(f"section dtype {code} is not allowed in an artifact")
    return code, arr.tobytes(), arr.size


def _pad(n: int) -> int:
    return (-n) % ALIGN


def write_artifact(
    path: str | os.PathLike | None,
    kind: int,
    meta: Mapping[str, Any],
    sections: Mapping[str, Any],
    unicode_version: str,
    src_hash: bytes,
) -> bytes:
    """Serialize an artifact; write it to `path` (atomically) when given; return the bytes."""
    if kind not in KIND_NAMES:
        raise ValueError(f"unknown artifact kind {kind}")
    if len(src_hash) != 32:
        raise ValueError("source hash must be 32 bytes (sha256)")
    all_sections: dict[str, Any] = {"meta": json.dumps(dict(meta), sort_keys=True).encode("utf-8")}
    for name, value in sections.items():
        if name == "meta":
            raise ValueError("'meta' is reserved")
        all_sections[name] = value
    encoded = []
    for name, value in all_sections.items():
        nb = name.encode("ascii")
        if not nb or len(nb) > 32:
            raise ValueError(f"bad section name {name!r}")
        encoded.append((nb, *_as_section(value)))
    table_end = HEADER_SIZE + SECTION_ENTRY_SIZE * len(encoded)
    offset = table_end + _pad(table_end)
    entries, payload_parts = [], []
    cursor = table_end
    for nb, code, data, count in encoded:
        payload_parts.append(b"\0" * (offset - cursor))
        entries.append(_ENTRY.pack(nb, code.encode("ascii"), offset, len(data), count))
        payload_parts.append(data)
        cursor = offset + len(data)
        offset = cursor + _pad(cursor)
    body = b"".join(entries) + b"".join(payload_parts)
    file_size = HEADER_SIZE + len(body)
    uv = unicode_version.encode("ascii")
    if len(uv) > 16:
        raise ValueError("unicode version string too long")
    crc = _crc32(body)
    hdr = _HEADER.pack(MAGIC, FORMAT_VERSION, kind, HEADER_SIZE, len(encoded), file_size, crc, 0, uv, src_hash, b"")
    hcrc = zlib.crc32(hdr)
    hdr = _HEADER.pack(MAGIC, FORMAT_VERSION, kind, HEADER_SIZE, len(encoded), file_size, crc, hcrc, uv, src_hash, b"")
    data = hdr + body
    if path is not None:
        save_bytes(path, data)
    return data


def save_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to `path` atomically (a temporary file beside it, then os.replace): a reader never
    sees half a file, a mapped older version stays valid, and a failure leaves nothing behind."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"save() expects a path, got {type(path).__name__}")
    p = os.fspath(path)
    if os.path.isdir(p):
        raise IsADirectoryError(f"{p} is a directory; save() writes one file (e.g. {os.path.join(p, 'tokenizer.fst')})")
    tmp = f"{p}.tmp{os.getpid()}.{threading.get_ident()}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


@dataclass
class Section:
    name: str
    dtype: str
    offset: int
    nbytes: int
    count: int


@dataclass
class Artifact:
    """A validated artifact. `buffer` is an mmap or bytes; arrays are zero-copy views into it."""

    buffer: Any
    kind: int
    format_version: int
    unicode_version: str
    source_hash: bytes
    sections: dict[str, Section]
    meta: dict[str, Any] = field(default_factory=dict)
    path: str | None = None

    @property
    def kind_name(self) -> str:
        return KIND_NAMES[self.kind]

    def array(self, name: str) -> np.ndarray:
        try:
            s = self.sections[name]
        except KeyError:
            raise ArtifactError(f"artifact has no section {name!r}") from None
        return np.frombuffer(self.buffer, dtype=np.dtype(s.dtype), count=s.count, offset=s.offset)

    def raw(self, name: str) -> bytes:
        s = self.sections[name]
        return bytes(memoryview(self.buffer)[s.offset : s.offset + s.nbytes])

    def has(self, name: str) -> bool:
        return name in self.sections

    def nbytes(self) -> int:
        return len(self.buffer)

    def to_bytes(self) -> bytes:
        return bytes(self.buffer)


def _fail(where: str, msg: str) -> ArtifactError:
    return ArtifactError(f"{where}: {msg}")


def _looks_like(buffer: Any) -> str:
    """A hint of what a file that is not an artifact seems to be (for the error message)."""
    head = bytes(buffer[:64])
    if not head:
        return ": the file is empty"
    s = head.lstrip()
    if s[:1] in (b"{", b"["):
        return ": it looks like JSON (compile a tokenizer.json with fstok.compile)"
    if head[:1] == b"\n" or (len(head) > 2 and head[0] == 0x0A and head[1] < 0x80):
        return ": it looks like a SentencePiece .model (protobuf), which fstok does not load"
    try:
        head.decode("utf-8")
        return ": it looks like a text file (compile a source with fstok.compile; load takes a saved artifact)"
    except UnicodeDecodeError:
        return ""


def parse_artifact(buffer: Any, where: str = "<bytes>", expect_kind: int | None = None,
                   verify_payload: bool = True) -> Artifact:
    """Validate `buffer` (bytes or mmap) completely, then return an Artifact over it.  verify_payload=False
    skips the payload checksum only, for an artifact nested in a section of one whose checksum covered it."""
    n = len(buffer)
    if n < HEADER_SIZE:
        if bytes(buffer[:8]) != MAGIC[:min(n, 8)] or n == 0:
            raise _fail(where, f"not an fstok artifact ({n} bytes, no {MAGIC!r} header){_looks_like(buffer)}")
        raise _fail(where, f"truncated: {n} bytes is smaller than the {HEADER_SIZE}-byte header")
    head = bytes(buffer[:HEADER_SIZE])
    magic, version, kind, hsize, nsec, fsize, pcrc, hcrc, uv, shash, _ = _HEADER.unpack(head)
    if magic != MAGIC:
        raise _fail(where, f"not an fstok artifact (header magic {magic!r}, expected {MAGIC!r}){_looks_like(buffer)}")
    if version != FORMAT_VERSION:
        raise _fail(where, f"format version {version} is not supported (this fstok reads version {FORMAT_VERSION}); recompile the tokenizer")
    zeroed = _HEADER.pack(magic, version, kind, hsize, nsec, fsize, pcrc, 0, uv, shash, _)
    if zlib.crc32(zeroed) != hcrc:
        raise _fail(where, "header checksum mismatch: the header is corrupted")
    if hsize != HEADER_SIZE:
        raise _fail(where, f"bad header size {hsize}")
    if fsize != n:
        raise _fail(where, f"truncated or padded: header says {fsize} bytes, file has {n}")
    if kind not in KIND_NAMES:
        raise _fail(where, f"unknown artifact kind {kind}")
    if expect_kind is not None and kind != expect_kind:
        raise _fail(where, f"artifact kind is {KIND_NAMES[kind]!r}, expected {KIND_NAMES[expect_kind]!r}")
    table_end = HEADER_SIZE + SECTION_ENTRY_SIZE * nsec
    if nsec == 0 or table_end > n:
        raise _fail(where, f"section table ({nsec} entries) does not fit in the file")
    if verify_payload and _crc32(memoryview(buffer)[HEADER_SIZE:]) != pcrc:
        raise _fail(where, "payload checksum mismatch: the file is corrupted")
    sections: dict[str, Section] = {}
    for i in range(nsec):
        off = HEADER_SIZE + i * SECTION_ENTRY_SIZE
        name_b, code_b, soff, snb, cnt = _ENTRY.unpack(bytes(buffer[off : off + SECTION_ENTRY_SIZE]))
        name = name_b.rstrip(b"\0").decode("ascii", "replace")
        code = code_b.rstrip(b"\0").decode("ascii", "replace")
        if code not in _ALLOWED_DTYPES:
            raise _fail(where, f"section {name!r} has bad dtype {code!r}")
        item = np.dtype(code).itemsize
        if soff % ALIGN or soff < table_end or soff + snb > n or cnt * item != snb:
            raise _fail(where, f"section {name!r} has bad bounds (offset {soff}, {snb} bytes, {cnt} items)")
        if name in sections:
            raise _fail(where, f"duplicate section {name!r}")
        sections[name] = Section(name, code, soff, snb, cnt)
    if "meta" not in sections:
        raise _fail(where, "no meta section")
    art = Artifact(buffer, kind, version, uv.rstrip(b"\0").decode("ascii", "replace"), shash, sections, path=None)
    try:
        art.meta = json.loads(art.raw("meta").decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _fail(where, f"meta section is not valid JSON ({e})") from None
    if not isinstance(art.meta, dict):
        raise _fail(where, "meta section is not a JSON object")
    return art


#: artifacts larger than this are refused before they are read (the largest real tokenizers are ~100 MB)
MAX_ARTIFACT_BYTES = int(os.environ.get("FSTOK_MAX_ARTIFACT_BYTES", str(4 << 30)))


def read_artifact(path: str | os.PathLike, expect_kind: int | None = None, use_mmap: bool = True) -> Artifact:
    """Open and validate an artifact file (memory-mapped when `use_mmap`).

    Only regular files are read (a device such as /dev/zero, a FIFO or a directory is refused before
    any byte is read), and the size is checked against the header before the rest is.  A mapped file
    must not be truncated or rewritten in place while the artifact is in use (the operating system
    then kills the process with SIGBUS on the next access); replacing it with `os.replace`, as
    `save()` does, is safe.  Pass `use_mmap=False` to read a private copy."""
    p = os.fspath(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise FileNotFoundError(f"no such artifact file: {p}") from None
    import stat as _stat

    if not _stat.S_ISREG(st.st_mode):
        what = "a directory" if _stat.S_ISDIR(st.st_mode) else "a device" if (
            _stat.S_ISCHR(st.st_mode) or _stat.S_ISBLK(st.st_mode)) else "a pipe or socket" if (
            _stat.S_ISFIFO(st.st_mode) or _stat.S_ISSOCK(st.st_mode)) else "not a regular file"
        raise ArtifactError(f"{p}: is {what}, not an fstok artifact file")
    with open(p, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > MAX_ARTIFACT_BYTES:
            raise ArtifactError(f"{p}: {size} bytes is larger than the {MAX_ARTIFACT_BYTES}-byte limit for an artifact "
                                "(FSTOK_MAX_ARTIFACT_BYTES)")
        head = f.read(HEADER_SIZE)
        if len(head) < HEADER_SIZE or head[:8] != MAGIC:
            parse_artifact(head, where=p)  # the header's own error: truncated / not an fstok artifact
        f.seek(0)
        if use_mmap and size > 0:
            buf: Any = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        else:
            buf = f.read(size + 1)
    art = parse_artifact(buf, where=p, expect_kind=expect_kind)
    art.path = p
    return art


def reseal(data: bytes | bytearray) -> bytes:
    """`data` with both checksums recomputed (after editing an artifact's bytes on purpose, e.g. in a fuzzer:
    the loaders' own validation, not the checksums, must then reject what is wrong)."""
    b = bytearray(data)
    if len(b) < HEADER_SIZE:
        return bytes(b)
    fields = list(_HEADER.unpack(bytes(b[:HEADER_SIZE])))
    fields[6] = zlib.crc32(memoryview(b)[HEADER_SIZE:])
    fields[7] = 0
    fields[7] = zlib.crc32(_HEADER.pack(*fields))
    b[:HEADER_SIZE] = _HEADER.pack(*fields)
    return bytes(b)
