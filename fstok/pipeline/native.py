"""A tokenizer.json pre-tokenizer as the compiled split pipeline of the C byte-level BPE (one pass in C).

    stages = native_stages(obj["pre_tokenizer"])   # [PreTokStage, ...], or raises NotNative(reason)

The C pipeline (`fstok_dfa_split_isolated`) applies regex DFAs level after level, each splitting every
piece of the previous level into its matches and the gaps between them (HF `Split(behavior=Isolated)`).
Stages that compute exactly that:

  Split(pattern, Isolated, invert)     the pattern (invert swaps matches and gaps: both are kept anyway)
  Punctuation / Digits (behavior)      a character class P as a regex: Isolated `P`, Contiguous `P+`,
                                       MergedWithPrevious `[^P]*P|[^P]+`, MergedWithNext `P[^P]*|[^P]+`
  ByteLevel(add_prefix_space=false)    the GPT-2 regex (use_regex) and, for the stages after it, the
                                       byte-character reading of their patterns (dialect "...+bytelevel")

Stages that remove or merge text (Split with another behavior or inverted, Whitespace, WhitespaceSplit,
CharDelimiterSplit, BertPreTokenizer, Punctuation with a behavior) are `native_levels`: split levels with HF's
behaviors, cut in one C call (`Cutter`, fstok.runtime._dfa.cut_levels) before the tables run.  Everything
else (a prefix space, Metaspace, UnicodeScripts, ...) raises NotNative naming it, and the file runs its
stages in Python (fstok.pipeline.pretokenizers, the oracle of this module).  The class P is HF's set
(`fstok.pipeline.unicode`), written out as code point ranges, so the DFA tests exactly HF's predicate.
"""
from __future__ import annotations

from typing import Any, Iterable, NamedTuple, Optional

from ..loaders.bpe_source import PreTokStage
from ..pretokenize import BYTELEVEL_SUFFIX, HF_BYTELEVEL_PAT


class NotNative(ValueError):
    """The pre-tokenizer has a stage the compiled split pipeline does not compute."""


def char_class(chars: Iterable[str], negate: bool = False) -> str:
    """A regex character class of exactly these code points, as \\x{..} ranges."""
    cps = sorted({ord(c) for c in chars})
    parts = []
    i = 0
    while i < len(cps):
        j = i
        while j + 1 < len(cps) and cps[j + 1] == cps[j] + 1:
            j += 1
        parts.append(f"\\x{{{cps[i]:X}}}" if i == j else f"\\x{{{cps[i]:X}}}-\\x{{{cps[j]:X}}}")
        i = j + 1
    if not parts:
        raise NotNative("an empty character class")
    return "[" + ("^" if negate else "") + "".join(parts) + "]"


def predicate_regex(chars: Iterable[str], behavior: str) -> str:
    chars = list(chars)
    p, q = char_class(chars), char_class(chars, negate=True)
    if behavior == "isolated":
        return p
    if behavior == "contiguous":
        return p + "+"
    if behavior == "mergedwithprevious":
        return f"{q}*{p}|{q}+"
    if behavior == "mergedwithnext":
        return f"{p}{q}*|{q}+"
    raise NotNative(f"behavior {behavior!r} removes text")


def native_stages(cfg: Any) -> tuple[Optional[PreTokStage], list[PreTokStage]]:
    """(find, stages): `find` is a leading Split(Removed, invert=true) -- only its matches are kept, as a
    regex finditer -- or None; `stages` the split levels after it."""
    from . import unicode as _u
    from ..pretokenize import hf_split_regex

    items = (cfg.get("pretokenizers") or []) if isinstance(cfg, dict) and cfg.get("type") == "Sequence" else [cfg]
    find: Optional[PreTokStage] = None
    if items and isinstance(items[0], dict) and items[0].get("type") == "Split" and \
            str(items[0].get("behavior", "")).lower() == "removed" and items[0].get("invert"):
        try:
            find = PreTokStage(hf_split_regex(dict(items[0], behavior="Isolated", invert=False)), keep_gaps=False,
                               dialect="oniguruma")
        except ValueError as e:
            raise NotNative(str(e)) from None
        items = items[1:]
    stages: list[PreTokStage] = []
    after = False  # after ByteLevel: patterns read byte characters
    seen_bytelevel = False

    def add(pattern: str) -> None:
        stages.append(PreTokStage(pattern, keep_gaps=True, dialect="oniguruma" + (BYTELEVEL_SUFFIX if after else "")))

    for it in items:
        if not isinstance(it, dict):
            raise NotNative(f"pre-tokenizer {it!r}")
        t = it.get("type")
        b = str(it.get("behavior", "")).lower()
        if t == "Split":
            if b != "isolated":
                raise NotNative(f"Split behavior {it.get('behavior')!r}")
            try:
                add(hf_split_regex(dict(it, invert=False)))
            except ValueError as e:
                raise NotNative(str(e)) from None
        elif t == "Punctuation":
            add(predicate_regex(sorted(_u.facts().punct), b or "isolated"))
        elif t == "Digits":
            from .unicode import _pipeline_sets

            add(predicate_regex(sorted(_pipeline_sets()[1]), "isolated" if it.get("individual_digits") else "contiguous"))
        elif t == "ByteLevel":
            if seen_bytelevel:
                raise NotNative("a second ByteLevel")
            if it.get("add_prefix_space", True):
                raise NotNative("ByteLevel add_prefix_space")
            if it.get("use_regex", True):
                add(HF_BYTELEVEL_PAT)
            after = seen_bytelevel = True
        else:
            raise NotNative(f"pre-tokenizer {t!r}")
    if not seen_bytelevel:
        raise NotNative("no ByteLevel pre-tokenizer (not a byte-level BPE)")
    return find, stages


#: HF SplitDelimiterBehavior codes of fstok.runtime._dfa.cut_levels (| INVERT: the pattern's matches and gaps swap)
BEHAVIORS = {"isolated": 0, "removed": 1, "mergedwithprevious": 2, "mergedwithnext": 3, "contiguous": 4}
INVERT = 8


class Level(NamedTuple):
    """One split level of the piece cutter: a regex, its dialect, and what HF does with its matches."""
    pattern: str
    dialect: str
    code: int  # BEHAVIORS[...] | INVERT


def native_levels(cfg: Any, byte_level: bool = True) -> list[Level]:
    """The pre-tokenizer as split levels with HF's behaviors (every stage that splits by a pattern or a
    character predicate: Split with any behavior and invert, Punctuation, Digits, Whitespace, WhitespaceSplit,
    CharDelimiterSplit, BertPreTokenizer, ByteLevel without a prefix space); raises NotNative naming a stage
    it cannot express (Metaspace, UnicodeScripts, FixedLength, a prefix space) or a file without ByteLevel.
    byte_level=False: the levels of a model that is not byte-level (fstok.pipeline.model_tables): ByteLevel
    is refused and not required."""
    from . import unicode as _u
    from .pretokenizers import WHITESPACE_REGEX

    items = (cfg.get("pretokenizers") or []) if isinstance(cfg, dict) and cfg.get("type") == "Sequence" else [cfg]
    levels: list[Level] = []
    after = seen_bytelevel = False

    def add(pattern: str, behavior: str, invert: bool = False, dialect: str = "oniguruma") -> None:
        if behavior not in BEHAVIORS:
            raise NotNative(f"behavior {behavior!r}")
        levels.append(Level(pattern, dialect + (BYTELEVEL_SUFFIX if after else ""),
                            BEHAVIORS[behavior] | (INVERT if invert else 0)))

    ws = sorted(_u.WHITESPACE)
    for it in items:
        if not isinstance(it, dict):
            raise NotNative(f"pre-tokenizer {it!r}")
        t = it.get("type")
        b = str(it.get("behavior", "")).lower()
        if t == "Split":
            pat = it.get("pattern")
            if not isinstance(pat, dict) or len(pat) != 1:
                raise NotNative(f"Split pattern {pat!r}")
            kind, value = next(iter(pat.items()))
            if kind == "String" and isinstance(value, str) and value:
                value = char_class(value) if len(value) == 1 else "".join(char_class(c) for c in value)
            elif kind != "Regex" or not isinstance(value, str):
                raise NotNative(f"Split pattern {pat!r}")
            add(value, b, bool(it.get("invert", False)))
        elif t == "Punctuation":
            add(char_class(sorted(_u.facts().punct)), b or "isolated")
        elif t == "Digits":
            from .unicode import _pipeline_sets

            add(char_class(sorted(_pipeline_sets()[1])), "isolated" if it.get("individual_digits") else "contiguous")
        elif t == "Whitespace":
            add(WHITESPACE_REGEX, "removed", True, "rust-regex")  # HF runs it with the regex crate
        elif t == "WhitespaceSplit":
            add(char_class(ws), "removed")
        elif t == "CharDelimiterSplit":
            d = it.get("delimiter")
            if not isinstance(d, str) or len(d) != 1:
                raise NotNative(f"CharDelimiterSplit delimiter {d!r}")
            add(char_class(d), "removed")
        elif t == "BertPreTokenizer":
            add(char_class(ws), "removed")
            add(char_class(sorted(_u.facts().punct)), "isolated")
        elif t == "ByteLevel" and byte_level:
            if seen_bytelevel:
                raise NotNative("a second ByteLevel")
            if it.get("add_prefix_space", True):
                raise NotNative("ByteLevel add_prefix_space")
            if it.get("use_regex", True):
                add(HF_BYTELEVEL_PAT, "isolated")
            after = seen_bytelevel = True
        else:
            raise NotNative(f"pre-tokenizer {t!r}")
    if byte_level and not seen_bytelevel:
        raise NotNative("no ByteLevel pre-tokenizer (not a byte-level BPE)")
    return levels


def _compiling(items: list, refuse_never=None) -> list:
    """The items (each with `.pattern` and `.dialect`) whose DFA compiles.  A byte-level pattern that can
    never match splits nothing and is left out, except where refuse_never(item) (NotNative)."""
    from ..compile.regex_bytelevel import NeverMatches
    from ..compile.regex_parse import RegexUnsupported
    from ..pretokenize import CompiledPattern

    out = []
    for it in items:
        try:
            cp = CompiledPattern.compile(it.pattern, it.dialect, "find")
        except NeverMatches:
            if refuse_never is not None and refuse_never(it):
                raise NotNative(f"regex {it.pattern[:80]!r} never matches the byte characters") from None
            continue
        except (RegexUnsupported, ValueError) as e:
            raise NotNative(f"Split regex {it.pattern[:80]!r}: {e}") from None
        if cp.levels[0].match(b"", 0) >= 0:
            raise NotNative(f"regex {it.pattern[:80]!r} can match the empty string")
        out.append(it)
    return out


def compile_levels(levels: list[Level]) -> list[Level]:
    """The levels whose DFA compiles.  A byte-level level that can never match splits nothing and is left
    out, except an inverted Removed one (it would remove everything: NotNative)."""
    return _compiling(levels, lambda lv: lv.code == BEHAVIORS["removed"] | INVERT)


def compile_stages(stages: list[PreTokStage]) -> list[PreTokStage]:
    """The stages whose DFA compiles; a byte-level stage that can never match (its pattern needs characters
    no byte character is, e.g. `\\s`) splits nothing and is left out."""
    return _compiling(stages)


class Cutter:
    """Pieces cut before the tables run (files whose pieces the tables' own pre-tokenizer cannot cut: a
    leading Split(Removed, invert=true) followed by more stages, or an end-of-word sentinel after each piece).

    `split` is the split pipeline of every stage (the find pattern first when there is one): its pieces never
    straddle a find match, and those outside every find match (HF removes them) are dropped."""

    def __init__(self, find, split, behaviors: Optional[bytes] = None):
        self.find, self.split = find, split  # CompiledPattern (mode find) / CompiledPattern (mode split), or None
        # one HF split behavior per level of `split` (BEHAVIORS, | INVERT; no `find` then), or None: `split`'s
        # levels are all Isolated
        self.behaviors = behaviors

    @classmethod
    def build_levels(cls, levels: list[Level]) -> "Cutter":
        from ..pretokenize import CompiledPattern

        if not levels:
            return cls(None, None)
        if all(lv.code == BEHAVIORS["isolated"] for lv in levels):
            return cls(None, CompiledPattern.pipeline([(lv.pattern, lv.dialect) for lv in levels]))
        return cls(None, CompiledPattern.pipeline([(lv.pattern, lv.dialect) for lv in levels]),
                   bytes(lv.code for lv in levels))

    @classmethod
    def build(cls, find: Optional[PreTokStage], stages: list[PreTokStage]) -> "Cutter":
        from ..pretokenize import CompiledPattern

        levels = ([(find.pattern, find.dialect)] if find is not None else []) + [(s.pattern, s.dialect) for s in stages]
        f = CompiledPattern.compile(find.pattern, find.dialect, "find") if find is not None else None
        sp = CompiledPattern.pipeline(levels) if (stages or f is None) and levels else None
        return cls(f, sp)

    def spans(self, data: bytes):
        """[k, 2] int64 byte spans of the pieces, in order."""
        import numpy as np

        if self.split is None:
            return self.find.byte_spans(data) if self.find is not None else (
                np.array([[0, len(data)]] if data else [], dtype=np.int64).reshape(-1, 2))
        sp = self.split.byte_spans(data)
        if self.find is None or not len(sp):
            return sp
        f = self.find.byte_spans(data)
        if not len(f):
            return sp[:0]
        k = np.searchsorted(f[:, 0], sp[:, 0], side="right") - 1
        keep = (k >= 0) & (sp[:, 0] < f[np.maximum(k, 0), 1])
        return sp[keep]

    def triples(self, data: bytes) -> bytes:
        """The pieces as native uint32 (start, end, 0xFFFFFFFF) triples (what the tables' `encode_spans`
        takes), in one C call: the find matches, each split by the stages after it."""
        if self.behaviors is not None:
            from ..runtime import _dfa

            return _dfa.cut_levels(data, self.split.spanner, self.behaviors)
        f = self.find.spanner if self.find is not None else None
        sp = self.split.spanner if self.split is not None else None
        if (self.find is not None and f is None) or (self.split is not None and sp is None):
            import numpy as np  # the C spanner is not built: the same triples from `spans`

            s = self.spans(data)
            tri = np.empty((len(s), 3), dtype=np.uint32)
            tri[:, 2] = 0xFFFFFFFF
            tri[:, 0], tri[:, 1] = s[:, 0], s[:, 1]
            return tri.tobytes()
        from ..runtime import _dfa

        # `split` starts with the find pattern itself when there is one (its pieces never straddle a match)
        return _dfa.cut(data, f, sp, 1 if (f is not None and sp is not None) else 0)

    def sections(self) -> dict:
        out = {}
        if self.find is not None:
            out.update(self.find.sections("cut.find."))
        if self.split is not None:
            out.update(self.split.sections("cut.split."))
        return out

    @classmethod
    def from_sections(cls, art, has_find: bool, has_split: bool, behaviors: Optional[list] = None) -> "Cutter":
        from ..artifact import ArtifactError
        from ..pretokenize import CompiledPattern

        f = CompiledPattern.from_sections(art, "cut.find.") if has_find else None
        sp = CompiledPattern.from_sections(art, "cut.split.") if has_split else None
        if (f is not None and f.mode != "find") or (sp is not None and sp.mode != "split"):
            raise ArtifactError(f"{art.path or '<bytes>'}: pipeline piece cutter has the wrong DFA modes")
        if behaviors is not None:
            codes = set(BEHAVIORS.values())
            if (f is not None or sp is None or len(behaviors) != len(sp.levels)
                    or not all(type(c) is int and (c & ~INVERT) in codes for c in behaviors)):
                raise ArtifactError(f"{art.path or '<bytes>'}: pipeline piece cutter behaviors {behaviors!r} do not "
                                    "match its levels"[:300])
            return cls(None, sp, bytes(behaviors))
        return cls(f, sp)
