"""The artifact cache of SentencePiece-family sources: `fstok.compile` of a `.model` file or of a Unigram /
SentencePiece-style tokenizer.json compiles once into the cache directory ($FSTOK_CACHE_DIR), then loads.

Entries are keyed by the sha256 of the source bytes, the fstok version, the table layout
(`spm_layout.TABLES`) and the fingerprint of fstok's code (so that an artifact compiled by other code is
never reused).  A small index file maps the source file's identity (path, device, inode, size,
mtime and ctime, as make and git see a change) to that key, so that a second compile of an unchanged
file reads neither the source nor its JSON: it maps the artifact.  A cache directory that cannot be
written leaves compile working, uncached.
"""
from __future__ import annotations

import hashlib
import os
from typing import Any, Callable, Optional

from ._cache import cache_dir
from ._compile_cache import _code_fingerprint
from ._version import __version__
from .spm_layout import TABLES


def _stamp() -> str:
    return f"{__version__}\0{TABLES}\0{_code_fingerprint()}"


def _stat_key(path: str) -> Optional[str]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    ident = f"{os.path.realpath(path)}\0{st.st_dev}\0{st.st_ino}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}"
    return hashlib.sha256(f"{ident}\0{_stamp()}".encode()).hexdigest()[:24]


def lookup(path: str) -> Any:
    """The cached tokenizer of the unchanged source file `path`, or None."""
    sk = _stat_key(path)
    if sk is None:
        return None
    d = cache_dir()
    try:
        with open(os.path.join(d, f"spm-src-{sk}.key"), encoding="ascii") as f:
            key = f.read().strip()
    except OSError:
        return None
    hit = os.path.join(d, f"spm-{key}.fst")
    if len(key) != 24 or not os.path.exists(hit):
        return None
    from ._load import load

    try:
        return load(hit)
    except Exception:  # a damaged or stale entry: compiled again by the caller
        return None


def compiled(path: str, tag: bytes, build: Callable[[bytes], Any]) -> Any:
    """The tokenizer of source file `path`: from the cache, else `build(source bytes)`, saved to the cache."""
    tok = lookup(path)
    if tok is not None:
        return tok
    with open(path, "rb") as f:
        data = f.read()
    key = hashlib.sha256(tag + b"\0" + data + b"\0" + _stamp().encode()).hexdigest()[:24]
    d = cache_dir()
    entry = os.path.join(d, f"spm-{key}.fst")
    from ._load import load

    tok = None
    if os.path.exists(entry):
        try:
            tok = load(entry)
        except Exception:
            tok = None
    if tok is None:
        tok = build(data)
        try:
            os.makedirs(d, exist_ok=True)
            tmp = f"{entry}.{os.getpid()}.tmp"
            tok.save(tmp)
            os.replace(tmp, entry)
            tok = load(entry)
        except OSError:
            return tok  # a read-only cache: compiled in each process
    sk = _stat_key(path)
    if sk is not None:
        try:
            idx = os.path.join(d, f"spm-src-{sk}.key")
            tmp_i = f"{idx}.{os.getpid()}.tmp"
            with open(tmp_i, "w", encoding="ascii") as f:
                f.write(key)
            os.replace(tmp_i, idx)
        except OSError:
            pass
    return tok
