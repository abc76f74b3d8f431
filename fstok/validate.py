"""Shared helpers of the artifact validators (`validate_bpe`, `validate_wordpiece`, `validate_dfa`).

Every failure is an `ArtifactError` whose message starts with the file, then the section and the
element (`o200k.fst: pair_tab[1023]: ...`, `x.fst: meta.special_tokens['<|a|>']: ...`), so that a
corrupted or crafted file is reported in terms of what is wrong in it, never as a KeyError or an
IndexError from the loader itself.
"""
from __future__ import annotations

import os
from time import monotonic as _monotonic
from typing import Any, Callable, Optional

import numpy as np

from .artifact import ArtifactError


def error(where: str, loc: str, msg: str) -> ArtifactError:
    return ArtifactError(f"{where}: {loc}: {msg}")


def check_mask(where: str, section: str, bad: np.ndarray, msg: Callable[[int], str] | str,
               index: Optional[np.ndarray] = None) -> None:
    """Raise naming the first element of `section` where `bad` is true.  `index` maps the mask's
    positions to element numbers (a mask over a subset, or over records of several elements);
    a callable `msg` gets the mask position."""
    if bad.size and bad.any():
        k = int(np.flatnonzero(bad)[0])
        i = int(index[k]) if index is not None else k
        raise error(where, f"{section}[{i}]", msg(k) if callable(msg) else msg)


def section_array(art, where: str, name: str, dtype: str, size: Optional[int] = None) -> np.ndarray:
    """The array of a section that must exist, with this dtype (and this many elements)."""
    s = art.sections.get(name)
    if s is None:
        raise error(where, name, "the section is missing")
    if s.dtype != dtype:
        raise error(where, name, f"has dtype {s.dtype}, expected {dtype}")
    if size is not None and s.count != size:
        raise error(where, name, f"has {s.count} elements, expected {size}")
    return art.array(name)


_MISSING = object()


class Meta:
    """Typed access to an artifact's meta JSON: every accessor names the field when it is missing or
    of the wrong type or out of range."""

    def __init__(self, meta: Any, where: str, prefix: str = "meta"):
        if not isinstance(meta, dict):
            raise error(where, prefix, f"must be a JSON object, got {type(meta).__name__}")
        self.d, self.where, self.prefix = meta, where, prefix

    def _get(self, key: str, default: Any) -> Any:
        v = self.d.get(key, _MISSING)
        if v is _MISSING:
            if default is _MISSING:
                raise self.fail(key, "the field is missing")
            return default
        return v

    def fail(self, key: str, msg: str) -> ArtifactError:
        return error(self.where, f"{self.prefix}.{key}", msg)

    def int(self, key: str, lo: int, hi: int, default: Any = _MISSING) -> int:
        v = self._get(key, default)
        if type(v) is not int:
            raise self.fail(key, f"must be an integer, got {v!r}"[:200])
        if not lo <= v <= hi:
            raise self.fail(key, f"{v} is outside [{lo}, {hi}]")
        return v

    def opt_int(self, key: str, lo: int, hi: int, default: Any = _MISSING) -> Optional[int]:
        v = self._get(key, default)
        return None if v is None else self.int(key, lo, hi)

    def bool(self, key: str, default: Any = _MISSING) -> bool:
        v = self._get(key, default)
        if type(v) is not bool:
            raise self.fail(key, f"must be true or false, got {v!r}"[:200])
        return v

    def str(self, key: str, default: Any = _MISSING, choices: Optional[tuple] = None) -> str:
        v = self._get(key, default)
        if not isinstance(v, str):
            raise self.fail(key, f"must be a string, got {v!r}"[:200])
        if choices is not None and v not in choices:
            raise self.fail(key, f"{v!r} is not one of {', '.join(map(repr, choices))}"[:300])
        return v

    def opt_str(self, key: str, default: Any = _MISSING, choices: Optional[tuple] = None) -> Optional[str]:
        v = self._get(key, default)
        if v is None:
            return None
        return self.str(key, choices=choices)

    def list(self, key: str, default: Any = _MISSING) -> list:
        v = self._get(key, default)
        if not isinstance(v, list):
            raise self.fail(key, f"must be a list, got {v!r}"[:200])
        return v

    def dict(self, key: str, default: Any = _MISSING) -> dict:
        v = self._get(key, default)
        if not isinstance(v, dict):
            raise self.fail(key, f"must be an object, got {v!r}"[:200])
        return v

    def sub(self, key: str, value: Any) -> "Meta":
        return Meta(value, self.where, f"{self.prefix}.{key}")


_MACHINE_THREADS = [0, 0.0]  # (CPUs, time.monotonic() when read)


def machine_threads() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one), read again at most once a
    second: the system call and its set of CPUs cost ~5 us, paid by every batch call on its calling thread
    (the modules are imported with this one: an import statement here costs more than the rest)."""
    now = _monotonic()
    if _MACHINE_THREADS[0] and now - _MACHINE_THREADS[1] < 1.0:
        return _MACHINE_THREADS[0]
    try:
        n = max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        n = max(1, os.cpu_count() or 1)
    _MACHINE_THREADS[0], _MACHINE_THREADS[1] = n, now
    return n


def check_threads(num_threads: Any, what: str = "num_threads") -> int:
    """A positive int (bool refused), clamped to what the machine can run at once: 4 x its CPUs, at most
    256 (more threads than cores only add memory and scheduling).  ValueError otherwise."""
    if not isinstance(num_threads, (int, np.integer)) or isinstance(num_threads, (bool, np.bool_)) or num_threads < 1:
        raise ValueError(f"{what} must be a positive int, got {num_threads!r}")
    return int(min(int(num_threads), 4 * machine_threads(), 256))
