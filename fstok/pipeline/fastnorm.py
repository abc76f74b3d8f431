"""A tokenizer.json normalizer as whole-string operations (no per-character Python): the text the compiled
tables encode when the normalizer is simple.

    f = fast_normalizer(obj["normalizer"])     # None: no fast form; else f(text) -> normalized text or None

Each component is computed by one C-implemented string operation with HF's own facts:
  NFC / NFD / NFKC / NFKD   `unicodedata.normalize` when the text holds none of the code points HF's tables
                            do not know (`fstok.pipeline.unicode.opaque`): else None
  Lowercase                 `str.translate` with HF's per-character lowercase table (no final-sigma rule)
  Strip                     `str.strip` of Rust's White_Space characters
  StripAccents              `str.translate` deleting HF's combining marks
  Replace                   String: `str.replace` (leftmost, non-overlapping, as HF); Regex: fstok's DFA
                            finds the matches, replaced in one join
  Prepend                   prefix on a non-empty text
  Sequence                  in order (None as soon as one part says None)
None means "not here": the caller runs the stage normalizer (fstok.pipeline.normalizers, the oracle), which
also gives the offsets.  Other components (ByteLevel, ...) have no fast form.
"""
from __future__ import annotations

import functools
import unicodedata
from typing import Any, Callable, Optional

Fast = Callable[[str], Optional[str]]


class NoFastForm(ValueError):
    pass


def _any_of(chars) -> Callable[[str], bool]:
    """`any(c in chars for c in t)` by fstok's compiled DFA (one pass in C over the UTF-8)."""
    from ..pretokenize import CompiledPattern
    from .native import char_class

    chars = sorted(set(chars))
    if not chars:
        return lambda t: False
    cp = CompiledPattern.compile(char_class(chars), "oniguruma", "find")
    return lambda t: cp.count(t) > 0


def _unicode(form: str) -> Fast:
    from . import unicode as _u

    has_opaque = _any_of(_u.opaque_compat() if "K" in form else _u.opaque())

    def f(t: str) -> Optional[str]:
        if t.isascii():
            return t
        if has_opaque(t):
            return None
        # without the characters HF's tables do not know, Python's tables hold HF's facts (decompositions,
        # combining classes; fstok.pipeline.unicode checks them against HF)
        return t if unicodedata.is_normalized(form, t) else unicodedata.normalize(form, t)
    return f


@functools.lru_cache(maxsize=1)
def _lower_differs_cached() -> tuple:
    from . import unicode as _u

    return tuple(sorted(_u.disk_cached("lower-differs", lambda: _lower_differs(dict(_u.facts().lower)))))


def _lower_differs(table: dict) -> list[str]:
    out = {chr(c) for c in table if chr(c).lower() != table[c]}
    step = 4096
    for lo in range(0, 0x110000, step):
        chunk = "".join(chr(c) for c in range(lo, lo + step) if not 0xD800 <= c <= 0xDFFF)
        if chunk.lower() == chunk:
            continue  # no character here that str.lower changes
        out.update(c for c in chunk if c.lower() != c and table.get(ord(c), c) != c.lower())
    out.add("\u03a3")  # str.lower's final-sigma rule
    return sorted(out)


def _lowercase() -> Fast:
    from . import unicode as _u

    table = dict(_u.facts().lower)
    # str.lower is HF's per-character table except on these characters (and the final-sigma rule on Σ):
    # texts without them take str.lower, the others the table itself
    has_differ = _any_of(_lower_differs_cached())

    def f(t: str) -> str:
        if t.isascii() or not has_differ(t):
            return t.lower()
        return t.translate(table)
    return f


def _replace(cfg: dict) -> Fast:
    pat, content = cfg.get("pattern"), cfg.get("content")
    if not isinstance(content, str) or not isinstance(pat, dict) or len(pat) != 1:
        raise NoFastForm("Replace")
    if isinstance(pat.get("String"), str) and pat["String"]:
        s = pat["String"]
        return lambda t: t.replace(s, content)
    if not isinstance(pat.get("Regex"), str):
        raise NoFastForm("Replace")
    from .patterns import Matcher

    m = Matcher(pat, "Replace")
    cb = content.encode("utf-8")
    if len(cb) <= 1 and m._cp is not None:
        import numpy as np

        cp = m._cp

        def g(t: str) -> str:
            # every match becomes the one-byte (or empty) content, in one vectorized pass over the UTF-8
            data = t.encode("utf-8")
            sp = cp.byte_spans(data)
            if not len(sp):
                return t
            a = np.frombuffer(data, dtype=np.uint8).copy()
            n1 = len(a) + 1
            d = np.bincount(sp[:, 0], minlength=n1) - np.bincount(sp[:, 1], minlength=n1)
            keep = np.cumsum(d[:-1]) == 0
            if cb:
                a[sp[:, 0]] = cb[0]
                keep[sp[:, 0]] = True
            return a[keep].tobytes().decode("utf-8")
        return g

    def f(t: str) -> str:
        spans = m.spans(t)
        if not spans:
            return t
        parts, last = [], 0
        for a, b in spans:
            parts.append(t[last:a])
            last = b
        parts.append(t[last:])
        return content.join(parts)
    return f


def fast_normalizer(cfg: Any) -> Optional[Fast]:
    """The fast form of a normalizer config, or None where it has none (a None config: the identity)."""
    try:
        return _build(cfg)
    except NoFastForm:
        return None


def _build(cfg: Any) -> Fast:
    if cfg is None:
        return lambda t: t
    if not isinstance(cfg, dict):
        raise NoFastForm(repr(cfg))
    t = cfg.get("type")
    if t == "Sequence":
        parts = [_build(c) for c in cfg.get("normalizers") or []]

        def seq(x: str) -> Optional[str]:
            for p in parts:
                x = p(x)
                if x is None:
                    return None
            return x
        return seq
    if t in ("NFC", "NFD", "NFKC", "NFKD"):
        return _unicode(t)
    if t == "Lowercase":
        return _lowercase()
    if t == "Strip":
        from .unicode import WHITESPACE

        ws = "".join(sorted(WHITESPACE))
        left, right = bool(cfg.get("strip_left", True)), bool(cfg.get("strip_right", True))
        if left and right:
            return lambda x: x.strip(ws)
        if left:
            return lambda x: x.lstrip(ws)
        return (lambda x: x.rstrip(ws)) if right else (lambda x: x)
    if t == "StripAccents":
        from .unicode import _pipeline_sets

        table = {ord(c): None for c in _pipeline_sets()[0]}
        return lambda x: x if x.isascii() else x.translate(table)
    if t == "Replace":
        return _replace(cfg)
    if t == "Prepend":
        pre = cfg.get("prepend")
        if not isinstance(pre, str):
            raise NoFastForm("Prepend")
        return lambda x: pre + x if x else x
    raise NoFastForm(str(t))
