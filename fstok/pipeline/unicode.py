"""The Unicode facts HF `tokenizers` 0.23.3 uses, per code point.

HF's tables come from Rust crates whose Unicode versions differ from Python's `unicodedata`, so the
facts that matter for exactness are read from `fstok/data/bert_unicode.npz` (probed from HF itself over
every code point by tools/gen_bert_unicode.py): punctuation (`is_ascii_punctuation || is_punctuation`),
lowercase (`char::to_lowercase`), canonical decomposition and combining classes (the
`unicode-normalization-alignments` crate); and from `fstok/data/hf_pipeline_unicode.npz`
(tools/gen_hf_pipeline_unicode.py): numeric (`char::is_numeric`, Digits), combining marks (StripAccents) and
the compatibility decompositions (NFKD). Python's `unicodedata` fills in only the canonical compositions
(restricted to code points HF decomposes).
"""
from __future__ import annotations

import functools
import os
import unicodedata

import numpy as np

_DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "bert_unicode.npz")

# Rust char::is_whitespace (the White_Space property; stable since Unicode 4.1)
WHITESPACE = frozenset("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
                       "\u2009\u200a\u2028\u2029\u202f\u205f\u3000")


def _unpack(z, name: str) -> dict[int, str]:
    keys, offs, vals = z[f"{name}_keys"], z[f"{name}_offs"], z[f"{name}_vals"]
    chars = "".join(map(chr, vals.tolist()))
    o = offs.tolist()
    return {int(k): chars[o[i]: o[i + 1]] for i, k in enumerate(keys.tolist())}


class _Facts:
    def __init__(self):
        with np.load(_DATA) as z:
            self.pretok = z["pretok"].copy()
            self.ccc = z["ccc"].copy()
            self.mn = z["mn"].copy()
            self.clean = z["clean"].copy()
            self.cjk = z["cjk"].copy()
            self.lower = _unpack(z, "lower")
            self.nfd = _unpack(z, "nfd")
        self.ccc_list = self.ccc.tolist()
        self.lower_table = {k: v for k, v in self.lower.items()}
        self.punct = frozenset(chr(c) for c in np.nonzero(self.pretok == 2)[0].tolist())


@functools.lru_cache(maxsize=1)
def facts() -> _Facts:
    return _Facts()


def disk_cached(name: str, compute) -> frozenset:
    """compute() (a set of characters that depends on HF's data files and Python's `unicodedata` only), kept
    in fstok's cache directory: computing it walks every code point (~1 s), once per machine and Python
    Unicode version."""
    import hashlib

    from .._cache import cache_dir

    ident = [name, unicodedata.unidata_version]
    for p in (_DATA, _PIPE_DATA):
        try:
            st = os.stat(p)
            ident.append(f"{st.st_size}:{st.st_mtime_ns}")
        except OSError:
            ident.append("-")
    path = os.path.join(cache_dir(), f"unicode-{name}-{hashlib.sha256('|'.join(ident).encode()).hexdigest()[:16]}.npy")
    try:
        cps = np.load(path, allow_pickle=False)
        if cps.dtype == np.uint32 and cps.ndim == 1 and (not len(cps) or int(cps.max()) < 0x110000):
            return frozenset(map(chr, cps.tolist()))
    except (OSError, ValueError):
        pass
    out = frozenset(compute())
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp.npy"
        np.save(tmp, np.array(sorted(map(ord, out)), dtype=np.uint32), allow_pickle=False)
        os.replace(tmp, path)
    except OSError:
        pass
    return out


@functools.lru_cache(maxsize=1)
def opaque() -> frozenset:
    """Code points whose canonical facts differ between HF and Python (characters newer than HF's tables):
    HF treats them as plain starters without a decomposition, so Python's tables must not touch them."""
    return disk_cached("opaque", _opaque)


def _opaque() -> set:
    f = facts()
    d = set()
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        py = unicodedata.normalize("NFD", c)
        if py != f.nfd.get(cp, c) or (py == c and unicodedata.combining(c) != f.ccc_list[cp]):
            d.add(c)
    return d


@functools.lru_cache(maxsize=2)
def touched(form: str) -> frozenset:
    """The code points a normalization check must look at for `form` ("NFC" or "NFKC"): those with a nonzero
    combining class, those the form maps to something else, those that can compose with the character
    before them (second halves of canonical decompositions, Hangul jamo), and those whose facts differ
    between HF and Python (`opaque` / `opaque_compat`).  A text with none of them is in the form by HF's
    tables and by `unicodedata` alike: every character is a starter that stays itself and combines with
    nothing."""
    if form not in ("NFC", "NFKC"):
        raise ValueError(f"normalization form {form!r}")
    return disk_cached(f"touched-v4-{form}", lambda: _touched(form))


def _touched(form: str) -> set:
    f = facts()
    compat = form == "NFKC"
    ctab = compat_table() if compat else {}
    d = set(opaque_compat() if compat else opaque())
    d.update(map(chr, range(0x1100, 0x1200)))  # Hangul jamo
    # characters that compose with the one before them: second halves of canonical decompositions (Python's and
    # HF's) and the Hangul vowels and trailing consonants (composed algorithmically)
    second = set(map(chr, [*range(0x1161, 0x1176), *range(0x11A8, 0x11C3)]))
    decomposing = []
    for cp in range(0x80, 0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        dec = unicodedata.decomposition(c)
        if dec and not dec.startswith("<") and len(dec.split()) == 2:
            second.add(chr(int(dec.split()[1], 16)))
        if unicodedata.combining(c) or f.ccc_list[cp] or unicodedata.normalize(form, c) != c:
            d.add(c)
        elif dec or cp in f.nfd or cp in ctab:
            decomposing.append(c)
    second.update(b for (_, b) in _compositions())
    for hf in f.nfd.values():
        second.update(hf[1:])
    d |= second
    # a character that decomposes must start with a starter that composes with nothing before it (by both
    # tables), or a normalization could reach back across it
    for c in decomposing:
        for first in (unicodedata.normalize("NFKD" if compat else "NFD", c)[:1], decompose(c, compat)[:1]):
            if first != c and (first in second or f.ccc_list[ord(first)] or unicodedata.combining(first)):
                d.add(c)
    return d


def is_punc(c: str) -> bool:
    return c in facts().punct


def is_whitespace(c: str) -> bool:
    return c in WHITESPACE


_PIPE_DATA = os.path.join(os.path.dirname(_DATA), "hf_pipeline_unicode.npz")


@functools.lru_cache(maxsize=1)
def _pipeline_sets() -> tuple[frozenset, frozenset]:
    with np.load(_PIPE_DATA) as z:
        return (frozenset(map(chr, z["marks"].tolist())), frozenset(map(chr, z["numeric"].tolist())))


def is_numeric(c: str) -> bool:
    """`char::is_numeric` as HF's Digits pre-tokenizer applies it."""
    return c in _pipeline_sets()[1]


_SCRIPTS_DATA = os.path.join(os.path.dirname(_DATA), "hf_scripts.npz")


@functools.lru_cache(maxsize=1)
def _scripts() -> tuple[list[int], list[int]]:
    with np.load(_SCRIPTS_DATA) as z:
        return z["starts"].tolist(), z["classes"].tolist()


def script_class(c: str) -> int:
    """HF's UnicodeScripts class of c: 0 joins either neighbour (' ' and characters outside every script);
    equal numbers are one script (Hiragana and Katakana count as Han, as HF counts them)."""
    import bisect

    starts, classes = _scripts()
    return classes[bisect.bisect_right(starts, ord(c)) - 1]


def is_combining_mark(c: str) -> bool:
    """What HF's StripAccents normalizer removes."""
    return c in _pipeline_sets()[0]


# ------------------------------------------------------------------ normalization forms (HF's crate)
_SBASE, _LBASE, _VBASE, _TBASE = 0xAC00, 0x1100, 0x1161, 0x11A7
_LCOUNT, _VCOUNT, _TCOUNT = 19, 21, 28
_NCOUNT = _VCOUNT * _TCOUNT
_SCOUNT = _LCOUNT * _NCOUNT


@functools.lru_cache(maxsize=1)
def compat_table() -> dict[int, str]:
    """{code point: HF's full NFKD} where it differs from HF's NFD (HF's crate is older than Python's
    tables: e.g. U+1078D and U+1F16C have no compatibility decomposition there)."""
    with np.load(_PIPE_DATA) as z:
        return _unpack(z, "nfkd")


@functools.lru_cache(maxsize=1)
def opaque_compat() -> frozenset:
    """`opaque()` plus the code points whose compatibility decomposition differs between HF and Python:
    a text without any of them gets HF's NFKC / NFKD from `unicodedata.normalize`."""
    return disk_cached("opaque-compat", _opaque_compat)


def _opaque_compat() -> set:
    table = compat_table()
    f = facts()
    d = set(opaque())
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        py = unicodedata.normalize("NFKD", c)
        if (py != c or cp in table) and py != table.get(cp, f.nfd.get(cp, c)):
            d.add(c)
    return d


@functools.lru_cache(maxsize=65536)
def decompose(c: str, compat: bool) -> str:
    """Full decomposition of one char as HF's crate knows it."""
    if compat:
        k = compat_table().get(ord(c))
        if k is not None:
            return k
    if c in opaque():
        return c
    return facts().nfd.get(ord(c), c)


@functools.lru_cache(maxsize=1)
def _compositions() -> dict[tuple[str, str], str]:
    f = facts()
    comp: dict[tuple[str, str], str] = {}
    for cp in f.nfd:
        c = chr(cp)
        if _SBASE <= cp < _SBASE + _SCOUNT:
            continue
        dec = unicodedata.decomposition(c)
        if not dec or dec.startswith("<"):
            continue
        parts = [chr(int(x, 16)) for x in dec.split()]
        if len(parts) != 2 or unicodedata.normalize("NFC", c) != c:
            continue
        comp[(parts[0], parts[1])] = c
    return comp


def compose(a: str, b: str) -> str | None:
    """The primary composite of a + b, or None (Hangul composed algorithmically)."""
    ai, bi = ord(a), ord(b)
    if _LBASE <= ai < _LBASE + _LCOUNT and _VBASE <= bi < _VBASE + _VCOUNT:
        return chr(_SBASE + ((ai - _LBASE) * _VCOUNT + (bi - _VBASE)) * _TCOUNT)
    if _SBASE <= ai < _SBASE + _SCOUNT and (ai - _SBASE) % _TCOUNT == 0 and _TBASE < bi < _TBASE + _TCOUNT:
        return chr(ai + bi - _TBASE)
    return _compositions().get((a, b))


def ccc(c: str) -> int:
    return facts().ccc_list[ord(c)]


def decompositions(text: str, compat: bool) -> list[tuple[str, int]]:
    """(char, change) stream of HF's NFD/NFKD: each input char's decomposition (first char change 0, the
    rest 1), every run of non-starters stably sorted by combining class."""
    cl = facts().ccc_list
    out: list[tuple[str, int]] = []
    run: list[tuple[int, str, int]] = []  # pending non-starters
    for c in text:
        for k, d in enumerate(decompose(c, compat)):
            k_ = cl[ord(d)]
            if k_ == 0:
                if run:
                    run.sort(key=lambda x: x[0])
                    out.extend((x[1], x[2]) for x in run)
                    run = []
                out.append((d, 1 if k else 0))
            else:
                run.append((k_, d, 1 if k else 0))
    if run:
        run.sort(key=lambda x: x[0])
        out.extend((x[1], x[2]) for x in run)
    return out


def recompositions(stream: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """HF's canonical composition over a decomposition stream, keeping the change counts as its crate
    does (a composed pair's change is the sum of both minus one)."""
    cl = facts().ccc_list
    out: list[tuple[str, int]] = []
    buf: list[tuple[str, int]] = []
    composee: tuple[str, int] | None = None
    last_ccc: int | None = None
    for ch, change in stream:
        cc = cl[ord(ch)]
        if composee is None:
            if cc != 0:
                out.append((ch, change))
                continue
            composee = (ch, change)
            continue
        if last_ccc is None:
            r = compose(composee[0], ch)
            if r is not None:
                composee = (r, composee[1] + change - 1)
                continue
            if cc == 0:
                out.append(composee)
                composee = (ch, change)
                continue
            buf.append((ch, change))
            last_ccc = cc
        else:
            if last_ccc >= cc:
                if cc == 0:
                    out.append(composee)
                    out.extend(buf)
                    buf = []
                    composee = (ch, change)
                    last_ccc = None
                    continue
                buf.append((ch, change))
                last_ccc = cc
                continue
            r = compose(composee[0], ch)
            if r is not None:
                composee = (r, composee[1] + change - 1)
                continue
            buf.append((ch, change))
            last_ccc = cc
    if composee is not None:
        out.append(composee)
    out.extend(buf)
    return out
