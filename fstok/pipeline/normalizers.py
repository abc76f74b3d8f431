"""HF tokenizer.json normalizers, exact, with the original-text span of every normalized character.

    norm = normalizers.from_config(obj["normalizer"], where="tokenizer.json")   # None for no normalizer
    piece = norm.normalize(Piece.original(text))      # piece.text, piece.starts, piece.ends
    norm.normalize_str("Text")                        # the normalized text only

Components (HF `tokenizers` 0.23.3 semantics, `normalizers/*.rs` and `NormalizedString`):
  NFC, NFD, NFKC, NFKD   HF's unicode-normalization tables (fstok.pipeline.unicode), with the same change
                         bookkeeping, so offsets match HF's
  Lowercase              `char::to_lowercase` per character (no context: final sigma is σ)
  Strip                  strip_left / strip_right of `char::is_whitespace` characters
  StripAccents           removes combining marks (HF's `is_combining_mark` table)
  Replace                String or Regex pattern -> content; the inserted characters take the span of
                         the last replaced character
  Prepend                prepends to a non-empty text; the prefix takes the first character's span
  ByteLevel              each UTF-8 byte -> GPT-2's byte character
  BertNormalizer         clean_text (controls removed, whitespace -> " "), spaces around CJK characters,
                         NFD and nonspacing marks removed (strip_accents, default: lowercase), lowercase; HF's
                         per-code-point facts (fstok/data/bert_unicode.npz, probed from HF itself)
  Precompiled            SentencePiece's charsmap over grapheme clusters (HF `spm_precompiled`, run by
                         fstok.hf_norm's oracle; clusters from fstok/data/hf_graphemes.npz)
  Sequence               in order
Anything else raises UnsupportedComponent naming it.
"""
from __future__ import annotations

import unicodedata
from typing import Any, Optional

from . import UnsupportedComponent
from . import unicode as _u
from .normalized import Piece
from .patterns import Matcher


class Normalizer:
    def normalize(self, p: Piece) -> Piece:
        raise NotImplementedError

    def normalize_str(self, text: str) -> str:
        return self.normalize(Piece.original(text)).text


class Unicode(Normalizer):
    """NFC / NFD / NFKC / NFKD."""

    def __init__(self, form: str):
        self.form = form
        self.compat = form in ("NFKC", "NFKD")
        self.compose = form in ("NFC", "NFKC")

    def normalize(self, p: Piece) -> Piece:
        t = p.text
        if t.isascii():
            return p
        op = _u.opaque_compat() if self.compat else _u.opaque()
        if not any(c in op for c in t) and unicodedata.is_normalized(self.form, t):
            return p  # HF's crate yields every char with change 0 here
        stream = _u.decompositions(t, self.compat)
        if self.compose:
            stream = _u.recompositions(stream)
        return p.transform(stream, 0)


class Lowercase(Normalizer):
    def __init__(self):
        self.table = {k: v for k, v in _u.facts().lower.items()}

    def normalize(self, p: Piece) -> Piece:
        if p.text.isascii():
            return Piece(p.text.lower(), p.starts, p.ends, p.base)
        return p.map_chars(self.table)


def lrstrip(p: Piece, left: bool, right: bool) -> Piece:
    """HF `NormalizedString::lrstrip`."""
    t = p.text
    n = len(t)
    lead = 0
    if left:
        while lead < n and t[lead] in _u.WHITESPACE:
            lead += 1
    trail = 0
    if right:
        while trail < n and t[n - 1 - trail] in _u.WHITESPACE:
            trail += 1
    if not lead and not trail:
        return p
    dest = []
    for i in range(n):
        if i < lead or i >= n - trail:
            continue
        dest.append((t[i], -trail if i == n - trail - 1 else 0))
    return p.transform(dest, lead)


class Strip(Normalizer):
    def __init__(self, left: bool, right: bool):
        self.left, self.right = left, right

    def normalize(self, p: Piece) -> Piece:
        return lrstrip(p, self.left, self.right)


def filter_chars(p: Piece, keep) -> Piece:
    """HF `NormalizedString::filter`."""
    removed = 0
    removed_start = 0
    dest = []
    last = None
    for c in p.text:
        if keep(c):
            if last is not None:
                dest.append((last, -removed))
            else:
                removed_start = removed
            last = c
            removed = 0
        else:
            removed += 1
    if last is not None:
        dest.append((last, -removed))
    return p.transform(dest, removed_start)


class StripAccents(Normalizer):
    def normalize(self, p: Piece) -> Piece:
        if p.text.isascii():
            return p
        return filter_chars(p, lambda c: not _u.is_combining_mark(c))


class Replace(Normalizer):
    def __init__(self, pattern: Any, content: str, where: str):
        self.matcher = Matcher(pattern, f"{where}: Replace")
        self.content = content

    def normalize(self, p: Piece) -> Piece:
        t = p.text
        spans = self.matcher.spans(t)
        if not spans:
            return p
        content = self.content
        out: list[str] = []
        ns: list[int] = []
        ne: list[int] = []
        last = 0
        for s, e in spans:
            out.append(t[last:s])
            ns.extend(p.starts[last:s])
            ne.extend(p.ends[last:s])
            if content:
                # inserted chars share the alignment of the char before the insertion point: the last matched one
                a, b = (p.starts[e - 1], p.ends[e - 1]) if e >= 1 else (p.base, p.base)
                out.append(content)
                ns.extend([a] * len(content))
                ne.extend([b] * len(content))
            last = e
        out.append(t[last:])
        ns.extend(p.starts[last:])
        ne.extend(p.ends[last:])
        return Piece("".join(out), ns, ne, p.base)


class Prepend(Normalizer):
    def __init__(self, prepend: str):
        self.prepend = prepend

    def normalize(self, p: Piece) -> Piece:
        if not p.text or not self.prepend:
            return p
        a, b = p.starts[0], p.ends[0]
        k = len(self.prepend)
        return Piece(self.prepend + p.text, [a] * k + list(p.starts), [b] * k + list(p.ends), p.base)


def byte_level_transform(p: Piece) -> Piece:
    """Every UTF-8 byte of every char becomes its GPT-2 byte character, aligned with the char."""
    from ..bytelevel_table import BYTE_TO_CHAR

    t = p.text
    if t.isascii():
        return Piece(t.translate(_ASCII_BL), p.starts, p.ends, p.base)
    out: list[str] = []
    ns: list[int] = []
    ne: list[int] = []
    for i, c in enumerate(t):
        bs = c.encode("utf-8", "surrogatepass")
        a, b = p.starts[i], p.ends[i]
        for x in bs:
            out.append(BYTE_TO_CHAR[x])
            ns.append(a)
            ne.append(b)
    return Piece("".join(out), ns, ne, p.base)


def _ascii_table() -> dict[int, str]:
    from ..bytelevel_table import BYTE_TO_CHAR

    return {b: BYTE_TO_CHAR[b] for b in range(128)}


_ASCII_BL = _ascii_table()


class ByteLevel(Normalizer):
    def normalize(self, p: Piece) -> Piece:
        return byte_level_transform(p) if p.text else p


class BertNormalizer(Normalizer):
    """HF `normalizers/bert.rs`: the same NormalizedString steps in the same order, so offsets match."""

    def __init__(self, clean_text: bool, chinese: bool, strip_accents: Optional[bool], lowercase: bool):
        self.clean_text, self.chinese, self.lowercase = clean_text, chinese, lowercase
        self.strip = lowercase if strip_accents is None else strip_accents
        self._nfd = Unicode("NFD")
        self._lower = Lowercase() if lowercase else None

    def normalize(self, p: Piece) -> Piece:
        f = _u.facts()
        t = p.text
        if self.clean_text:
            clean = f.clean
            kinds = {c: int(clean[ord(c)]) for c in set(t)}
            if any(k == 1 for k in kinds.values()):
                p = filter_chars(p, lambda c: kinds[c] != 1)  # NUL, U+FFFD and control characters
            spaces = {ord(c): " " for c, k in kinds.items() if k == 2 and c != " "}
            if spaces:
                p = Piece(p.text.translate(spaces), p.starts, p.ends, p.base)
        if self.chinese and not p.text.isascii():
            cjk = f.cjk
            if any(cjk[ord(c)] for c in p.text):
                dest: list[tuple[str, int]] = []
                for c in p.text:
                    if cjk[ord(c)]:
                        dest += [(" ", 0), (c, 1), (" ", 1)]
                    else:
                        dest.append((c, 0))
                p = p.transform(dest, 0)
        if self.strip and not p.text.isascii():
            p = self._nfd.normalize(p)
            mn = f.mn
            if any(mn[ord(c)] for c in p.text):
                p = filter_chars(p, lambda c: not mn[ord(c)])
        if self._lower is not None:
            p = self._lower.normalize(p)
        return p


class _Recorder:
    """What fstok.hf_norm.Precompiled reads and writes of HF's NormalizedString: the text, and the transform
    it asks for (applied to the Piece with its alignment bookkeeping)."""

    __slots__ = ("text", "dest")

    def __init__(self, text: str):
        self.text, self.dest = text, None

    def get(self) -> str:
        return self.text

    def transform(self, dest) -> None:
        self.dest = dest


def _graphemes():
    g = _GRAPHEMES.get("t")
    if g is None:
        import os

        import numpy as np

        from ..hf_norm import GraphemeTable

        path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "hf_graphemes.npz")
        with np.load(path) as z:
            g = _GRAPHEMES["t"] = GraphemeTable(z["starts"].copy(), z["ends"].copy(), z["bits"].copy())
    return g


_GRAPHEMES: dict = {}


class Precompiled(Normalizer):
    def __init__(self, charsmap: str, where: str):
        import base64
        import struct

        import numpy as np

        try:
            blob = base64.b64decode(charsmap, validate=True)
        except (ValueError, TypeError):
            raise UnsupportedComponent(f"{where}: Precompiled precompiled_charsmap is not base64") from None
        if not blob:  # HF cannot parse it and refuses the file
            raise UnsupportedComponent(f"{where}: normalizer 'Precompiled' with an empty precompiled_charsmap")
        (tsize,) = struct.unpack_from("<I", blob, 0) if len(blob) > 4 else (0,)
        if tsize == 0 or tsize % 4 or 4 + tsize > len(blob):
            raise UnsupportedComponent(f"{where}: Precompiled charsmap is broken (trie size {tsize}, {len(blob)} bytes)")
        units = np.frombuffer(blob, dtype="<u4", count=tsize // 4, offset=4).astype(np.uint32)
        norm = blob[4 + tsize:]
        if not norm.endswith(b"\0"):
            norm += b"\0"
        from ..hf_norm import Precompiled as _Oracle

        self._p = _Oracle(units, norm, _graphemes())

    def normalize(self, p: Piece) -> Piece:
        if not p.text:
            return p
        rec = _Recorder(p.text)
        self._p(rec)
        return p if rec.dest is None else p.transform(rec.dest, 0)


class Sequence(Normalizer):
    def __init__(self, items: list[Normalizer]):
        self.items = items

    def normalize(self, p: Piece) -> Piece:
        for n in self.items:
            p = n.normalize(p)
        return p


def from_config(cfg: Any, where: str = "tokenizer.json") -> Optional[Normalizer]:
    """The normalizer of a tokenizer.json `normalizer` value (None for null / an empty Sequence)."""
    if cfg is None:
        return None
    if not isinstance(cfg, dict):
        raise UnsupportedComponent(f"{where}: normalizer {cfg!r} is not an object")
    t = cfg.get("type")
    if t == "Sequence":
        items = [from_config(c, where) for c in cfg.get("normalizers") or []]
        items = [n for n in items if n is not None]
        if not items:
            return None
        return items[0] if len(items) == 1 else Sequence(items)
    if t in ("NFC", "NFD", "NFKC", "NFKD"):
        return Unicode(t)
    if t == "Lowercase":
        return Lowercase()
    if t == "Strip":
        return Strip(bool(cfg.get("strip_left", True)), bool(cfg.get("strip_right", True)))
    if t == "StripAccents":
        return StripAccents()
    if t == "Replace":
        content = cfg.get("content")
        if not isinstance(content, str):
            raise UnsupportedComponent(f"{where}: Replace normalizer without a string content")
        return Replace(cfg.get("pattern"), content, where)
    if t == "Prepend":
        pre = cfg.get("prepend")
        if not isinstance(pre, str):
            raise UnsupportedComponent(f"{where}: Prepend normalizer without a string prepend")
        return Prepend(pre)
    if t == "ByteLevel":
        return ByteLevel()
    if t == "Precompiled":
        cm = cfg.get("precompiled_charsmap")
        if not isinstance(cm, str):
            raise UnsupportedComponent(f"{where}: Precompiled normalizer without a precompiled_charsmap string")
        return Precompiled(cm, where)
    if t == "BertNormalizer":
        sa = cfg.get("strip_accents")
        return BertNormalizer(bool(cfg.get("clean_text", True)), bool(cfg.get("handle_chinese_chars", True)),
                              None if sa is None else bool(sa), bool(cfg.get("lowercase", True)))
    raise UnsupportedComponent(f"{where}: normalizer {t!r} is not supported by fstok's tokenizer.json pipeline "
                               "(supported: NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, Replace, Prepend, "
                               "ByteLevel, BertNormalizer, Precompiled, Sequence)")
