"""Loading an artifact: read and validate it, then hand it to the runtime class of its kind.

Below the tokenizer modules (which pickle themselves through `loads`) and the API that re-exports it; the
classes are found by name, so this module imports none of them until an artifact of their kind is loaded.
"""
from __future__ import annotations

import importlib
import os
from typing import Any, Optional

from . import artifact as _art

_KIND_LOADERS = {
    _art.KIND_WORDPIECE: ("fstok.wordpiece", "WordPieceTokenizer"),
    _art.KIND_BPE: ("fstok.bpe", "BPETokenizer"),
    _art.KIND_REGEX_DFA: ("fstok.pretokenize", "CompiledPattern"),
    _art.KIND_SPM: ("fstok.spm", "SentencePieceTokenizer"),
    _art.KIND_PIPELINE: ("fstok.pipeline.tokenizer", "PipelineTokenizer"),
    _art.KIND_TEKKEN: ("fstok.pipeline.tekken", "TekkenTokenizer"),
}


def _cls(kind: int):
    mod, name = _KIND_LOADERS[kind]
    return getattr(importlib.import_module(mod), name)


def _from_artifact(art: _art.Artifact):
    return _cls(art.kind).from_artifact(art)


def _in_cache(path: str) -> bool:
    from ._cache import cache_dir

    try:
        c = os.path.realpath(cache_dir())
        return os.path.commonpath([os.path.realpath(path), c]) == c
    except ValueError:
        return False


def load(path: str | os.PathLike, use_mmap: Optional[bool] = None):
    """Load a compiled artifact (validated: magic, version, sizes, checksums, every table index).

    use_mmap: None (default) maps files inside fstok's cache directory (written once, replaced
    atomically) and reads a private copy of any other file, so that a file truncated or rewritten
    in place while loaded cannot crash the process (SIGBUS); True maps any file (the caller keeps
    it unchanged while the tokenizer lives), False always copies."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"fstok.load expects a path, got {type(path).__name__}")
    if use_mmap is not None and not isinstance(use_mmap, bool):
        raise TypeError(f"use_mmap must be None, True or False, got {use_mmap!r}")
    p = os.fspath(path)
    if use_mmap is None:
        use_mmap = _in_cache(p)
    return _from_artifact(_art.read_artifact(p, use_mmap=use_mmap))


def loads(data: bytes):
    """Load an artifact from bytes (the inverse of `tok.to_bytes()`)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"fstok.loads expects bytes, got {type(data).__name__}")
    return _from_artifact(_art.parse_artifact(bytes(data)))


def fstok_kind(tok: Any) -> Optional[str]:
    """The kind of a fstok object ("wordpiece", "bpe", "regex_dfa": its class attribute ``_fstok_kind``), else None.

    Modules that handle several kinds ask this instead of importing each class (which would import them back)."""
    return getattr(type(tok), "_fstok_kind", None)
