"""The parts of HF `tokenizers`' pipeline that SentencePiece-style tokenizer.json files use, with HF's
offsets: a NormalizedString (per-character alignments into the original text, transformed exactly as
`tokenizers` transforms them), the Precompiled / Replace / Prepend / Lowercase / Strip / NFx normalizers,
the Metaspace / WhitespaceSplit pre-tokenizers and added-token splitting (decoders: fstok.pipeline.decoders).

Grapheme clusters (the Precompiled normalizer works on them) follow UAX #29 with class tables the
compiler derives and stores in the artifact (`grapheme_classes`).
"""
from __future__ import annotations

import bisect
import re
from typing import Any, Callable

# Grapheme_Cluster_Break classes (plus the two extra properties the rules read)
G_OTHER, G_CR, G_LF, G_CONTROL, G_EXTEND, G_ZWJ, G_RI, G_PREPEND, G_SPACINGMARK = range(9)
G_L, G_V, G_T, G_LV, G_LVT = range(9, 14)
# bit flags above the class (bits 0-3 hold the class)
G_EXTPICT = 16
G_INCB_CONSONANT = 32
G_INCB_EXTEND = 64
G_INCB_LINKER = 128

WHITE_SPACE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)


class GraphemeTable:
    """Code point -> class bits, from sorted (start, end, bits) ranges (end inclusive)."""

    def __init__(self, starts, ends, bits):
        self._arrays = (starts, ends, bits)
        self._lists = None

    def _ranges(self):
        # lists on first use (a load of the artifact does not pay for them)
        if self._lists is None:
            self._lists = tuple(x.tolist() if hasattr(x, "tolist") else list(x) for x in self._arrays)
        return self._lists

    @property
    def starts(self) -> list[int]:
        return self._ranges()[0]

    @property
    def ends(self) -> list[int]:
        return self._ranges()[1]

    @property
    def bits(self) -> list[int]:
        return self._ranges()[2]

    def get(self, cp: int) -> int:
        i = bisect.bisect_right(self.starts, cp) - 1
        if i >= 0 and cp <= self.ends[i]:
            return self.bits[i]
        return G_OTHER

    def clusters(self, s: str) -> list[tuple[int, int]]:
        """Extended grapheme clusters of s as (start, end) character indices (UAX #29, GB3-GB999)."""
        n = len(s)
        if n == 0:
            return []
        get = self.get
        props = [get(ord(c)) for c in s]
        out = []
        start = 0
        pc = props[0] & 15
        ri = 1 if pc == G_RI else 0                    # consecutive regional indicators ending here
        emo = bool(props[0] & G_EXTPICT)               # text ending here matches ExtPict Extend*
        zwj_emo = False                                # ... ExtPict Extend* ZWJ
        incb = 1 if props[0] & G_INCB_CONSONANT else 0  # GB9c: 1 consonant [extend]*, 2 with a linker
        for i in range(1, n):
            cur = props[i]
            cc = cur & 15
            if pc == G_CR and cc == G_LF:
                brk = False
            elif pc in (G_CONTROL, G_CR, G_LF) or cc in (G_CONTROL, G_CR, G_LF):
                brk = True
            elif pc == G_L and cc in (G_L, G_V, G_LV, G_LVT):
                brk = False
            elif pc in (G_LV, G_V) and cc in (G_V, G_T):
                brk = False
            elif pc in (G_LVT, G_T) and cc == G_T:
                brk = False
            elif cc in (G_EXTEND, G_ZWJ, G_SPACINGMARK) or pc == G_PREPEND:
                brk = False
            elif incb == 2 and cur & G_INCB_CONSONANT:
                brk = False
            elif zwj_emo and cur & G_EXTPICT:
                brk = False
            elif pc == G_RI and cc == G_RI and ri % 2 == 1:
                brk = False
            else:
                brk = True
            if brk:
                out.append((start, i))
                start = i
            ri = ri + 1 if cc == G_RI else 0
            zwj_emo = cc == G_ZWJ and emo
            emo = bool(cur & G_EXTPICT) or (cc == G_EXTEND and emo)
            if cur & G_INCB_CONSONANT:
                incb = 1
            elif incb and cur & G_INCB_LINKER:
                incb = 2
            elif not (incb and cur & G_INCB_EXTEND):
                incb = 0
            pc = cc
        out.append((start, n))
        return out


class NString:
    """HF's NormalizedString, one alignment per character: (original start, original end) in characters
    of the whole input (HF keeps one per byte, equal within a character; every transformation below
    reads and writes whole characters, so the two are the same)."""

    __slots__ = ("chars", "align", "orig_start", "orig_end")

    def __init__(self, chars: list[str], align: list[tuple[int, int]], orig_start: int, orig_end: int):
        self.chars = chars
        self.align = align
        self.orig_start = orig_start
        self.orig_end = orig_end

    @classmethod
    def from_text(cls, text: str, base: int = 0) -> "NString":
        n = len(text)
        return cls(list(text), list(zip(range(base, base + n), range(base + 1, base + n + 1))), base, base + n)

    def get(self) -> str:
        return "".join(self.chars)

    def transform(self, dest: list[tuple[str, int]]) -> None:
        """NormalizedString::transform_range over the whole string (initial_offset 0)."""
        old = self.align
        p = 0
        chars, align = [], []
        for c, change in dest:
            if change > 0:
                a = old[p - 1] if p >= 1 else (0, 0)
            else:
                a = old[p]
                p += 1
            if change < 0:
                p += -change
            chars.append(c)
            align.append(a)
        self.chars, self.align = chars, align

    def replace_spans(self, spans: list[tuple[int, int]], content: str) -> None:
        """NormalizedString::replace for the given matches (character spans): content takes the
        alignment of the last replaced character."""
        if not spans:
            return
        chars, align = [], []
        last = 0
        for s, e in spans:
            chars.extend(self.chars[last:s])
            align.extend(self.align[last:s])
            a = self.align[e - 1] if e >= 1 else (0, 0)
            for c in content:
                chars.append(c)
                align.append(a)
            last = e
        chars.extend(self.chars[last:])
        align.extend(self.align[last:])
        self.chars, self.align = chars, align

    def prepend(self, s: str) -> None:
        if not self.chars:
            return
        a = self.align[0]
        self.chars = list(s) + self.chars
        self.align = [a] * len(s) + self.align

    def slice(self, s: int, e: int) -> "NString":
        al = self.align[s:e]
        if al:
            os_, oe = al[0][0], al[-1][1]
        else:
            os_ = oe = self.orig_start
        return NString(self.chars[s:e], al, os_, oe)


# ---------------------------------------------------------------------------------------------
# normalizers


class Precompiled:
    """HF's Precompiled normalizer (spm_precompiled): per grapheme cluster shorter than 6 bytes, the
    replacement of the *shortest* charsmap key that prefixes the cluster replaces the whole cluster;
    other clusters go character by character."""

    def __init__(self, units, norm: bytes, graphemes: GraphemeTable):
        self.units = units
        self.n = len(units)
        self.norm = norm
        self.g = graphemes
        self.memo: dict[str, str | None] = {}
        self.inert_memo: dict[str, bool] = {}
        self.keep_memo: dict[str, bool] = {}
        self.ctrl_rx = None
        self.plain_rx = None  # characters with a grapheme property
        self.seen: set[str] = set()
        self.table: dict[int, str] = {}  # single characters the charsmap replaces

    def transform(self, chunk: str) -> str | None:
        r = self.memo.get(chunk, 0)
        if r != 0:
            return r
        units = self.units
        key = chunk.encode("utf-8")
        node = 0
        u = int(units[0])
        node ^= (u >> 10) << ((u & (1 << 9)) >> 6)
        res = None
        for c in key:
            if c == 0:
                break
            node ^= c
            if node >= self.n:
                break
            u = int(units[node])
            if (u & 0x800000FF) != c:
                break
            node ^= (u >> 10) << ((u & (1 << 9)) >> 6)
            if (u >> 8) & 1:
                if node >= self.n:
                    break
                v = int(units[node]) & 0x7FFFFFFF
                end = self.norm.find(b"\0", v)
                res = self.norm[v : (len(self.norm) if end < 0 else end)].decode("utf-8", "replace")
                break  # the first (shortest) match
        self.memo[chunk] = res
        return res

    def __call__(self, ns: NString) -> None:
        s = ns.get()
        keep = self._keeps
        if all(keep(c) for c in set(s)):
            return  # every character is a cluster of its own that the charsmap leaves alone: nothing changes
        trans: list[tuple[str, int]] = []
        modified = False

        def replace(old: str, new: str):
            diff = len(new) - len(old)
            for c in new:
                trans.append((c, 0))
            if diff > 0:
                for k in range(len(trans) - 1, len(trans) - 1 - diff, -1):
                    if k >= 0:
                        trans[k] = (trans[k][0], 1)
            elif diff < 0 and trans:
                c, ch = trans[-1]
                trans[-1] = (c, ch + diff)

        for a, b in self.g.clusters(s):
            gr = s[a:b]
            if len(gr.encode("utf-8")) < 6:
                norm = self.transform(gr)
                if norm is not None:
                    modified = True
                    replace(gr, norm)
                    continue
            for c in gr:
                norm = self.transform(c)
                if norm is not None:
                    modified = True
                    replace(c, norm)
                else:
                    trans.append((c, 0))
        if modified:
            ns.transform(trans)

    def _keeps(self, c: str) -> bool:
        """c has no grapheme property (so, between such characters, it is a cluster of its own) and the
        charsmap has no replacement for it."""
        r = self.keep_memo.get(c)
        if r is None:
            r = self.keep_memo[c] = self.g.get(ord(c)) == 0 and self.transform(c) is None
        return r

    # -- the same result without alignments (encode without offsets) ---------------------------
    def _inert(self, c: str) -> bool:
        """No charsmap key starts with c: the walk over c's bytes leaves the trie."""
        r = self.inert_memo.get(c)
        if r is not None:
            return r
        units = self.units
        u = int(units[0])
        node = (u >> 10) << ((u & (1 << 9)) >> 6)
        r = False
        for b in c.encode("utf-8"):
            if b == 0:
                r = True
                break
            node ^= b
            if node >= self.n:
                r = True
                break
            u = int(units[node])
            if (u & 0x800000FF) != b:
                r = True
                break
            node ^= (u >> 10) << ((u & (1 << 9)) >> 6)
        self.inert_memo[c] = r
        return r

    def _clusters_str(self, s: str) -> str:
        out = []
        for a, b in self.g.clusters(s):
            gr = s[a:b]
            if len(gr.encode("utf-8")) < 6:
                norm = self.transform(gr)
                if norm is not None:
                    out.append(norm)
                    continue
            for c in gr:
                norm = self.transform(c)
                out.append(c if norm is None else norm)
        return "".join(out)

    def _chunk_str(self, s: str) -> str:
        """Characters with no grapheme property (most text) are clusters of one between two such
        characters: they are mapped with a translation table; the regions around the other characters
        (one plain character on each side) go through the cluster rules."""
        if self.plain_rx is None:
            parts = [f"{re.escape(chr(a))}-{re.escape(chr(e))}" for a, e in zip(self.g.starts, self.g.ends)
                     if not (a <= 0xDFFF and e >= 0xD800)]
            self.plain_rx = re.compile("[" + "".join(parts) + "]+")
        for c in set(s).difference(self.seen):
            self.seen.add(c)
            norm = self.transform(c)
            if norm is not None:
                self.table[ord(c)] = norm
        out = []
        pos = 0
        n = len(s)
        spans = []
        for m in self.plain_rx.finditer(s):
            a, b = max(m.start() - 1, 0), min(m.end() + 1, n)
            if spans and a <= spans[-1][1]:
                spans[-1] = (spans[-1][0], b)
            else:
                spans.append((a, b))
        for a, b in spans:
            if a > pos:
                out.append(s[pos:a].translate(self.table))
            out.append(self._clusters_str(s[a:b]))
            pos = b
        if pos < n:
            out.append(s[pos:].translate(self.table))
        return "".join(out)

    def apply_str(self, s: str) -> str:
        """The normalized string alone.  Control characters, CR and LF are clusters of their own (CR LF one
        cluster), so the text between them is normalized piece by piece; a piece whose characters start no
        charsmap key is unchanged."""
        if self.ctrl_rx is None:
            import re as _re

            parts = []
            for a, e, bits in zip(self.g.starts, self.g.ends, self.g.bits):
                if bits & 15 in (G_CR, G_LF, G_CONTROL) and not 0xD800 <= a <= 0xDFFF:
                    parts.append(f"{_re.escape(chr(a))}-{_re.escape(chr(min(e, 0x10FFFF)))}")
            self.ctrl_rx = _re.compile("\r\n|[" + "".join(parts) + "]")
        out = []
        pos = 0
        for m in self.ctrl_rx.finditer(s):
            if m.start() > pos:
                out.append(self._chunk_str(s[pos : m.start()]))
            g = m.group()
            norm = self.transform(g)
            if norm is None and len(g) > 1:
                norm = "".join(self.transform(c) or c for c in g)
            out.append(g if norm is None else norm)
            pos = m.end()
        if pos < len(s):
            out.append(self._chunk_str(s[pos:]))
        return "".join(out)


def _literal_spans(s: str, pat: str) -> list[tuple[int, int]]:
    out, i = [], 0
    if not pat:
        return out
    while True:
        j = s.find(pat, i)
        if j < 0:
            return out
        out.append((j, j + len(pat)))
        i = j + len(pat)


class Replace:
    def __init__(self, pattern: dict, content: str, where: str):
        self.content = content
        if "String" in pattern:
            self.lit = pattern["String"]
            self.rx = None
        elif "Regex" in pattern:
            self.lit = None
            self.rx = compile_simple_regex(pattern["Regex"], where)
        else:
            raise ValueError(f"{where}: Replace pattern {pattern!r} is not understood")

    def spans(self, s: str) -> list[tuple[int, int]]:
        if self.lit is not None:
            return _literal_spans(s, self.lit)
        return [(m.start(), m.end()) for m in self.rx.finditer(s) if m.end() > m.start()]

    def __call__(self, ns: NString) -> None:
        ns.replace_spans(self.spans(ns.get()), self.content)

    def apply_str(self, s: str) -> str:
        out, last = [], 0
        for a, b in self.spans(s):
            out.append(s[last:a])
            out.append(self.content)
            last = b
        out.append(s[last:])
        return "".join(out)


# Regex patterns whose meaning is the same in Oniguruma and Python's `re` on str: literals, escapes of
# punctuation, \s \d \w-free classes of literals and ranges, and the usual quantifiers.
_SIMPLE_RX = re.compile(r"^(?:[^\\\[\](){}|.^$*+?]|\\[\\\[\](){}|.^$*+?\-/ tnr]|\[(?:[^\\\]\[]|\\[\\\]\[\-^tnr ])+\]|\{\d+(?:,\d*)?\}|[*+?])+$")


def compile_simple_regex(pat: str, where: str) -> re.Pattern:
    if not _SIMPLE_RX.match(pat):
        raise ValueError(f"{where}: Replace regex {pat!r} is not supported (only literal characters, classes and "
                         "quantifiers are)")
    return re.compile(pat)


class Prepend:
    def __init__(self, s: str):
        self.s = s

    def __call__(self, ns: NString) -> None:
        ns.prepend(self.s)

    def apply_str(self, s: str) -> str:
        return self.s + s if s else s


class Lowercase:
    def __call__(self, ns: NString) -> None:
        trans = []
        for c in ns.chars:
            lo = c.lower()
            trans.append((lo[0], 0))
            for x in lo[1:]:
                trans.append((x, 1))
        ns.transform(trans)

    def apply_str(self, s: str) -> str:
        # per character (no final-sigma context, as Rust's char::to_lowercase)
        return s.lower() if "\u03a3" not in s else "".join(c.lower() for c in s)


def build_normalizer(spec: Any, where: str, graphemes: GraphemeTable, charsmaps: list) -> list[Callable]:
    """The normalizer steps of a tokenizer.json `normalizer` object (charsmaps: (units, norm) in order)."""
    if spec is None:
        return []
    t = spec.get("type")
    if t == "Sequence":
        out = []
        for s in spec["normalizers"]:
            out += build_normalizer(s, where, graphemes, charsmaps)
        return out
    if t == "Precompiled":
        units, norm = charsmaps.pop(0)
        return [Precompiled(units, norm, graphemes)] if len(units) else []
    if t == "Replace":
        return [Replace(spec["pattern"], spec["content"], where)]
    if t == "Prepend":
        return [Prepend(spec["prepend"])]
    if t == "Lowercase":
        return [Lowercase()]
    raise ValueError(f"{where}: normalizer {t!r} is not supported in SentencePiece-style pipelines "
                     "(supported: Sequence, Precompiled, Replace, Prepend, Lowercase)")


# ---------------------------------------------------------------------------------------------
# pre-tokenizers: each returns the pieces (NStrings) of one NString


class Metaspace:
    def __init__(self, spec: dict, where: str):
        self.rep = spec.get("replacement", "\u2581")
        if "prepend_scheme" in spec and spec["prepend_scheme"] is not None:
            self.scheme = spec["prepend_scheme"]
        else:
            self.scheme = "always" if spec.get("add_prefix_space", True) else "never"
        if self.scheme not in ("always", "first", "never"):
            raise ValueError(f"{where}: Metaspace prepend_scheme {self.scheme!r} is not understood")
        self.split = spec.get("split", True)
        if self.split is None:
            self.split = True
        if len(self.rep) != 1:
            raise ValueError(f"{where}: Metaspace replacement must be one character")

    def __call__(self, ns: NString) -> list[NString]:
        ns.replace_spans([(i, i + 1) for i, c in enumerate(ns.chars) if c == " "], self.rep)
        if self.scheme == "always" or (self.scheme == "first" and ns.orig_start == 0):
            if not (ns.chars and ns.chars[0] == self.rep):
                ns.prepend(self.rep)
        if not self.split:
            return [ns]
        cuts = [i for i, c in enumerate(ns.chars) if c == self.rep]
        if not cuts or cuts[0] != 0:
            cuts = [0] + cuts
        cuts.append(len(ns.chars))
        return [ns.slice(a, b) for a, b in zip(cuts, cuts[1:]) if b > a]

    def split_str(self, s: str, at_start: bool) -> list[str]:
        s = s.replace(" ", self.rep)
        if (self.scheme == "always" or (self.scheme == "first" and at_start)) and s and s[0] != self.rep:
            s = self.rep + s
        if not self.split:
            return [s]
        parts = s.split(self.rep)
        out = [parts[0]] if parts[0] else []
        out += [self.rep + p for p in parts[1:]]
        return out


_WS_RX = re.compile("[" + "".join(sorted(WHITE_SPACE)).replace("\\", "") + "]+")


class WhitespaceSplit:
    def split_str(self, s: str, at_start: bool) -> list[str]:
        return [p for p in _WS_RX.split(s) if p]

    def __call__(self, ns: NString) -> list[NString]:
        out, start = [], None
        for i, c in enumerate(ns.chars):
            if c in WHITE_SPACE:
                if start is not None:
                    out.append(ns.slice(start, i))
                    start = None
            elif start is None:
                start = i
        if start is not None:
            out.append(ns.slice(start, len(ns.chars)))
        return out


def build_pretokenizer(spec: Any, where: str) -> list[Callable]:
    if spec is None:
        return []
    t = spec.get("type")
    if t == "Sequence":
        out = []
        for s in spec["pretokenizers"]:
            out += build_pretokenizer(s, where)
        return out
    if t == "Metaspace":
        return [Metaspace(spec, where)]
    if t == "WhitespaceSplit":
        return [WhitespaceSplit()]
    raise ValueError(f"{where}: pre-tokenizer {t!r} is not supported in SentencePiece-style pipelines "
                     "(supported: Metaspace, WhitespaceSplit, Sequence)")
