"""The artifact cache in front of `fstok.compile` for self-contained sources (a tokenizer.json, a tekken.json).

    tok = cached_compile(path, options, build)   # build() on a miss; else the cached artifact, mmap-loaded

The entry's key is the sha256 of the file's bytes, its absolute path (the name and the error messages of a
compiled tokenizer come from it), the options, the FSTOK_* environment settings, fstok's version and a
fingerprint of the compiler's code (sizes and mtimes, so that a changed compiler never reuses a stale entry).
A small index file maps the file's identity on disk (path, size, mtime, ctime, inode) to that key, so a hit
costs one stat and `fstok.load` of the artifact (memory-mapped, validated like any other), where compiling a
large tokenizer.json costs seconds.  Entries are written to a temporary name and renamed, so concurrent
processes never see half a file; a cache directory that cannot be written leaves compile uncached; a damaged
entry is rebuilt.
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Callable

from ._cache import code_stamp

_FINGERPRINT: list[str] = []


def _code_fingerprint() -> str:
    if not _FINGERPRINT:
        stamp = code_stamp(("", "compile", "loaders", "data", "pipeline", "runtime"), (".py", ".npz", ".json", ".so", ".pyd"))
        _FINGERPRINT.append(hashlib.sha256(stamp.encode()).hexdigest())
    return _FINGERPRINT[0]


def _head(path: str, options: dict) -> bytes:
    from ._version import __version__
    from .artifact import FORMAT_VERSION

    # FSTOK_* settings (test hooks, tuning) may change what compiling makes
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith("FSTOK_") and k != "FSTOK_CACHE_DIR")
    return json.dumps([FORMAT_VERSION, __version__, _code_fingerprint(), os.path.abspath(path),
                       sorted((str(k), repr(v)) for k, v in options.items()), env]).encode("utf-8", "surrogatepass")


def cache_key(raw: bytes, path: str, options: dict) -> str:
    """The entry's name: the file's bytes with everything else that decides what compiling makes."""
    h = hashlib.sha256(_head(path, options))
    h.update(b"\0")
    h.update(raw)
    return h.hexdigest()[:32]


def _write(path: str, data: bytes) -> None:
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache: compile still works, uncached


def cached_compile(path: str, options: dict, build: Callable[[], Any]):
    from . import artifact as _art
    from ._cache import cache_dir
    from ._load import load

    def load_entry(key: str):
        entry = os.path.join(cache_dir(), f"src-{key}.fst")
        if os.path.exists(entry):
            try:
                return load(entry)
            except (_art.ArtifactError, OSError, ValueError):
                pass  # damaged or from an incompatible build: compiled again
        return None

    # the file's identity on disk (a write changes its size, mtime or ctime; a copy its path or inode) maps to
    # its content key by a small index file, so that a hit does not read and hash a large file
    try:
        st = os.stat(path)
    except OSError:
        return build()
    ident = f"{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}:{st.st_dev}".encode()
    index = os.path.join(cache_dir(), f"src-{hashlib.sha256(_head(path, options) + ident).hexdigest()[:32]}.key")
    try:
        with open(index, encoding="ascii") as f:
            known = f.read().strip()
        if len(known) == 32:
            tok = load_entry(known)
            if tok is not None:
                return tok
    except (OSError, ValueError):
        pass
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return build()
    key = cache_key(raw, path, options)
    tok = load_entry(key)
    if tok is None:
        tok = build()
        try:
            data = tok.to_bytes()
        except (AttributeError, NotImplementedError, TypeError, ValueError):
            return tok  # a kind without an artifact form
        _write(os.path.join(cache_dir(), f"src-{key}.fst"), data)
    _write(index, key.encode("ascii"))
    return tok
