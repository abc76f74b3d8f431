"""HF tokenizer.json pre-tokenizers, exact: each splits every piece into pieces (empty ones dropped).

    pt = pretokenizers.from_config(obj["pre_tokenizer"], where="tokenizer.json")   # None for none
    pieces = pt.split([piece])

Components (HF `tokenizers` 0.23.3, `pre_tokenizers/*.rs`, `NormalizedString::split`):
  Split(pattern, behavior, invert)   String or Regex; behavior Removed, Isolated, MergedWithPrevious,
                                     MergedWithNext, Contiguous; invert swaps matches and gaps
  Punctuation(behavior)              each `is_ascii_punctuation || is_punctuation` char is a match
  Digits(individual_digits)          `char::is_numeric` chars, Isolated (individual) or Contiguous
  Whitespace                         keeps `\\w+|[^\\w\\s]+` runs (Rust regex Unicode classes)
  WhitespaceSplit                    removes `char::is_whitespace` chars
  CharDelimiterSplit(delimiter)      removes the delimiter
  ByteLevel(add_prefix_space, use_regex)   prefix space per piece, GPT-2 regex split, byte characters
  BertPreTokenizer                   whitespace removed, then punctuation isolated
  UnicodeScripts                     splits where the script changes (HF's script classes, probed from HF:
                                     fstok/data/hf_scripts.npz, tools/gen_hf_scripts.py)
  FixedLength(length)                pieces of `length` characters
  Metaspace(replacement, prepend_scheme, split)   spaces -> replacement, prefix, split before each one
  Sequence                           in order
Anything else raises UnsupportedComponent naming it.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from . import UnsupportedComponent
from . import unicode as _u
from .normalized import Piece
from .normalizers import byte_level_transform
from .patterns import Matcher, char_matches

BEHAVIORS = ("removed", "isolated", "mergedwithprevious", "mergedwithnext", "contiguous")
HF_BYTELEVEL_REGEX = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
WHITESPACE_REGEX = r"\w+|[^\w\s]+"


def apply_behavior(matches: list[tuple[tuple[int, int], bool]], behavior: str) -> list[tuple[int, int]]:
    """HF `NormalizedString::split`: the kept spans, in order (before empty ones are dropped)."""
    if behavior == "isolated":
        return [o for o, _ in matches]
    if behavior == "removed":
        return [o for o, m in matches if not m]
    out: list[list[int]] = []
    prev = False
    if behavior == "contiguous":
        for (s, e), m in matches:
            if m == prev and out:
                out[-1][1] = e
            else:
                out.append([s, e])
            prev = m
    elif behavior == "mergedwithprevious":
        for (s, e), m in matches:
            if m and not prev and out:
                out[-1][1] = e
            else:
                out.append([s, e])
            prev = m
    elif behavior == "mergedwithnext":
        for (s, e), m in reversed(matches):
            if m and not prev and out:
                out[-1][0] = s
            else:
                out.append([s, e])
            prev = m
        out.reverse()
    else:
        raise ValueError(behavior)
    return [(s, e) for s, e in out]


def _split_piece(p: Piece, matches, behavior: str, out: list[Piece]) -> None:
    for s, e in apply_behavior(matches, behavior):
        if e > s:
            out.append(p.slice(s, e))


class PreTokenizer:
    def split(self, pieces: list[Piece]) -> list[Piece]:
        raise NotImplementedError


def _behavior(cfg: dict, where: str, default: Optional[str] = None) -> str:
    b = cfg.get("behavior", default)
    if not isinstance(b, str) or b.lower() not in BEHAVIORS:
        raise UnsupportedComponent(f"{where}: {cfg.get('type')} behavior {b!r} is not one of Removed, Isolated, "
                                   "MergedWithPrevious, MergedWithNext, Contiguous")
    return b.lower()


class Split(PreTokenizer):
    def __init__(self, pattern: Any, behavior: str, invert: bool, where: str, dialect: str = "oniguruma"):
        self.matcher = Matcher(pattern, f"{where}: Split", dialect)
        self.behavior = behavior
        self.invert = invert

    def split(self, pieces: list[Piece]) -> list[Piece]:
        out: list[Piece] = []
        for p in pieces:
            m = self.matcher.find_matches(p.text)
            if self.invert:
                m = [(o, not f) for o, f in m]
            _split_piece(p, m, self.behavior, out)
        return out


class CharSplit(PreTokenizer):
    """Punctuation, Digits, WhitespaceSplit, CharDelimiterSplit: a character predicate and a behavior."""

    def __init__(self, pred: Callable[[str], bool], behavior: str):
        self.pred = pred
        self.behavior = behavior

    def split(self, pieces: list[Piece]) -> list[Piece]:
        out: list[Piece] = []
        for p in pieces:
            _split_piece(p, char_matches(self.pred, p.text), self.behavior, out)
        return out


class ByteLevel(PreTokenizer):
    def __init__(self, add_prefix_space: bool, use_regex: bool):
        self.add_prefix_space = add_prefix_space
        self.matcher = Matcher({"Regex": HF_BYTELEVEL_REGEX}, "ByteLevel") if use_regex else None

    def split(self, pieces: list[Piece]) -> list[Piece]:
        mid: list[Piece] = []
        for p in pieces:
            if self.add_prefix_space and not p.text.startswith(" "):
                if p.text:
                    p = Piece(" " + p.text, [p.starts[0]] + list(p.starts), [p.ends[0]] + list(p.ends), p.base)
            if self.matcher is not None:
                _split_piece(p, self.matcher.find_matches(p.text), "isolated", mid)
            elif p.text:
                mid.append(p)
        return [byte_level_transform(p) for p in mid]


class UnicodeScripts(PreTokenizer):
    """A piece ends where the script changes between two characters of a script; class-0 characters (' ',
    characters outside every script) join the piece before them, and those before the first script
    character of a piece are dropped (HF's `UnicodeScripts`)."""

    def __init__(self):
        self._cache: dict[str, int] = {}

    def _cls(self, c: str) -> int:
        k = self._cache.get(c)
        if k is None:
            k = self._cache[c] = _u.script_class(c)
        return k

    def split(self, pieces: list[Piece]) -> list[Piece]:
        out: list[Piece] = []
        for p in pieces:
            cuts: list[int] = []
            last = None
            for i, c in enumerate(p.text):
                k = self._cls(c)
                if k != 0 and last != 0 and last != k:
                    cuts.append(i)
                if k != 0:
                    last = k
            cuts.append(len(p.text))
            for a, b in zip(cuts, cuts[1:]):
                out.append(p.slice(a, b))
        return out


class Metaspace(PreTokenizer):
    """Spaces become `replacement`; the replacement is prepended to a piece that does not start with it
    (prepend_scheme always, or first: only the piece at the start of the text), taking its first
    character's span; with split, each replacement starts a new piece (MergedWithNext)."""

    def __init__(self, replacement: str, prepend_scheme: str, split: bool):
        self.repl, self.scheme, self.do_split = replacement, prepend_scheme, split

    def split(self, pieces: list[Piece]) -> list[Piece]:
        out: list[Piece] = []
        r = self.repl
        for p in pieces:
            q = Piece(p.text.replace(" ", r), p.starts, p.ends, p.base)
            if q.text and not q.text.startswith(r) and (
                    self.scheme == "always" or (self.scheme == "first" and q.starts[0] == 0)):
                q = Piece(r + q.text, [q.starts[0], *q.starts], [q.ends[0], *q.ends], q.base)
            if self.do_split:
                _split_piece(q, char_matches(lambda c: c == r, q.text), "mergedwithnext", out)
            elif q.text:
                out.append(q)
        return out


class FixedLength(PreTokenizer):
    """Pieces of `length` characters (the last one shorter)."""

    def __init__(self, length: int):
        self.length = length

    def split(self, pieces: list[Piece]) -> list[Piece]:
        out: list[Piece] = []
        n = self.length
        for p in pieces:
            for a in range(0, len(p.text), n):
                out.append(p.slice(a, min(a + n, len(p.text))))
        return out


class Sequence(PreTokenizer):
    def __init__(self, items: list[PreTokenizer]):
        self.items = items

    def split(self, pieces: list[Piece]) -> list[Piece]:
        for it in self.items:
            pieces = it.split(pieces)
        return pieces


def from_config(cfg: Any, where: str = "tokenizer.json") -> Optional[PreTokenizer]:
    if cfg is None:
        return None
    if not isinstance(cfg, dict):
        raise UnsupportedComponent(f"{where}: pre_tokenizer {cfg!r} is not an object")
    t = cfg.get("type")
    if t == "Sequence":
        items = [from_config(c, where) for c in cfg.get("pretokenizers") or []]
        items = [x for x in items if x is not None]
        if not items:
            return None
        return items[0] if len(items) == 1 else Sequence(items)
    if t == "Split":
        return Split(cfg.get("pattern"), _behavior(cfg, where), bool(cfg.get("invert", False)), where)
    if t == "Punctuation":
        return CharSplit(_u.is_punc, _behavior(cfg, where, "Isolated"))
    if t == "Digits":
        return CharSplit(_u.is_numeric, "isolated" if cfg.get("individual_digits", False) else "contiguous")
    if t == "Whitespace":
        return Split({"Regex": WHITESPACE_REGEX}, "removed", True, where, "rust-regex")  # HF runs it with the regex crate
    if t == "WhitespaceSplit":
        return CharSplit(_u.is_whitespace, "removed")
    if t == "CharDelimiterSplit":
        d = cfg.get("delimiter")
        if not isinstance(d, str) or len(d) != 1:
            raise UnsupportedComponent(f"{where}: CharDelimiterSplit delimiter {d!r} is not one character")
        return CharSplit(lambda c, d=d: c == d, "removed")
    if t == "ByteLevel":
        return ByteLevel(bool(cfg.get("add_prefix_space", True)), bool(cfg.get("use_regex", True)))
    if t == "BertPreTokenizer":
        # whitespace removed, then each punctuation character isolated (HF `BertPreTokenizer`)
        return Sequence([CharSplit(_u.is_whitespace, "removed"), CharSplit(_u.is_punc, "isolated")])
    if t == "UnicodeScripts":
        return UnicodeScripts()
    if t == "Metaspace":
        from .decoders import metaspace_prepend_scheme

        r = cfg.get("replacement")
        if not isinstance(r, str) or len(r) != 1:
            raise UnsupportedComponent(f"{where}: Metaspace replacement {r!r} is not one character")
        try:
            scheme = metaspace_prepend_scheme(cfg)
        except UnsupportedComponent as e:
            raise UnsupportedComponent(f"{where}: {e}") from None
        if cfg.get("add_prefix_space") is False and scheme != "never":
            raise UnsupportedComponent(f"{where}: Metaspace add_prefix_space=false contradicts prepend_scheme "
                                       f"{scheme!r} (HF refuses the file)")
        return Metaspace(r, scheme, bool(cfg.get("split", True)))
    if t == "FixedLength":
        n = cfg.get("length", 5)
        if type(n) is not int or n <= 0:
            raise UnsupportedComponent(f"{where}: FixedLength length {n!r} is not a positive integer")
        return FixedLength(n)
    raise UnsupportedComponent(f"{where}: pre-tokenizer {t!r} is not supported by fstok's tokenizer.json pipeline "
                               "(supported: Split, Punctuation, Digits, Whitespace, WhitespaceSplit, "
                               "CharDelimiterSplit, ByteLevel, BertPreTokenizer, UnicodeScripts, FixedLength, Metaspace, "
                               "Sequence)")
