"""HF `Split(Isolated)` levels fused: consecutive levels that each cut out runs of one character class become
one level, so the runtime walks the text once for all of them.

    fuse_class_runs([(r"\\p{N}{1,3}", "oniguruma"), ("[一-龥぀-ゟ゠-ヿ]+", "oniguruma"), (Q, "oniguruma")])
        -> [(r"[\\x{30}-\\x{39}...]{1,3}|[\\x{3040}-\\x{30FF}\\x{4E00}-\\x{9FA5}]+", "oniguruma"), (Q, "oniguruma")]

A level is a *class run* when its pattern is one character class P, optionally repeated greedily (or
possessively) from 1 to k times or without bound: `P`, `P{1,k}`, `P+`.  Its finditer over any text matches
exactly the runs of P characters, cut into groups of at most k from the start of each run; its gaps are the
runs of characters outside P.

Two class-run levels A (class P) and B (class Q) with P and Q disjoint, applied one after the other (B to every
piece of A, HF's Sequence), give the same pieces as the one level `A|B` (leftmost-first):
  * A's groups hold no Q character, so B leaves them whole; B cuts each of A's gaps (a run outside P) into
    its groups of Q characters and the runs outside P and Q between them;
  * `A|B` at a P character takes A's group (B cannot start there), at a Q character B's group (A cannot start
    there; the Q run ends where the text leaves Q, as it does inside A's gap), and elsewhere nothing, so its
    gaps are the runs outside P and Q.
The groups start at the same places: each starts where the previous piece ended, at the start of a run or
after a full group.  By induction a run of n such levels with pairwise disjoint classes is one level.  Levels
after the run are applied to its pieces as before (their input pieces are the same).

Levels of another shape (lookahead, several alternatives, anchors, `+bytelevel` dialects) are kept as they
are.  The classes are written out as code point ranges (the dialect's own reading of the pattern, fixed), so
the fused level means what the levels meant.  Oracle: the levels one after another
(`CompiledPattern.pipeline(..., fuse=False)` / `_reference_byte_spans`).
"""
from __future__ import annotations

from typing import Optional

from .regex_parse import Chars, RegexSyntaxError, RegexUnsupported, Repeat, parse
from .unicode_props import CharSet

_SURROGATES = CharSet([(0xD800, 0xDFFF)])


def class_run(pattern: str, dialect: str) -> Optional[tuple[CharSet, int, Optional[int]]]:
    """(class, 1, max repeats or None) where the level cuts out runs of one class, else None."""
    if "+" in dialect:  # (a byte-character dialect: its classes are read in another alphabet)
        return None
    try:
        node = parse(pattern, dialect)
    except (RegexSyntaxError, RegexUnsupported):
        return None
    if isinstance(node, Chars):
        return node.set, 1, 1
    if isinstance(node, Repeat) and isinstance(node.node, Chars) and node.min == 1 and \
            (node.greedy or node.possessive) and (node.max is None or node.max >= 1):
        return node.node.set, 1, node.max
    return None


def _write(cs: CharSet, hi: Optional[int]) -> str:
    """The class as explicit code point ranges (without surrogates: text never holds them) and its repeat."""
    parts = []
    for lo, up in (cs - _SURROGATES).ranges:
        parts.append(f"\\x{{{lo:X}}}" if lo == up else f"\\x{{{lo:X}}}-\\x{{{up:X}}}")
    if not parts:
        return ""
    rx = "[" + "".join(parts) + "]"
    return rx + ("+" if hi is None else "" if hi == 1 else f"{{1,{hi}}}")


def fuse_class_runs(levels: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The levels with every run of consecutive class-run levels of one dialect and pairwise disjoint classes
    as one level (see the module docstring); other levels unchanged, in order."""
    out: list[tuple[str, str]] = []
    group: list[tuple[CharSet, Optional[int]]] = []
    group_levels: list[tuple[str, str]] = []
    dialect = None

    def flush():
        nonlocal group, group_levels
        if len(group) >= 2:
            alts = [_write(cs, hi) for cs, hi in group]
            if all(alts):
                out.append(("|".join(alts), dialect))
            else:
                out.extend(group_levels)
        else:
            out.extend(group_levels)
        group, group_levels = [], []

    for pat, d in levels:
        cr = class_run(pat, d)
        if cr is None:
            flush()
            out.append((pat, d))
            continue
        cs = cr[0]
        if group and (d != dialect or any(cs & g for g, _ in group)):
            flush()
        dialect = d
        group.append((cs, cr[2]))
        group_levels.append((pat, d))
    flush()
    return out
