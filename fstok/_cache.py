"""Where fstok keeps what it compiles on first use ($FSTOK_CACHE_DIR or ~/.cache/fstok).

The lowest layer: imported by the registry, the regex DFA cache and the boundary-table cache alike.
"""
from __future__ import annotations

import os


def cache_dir() -> str:
    """Where compiled bundled encodings are cached ($FSTOK_CACHE_DIR or ~/.cache/fstok)."""
    d = os.environ.get("FSTOK_CACHE_DIR")
    if not d:
        d = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "fstok")
    return d


def code_stamp(subdirs: tuple[str, ...], suffixes: tuple[str, ...]) -> str:
    """Name, size and mtime of fstok's own files in `subdirs` (relative to the package) ending in `suffixes`: part
    of a cache key, so that a changed compiler never reuses a stale cache entry."""
    root = os.path.dirname(os.path.abspath(__file__))
    parts = []
    for sub in subdirs:
        d = os.path.join(root, sub)
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        for n in names:
            if n.endswith(suffixes):
                try:
                    st = os.stat(os.path.join(d, n))
                except OSError:
                    continue
                parts.append(f"{sub}/{n}:{st.st_size}:{st.st_mtime_ns}")
    return "|".join(parts)
