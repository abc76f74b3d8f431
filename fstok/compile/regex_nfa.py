"""AST -> Thompson NFA over an alphabet of Unicode cells, with leftmost-first priorities.

Alphabet.  The character sets a pattern tests partition the Unicode scalar values into
*cells*: code points with the same membership in every set (wordchipper's equivalence cells).
The NFA reads one cell per character, plus the end-of-input symbol EOI (= n_cells).

Nodes (parallel lists, ids are ints):
  CHAR   mask, out     consume one character whose cell bit is set in `mask`
  SPLIT  outs          epsilon to each of `outs`, in priority order (leftmost-first)
  EOI    out           consume the end-of-input symbol
  MATCH                the pattern matched; the match ends here
  MATCH_LA             the pattern matched *before* the last consumed character: the character
                       was read only to test a one-character lookahead (`(?!\\S)`, `(?=C)`, `$`
                       in Oniguruma) and is given back.  This is the per-alternative lookahead
                       flag: no pattern-specific rule, any alternative ending in such an
                       assertion compiles the same way.

Lookahead at the end of an alternative, `X(?!C)`, compiles to X followed by a choice between a
character of ~C (then MATCH_LA) and EOI (then MATCH).  Since leftmost-first determinization keeps
threads in priority order, this reproduces the backtracking engine exactly: the greedy X tries
longest first, each X-end is accepted iff the next character passes the test.

Possessive quantifiers (`\\p{L}++`, `?+`, `{1,3}+`) are compiled as greedy ones when that is
provably the same: the operand is one character from a set C, and what follows can neither start
with a character of C nor lookahead-test one, or can end the match at once.  Otherwise
RegexUnsupported is raised (never silently mis-compiled).
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from .regex_parse import (Alt, Assert, Chars, Concat, Empty, Node, Repeat, RegexUnsupported, char_sets, nullable)
from .unicode_props import VALID, CharSet

CHAR, SPLIT, EOI, MATCH, MATCH_LA = 0, 1, 2, 3, 4
KIND_NAMES = {CHAR: "CHAR", SPLIT: "SPLIT", EOI: "EOI", MATCH: "MATCH", MATCH_LA: "MATCH_LA"}
MAX_NFA_STATES = 200_000


@dataclass
class Alphabet:
    """Partition of the Unicode scalar values into cells."""

    runs_lo: list[int]  # sorted starts of maximal runs of one cell
    runs_hi: list[int]
    runs_cell: list[int]
    n_cells: int
    reps: list[int]  # a representative code point per cell (the smallest)
    sets: dict = field(default_factory=dict)  # CharSet -> cell bitmask

    def cell_of(self, cp: int) -> int:
        """Cell of a code point, -1 for surrogates / out of range."""
        i = bisect.bisect_right(self.runs_lo, cp) - 1
        if i < 0 or cp > self.runs_hi[i]:
            return -1
        return self.runs_cell[i]

    def mask(self, s: CharSet) -> int:
        return self.sets[s]

    def cell_ranges(self, cell: int) -> list[tuple[int, int]]:
        return [(a, b) for a, b, c in zip(self.runs_lo, self.runs_hi, self.runs_cell) if c == cell]

    @property
    def eoi(self) -> int:
        return self.n_cells


def build_alphabet(sets: list[CharSet]) -> Alphabet:
    uniq: list[CharSet] = []
    seen = set()
    for s in sets:
        if s not in seen:
            seen.add(s)
            uniq.append(s)
    points = {0, 0xD800, 0xE000, 0x110000}
    for s in uniq:
        for a, b in s.ranges:
            points.add(a)
            points.add(b + 1)
    pts = sorted(p for p in points if p <= 0x110000)
    # membership signature of each elementary interval, by a sweep per set
    sigs = [0] * (len(pts) - 1)
    for k, s in enumerate(uniq):
        bit = 1 << k
        rs = s.ranges
        j = 0
        for idx in range(len(pts) - 1):
            lo = pts[idx]
            while j < len(rs) and rs[j][1] < lo:
                j += 1
            if j < len(rs) and rs[j][0] <= lo:
                sigs[idx] |= bit
    cell_of_sig: dict[int, int] = {}
    runs_lo, runs_hi, runs_cell, reps = [], [], [], []
    for idx in range(len(pts) - 1):
        lo, hi = pts[idx], pts[idx + 1] - 1
        if 0xD800 <= lo <= 0xDFFF:
            continue
        sig = sigs[idx]
        if sig not in cell_of_sig:
            cell_of_sig[sig] = len(cell_of_sig)
            reps.append(lo)
        c = cell_of_sig[sig]
        if runs_cell and runs_cell[-1] == c and runs_hi[-1] + 1 == lo:
            runs_hi[-1] = hi
        else:
            runs_lo.append(lo)
            runs_hi.append(hi)
            runs_cell.append(c)
    masks = {}
    for k, s in enumerate(uniq):
        m = 0
        for sig, c in cell_of_sig.items():
            if sig >> k & 1:
                m |= 1 << c
        masks[s] = m
    return Alphabet(runs_lo, runs_hi, runs_cell, len(cell_of_sig), reps, masks)


class NFA:
    def __init__(self, alphabet: Alphabet):
        self.alphabet = alphabet
        self.kind: list[int] = []
        self.mask: list[int] = []
        self.out: list = []  # int for CHAR/EOI, list for SPLIT, None for MATCH*
        self.start = -1
        self.match = self._add(MATCH, 0, None)
        self.match_la = self._add(MATCH_LA, 0, None)
        self._possessive: list[tuple[int, int, int]] = []  # (mask, continuation, pattern pos)

    def _add(self, kind: int, mask: int, out) -> int:
        if len(self.kind) >= MAX_NFA_STATES:
            raise RegexUnsupported(f"pattern is too large: more than {MAX_NFA_STATES} NFA states")
        self.kind.append(kind)
        self.mask.append(mask)
        self.out.append(out)
        return len(self.kind) - 1

    def __len__(self) -> int:
        return len(self.kind)

    # -- construction (continuation passing: compile(node, next) -> entry) ----------------------
    def compile(self, node: Node, nxt: int) -> int:
        if isinstance(node, Chars):
            return self._add(CHAR, self.alphabet.mask(node.set), nxt)
        if isinstance(node, Empty):
            return nxt
        if isinstance(node, Concat):
            for item in reversed(node.items):
                nxt = self.compile(item, nxt)
            return nxt
        if isinstance(node, Alt):
            return self._add(SPLIT, 0, [self.compile(it, nxt) for it in node.items])
        if isinstance(node, Assert):
            if nxt != self.match:
                raise RegexUnsupported(
                    f"regex not supported at position {node.pos}: the assertion {node.text!r} must be at the end of "
                    "the pattern or of a top-level alternative (fstok compiles lookahead as a per-alternative flag)")
            outs = []
            if node.chars:
                outs.append(self._add(CHAR, self.alphabet.mask(node.chars), self.match_la))
            if node.eof:
                outs.append(self._add(EOI, 0, self.match))
            if not outs:
                return self._add(CHAR, 0, self.match)  # can never match
            return outs[0] if len(outs) == 1 else self._add(SPLIT, 0, outs)
        if isinstance(node, Repeat):
            return self._repeat(node, nxt)
        raise TypeError(f"unknown AST node {node!r}")

    def _repeat(self, r: Repeat, nxt: int) -> int:
        if r.possessive:
            from .regex_parse import single_char_set

            s = single_char_set(r.node)
            if s is None:
                raise RegexUnsupported(
                    f"regex not supported at position {r.pos}: possessive quantifier on a multi-character "
                    "expression (only one-character operands such as \\p{L}++ are compiled)")
            self._possessive.append((self.alphabet.mask(s), nxt, r.pos))
        if r.max is None and nullable(r.node):
            raise RegexUnsupported(
                f"regex not supported at position {r.pos}: unbounded repetition of an expression that can match "
                "the empty string")

        def split(body: int, exit_: int) -> int:
            return self._add(SPLIT, 0, [body, exit_] if r.greedy else [exit_, body])

        if r.max is None:
            loop = self._add(SPLIT, 0, [])
            body = self.compile(r.node, loop)
            self.out[loop] = [body, nxt] if r.greedy else [nxt, body]
            tail = loop
        else:
            tail = nxt
            for _ in range(r.max - r.min):
                tail = split(self.compile(r.node, tail), nxt)
        for _ in range(r.min):
            tail = self.compile(r.node, tail)
        return tail

    # -- closure helpers --------------------------------------------------------------------
    def closure(self, starts, stop_at_match: bool = True) -> list[int]:
        """Ordered epsilon closure: CHAR/EOI/MATCH* nodes in priority order; truncated after the
        first match node (leftmost-first: lower-priority threads can never win)."""
        out: list[int] = []
        seen: set[int] = set()
        kind, outs = self.kind, self.out
        stack = list(reversed(starts))
        while stack:
            s = stack.pop()
            if s in seen:
                continue
            seen.add(s)
            k = kind[s]
            if k == SPLIT:
                stack.extend(reversed(outs[s]))
            else:
                out.append(s)
                if stop_at_match and (k == MATCH or k == MATCH_LA):
                    break
        return out

    def check_possessive(self) -> None:
        for mask, cont, pos in self._possessive:
            cl = self.closure([cont], stop_at_match=False)
            if any(self.kind[s] == MATCH for s in cl):
                continue
            follow = 0
            for s in cl:
                if self.kind[s] == CHAR:
                    follow |= self.mask[s]
            if follow & mask:
                raise RegexUnsupported(
                    f"regex not supported at position {pos}: possessive quantifier whose operand can also match the "
                    "next character of what follows (it would differ from a greedy one); fstok compiles only "
                    "possessive quantifiers that cannot give characters back")


def build_nfa(ast: Node) -> NFA:
    if nullable(ast):
        raise RegexUnsupported("regex not supported: the pattern can match the empty string "
                               "(a pre-tokenizer must consume at least one character per piece)")
    sets = [s & VALID for s in char_sets(ast)]
    alphabet = build_alphabet(sets)
    # masks are looked up by the original (unclipped) sets
    for s in char_sets(ast):
        alphabet.sets.setdefault(s, alphabet.sets[s & VALID])
    nfa = NFA(alphabet)
    nfa.start = nfa.compile(ast, nfa.match)
    nfa.check_possessive()
    return nfa


def describe(nfa: NFA) -> str:
    lines = [f"NFA: {len(nfa)} states, start {nfa.start}, {nfa.alphabet.n_cells} cells"]
    for i in range(len(nfa)):
        k = nfa.kind[i]
        extra = ""
        if k == CHAR:
            extra = f" mask={nfa.mask[i]:#x} -> {nfa.out[i]}"
        elif k == SPLIT:
            extra = f" -> {nfa.out[i]}"
        elif k == EOI:
            extra = f" -> {nfa.out[i]}"
        lines.append(f"  {i}: {KIND_NAMES[k]}{extra}")
    return "\n".join(lines)
