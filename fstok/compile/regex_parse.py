"""Parse a pre-tokenization regex into a small AST, as a given engine reads it.

Dialects (the engine the tokenizer was made for decides what a pattern means):

  "rust-regex"  tiktoken: fancy-regex over the Rust regex-syntax crate.  Possessive quantifiers
                `?+ *+ ++ {m,n}+`; `$` is the end of the text ((?m) makes it the end of a line);
                `{` must start a valid repetition.
  "oniguruma"   HF tokenizers: Oniguruma with Ruby syntax.  `?+ *+ ++` are possessive, but
                `{m,n}+` is the interval repeated (`(?:x{m,n})+`), `{,n}` means `{0,n}`, a `{`
                that does not start an interval is a literal, `$` is the end of a line, and
                (?i) string literals also match characters whose full case folding they spell
                (`(?i:ss)` matches "ß"); `a(?i)b|c` means `a(?i:b|c)`.

Supported: literals and escapes (\\t \\n \\r \\f \\v \\a \\e \\0 \\xHH \\x{H..} \\uHHHH \\u{H..} \\U..,
escaped punctuation), `.`, classes `[...]` (ranges, negation, nesting, `&&`; `--` and `~~` in
rust-regex), Unicode properties `\\p{..}` `\\P{..}` `\\pL` (General_Category short and long names,
Any, ASCII, White_Space), `\\s \\S \\d \\D \\w \\W` with the engine's own definitions, groups
(capturing, named, non-capturing, flag groups `(?i:..)`, `(?i)`, `(?s)`, `(?m)`), alternation,
`? * + {m} {m,} {m,n}` greedy / lazy / possessive, `$`, `\\z`, and a one-character lookahead
`(?!C)` / `(?=C)` at the end of the pattern or of a top-level alternative.  Anything else
raises `RegexUnsupported` (or `RegexSyntaxError`) naming the construct and its position.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

from .unicode_props import EMPTY, CharSet, UnicodeTables, tables

DIALECTS = ("rust-regex", "oniguruma")
NL = CharSet.of(0x0A)


class RegexSyntaxError(ValueError):
    """The pattern is not valid in its dialect."""


class RegexUnsupported(ValueError):
    """The pattern is valid but uses a construct fstok does not compile into a DFA."""


# --------------------------------------------------------------------------------------- AST
@dataclass(frozen=True)
class Chars:
    """One character from a set."""

    set: CharSet


@dataclass(frozen=True)
class Concat:
    items: tuple


@dataclass(frozen=True)
class Alt:
    """Alternatives in priority order (leftmost-first)."""

    items: tuple


@dataclass(frozen=True)
class Repeat:
    node: "Node"
    min: int
    max: Optional[int]  # None = unbounded
    greedy: bool = True
    possessive: bool = False
    pos: int = 0


@dataclass(frozen=True)
class Assert:
    """Zero-width test of what follows: the next character is in `chars`, or the text ends
    here and `eof` is true.  `(?!C)` is Assert(~C, True); `(?=C)` is Assert(C, False); `$` in
    rust-regex is Assert({}, True); `$` in Oniguruma (end of line) is Assert({\\n}, True)."""

    chars: CharSet
    eof: bool
    text: str = ""
    pos: int = 0


@dataclass(frozen=True)
class Empty:
    pass


Node = Union[Chars, Concat, Alt, Repeat, Assert, Empty]


def _concat(items: list) -> Node:
    flat = []
    for it in items:
        if isinstance(it, Concat):
            flat.extend(it.items)
        elif not isinstance(it, Empty):
            flat.append(it)
    if not flat:
        return Empty()
    return flat[0] if len(flat) == 1 else Concat(tuple(flat))


def _alt(items: list) -> Node:
    return items[0] if len(items) == 1 else Alt(tuple(items))


def single_char_set(node: Node) -> Optional[CharSet]:
    """If every string `node` matches is one character long, the set of those characters."""
    if isinstance(node, Chars):
        return node.set
    if isinstance(node, Alt):
        s = EMPTY
        for it in node.items:
            sub = single_char_set(it)
            if sub is None:
                return None
            s = s | sub
        return s
    if isinstance(node, Concat) and len(node.items) == 1:
        return single_char_set(node.items[0])
    if isinstance(node, Repeat) and node.min == node.max == 1:
        return single_char_set(node.node)
    return None


def nullable(node: Node) -> bool:
    """Can `node` match the empty string (assertions count as empty)?"""
    if isinstance(node, Chars):
        return False
    if isinstance(node, (Empty, Assert)):
        return True
    if isinstance(node, Concat):
        return all(nullable(i) for i in node.items)
    if isinstance(node, Alt):
        return any(nullable(i) for i in node.items)
    if isinstance(node, Repeat):
        return node.min == 0 or nullable(node.node)
    raise TypeError(node)


def char_sets(node: Node) -> list[CharSet]:
    """Every character set the AST tests (for the alphabet partition)."""
    out: list[CharSet] = []

    def walk(n):
        if isinstance(n, Chars):
            out.append(n.set)
        elif isinstance(n, Assert):
            out.append(n.chars)
        elif isinstance(n, (Concat, Alt)):
            for i in n.items:
                walk(i)
        elif isinstance(n, Repeat):
            walk(n.node)

    walk(node)
    return out


# ------------------------------------------------------------------------------------ parser
@dataclass
class _Flags:
    i: bool = False
    s: bool = False
    m: bool = False


class _Parser:
    def __init__(self, pattern: str, dialect: str):
        if dialect not in DIALECTS:
            raise ValueError(f"unknown regex dialect {dialect!r}; known: {', '.join(DIALECTS)}")
        self.p = pattern
        self.i = 0
        self.dialect = dialect
        self.onig = dialect == "oniguruma"
        self.u: UnicodeTables = tables(dialect)

    # -- helpers --------------------------------------------------------------------------
    def err(self, msg: str, pos: Optional[int] = None, unsupported: bool = False):
        pos = self.i if pos is None else pos
        cls = RegexUnsupported if unsupported else RegexSyntaxError
        ctx = self.p[max(0, pos - 10): pos + 10]
        kind = "not supported" if unsupported else "syntax error"
        return cls(f"regex {kind} at position {pos}: {msg} (near {ctx!r}, dialect {self.dialect})")

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.p[j] if j < len(self.p) else ""

    def eof(self) -> bool:
        return self.i >= len(self.p)

    def take(self) -> str:
        if self.i >= len(self.p):
            raise self.err("unexpected end of pattern")
        c = self.p[self.i]
        self.i += 1
        return c

    def lit(self, cp: int, flags: _Flags) -> Chars:
        s = CharSet.of(cp)
        return Chars(self.u.case_close(s) if flags.i else s)

    # -- grammar --------------------------------------------------------------------------
    def parse(self) -> Node:
        node = self.alternation(_Flags(), top=True)
        if not self.eof():
            raise self.err("unmatched ')'")
        return node

    def alternation(self, flags: _Flags, top: bool = False) -> Node:
        branches = [self.concat(flags)]
        while self.peek() == "|":
            self.i += 1
            branches.append(self.concat(flags))
        return _alt(branches)

    def concat(self, flags: _Flags) -> Node:
        items: list = []
        lit_run: list[tuple[int, int]] = []  # (cp, pos) of consecutive (?i) literals, oniguruma multi-folds
        while not self.eof() and self.peek() not in "|)":
            start = self.i
            c = self.peek()
            if c == "(" and self._is_flag_only_group():
                if self.onig:
                    # Oniguruma: `a(?i)b|c` is `a(?i:b|c)`: the flags open a group that runs to the
                    # end of the enclosing group, alternatives included
                    inner = _Flags(flags.i, flags.s, flags.m)
                    self._flag_group(inner)
                    self._check_multifold(lit_run, flags)
                    lit_run = []
                    items.append(self.alternation(inner))
                    break
                self._flag_group(flags)
                continue
            atom, lit_cp = self.atom(flags)
            atom = self.quantifiers(atom, start)
            if self.onig and flags.i and lit_cp is not None and isinstance(atom, Chars):
                lit_run.append((lit_cp, start))
            else:
                self._check_multifold(lit_run, flags)
                lit_run = []
            items.append(atom)
        self._check_multifold(lit_run, flags)
        return _concat(items)

    def _check_multifold(self, run: list[tuple[int, int]], flags: _Flags) -> None:
        if not run or not self.u.multi_folds:
            return
        text = "".join(chr(c) for c, _ in run).casefold()
        for cp, folded in self.u.multi_folds:
            if folded in text:
                raise self.err(
                    f"(?i) literal {text!r} also matches U+{cp:04X} {chr(cp)!r} in Oniguruma (multi-character case "
                    "folding); fstok does not compile multi-character folds", run[0][1], unsupported=True)

    def _is_flag_only_group(self) -> bool:
        j = self.i + 2
        if not self.p.startswith("(?", self.i):
            return False
        while j < len(self.p) and (self.p[j].isalpha() or self.p[j] == "-"):
            j += 1
        return j < len(self.p) and self.p[j] == ")" and j > self.i + 2

    def _parse_flags(self, upto: str) -> tuple[dict, int]:
        """Parse flag letters at self.i until one of `upto`; return {flag: on}."""
        out: dict = {}
        on = True
        start = self.i
        while not self.eof() and self.peek() not in upto:
            c = self.take()
            if c == "-":
                on = False
            elif c in "ism":
                out[c] = on
            elif c == "x":
                raise self.err("the verbose flag (?x) is not supported", self.i - 1, unsupported=True)
            elif c == "u":
                if not on:
                    raise self.err("(?-u) (non-Unicode mode) is not supported", self.i - 1, unsupported=True)
            else:
                raise self.err(f"unknown flag {c!r}", self.i - 1)
        if self.eof():
            raise self.err("unterminated flag group", start)
        return out, start

    def _apply_flags(self, flags: _Flags, fl: dict) -> None:
        for k, v in fl.items():
            if self.onig and k == "m":
                flags.s = v  # Ruby's (?m) is dot-all
            else:
                setattr(flags, k, v)

    def _flag_group(self, flags: _Flags) -> None:
        self.i += 2
        fl, _ = self._parse_flags(")")
        self.i += 1
        self._apply_flags(flags, fl)

    def atom(self, flags: _Flags) -> tuple[Node, Optional[int]]:
        """One atom, and its code point when it is a plain literal character."""
        start = self.i
        c = self.take()
        if c == "(":
            return self.group(flags, start), None
        if c == "[":
            s = self.char_class(flags, start)
            return Chars(s), None
        if c == ".":
            s = CharSet.full() if flags.s else NL.complement()
            return Chars(s), None
        if c == "^":
            raise self.err("the start anchor '^' is not supported", start, unsupported=True)
        if c == "$":
            if self.onig or flags.m:
                return Assert(NL, True, "$", start), None
            return Assert(EMPTY, True, "$", start), None
        if c == "\\":
            return self.escape(flags, start)
        if c in "*+?":
            raise self.err(f"repetition operator {c!r} has nothing to repeat", start)
        if c == "{":
            if self.onig:
                return self.lit(ord(c), flags), ord(c)
            raise self.err("'{' does not start a valid repetition (escape it as '\\{')", start)
        return self.lit(ord(c), flags), ord(c)

    def group(self, flags: _Flags, start: int) -> Node:
        inner = _Flags(flags.i, flags.s, flags.m)
        if self.peek() == "?":
            self.i += 1
            c = self.peek()
            if c == ":":
                self.i += 1
            elif c in ("!", "="):
                self.i += 1
                return self.lookahead(inner, start, negative=(c == "!"))
            elif c == "<" and self.peek(1) in ("=", "!"):
                raise self.err("lookbehind (?<= / (?<! is not supported", start, unsupported=True)
            elif c == ">":
                return self._atomic(inner, start)
            elif c == "#":
                raise self.err("comment groups (?#...) are not supported", start, unsupported=True)
            elif c == "P" and self.peek(1) == "<" or c == "<" or c == "'":
                self.i += 2 if c == "P" else 1
                close = "'" if c == "'" else ">"
                j = self.p.find(close, self.i)
                if j < 0:
                    raise self.err("unterminated group name", start)
                name = self.p[self.i: j]
                if not name or not all(ch.isalnum() or ch == "_" for ch in name):
                    raise self.err(f"invalid group name {name!r}", self.i)
                self.i = j + 1
            elif c.isalpha() or c == "-":
                fl, _ = self._parse_flags(":)")
                if self.peek() != ":":
                    raise self.err("expected ':' in flag group", self.i)
                self.i += 1
                self._apply_flags(inner, fl)
            else:
                raise self.err(f"unknown group construct '(?{c}'", start, unsupported=True)
        node = self.alternation(inner)
        if self.peek() != ")":
            raise self.err("unclosed group '('", start)
        self.i += 1
        return node

    def lookahead(self, flags: _Flags, start: int, negative: bool) -> Node:
        node = self.alternation(flags)
        if self.peek() != ")":
            raise self.err("unclosed lookahead group", start)
        self.i += 1
        s = single_char_set(node)
        text = self.p[start: self.i]
        if s is None:
            raise self.err(f"lookahead {text} must test exactly one character (like (?!\\S))", start, unsupported=True)
        if negative:
            return Assert(s.complement(), True, text, start)
        return Assert(s, False, text, start)

    # -- quantifiers ----------------------------------------------------------------------
    def quantifiers(self, atom: Node, start: int) -> Node:
        first = True
        while True:
            c = self.peek()
            qpos = self.i
            if c in ("*", "+", "?"):
                self.i += 1
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
                interval = False
            elif c == "{":
                r = self._interval()
                if r is None:
                    if self.onig:
                        return atom  # a literal '{' follows; the caller parses it
                    raise self.err("invalid repetition '{...}'", qpos)
                lo, hi = r
                interval = True
            else:
                return atom
            if not first and not self.onig:
                raise self.err("repetition operator applied to a repetition (nested quantifier)", qpos)
            if isinstance(atom, (Assert, Empty)):
                raise self.err("repetition of an assertion or empty expression", qpos, unsupported=True)
            greedy, possessive = True, False
            if self.peek() == "?":
                self.i += 1
                greedy = False
            elif self.peek() == "+" and not (self.onig and interval):
                # Oniguruma (Ruby syntax) reads {m,n}+ as the interval repeated one or more times
                self.i += 1
                possessive = True
            if hi is not None and hi < lo:
                raise self.err(f"invalid repetition {{{lo},{hi}}}: max < min", qpos)
            if (hi or lo) > 1000:
                raise self.err(f"repetition count {hi or lo} exceeds the limit of 1000", qpos, unsupported=True)
            atom = Repeat(atom, lo, hi, greedy, possessive, qpos)
            first = False

    def _atomic(self, inner: "_Flags", start: int) -> Node:
        """`(?>X)`: an atomic group keeps the first match its body finds.  When the body is one greedy
        repetition this is exactly the possessive repetition `X{m,n}+` (HF's tokenizer.json spells tiktoken's
        `\\p{N}{1,3}+` that way), and a body that is one character class cannot backtrack at all; anything
        else is refused."""
        self.i += 1
        node = self.alternation(inner)
        if self.peek() != ")":
            raise self.err("unclosed group '('", start)
        self.i += 1
        if isinstance(node, Repeat) and node.greedy:
            return Repeat(node.node, node.min, node.max, True, True, node.pos)
        if isinstance(node, Chars):
            return node
        raise self.err("atomic groups (?>...) are supported only around one greedy repetition or one character "
                       "class", start, unsupported=True)

    def _interval(self) -> Optional[tuple[int, Optional[int]]]:
        j = self.i + 1
        p = self.p

        def num(k):
            e = k
            while e < len(p) and p[e].isdigit():
                e += 1
            return (int(p[k:e]) if e > k else None), e

        lo, j = num(j)
        hi: Optional[int]
        if j < len(p) and p[j] == "}":
            if lo is None:
                return None
            self.i = j + 1
            return lo, lo
        if j >= len(p) or p[j] != ",":
            return None
        hi, j = num(j + 1)
        if j >= len(p) or p[j] != "}":
            return None
        if lo is None:
            if not self.onig or hi is None:
                return None
            lo = 0
        self.i = j + 1
        return lo, hi

    # -- escapes --------------------------------------------------------------------------
    def _hex(self, start: int, fixed: Optional[int], braces_ok: bool) -> int:
        if braces_ok and self.peek() == "{":
            j = self.p.find("}", self.i)
            if j < 0:
                raise self.err("unterminated \\x{...} escape", start)
            h = self.p[self.i + 1: j].strip()
            self.i = j + 1
        else:
            n = fixed or 2
            h = self.p[self.i: self.i + n]
            if len(h) != n:
                raise self.err("truncated hex escape", start)
            self.i += n
        try:
            v = int(h, 16)
        except ValueError:
            raise self.err(f"invalid hex digits {h!r}", start) from None
        if not h or v > 0x10FFFF:
            raise self.err(f"code point {h!r} out of range", start)
        if 0xD800 <= v <= 0xDFFF:
            raise self.err(f"escape of surrogate code point U+{v:04X}", start)
        return v

    def escape_value(self, start: int, in_class: bool) -> tuple[str, object]:
        """Returns ('cp', int) or ('set', CharSet) or ('assert', Assert)."""
        c = self.take()
        simple = {"t": 9, "n": 10, "r": 13, "f": 12, "v": 11, "a": 7, "e": 27}
        if c in simple:
            return "cp", simple[c]
        if c in "sSdDwW":
            return "set", self.u.shorthand(c)
        if c in "pP":
            neg = c == "P"
            if self.peek() == "{":
                j = self.p.find("}", self.i)
                if j < 0:
                    raise self.err("unterminated \\p{...}", start)
                name = self.p[self.i + 1: j]
                self.i = j + 1
                if name.startswith("^"):
                    neg = not neg
                    name = name[1:]
            else:
                if self.eof():
                    raise self.err("\\p needs a property name", start)
                name = self.take()
            try:
                s = self.u.property(name)
            except KeyError:
                raise self.err(f"unknown or unsupported Unicode property {name!r}", start, unsupported=True) from None
            return "set", s.complement() if neg else s
        if c == "x":
            return "cp", self._hex(start, 2, True)
        if c == "u":
            if self.peek() == "{" and not self.onig:
                return "cp", self._hex(start, None, True)
            return "cp", self._hex(start, 4, False)
        if c == "U" and not self.onig:
            if self.peek() == "{":
                return "cp", self._hex(start, None, True)
            return "cp", self._hex(start, 8, False)
        if c == "0":
            if self.onig:
                j = self.i
                while j < len(self.p) and j < self.i + 2 and self.p[j] in "01234567":
                    j += 1
                v = int("0" + self.p[self.i: j], 8)
                self.i = j
                return "cp", v
            return "cp", 0
        if c == "z" and not in_class:
            return "assert", Assert(EMPTY, True, "\\z", start)
        if c.isalnum():
            raise self.err(f"escape '\\{c}' is not supported", start, unsupported=True)
        if ord(c) < 0x80:
            return "cp", ord(c)
        if self.onig:
            return "cp", ord(c)
        raise self.err(f"escape of non-ASCII character {c!r}", start)

    def escape(self, flags: _Flags, start: int) -> tuple[Node, Optional[int]]:
        kind, v = self.escape_value(start, in_class=False)
        if kind == "cp":
            return self.lit(v, flags), v
        if kind == "assert":
            return v, None
        s = v
        return Chars(self.u.case_close(s) if flags.i else s), None

    # -- character classes ----------------------------------------------------------------
    def char_class(self, flags: _Flags, start: int) -> CharSet:
        """Parse after '['; returns the (case-closed, maybe negated) set."""
        neg = False
        if self.peek() == "^":
            self.i += 1
            neg = True
        s = self._class_body(flags, start)
        if flags.i:
            if not neg:
                for cp, folded in self.u.multi_folds:
                    if cp in s:
                        raise self.err(
                            f"(?i) class containing U+{cp:04X} {chr(cp)!r} also matches {folded!r} in Oniguruma "
                            "(multi-character case folding); fstok does not compile multi-character folds",
                            start, unsupported=True)
            s = self.u.case_close(s)
        return s.complement() if neg else s

    def _class_body(self, flags: _Flags, start: int) -> CharSet:
        ops = ("&&",) if self.onig else ("&&", "--", "~~")
        acc: Optional[CharSet] = None
        pending_op: Optional[str] = None
        cur = EMPTY
        first = True
        while True:
            if self.eof():
                raise self.err("unclosed character class '['", start)
            if self.peek() == "]" and not first:
                self.i += 1
                break
            op = next((o for o in ops if self.p.startswith(o, self.i)), None)
            if op is not None:
                self.i += 2
                acc = cur if acc is None else self._setop(acc, pending_op, cur)
                pending_op, cur = op, EMPTY
                first = False
                continue
            item = self._class_item(flags, first)
            first = False
            if isinstance(item, CharSet):
                cur = cur | item
                continue
            lo = item
            # range?
            if self.peek() == "-" and self.peek(1) not in ("]", "") and not self.p.startswith("--", self.i):
                save = self.i
                self.i += 1
                hi_item = self._class_item(flags, False)
                if isinstance(hi_item, CharSet):
                    if self.onig:
                        raise self.err("character class range ends with a class", save)
                    raise self.err("invalid range end in character class", save)
                if hi_item < lo:
                    raise self.err(f"invalid range {chr(lo)!r}-{chr(hi_item)!r} in character class", save)
                cur = cur | CharSet([(lo, hi_item)])
            else:
                cur = cur | CharSet.of(lo)
        if acc is not None:
            cur = self._setop(acc, pending_op, cur)
        return cur

    @staticmethod
    def _setop(a: CharSet, op: Optional[str], b: CharSet) -> CharSet:
        if op == "&&":
            return a & b
        if op == "--":
            return a - b
        if op == "~~":
            return a ^ b
        return a | b

    def _class_item(self, flags: _Flags, first: bool):
        pos = self.i
        c = self.take()
        if c == "[":
            if self.peek() == ":":
                raise self.err("POSIX classes [:name:] are not supported", pos, unsupported=True)
            neg = False
            if self.peek() == "^":
                self.i += 1
                neg = True
            s = self._class_body(flags, pos)
            return s.complement() if neg else s
        if c == "\\":
            kind, v = self.escape_value(pos, in_class=True)
            if kind == "set":
                return v
            if kind == "assert":
                raise self.err("assertion inside a character class", pos)
            return v
        return ord(c)


def parse(pattern: str, dialect: str = "rust-regex") -> Node:
    """Parse `pattern` as `dialect` reads it; raises RegexSyntaxError / RegexUnsupported."""
    if not isinstance(pattern, str):
        raise TypeError(f"regex pattern must be a str, got {type(pattern).__name__}")
    if not isinstance(dialect, str):
        raise TypeError(f"regex dialect must be a str, got {type(dialect).__name__}")
    for k, ch in enumerate(pattern):
        if 0xD800 <= ord(ch) <= 0xDFFF:
            raise RegexSyntaxError(f"regex pattern contains a lone surrogate U+{ord(ch):04X} at position {k}")
    return _Parser(pattern, dialect).parse()


def top_alternatives(node: Node) -> tuple:
    return node.items if isinstance(node, Alt) else (node,)
