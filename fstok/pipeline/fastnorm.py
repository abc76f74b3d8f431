"""A tokenizer.json normalizer as whole-text operations in C (no per-character Python): the UTF-8 the compiled
tables encode when the normalizer is simple.

    plan = fast_normalizer_plan(obj["normalizer"])   # None: no fast form
    plan(text)                                       # normalized UTF-8 bytes, or None: run the stages
    fast_normalizer(obj["normalizer"])(text)         # the same as a str (tests, the HF face)

Each component is one pass with HF's own facts, over the text as a str or as its UTF-8:
  NFC / NFD / NFKC / NFKD   `unicodedata` when the text holds none of the code points HF's tables do not
                            know (`fstok.pipeline.unicode.opaque`, tested by a C bitmap scan): else None
  Lowercase                 HF's per-character lowercase map over the UTF-8 (fstok.runtime._norm.map)
  Strip                     `str.strip` of Rust's White_Space characters
  StripAccents              `str.translate` deleting HF's combining marks
  Replace                   String: `bytes.replace` (leftmost, non-overlapping, as HF); Regex: fstok's DFA
                            finds the matches and C writes the result (fstok.runtime._dfa Spanner.replace)
  Prepend                   prefix on a non-empty text
  BertNormalizer            clean_text, CJK padding, NFD + HF's Mn marks deleted, Lowercase: C maps over the UTF-8
  Sequence                  in order (None as soon as one part says None)
None means "not here": the caller runs the stage normalizer (fstok.pipeline.normalizers, the oracle), which
also gives the offsets.  Other components (ByteLevel, ...) have no fast form.

The facts a plan needs (the code point sets, the lowercase map, the Replace DFAs) are computed when the
tokenizer is compiled and kept in its artifact (`sections()` / `from_sections`), so loading one reads
tables and compiles nothing.
"""
from __future__ import annotations

import unicodedata
from typing import Any, Callable, Optional

import numpy as np

Fast = Callable[[str], Optional[str]]
NCP = 0x110000
PREFIX = "norm."


class NoFastForm(ValueError):
    pass


def _bitmap(cps: np.ndarray) -> np.ndarray:
    """The 0x110000-bit set of these code points (fstok.runtime._norm's layout: bit cp of byte cp >> 3)."""
    cps = np.asarray(cps, dtype=np.uint32)
    bits = np.zeros(NCP, dtype=np.bool_)
    bits[cps] = True
    return np.packbits(bits, bitorder="little")


def _sorted_cps(chars) -> np.ndarray:
    return np.array(sorted({ord(c) for c in chars}), dtype=np.uint32)


def _native():
    from ..runtime import _norm

    return _norm


class _Step:
    """One component: `domain` "s" (runs on the str) or "b" (on the UTF-8 bytes); `data` the arrays it keeps
    in the artifact."""

    domain = "s"

    def __init__(self):
        self.data: dict[str, np.ndarray] = {}

    def __call__(self, x):
        raise NotImplementedError


class _Unicode(_Step):
    def __init__(self, form: str, opaque: np.ndarray):
        super().__init__()
        self.form = form
        self.data = {"cps": opaque}
        self._bm = _bitmap(opaque)
        self._any = _native().any_in

    @classmethod
    def build(cls, form: str) -> "_Unicode":
        from . import unicode as _u

        return cls(form, _sorted_cps(_u.opaque_compat() if "K" in form else _u.opaque()))

    def __call__(self, t: str) -> Optional[str]:
        if t.isascii():
            return t
        if self._any(t, self._bm):
            return None
        # without the characters HF's tables do not know, Python's tables hold HF's facts (decompositions,
        # combining classes; fstok.pipeline.unicode checks them against HF)
        return t if unicodedata.is_normalized(self.form, t) else unicodedata.normalize(self.form, t)


class _Lowercase(_Step):
    domain = "b"
    _ASCII = bytes(range(65)) + bytes(range(97, 123)) + bytes(range(91, 128))

    def __init__(self, keys: np.ndarray, offs: np.ndarray, blob: np.ndarray):
        super().__init__()
        if len(offs) != len(keys) + 1 or (len(keys) and (int(keys.max()) >= NCP or np.any(np.diff(keys.astype(np.int64)) <= 0))):
            raise ValueError("Lowercase map: keys not increasing code points, or offsets of the wrong length")
        if int(offs[0]) != 0 or np.any(np.diff(offs.astype(np.int64)) < 0) or int(offs[-1]) > len(blob):
            raise ValueError("Lowercase map: offsets not increasing from 0 within the value bytes")
        self.data = {"keys": keys, "offs": offs, "blob": blob}
        self._bm = _bitmap(keys)
        self._args = (self._bm, keys, offs, blob, self._ASCII)
        self._map = _native().map

    @classmethod
    def build(cls) -> "_Lowercase":
        from . import unicode as _u

        table = _u.facts().lower  # HF's char::to_lowercase where it is not the character itself
        keys = sorted(c for c, v in table.items() if v != chr(c) and c >= 0x80)
        vals = [table[c].encode("utf-8") for c in keys]
        offs = np.zeros(len(keys) + 1, dtype=np.uint32)
        offs[1:] = np.cumsum([len(v) for v in vals]) if vals else []
        return cls(np.array(keys, dtype=np.uint32), offs, np.frombuffer(b"".join(vals), dtype=np.uint8).copy())

    def __call__(self, b: bytes) -> bytes:
        return self._map(b, *self._args)


class _ReplaceString(_Step):
    domain = "b"

    def __init__(self, pat: str, content: str):
        super().__init__()
        self.pat, self.content = pat.encode("utf-8"), content.encode("utf-8")

    def __call__(self, b: bytes) -> bytes:
        # leftmost non-overlapping, as HF: a match of valid UTF-8 in valid UTF-8 starts and ends on characters
        return b.replace(self.pat, self.content)


class _ReplaceRegex(_Step):
    domain = "b"

    def __init__(self, cp, content: str):
        super().__init__()
        self.cp, self.content = cp, content.encode("utf-8")
        self._rep = cp.spanner.replace

    def __call__(self, b: bytes) -> bytes:
        return self._rep(b, self.content)


class _Strip(_Step):
    def __init__(self, left: bool, right: bool):
        super().__init__()
        from .unicode import WHITESPACE

        ws = "".join(sorted(WHITESPACE))
        self.f = (lambda x: x.strip(ws)) if left and right else (lambda x: x.lstrip(ws)) if left else (
            (lambda x: x.rstrip(ws)) if right else (lambda x: x))

    def __call__(self, t: str) -> str:
        return self.f(t)


class _StripAccents(_Step):
    def __init__(self, marks: np.ndarray):
        super().__init__()
        self.data = {"cps": marks}
        self._table = None

    @classmethod
    def build(cls) -> "_StripAccents":
        from .unicode import _pipeline_sets

        return cls(_sorted_cps(_pipeline_sets()[0]))

    def __call__(self, t: str) -> str:
        if t.isascii():
            return t
        if self._table is None:
            self._table = dict.fromkeys(self.data["cps"].tolist())
        return t.translate(self._table)


class _Prepend(_Step):
    domain = "b"

    def __init__(self, pre: str):
        super().__init__()
        self.pre = pre.encode("utf-8")

    def __call__(self, b: bytes) -> bytes:
        return self.pre + b if b else b


class _BertNorm(_Step):
    """HF's BertNormalizer in its own order (fstok.pipeline.normalizers.BertNormalizer, the oracle), over the UTF-8
    in C passes: clean_text (NUL, U+FFFD and control characters deleted, whitespace to a space), CJK characters
    padded with spaces, NFD and HF's Mn marks deleted (strip_accents; the NFD step's None on code points HF's
    tables do not know), lowercase (HF's map).  The facts are HF's (fstok.pipeline.unicode)."""

    def __init__(self, clean: bool, chinese: bool, strip: bool, lower: bool, data: dict):
        super().__init__()
        self.clean, self.chinese, self.strip, self.lower = clean, chinese, strip, lower
        self.data = data
        for k in ("del", "space", "cjk", "mn", "cps"):
            a = data[k]
            if a.dtype != np.uint32 or (a.size and int(a.max()) >= NCP) or np.any(np.diff(a.astype(np.int64)) <= 0):
                raise ValueError(f"BertNormalizer {k}: not increasing uint32 code points")
        if np.intersect1d(data["del"], data["space"]).size:
            raise ValueError("BertNormalizer del, space: a code point both deleted and made a space")
        self._cjk_bm = _bitmap(data["cjk"]) if chinese else None
        self._any = _native().any_in
        self._nfd = _Unicode("NFD", data["cps"]) if strip else None
        self._lower = _Lowercase(data["keys"], data["offs"], data["blob"]) if lower else None
        self._ascii_tab = None
        self._map = _native().map

    @classmethod
    def build(cls, c: dict) -> "_BertNorm":
        from . import unicode as _u

        f = _u.facts()
        strip = c.get("strip_accents")
        lower = bool(c.get("lowercase", True))
        strip = lower if strip is None else bool(strip)
        low = _Lowercase.build()
        data = {"del": np.nonzero(f.clean == 1)[0].astype(np.uint32),
                "space": np.nonzero(f.clean == 2)[0].astype(np.uint32),
                "cjk": np.nonzero(f.cjk)[0].astype(np.uint32), "mn": np.nonzero(f.mn)[0].astype(np.uint32),
                "cps": _Unicode.build("NFD").data["cps"], **low.data}
        return cls(bool(c.get("clean_text", True)), bool(c.get("handle_chinese_chars", True)), strip, lower, data)

    domain = "b"

    def _args(self, name: str) -> tuple:
        """fstok.runtime._norm.map's arguments replacing each code point of a set by its UTF-8 value (made on
        first need): "clean" the non-ASCII characters clean_text deletes or makes a space, "cjk" the padded CJK
        characters, "mn" the deleted marks."""
        got = self.__dict__.get("_m_" + name)
        if got is not None:
            return got
        if name == "clean":
            sp = {k for k in self.data["space"].tolist() if k >= 128}
            keys = sorted(sp | {k for k in self.data["del"].tolist() if k >= 128})
            vals = [b" " if k in sp else b"" for k in keys]
        elif name == "cjk":
            keys = self.data["cjk"].tolist()
            vals = [f" {chr(k)} ".encode("utf-8", "surrogatepass") for k in keys]
        else:
            keys = self.data["mn"].tolist()
            vals = [b""] * len(keys)
        keys = np.asarray(keys, dtype=np.uint32)
        offs = np.zeros(len(keys) + 1, dtype=np.uint32)
        offs[1:] = np.cumsum([len(v) for v in vals]) if vals else []
        blob = np.frombuffer(b"".join(vals) or b"\0", dtype=np.uint8).copy()
        got = self.__dict__["_m_" + name] = (_bitmap(keys), keys, offs, blob, bytes(range(128)))
        return got

    def __call__(self, b: bytes) -> Optional[bytes]:
        m = self._map
        if self.clean:  # ASCII controls and spaces in one bytes.translate (no UTF-8 sequence holds an ASCII byte)
            if self._ascii_tab is None:
                tab = bytearray(range(256))
                for k in self.data["space"].tolist():
                    if k < 128:
                        tab[k] = 32
                self._ascii_tab = (bytes(tab), bytes(k for k in self.data["del"].tolist() if k < 128))
            b = b.translate(*self._ascii_tab)
        if b.isascii():
            return b.lower() if self.lower else b
        if self.clean:
            b = m(b, *self._args("clean"))
        if self.chinese and self._any(b, self._cjk_bm):
            b = m(b, *self._args("cjk"))
        if self.strip:
            t = self._nfd(b.decode("utf-8"))
            if t is None:
                return None
            b = m(t.encode("utf-8"), *self._args("mn"))
        return self._lower(b) if self.lower else b

def _flatten(cfg: Any) -> list[dict]:
    if cfg is None:
        return []
    if not isinstance(cfg, dict):
        raise NoFastForm(repr(cfg))
    if cfg.get("type") == "Sequence":
        out = []
        for c in cfg.get("normalizers") or []:
            out += _flatten(c)
        return out
    return [cfg]


def _replace_parts(c: dict) -> tuple[str, str, str]:
    pat, content = c.get("pattern"), c.get("content")
    if not isinstance(content, str) or not isinstance(pat, dict) or len(pat) != 1:
        raise NoFastForm("Replace")
    kind, value = next(iter(pat.items()))
    if kind not in ("String", "Regex") or not isinstance(value, str) or not value:
        raise NoFastForm("Replace")
    return kind, value, content


def _step(c: dict, i: int, art=None) -> _Step:
    """The step of component `c` (index `i` of the flattened sequence): its facts computed, or read from the
    artifact's sections `norm.{i}.*` when `art` is given."""
    t = c.get("type")

    def arr(name: str) -> np.ndarray:
        return art.array(f"{PREFIX}{i}.{name}")

    if t in ("NFC", "NFD", "NFKC", "NFKD"):
        if art is None:
            return _Unicode.build(t)
        cps = arr("cps")
        if cps.dtype != np.uint32 or (cps.size and int(cps.max()) >= NCP):
            raise ValueError(f"{PREFIX}{i}.cps: not uint32 code points")
        return _Unicode(t, cps)
    if t == "Lowercase":
        if art is None:
            return _Lowercase.build()
        keys, offs, blob = arr("keys"), arr("offs"), arr("blob")
        if keys.dtype != np.uint32 or offs.dtype != np.uint32 or blob.dtype != np.uint8:
            raise ValueError(f"{PREFIX}{i}: Lowercase map arrays of the wrong types")
        return _Lowercase(keys, offs, blob)
    if t == "Replace":
        kind, value, content = _replace_parts(c)
        if kind == "String":
            return _ReplaceString(value, content)
        if art is not None:
            from ..pretokenize import CompiledPattern

            cp = CompiledPattern.from_sections(art, f"{PREFIX}{i}.re.")
            if cp.mode != "find":
                raise ValueError(f"{PREFIX}{i}.re: not a find-mode DFA")
            return _ReplaceRegex(cp, content)
        from .patterns import Matcher

        m = Matcher(c["pattern"], "Replace")
        if m._cp is None:
            raise NoFastForm("Replace")
        return _ReplaceRegex(m._cp, content)
    if t == "Strip":
        return _Strip(bool(c.get("strip_left", True)), bool(c.get("strip_right", True)))
    if t == "StripAccents":
        if art is None:
            return _StripAccents.build()
        cps = arr("cps")
        if cps.dtype != np.uint32 or (cps.size and int(cps.max()) >= NCP):
            raise ValueError(f"{PREFIX}{i}.cps: not uint32 code points")
        return _StripAccents(cps)
    if t == "BertNormalizer":
        if art is None:
            return _BertNorm.build(c)
        lower = bool(c.get("lowercase", True))
        strip = c.get("strip_accents")
        return _BertNorm(bool(c.get("clean_text", True)), bool(c.get("handle_chinese_chars", True)),
                         lower if strip is None else bool(strip), lower,
                         {k: arr(k) for k in ("del", "space", "cjk", "mn", "cps", "keys", "offs", "blob")})
    if t == "Prepend":
        pre = c.get("prepend")
        if not isinstance(pre, str):
            raise NoFastForm("Prepend")
        return _Prepend(pre)
    raise NoFastForm(str(t))


class NormPlan:
    """The fast form of a normalizer: `plan(text)` -> normalized UTF-8 bytes, or None (run the stages)."""

    def __init__(self, steps: list[_Step]):
        self.steps = steps

    def __call__(self, text: str) -> Optional[bytes]:
        x: Any = text
        in_bytes = False
        try:
            for st in self.steps:
                if st.domain == "b":
                    if not in_bytes:
                        x, in_bytes = x.encode("utf-8"), True
                elif in_bytes:
                    x, in_bytes = x.decode("utf-8"), False
                x = st(x)
                if x is None:
                    return None
            return x if in_bytes else x.encode("utf-8")
        except UnicodeEncodeError:
            return None  # lone surrogates: the stages see the text as given

    def text(self, text: str) -> Optional[str]:
        b = self(text)
        return None if b is None else b.decode("utf-8")

    def sections(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for i, st in enumerate(self.steps):
            for k, v in st.data.items():
                out[f"{PREFIX}{i}.{k}"] = np.ascontiguousarray(v)
            if isinstance(st, _ReplaceRegex):
                out.update(st.cp.sections(f"{PREFIX}{i}.re."))
        return out

    @classmethod
    def from_sections(cls, cfg: Any, art) -> "NormPlan":
        """The plan of `cfg` with its facts read from the artifact (ValueError naming a bad section)."""
        try:
            return cls([_step(c, i, art) for i, c in enumerate(_flatten(cfg))])
        except KeyError as e:
            raise ValueError(f"normalizer section {e} is missing") from None


def fast_normalizer_plan(cfg: Any) -> Optional[NormPlan]:
    """The fast form of a normalizer config, or None where it has none (a None config: the identity)."""
    try:
        return NormPlan([_step(c, i) for i, c in enumerate(_flatten(cfg))])
    except NoFastForm:
        return None


def fast_normalizer(cfg: Any) -> Optional[Fast]:
    """`fast_normalizer_plan` giving a str (None where it has no fast form)."""
    plan = fast_normalizer_plan(cfg)
    return None if plan is None else plan.text
