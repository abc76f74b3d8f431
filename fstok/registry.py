"""Bundled encodings: name -> how to build it from files shipped in fstok/data.

Builders import their modules lazily.  Each spec's `cache_key` changes whenever the
source files or the fstok format change, so a stale cached artifact is never reused.
"""
from __future__ import annotations

import hashlib
import importlib
import os
from dataclasses import dataclass, field
from typing import Any, Callable

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def cache_dir() -> str:
    """Where compiled bundled encodings are cached ($FSTOK_CACHE_DIR or ~/.cache/fstok)."""
    d = os.environ.get("FSTOK_CACHE_DIR")
    if not d:
        d = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "fstok")
    return d


@dataclass
class EncodingSpec:
    name: str
    builder: str  # "module:function"
    files: tuple[str, ...]  # paths relative to DATA_DIR
    options: dict[str, Any] = field(default_factory=dict)

    def paths(self) -> list[str]:
        return [os.path.join(DATA_DIR, f) for f in self.files]

    def cache_key(self) -> str:
        from .artifact import FORMAT_VERSION

        h = hashlib.sha256(f"v{FORMAT_VERSION}:{self.builder}:{sorted(self.options.items())}".encode())
        for p in self.paths():
            st = os.stat(p)
            h.update(f"{os.path.basename(p)}:{st.st_size}:{int(st.st_mtime)}".encode())
        from . import __version__

        h.update(__version__.encode())
        h.update(_code_fingerprint().encode())
        return h.hexdigest()[:16]

    def build(self):
        mod, fn = self.builder.split(":")
        func: Callable = getattr(importlib.import_module(mod), fn)
        return func(self.name, *self.paths(), **self.options)


def _code_fingerprint() -> str:
    """Size and mtime of the compiler's code and data: a changed compiler never reuses a stale cache."""
    root = os.path.dirname(os.path.abspath(__file__))
    parts = []
    for sub in ("", "compile", "loaders", "data"):
        d = os.path.join(root, sub)
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        for n in names:
            if n.endswith((".py", ".npz", ".json")):
                st = os.stat(os.path.join(d, n))
                parts.append(f"{sub}/{n}:{st.st_size}:{int(st.st_mtime)}")
    return "|".join(parts)


ENCODINGS: dict[str, EncodingSpec] = {}


def register(spec: EncodingSpec) -> None:
    if spec.name in ENCODINGS:
        raise ValueError(f"encoding {spec.name!r} registered twice")
    ENCODINGS[spec.name] = spec


# WordPiece (BERT); vocabularies in fstok/data/bert/, see fstok/data/PROVENANCE.md
for _name, _lower in (("bert-base-uncased", True), ("bert-base-cased", False), ("bert-base-multilingual-cased", False)):
    register(EncodingSpec(_name, "fstok.wordpiece:build_bundled", (f"bert/{_name}.txt",), {"lowercase": _lower}))

# Byte-level BPE encodings (fstok.bpe) register themselves here too: see fstok/registry_bpe.py
try:
    from . import registry_bpe  # noqa: F401
except ImportError:
    pass
