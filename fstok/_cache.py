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
