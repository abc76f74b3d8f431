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

from ._cache import cache_dir  # noqa: F401  (re-exported: fstok.registry.cache_dir)
from ._cache import code_stamp
from ._version import __version__

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


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
        h.update(__version__.encode())
        h.update(_code_fingerprint().encode())
        return h.hexdigest()[:16]

    def build(self):
        mod, fn = self.builder.split(":")
        func: Callable = getattr(importlib.import_module(mod), fn)
        return func(self.name, *self.paths(), **self.options)


def _code_fingerprint() -> str:
    """Size and mtime of the compiler's code and data: a changed compiler never reuses a stale cache."""
    return code_stamp(("", "compile", "loaders", "data"), (".py", ".npz", ".json"))


ENCODINGS: dict[str, EncodingSpec] = {}


def register(spec: EncodingSpec) -> None:
    if spec.name in ENCODINGS:
        raise ValueError(f"encoding {spec.name!r} registered twice")
    ENCODINGS[spec.name] = spec


# WordPiece (BERT); vocabularies in fstok/data/bert/, see fstok/data/PROVENANCE.md
for _name, _lower in (("bert-base-uncased", True), ("bert-base-cased", False), ("bert-base-multilingual-cased", False)):
    register(EncodingSpec(_name, "fstok.wordpiece:build_bundled", (f"bert/{_name}.txt",), {"lowercase": _lower}))

# Byte-level BPE encodings (fstok.bpe): OpenAI's tiktoken encodings, rank files in fstok/data/tiktoken/ (see
# fstok/data/PROVENANCE.md); patterns and special tokens are tiktoken's (fstok.loaders.bpe_source.OPENAI_ENCODINGS).
# file -> sha256 that tiktoken 0.14.0 expects for it
TIKTOKEN_SHA256 = {
    "r50k_base": "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
    "p50k_base": "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}

for _name, _file in (
    ("r50k_base", "r50k_base"),
    ("p50k_base", "p50k_base"),
    ("p50k_edit", "p50k_base"),
    ("cl100k_base", "cl100k_base"),
    ("o200k_base", "o200k_base"),
    ("gpt2", "r50k_base"),
    ("o200k_harmony", "o200k_base"),
):
    register(
        EncodingSpec(_name, "fstok.bpe:build_bundled", (f"tiktoken/{_file}.tiktoken",), {"sha256": TIKTOKEN_SHA256[_file]})
    )
