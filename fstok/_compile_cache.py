"""The artifact cache in front of `fstok.compile` for self-contained sources (a tokenizer.json, a tekken.json).

    tok = cached_compile(path, options, build)   # build() on a miss; else the cached artifact, mmap-loaded

The key is the sha256 of the file's bytes, its absolute path (the name and the error messages of a compiled
tokenizer come from it), the options, the FSTOK_* environment settings, fstok's version and a fingerprint of
the compiler's code (sizes and mtimes, so that a changed compiler never reuses a stale entry).  A hit costs reading and hashing the file
plus `fstok.load` of the artifact (validated like any other); compiling a large tokenizer.json costs seconds.
Entries are written to a temporary name and renamed, so concurrent processes never see half a file; a cache
directory that cannot be written leaves compile uncached; a damaged entry is rebuilt.
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Callable

_FINGERPRINT: list[str] = []


def _code_fingerprint() -> str:
    if not _FINGERPRINT:
        root = os.path.dirname(os.path.abspath(__file__))
        parts = []
        for sub in ("", "compile", "loaders", "data", "pipeline", "runtime"):
            d = os.path.join(root, sub)
            try:
                names = sorted(os.listdir(d))
            except OSError:
                continue
            for n in names:
                if n.endswith((".py", ".npz", ".json", ".so", ".pyd")):
                    try:
                        st = os.stat(os.path.join(d, n))
                    except OSError:
                        continue
                    parts.append(f"{sub}/{n}:{st.st_size}:{st.st_mtime_ns}")
        _FINGERPRINT.append(hashlib.sha256("|".join(parts).encode()).hexdigest())
    return _FINGERPRINT[0]


def cache_key(raw: bytes, path: str, options: dict) -> str:
    from ._version import __version__
    from .artifact import FORMAT_VERSION

    h = hashlib.sha256()
    # FSTOK_* settings (test hooks, tuning) may change what compiling makes
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith("FSTOK_") and k != "FSTOK_CACHE_DIR")
    head = json.dumps([FORMAT_VERSION, __version__, _code_fingerprint(), os.path.abspath(path),
                       sorted((str(k), repr(v)) for k, v in options.items()), env])
    h.update(head.encode("utf-8", "surrogatepass"))
    h.update(b"\0")
    h.update(raw)
    return h.hexdigest()[:32]


def cached_compile(path: str, options: dict, build: Callable[[], Any]):
    from . import artifact as _art
    from ._cache import cache_dir
    from ._load import load

    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return build()
    entry = os.path.join(cache_dir(), f"src-{cache_key(raw, path, options)}.fst")
    if os.path.exists(entry):
        try:
            return load(entry)
        except (_art.ArtifactError, OSError, ValueError):
            pass  # damaged or from an incompatible build: compiled again below
    tok = build()
    try:
        data = tok.to_bytes()
    except (AttributeError, NotImplementedError, TypeError, ValueError):
        return tok  # a kind without an artifact form
    try:
        os.makedirs(os.path.dirname(entry), exist_ok=True)
        tmp = f"{entry}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, entry)
    except OSError:
        pass  # a read-only cache: compile still works, uncached
    return tok
