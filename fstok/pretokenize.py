"""Pre-tokenization regexes compiled to byte DFAs, run by the C spanner.

    fstok.pretokenize("o200k_base", text)          # [(start, end), ...] character offsets
    fstok.pretokenize(r"\\p{L}+|\\s+", text)          # any supported regex (rust-regex dialect)
    cp = CompiledPattern.compile(pattern, dialect="oniguruma")
    cp = CompiledPattern.from_tokenizer_json("tokenizer.json")   # HF Split / ByteLevel pipeline
    cp.spans(text); cp.save("p.fst"); fstok.load("p.fst")

Semantics.  A pattern is compiled for the engine its tokenizer was made for ("rust-regex" =
tiktoken's fancy-regex/regex-syntax, "oniguruma" = HF tokenizers) with that engine's Unicode
tables (fstok/compile/unicode_props.py).  Two modes:

  find   regex `finditer`: the matches, in order; text no match covers is skipped (tiktoken's
         behaviour; the four OpenAI patterns match everywhere, so their spans tile the text).
  split  HF `Split(behavior="Isolated")` applied level after level (a `Sequence` of Split
         pre-tokenizers, a ByteLevel with use_regex): matches and the gaps between them are
         pieces, and each piece is split again by the next level as a text of its own.

Artifact (kind KIND_REGEX_DFA, or embedded in another kind, e.g. BPE, under a prefix):

  <prefix>source        |u1  JSON {"version", "mode", "name", "levels": [{"pattern", "dialect",
                             "unicode"}]}
  <prefix><i>.info      <u4  [layout=2, n_states, n_classes, shift, start, eoi, n_boundary, n_giveback]
                             (layout 1: the first seven; no give-back boundary states)
  <prefix><i>.trans     <u4  [n_states << shift] premultiplied transitions (see runtime/csrc/dfa.h)
  <prefix><i>.classes   |u1  [256] byte classes
  <prefix><i>.accept    |u1  [n_states] low nibble: 0, or 1 + bytes given back by a lookahead;
                             high nibble (boundary states 1..n_giveback only): the piece ended that
                             many bytes before the byte just read (see `add_boundary_states`)

Compiled tables are cached in memory (by pattern, dialect) and on disk under
`fstok.registry.cache_dir()/regex/`, since compiling a Unicode DFA in Python takes a fraction
of a second to seconds.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import dataclass
from typing import Any, Iterable, Optional, Sequence

import numpy as np

from . import artifact as _art

COMPILER_VERSION = "2"  # bump whenever compiled tables could change
PREFIX = "dfa."
LAYOUT = 2
LAYOUTS = (1, 2)  # layout 1 artifacts (no give-back boundary states) still load
GIVEBACK_SHIFT = 4
MODES = ("find", "split")
MAX_LEVELS = 16  # split pipelines (the C spanner recurses once per level)

# --------------------------------------------------------------------------- named patterns
# tiktoken 0.14.0, tiktoken_ext/openai_public.py (tests check these against the installed copy)
R50K_PAT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
CL100K_PAT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
O200K_PAT = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
# Meta Llama 3 (tiktoken-based reference tokenizer) and its HF tokenizer.json Split regex
LLAMA3_PAT = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
# Qwen (qwen.tiktoken, tiktoken-based) and Qwen2's tokenizer.json: like Llama 3 but one digit per piece
QWEN2_PAT = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
# HF tokenizers ByteLevel(use_regex=True): the original GPT-2 pattern, run by Oniguruma
HF_BYTELEVEL_PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


@dataclass(frozen=True)
class PatternSpec:
    levels: tuple  # ((pattern, dialect), ...)
    mode: str = "find"


NAMED_PATTERNS: dict[str, PatternSpec] = {
    "r50k_base": PatternSpec(((R50K_PAT, "rust-regex"),)),
    "p50k_base": PatternSpec(((R50K_PAT, "rust-regex"),)),
    "p50k_edit": PatternSpec(((R50K_PAT, "rust-regex"),)),
    "gpt2": PatternSpec(((R50K_PAT, "rust-regex"),)),
    "cl100k_base": PatternSpec(((CL100K_PAT, "rust-regex"),)),
    "o200k_base": PatternSpec(((O200K_PAT, "rust-regex"),)),
    "o200k_harmony": PatternSpec(((O200K_PAT, "rust-regex"),)),
    "llama3": PatternSpec(((LLAMA3_PAT, "rust-regex"),)),
    "qwen2": PatternSpec(((QWEN2_PAT, "rust-regex"),)),
    "hf-bytelevel": PatternSpec(((HF_BYTELEVEL_PAT, "oniguruma"),), "split"),
    "hf-llama3": PatternSpec(((LLAMA3_PAT, "oniguruma"),), "split"),
    "hf-qwen2": PatternSpec(((QWEN2_PAT, "oniguruma"),), "split"),
}


# ------------------------------------------------------------------------------ DFA tables
@dataclass
class DFATables:
    """One DFA in runtime form: exactly what C's `fstok_dfa` points at (see dfa.h)."""

    trans: np.ndarray  # uint32 [n_states << shift], premultiplied
    classes: np.ndarray  # uint8 [256]
    accept: np.ndarray  # uint8 [n_states]
    n_states: int
    n_classes: int  # including the EOI class
    shift: int
    start: int  # premultiplied
    eoi: int
    n_boundary: int = 0  # states 1..n_boundary are boundary (restart) states
    n_giveback: int = 0  # of which 1..n_giveback end their piece some bytes back (accept >> 4)
    pattern: str = ""
    dialect: str = "rust-regex"
    unicode: str = ""

    @property
    def live(self) -> int:
        """Premultiplied id of the first ordinary state: an anchored search stops below it."""
        return (self.n_boundary + 1) << self.shift

    @classmethod
    def from_byte_dfa(cls, bd, n_boundary: int, pattern: str, dialect: str, unicode: str,
                      n_giveback: int = 0) -> "DFATables":
        n, nc = bd.trans.shape
        shift = max(0, (nc - 1).bit_length())
        stride = 1 << shift
        tbl = np.zeros((n, stride), dtype=np.uint32)
        tbl[:, :nc] = bd.trans.astype(np.uint32) << np.uint32(shift)
        return cls(tbl.reshape(-1), bd.classes.astype(np.uint8), bd.accept.astype(np.uint8), int(n), int(nc),
                   shift, int(bd.start) << shift, int(bd.eoi_class), int(n_boundary), int(n_giveback), pattern,
                   dialect, unicode)

    def info(self) -> np.ndarray:
        return np.array([LAYOUT, self.n_states, self.n_classes, self.shift, self.start, self.eoi, self.n_boundary,
                         self.n_giveback],
                        dtype=np.uint32)

    def nbytes(self) -> int:
        return self.trans.nbytes + 256 + self.accept.nbytes

    def state_index(self, st: int) -> int:
        return st >> self.shift

    def matrix(self) -> np.ndarray:
        """[n_states, n_classes] of state indices (for inspection)."""
        return (self.trans.reshape(self.n_states, 1 << self.shift)[:, : self.n_classes] >> np.uint32(self.shift)).astype(np.int64)

    # pure-Python executor of these same tables: the oracle for lib_dfa.c
    def match(self, data: bytes, pos: int) -> int:
        """End of the leftmost-first match anchored at byte `pos`, or -1 (fstok_dfa_match)."""
        py = self.__dict__.get("_py")
        if py is None:
            py = self.__dict__["_py"] = (self.trans.tolist(), self.classes.tolist(), self.accept.tolist())
        T, C, A = py
        sh = self.shift
        live = self.live
        st = self.start
        last = -1
        n = len(data)
        i = pos
        while i < n:
            st = T[st + C[data[i]]]
            i += 1
            if st < live:  # dead, or a boundary state: the match cannot grow
                return last
            a = A[st >> sh]
            if a:
                last = i - (a - 1)
        st = T[st + self.eoi]
        if st:
            a = A[st >> sh]
            if a:
                last = n - (a - 1)
        return last

    def next_span(self, data: bytes, pos: int) -> Optional[tuple[int, int]]:
        """(start, end) of the next match at or after `pos` (fstok_dfa_next_span)."""
        n = len(data)
        while pos < n:
            e = self.match(data, pos)
            if e >= 0:
                return pos, e
            pos += 1
            while pos < n and (data[pos] & 0xC0) == 0x80:
                pos += 1
        return None


    def bulk_ends(self, data: bytes) -> tuple[list[int], int]:
        """Pure-Python oracle of C `fstok_dfa_find_ends` on these tables: the ends of consecutive
        pieces from byte 0 (stopping where no match starts) and the number of deaths -- bytes on
        which the one walk over the text died and the piece had to be re-matched from its start.
        Boundary states continue into the next piece without a rematch; give-back ones (accept
        >> 4 = g) put the end g bytes before the byte just read."""
        T, C, A = self.trans.tolist(), self.classes.tolist(), self.accept.tolist()
        sh, nbs = self.shift, (self.n_boundary + 1) << self.shift
        ends: list[int] = []
        deaths = 0
        n, p = len(data), 0
        while p < n:
            st, i, tok = self.start, p, p
            while i < n:
                st = T[st + C[data[i]]]
                if st == 0:
                    break
                if st < nbs:  # boundary: a piece [tok, end) ended, the next one has read up to byte i
                    tok = i - (A[st >> sh] >> GIVEBACK_SHIFT)
                    ends.append(tok)
                i += 1
            if i < n:
                deaths += 1
            e = self.match(data, tok)
            if e < 0:
                return ends, deaths
            ends.append(e)
            p = e
        return ends, deaths


def validate_tables(t: DFATables, where: str = "DFA", c_check: bool = True) -> None:
    """Structural checks and the progress proof before C ever sees the tables (a crafted file must
    raise, not crash or hang): fstok/validate_dfa.py (one C pass, the Python checks for the message).
    `where` is "<file>: <section prefix>".  c_check=False: see `validate_dfa.validate`."""
    from .validate_dfa import validate

    validate(t, where, c_check)


# --------------------------------------------------------------------------------- compiling
_lock = threading.RLock()
_level_cache: dict[tuple[str, str], DFATables] = {}
_pattern_cache: dict[Any, "CompiledPattern"] = {}
_table_digests: dict[str, str] = {}


#: a dialect with this suffix reads its pattern over GPT-2 byte characters (an HF stage after ByteLevel);
#: the DFA runs on the raw bytes (fstok/compile/regex_bytelevel.py)
BYTELEVEL_SUFFIX = "+bytelevel"


def base_dialect(dialect: str) -> str:
    return dialect[: -len(BYTELEVEL_SUFFIX)] if dialect.endswith(BYTELEVEL_SUFFIX) else dialect


def _table_digest(dialect: str) -> str:
    dialect = base_dialect(dialect)
    d = _table_digests.get(dialect)
    if d is None:
        from .compile.unicode_props import tables

        with open(tables(dialect).path, "rb") as f:
            d = hashlib.sha256(f.read()).hexdigest()
        _table_digests[dialect] = d
    return d


_compiler_digest_value: list[str] = []


def _compiler_digest() -> str:
    """Hash of the compiler's own source: a cached DFA is reused only by the code that built it."""
    if not _compiler_digest_value:
        here = os.path.dirname(os.path.abspath(__file__))
        h = hashlib.sha256(COMPILER_VERSION.encode())
        for rel in ("compile/regex_parse.py", "compile/regex_nfa.py", "compile/regex_dfa.py",
                    "compile/regex_bytelevel.py", "compile/unicode_props.py", "pretokenize.py"):
            try:
                with open(os.path.join(here, rel), "rb") as f:
                    h.update(f.read())
            except OSError:
                h.update(rel.encode())
        _compiler_digest_value.append(h.hexdigest())
    return _compiler_digest_value[0]


def _check_dialect(dialect: Any) -> str:
    from .compile.regex_parse import DIALECTS

    if not isinstance(dialect, str):
        raise TypeError(f"dialect must be a str, got {type(dialect).__name__}")
    if base_dialect(dialect) not in DIALECTS:
        raise ValueError(f"unknown regex dialect {dialect!r}; known: {', '.join(DIALECTS)} (each optionally "
                         f"with {BYTELEVEL_SUFFIX!r})")
    return dialect


def compile_tables(pattern: str, dialect: str = "rust-regex", **limits: int) -> DFATables:
    """Compile one regex to DFA tables (no cache).  `limits`: max_cell_states, max_byte_states,
    max_table_bytes (see fstok.compile.regex_dfa)."""
    from .compile.regex_dfa import add_boundary_states, compile_dfa
    from .compile.regex_nfa import build_nfa
    from .compile.regex_parse import parse
    from .compile.unicode_props import unicode_version

    if not isinstance(pattern, str):
        raise TypeError(f"regex pattern must be a str, got {type(pattern).__name__}")
    _check_dialect(dialect)
    base = base_dialect(dialect)
    bd = compile_dfa(build_nfa(parse(pattern, base)), **limits)
    if base != dialect:
        from .compile.regex_bytelevel import bytelevel_dfa

        bd = bytelevel_dfa(bd)
    bd, k, g = add_boundary_states(bd)
    return DFATables.from_byte_dfa(bd, k, pattern, dialect, unicode_version(base), g)


def _cache_path(pattern: str, dialect: str) -> str:
    from ._cache import cache_dir

    h = _art.source_hash("fstok-regex", _compiler_digest(), pattern, dialect, _table_digest(dialect)).hex()[:32]
    return os.path.join(cache_dir(), "regex", f"{h}.fst")


def _level(pattern: str, dialect: str) -> DFATables:
    key = (pattern, dialect)
    with _lock:
        t = _level_cache.get(key)
        if t is not None:
            return t
        path = _cache_path(pattern, dialect)
        if os.path.exists(path):
            try:
                cp = CompiledPattern.from_artifact(_art.read_artifact(path, expect_kind=_art.KIND_REGEX_DFA))
                if len(cp.levels) == 1 and cp.levels[0].pattern == pattern and cp.levels[0].dialect == dialect:
                    t = cp.levels[0]
            except (OSError, ValueError):
                t = None  # damaged or stale cache entry: recompile
        if t is None:
            t = compile_tables(pattern, dialect)
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                CompiledPattern([t], "find").save(path)
            except OSError:
                pass  # a read-only cache is not an error
        _level_cache[key] = t
        return t


# ---------------------------------------------------------------------------- the pattern
class CompiledPattern:
    """One or more compiled regex DFAs and how to apply them (mode "find" or "split")."""

    _fstok_kind = "regex_dfa"  # fstok._load.fstok_kind

    def __init__(self, levels: Sequence[DFATables], mode: str = "find", name: Optional[str] = None):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if not levels:
            raise ValueError("a compiled pattern needs at least one DFA")
        if mode == "find" and len(levels) != 1:
            raise ValueError("mode 'find' takes exactly one DFA (use mode 'split' for a pipeline)")
        if len(levels) > MAX_LEVELS:
            raise ValueError(f"a pipeline has at most {MAX_LEVELS} levels, got {len(levels)}")
        self.levels = list(levels)
        self.mode = mode
        self.name = name
        self._spanner = None

    # -- construction -----------------------------------------------------------------------
    @classmethod
    def compile(cls, pattern: str, dialect: str = "rust-regex", mode: str = "find") -> "CompiledPattern":
        """Compile (or fetch from the caches) one regex."""
        if not isinstance(pattern, str):
            raise TypeError(f"regex pattern must be a str, got {type(pattern).__name__}")
        _check_dialect(dialect)
        key = ("re", pattern, dialect, mode)
        with _lock:
            cp = _pattern_cache.get(key)
            if cp is None:
                cp = cls([_level(pattern, dialect)], mode)
                _pattern_cache[key] = cp
        return cp

    @classmethod
    def pipeline(cls, levels: Iterable[tuple[str, str]], name: Optional[str] = None) -> "CompiledPattern":
        """HF-style Split(Isolated) pipeline of (pattern, dialect) levels."""
        lv = [(p, _check_dialect(d)) for p, d in levels]
        key = ("pipe", tuple(lv), name)
        with _lock:
            cp = _pattern_cache.get(key)
            if cp is None:
                cp = cls([_level(p, d) for p, d in lv], "split", name)
                _pattern_cache[key] = cp
        return cp

    @classmethod
    def named(cls, name: str) -> "CompiledPattern":
        try:
            spec = NAMED_PATTERNS[name]
        except KeyError:
            raise ValueError(f"unknown pattern name {name!r}; known: {', '.join(sorted(NAMED_PATTERNS))}") from None
        key = ("name", name)
        with _lock:
            cp = _pattern_cache.get(key)
            if cp is None:
                cp = cls([_level(p, d) for p, d in spec.levels], spec.mode, name)
                _pattern_cache[key] = cp
        return cp

    @classmethod
    def from_hf_pre_tokenizer(cls, cfg: Optional[dict], name: Optional[str] = None) -> "CompiledPattern":
        """The regex part of an HF tokenizer.json `pre_tokenizer` (Sequence / Split / ByteLevel)."""
        levels = hf_pre_tokenizer_levels(cfg)
        if not levels:
            raise ValueError("the pre_tokenizer has no regex to compile (no Split or ByteLevel with use_regex)")
        return cls.pipeline(levels, name)

    @classmethod
    def from_tokenizer_json(cls, src: Any) -> "CompiledPattern":
        """From a tokenizer.json path (or its parsed dict)."""
        if isinstance(src, (str, os.PathLike)):
            with open(src, encoding="utf-8") as f:
                obj = json.load(f)
            name = os.path.basename(os.fspath(src))
        elif isinstance(src, dict):
            obj, name = src, None
        else:
            raise TypeError(f"expected a tokenizer.json path or dict, got {type(src).__name__}")
        return cls.from_hf_pre_tokenizer(obj.get("pre_tokenizer"), name)

    # -- artifact -------------------------------------------------------------------------------
    def sections(self, prefix: str = PREFIX) -> dict[str, Any]:
        return dfa_sections(self, prefix)

    def unicode_version(self) -> str:
        vs = sorted({t.unicode for t in self.levels})
        return vs[0] if len(vs) == 1 else "+".join(vs)[:16]

    def source_hash(self) -> bytes:
        parts: list[Any] = ["fstok-regex", COMPILER_VERSION, self.mode]
        for t in self.levels:
            parts += [t.pattern, t.dialect, _table_digest(t.dialect)]
        return _art.source_hash(*parts)

    def to_bytes(self) -> bytes:
        meta = {"kind": "regex_dfa", "prefix": PREFIX, "mode": self.mode, "name": self.name,
                "patterns": [t.pattern for t in self.levels], "dialects": [t.dialect for t in self.levels],
                "compiler_version": COMPILER_VERSION}
        return _art.write_artifact(None, _art.KIND_REGEX_DFA, meta, self.sections(), self.unicode_version(),
                                   self.source_hash())

    def save(self, path: str | os.PathLike) -> None:
        _art.save_bytes(path, self.to_bytes())

    @classmethod
    def from_artifact(cls, art: _art.Artifact) -> "CompiledPattern":
        if art.kind != _art.KIND_REGEX_DFA:
            raise _art.ArtifactError(f"artifact kind is {art.kind_name!r}, expected 'regex_dfa'")
        prefix = art.meta.get("prefix", PREFIX) if isinstance(art.meta, dict) else PREFIX
        if not isinstance(prefix, str):
            raise _art.ArtifactError("regex_dfa meta 'prefix' must be a string")
        return cls.from_sections(art, prefix)

    @classmethod
    def from_sections(cls, art: _art.Artifact, prefix: str = PREFIX, c_check: bool = True) -> "CompiledPattern":
        """Load DFA sections written by `dfa_sections` (also from inside another artifact kind).  c_check=False:
        the levels' C pass is left to the caller's runtime (a BPE model's set_pretokenizer runs it)."""
        where = art.path or "<artifact>"
        try:
            src = json.loads(art.raw(f"{prefix}source").decode("utf-8"))
        except KeyError:
            raise _art.ArtifactError(f"{where}: {prefix}source: the section is missing (a {art.kind_name} artifact "
                                     "with a regex pre-tokenizer needs it)") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise _art.ArtifactError(f"{where}: {prefix}source: not valid JSON ({e})") from None
        if not isinstance(src, dict) or src.get("version") not in LAYOUTS:
            raise _art.ArtifactError(f"{where}: {prefix}source: unsupported regex DFA layout "
                                     f"{src.get('version') if isinstance(src, dict) else src!r}"[:300])
        mode = src.get("mode")
        lv = src.get("levels")
        if (mode not in MODES or not isinstance(lv, list) or not lv or len(lv) > MAX_LEVELS
                or (mode == "find" and len(lv) != 1)):
            raise _art.ArtifactError(f"{where}: {prefix}source: bad mode or levels (mode {mode!r}, "
                                     f"{len(lv) if isinstance(lv, list) else lv!r} levels)"[:300])
        levels = []
        for i, desc in enumerate(lv):
            if not isinstance(desc, dict):
                raise _art.ArtifactError(f"{where}: {prefix}source: level {i} is not an object")
            p = f"{prefix}{i}."
            info = art.array(p + "info")
            lay = int(info[0]) if info.dtype == np.uint32 and info.size else -1
            if lay != src["version"] or info.size != (7 if lay == 1 else 8):
                raise _art.ArtifactError(f"{where}: {p}info: layout {lay} with {info.size} entries does not match "
                                         f"{prefix}source (layout {src['version']})")
            _, n_states, n_classes, shift, start, eoi, n_boundary = (int(x) for x in info[:7])
            n_giveback = int(info[7]) if lay >= 2 else 0
            t = DFATables(art.array(p + "trans"), art.array(p + "classes"), art.array(p + "accept"), n_states,
                          n_classes, shift, start, eoi, n_boundary, n_giveback, str(desc.get("pattern", "")),
                          str(desc.get("dialect", "")), str(desc.get("unicode", "")))
            validate_tables(t, f"{where}: {p[:-1]}", c_check)
            levels.append(t)
        name = src.get("name")
        return cls(levels, mode, name if isinstance(name, str) else None)

    # -- running -------------------------------------------------------------------------------
    @property
    def spanner(self):
        """The C spanner (fstok.runtime._dfa.Spanner), or None if the extension is not built."""
        if self._spanner is None:
            try:
                from .runtime import _dfa
            except ImportError:
                return None
            dfas = tuple(_dfa.DFA(t.trans, t.classes, t.accept, t.n_states, t.shift, t.start, t.eoi, t.n_boundary)
                         for t in self.levels)
            self._spanner = _dfa.Spanner(dfas, 0 if self.mode == "find" else 1)
        return self._spanner

    def spans(self, text: str | bytes) -> list[tuple[int, int]]:
        """Pieces of `text` as (start, end) character offsets (byte offsets for UTF-8 bytes)."""
        if not isinstance(text, (str, bytes, bytearray, memoryview)):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        sp = self.spanner
        if sp is None:
            if isinstance(text, str):
                return self.reference_spans(text)
            return self._reference_byte_spans(bytes(text))
        return sp.spans(text)

    def pieces(self, text: str) -> list[str]:
        return [text[a:b] for a, b in self.spans(text)]

    def byte_spans(self, data: str | bytes) -> np.ndarray:
        """[k, 2] int64 (start, end) byte offsets into the UTF-8 text."""
        if not isinstance(data, (str, bytes, bytearray, memoryview)):
            raise TypeError(f"text must be str or bytes, got {type(data).__name__}")
        sp = self.spanner
        if sp is None:
            b = data.encode("utf-8") if isinstance(data, str) else bytes(data)
            return np.array(self._reference_byte_spans(b), dtype=np.int64).reshape(-1, 2)
        raw = np.frombuffer(sp.byte_spans(data), dtype=np.uint64).astype(np.int64)
        if self.mode == "find":
            return raw.reshape(-1, 2)
        starts = np.concatenate([[0], raw[:-1]]) if raw.size else raw
        return np.stack([starts, raw], axis=1)

    def count(self, data: str | bytes) -> int:
        sp = self.spanner
        if sp is None:
            b = data.encode("utf-8") if isinstance(data, str) else bytes(data)
            return len(self._reference_byte_spans(b))
        return sp.count(data)

    # -- the pure-Python reference executor of the same tables -----------------------------------
    def _reference_byte_spans(self, data: bytes) -> list[tuple[int, int]]:
        if self.mode == "find":
            out, pos = [], 0
            t = self.levels[0]
            while True:
                r = t.next_span(data, pos)
                if r is None:
                    return out
                out.append(r)
                pos = r[1]
        pieces = [(0, len(data))] if data else []
        for t in self.levels:
            nxt = []
            for lo, hi in pieces:
                sub = data[lo:hi]
                pos = 0
                while True:
                    r = t.next_span(sub, pos)
                    if r is None:
                        break
                    if r[0] > pos:
                        nxt.append((lo + pos, lo + r[0]))
                    nxt.append((lo + r[0], lo + r[1]))
                    pos = r[1]
                if pos < len(sub):
                    nxt.append((lo + pos, hi))
            pieces = nxt
        return pieces

    def reference_spans(self, text: str) -> list[tuple[int, int]]:
        """Same as `spans`, computed in pure Python from the same tables (test oracle)."""
        data = _utf8(text)
        bs = self._reference_byte_spans(data)
        if text.isascii():
            return bs
        b2c = np.zeros(len(data) + 1, dtype=np.int64)
        lead = np.frombuffer(data, dtype=np.uint8) & 0xC0 != 0x80
        b2c[1:] = np.cumsum(lead)
        return [(int(b2c[a]), int(b2c[b])) for a, b in bs]

    def __repr__(self) -> str:
        n = sum(t.n_states for t in self.levels)
        what = self.name or (self.levels[0].pattern[:40] + ("..." if len(self.levels[0].pattern) > 40 else ""))
        return f"<CompiledPattern {what!r} mode={self.mode} levels={len(self.levels)} states={n}>"


def _utf8(text: str) -> bytes:
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"text contains a lone surrogate (U+{ord(text[e.start]):04X} at index {e.start}); "
                         "it cannot be encoded as UTF-8") from None


def dfa_sections(compiled: CompiledPattern, prefix: str = PREFIX) -> dict[str, Any]:
    """Artifact sections of a compiled pattern (names start with `prefix`), for embedding."""
    if not isinstance(prefix, str) or len(prefix) + len("15.classes") > 32:
        raise ValueError(f"section prefix {prefix!r} is too long")
    src = {"version": LAYOUT, "mode": compiled.mode, "name": compiled.name,
           "levels": [{"pattern": t.pattern, "dialect": t.dialect, "unicode": t.unicode} for t in compiled.levels]}
    out: dict[str, Any] = {f"{prefix}source": json.dumps(src, sort_keys=True).encode("utf-8")}
    for i, t in enumerate(compiled.levels):
        p = f"{prefix}{i}."
        out[p + "info"] = t.info()
        out[p + "trans"] = np.ascontiguousarray(t.trans, dtype=np.uint32)
        out[p + "classes"] = np.ascontiguousarray(t.classes, dtype=np.uint8)
        out[p + "accept"] = np.ascontiguousarray(t.accept, dtype=np.uint8)
    return out


# ---------------------------------------------------------------------- HF pre-tokenizers
def hf_split_regex(cfg: dict) -> str:
    """The regex of an HF `Split` pre-tokenizer (Isolated behaviour only; a String pattern is escaped)."""
    pat = cfg.get("pattern") or {}
    if "Regex" in pat:
        rx = pat["Regex"]
    elif "String" in pat:
        import regex as _re

        rx = _re.escape(pat["String"])
    else:
        raise ValueError(f"Split pre-tokenizer without a pattern: {cfg!r}")
    behavior = str(cfg.get("behavior", "")).lower()
    if behavior != "isolated":
        raise ValueError(f"Split behavior {cfg.get('behavior')!r} is not supported (only 'Isolated')")
    if cfg.get("invert"):
        raise ValueError("Split with invert=true is not supported")
    return rx


def hf_pre_tokenizer_levels(cfg: Optional[dict]) -> list[tuple[str, str]]:
    """(pattern, "oniguruma") levels of an HF pre_tokenizer config, in application order."""
    if cfg is None:
        return []
    if not isinstance(cfg, dict):
        raise TypeError(f"pre_tokenizer config must be a dict, got {type(cfg).__name__}")
    typ = cfg.get("type")
    if typ == "Sequence":
        out: list[tuple[str, str]] = []
        for sub in cfg.get("pretokenizers", []):
            out += hf_pre_tokenizer_levels(sub)
        return out
    if typ == "Split":
        return [(hf_split_regex(cfg), "oniguruma")]
    if typ == "ByteLevel":
        if cfg.get("add_prefix_space"):
            raise ValueError("ByteLevel add_prefix_space=true changes the text; it is not a regex split "
                             "(not supported by the pattern compiler)")
        return [(HF_BYTELEVEL_PAT, "oniguruma")] if cfg.get("use_regex", True) else []
    raise ValueError(f"pre-tokenizer type {typ!r} is not supported by the pattern compiler "
                     "(supported: Sequence, Split, ByteLevel)")


# --------------------------------------------------------------------------------- public
def get_pattern(name_or_pattern: str, dialect: str = "rust-regex") -> CompiledPattern:
    """A named pattern (`NAMED_PATTERNS`) or a regex string, compiled and cached."""
    if not isinstance(name_or_pattern, str):
        raise TypeError(f"pattern must be an encoding name or a regex str, got {type(name_or_pattern).__name__}")
    if name_or_pattern in NAMED_PATTERNS:
        return CompiledPattern.named(name_or_pattern)
    from .validate_pattern import check_name

    check_name(name_or_pattern, NAMED_PATTERNS)  # "gpt4" is a name fstok does not know, not the literal regex
    return CompiledPattern.compile(name_or_pattern, dialect)


def pretokenize(name_or_pattern: str, text: str, *, dialect: str = "rust-regex") -> list[tuple[int, int]]:
    """Spans (character offsets) of the pre-tokenization regex over `text`.

    `name_or_pattern`: an encoding name ("r50k_base", "p50k_base", "cl100k_base", "o200k_base",
    ... see NAMED_PATTERNS) or a regex string (read in `dialect`, default tiktoken's)."""
    cp = get_pattern(name_or_pattern, dialect)
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return cp.spans(text)


def clear_memory_cache() -> None:
    with _lock:
        _level_cache.clear()
        _pattern_cache.clear()


# `import fstok.pretokenize` binds this module to the package attribute that `fstok/__init__.py`
# defines as the function `fstok.pretokenize(name_or_pattern, text)`; make the module callable
# so that both spellings keep working whatever was imported first.
class _CallableModule(type(os)):
    def __call__(self, name_or_pattern: str, text: str, **kw: Any) -> list[tuple[int, int]]:
        return pretokenize(name_or_pattern, text, **kw)


import sys as _sys  # noqa: E402

_sys.modules[__name__].__class__ = _CallableModule
